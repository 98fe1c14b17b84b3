//! The client side of Kafka's security protocols, for connections Tern makes to other clusters
//! (the mirror's source): TLS with rustls and PEM trust and key material, then SASL PLAIN or
//! SCRAM through SaslHandshake v1 and SaslAuthenticate.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;

use crate::client::{ClientError, KafkaConnection};
use crate::sasl::scram::{client_final_message, ScramMechanism};

/// SASL credentials of a client.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// User name.
    pub username: String,
    /// Password (never printed).
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// How a client secures its connections.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    /// TLS settings when the protocol is SSL or SASL_SSL.
    pub tls: Option<Arc<ClientConfig>>,
    /// SASL credentials when the protocol is SASL_PLAINTEXT or SASL_SSL.
    pub sasl: Option<SaslCredentials>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// PEM trust and key material for a TLS client.
#[derive(Debug, Clone, Default)]
pub struct TlsClientPem {
    /// CA certificates to trust; the built-in roots are not used.
    pub trusted_cas: Vec<u8>,
    /// A client certificate chain and its unencrypted private key, for mutual TLS.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// Check that the certificate names the host (`ssl.endpoint.identification.algorithm=https`).
    pub verify_hostname: bool,
}

/// Accepts a certificate chain the CAs vouch for whatever host name it names: Kafka's
/// `ssl.endpoint.identification.algorithm=` (empty), for brokers addressed by IP or alias.
#[derive(Debug)]
struct NoHostnameCheck(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoHostnameCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl TlsClientPem {
    /// The rustls client config.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&self.trusted_cas) {
            let cert = cert.map_err(|e| format!("truststore: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("truststore certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the truststore holds no certificate (PEM expected)".into());
        }
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if self.verify_hostname {
            builder.with_root_certificates(roots)
        } else {
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("truststore: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoHostnameCheck(inner)))
        };
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("keystore certificate chain: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| format!("keystore private key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("keystore: {e}"))?
            }
        };
        Ok(Arc::new(config))
    }
}

impl ClientSecurity {
    /// Connects to `host:port`, runs the TLS handshake and SASL authentication as configured.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        client_id: &str,
    ) -> Result<KafkaConnection, ClientError> {
        let tcp = TcpStream::connect((host, port)).await?;
        tcp.set_nodelay(true)?;
        let mut conn = match &self.tls {
            None => KafkaConnection::over(Box::new(tcp), client_id),
            Some(config) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| ClientError::Tls(format!("server name {host}: {e}")))?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| ClientError::Tls(e.to_string()))?;
                KafkaConnection::over(Box::new(tls), client_id)
            }
        };
        if let Some(sasl) = &self.sasl {
            authenticate(&mut conn, sasl).await?;
        }
        Ok(conn)
    }
}

/// Runs SaslHandshake v1 and the mechanism's SaslAuthenticate exchange.
pub async fn authenticate(
    conn: &mut KafkaConnection,
    sasl: &SaslCredentials,
) -> Result<(), ClientError> {
    let handshake = conn
        .send(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_string(sasl.mechanism.clone())),
            1,
        )
        .await?;
    if handshake.error_code != 0 {
        let offered: Vec<String> = handshake.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(ClientError::Authentication(format!(
            "mechanism {} refused (error {}); the broker offers {}",
            sasl.mechanism,
            handshake.error_code,
            offered.join(",")
        )));
    }
    match sasl.mechanism.as_str() {
        "PLAIN" => {
            let token = format!("\0{}\0{}", sasl.username, sasl.password).into_bytes();
            auth_step(conn, token).await?;
            Ok(())
        }
        m => {
            let mechanism = ScramMechanism::from_name(m).ok_or_else(|| {
                ClientError::Authentication(format!("mechanism {m} is not implemented"))
            })?;
            let mut nonce = [0u8; 18];
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
            use base64::Engine;
            let nonce = base64::engine::general_purpose::STANDARD.encode(nonce);
            let user = sasl.username.replace('=', "=3D").replace(',', "=2C");
            let first_bare = format!("n={user},r={nonce}");
            let server_first = auth_step(conn, format!("n,,{first_bare}").into_bytes()).await?;
            let server_first = String::from_utf8(server_first)
                .map_err(|_| ClientError::Authentication("server-first is not UTF-8".into()))?;
            if !server_first.starts_with(&format!("r={nonce}")) {
                return Err(ClientError::Authentication("server nonce mismatch".into()));
            }
            let (client_final, expected) =
                client_final_message(mechanism, &sasl.password, &first_bare, &server_first)
                    .map_err(|e| ClientError::Authentication(e.to_string()))?;
            let server_final = auth_step(conn, client_final.into_bytes()).await?;
            if server_final != expected {
                return Err(ClientError::Authentication(
                    "the server's signature does not match: not the cluster we meant".into(),
                ));
            }
            Ok(())
        }
    }
}

/// Sends one SaslAuthenticate token; returns the server's token.
async fn auth_step(conn: &mut KafkaConnection, token: Vec<u8>) -> Result<Vec<u8>, ClientError> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let resp = conn.send(&req, 1).await?;
    if resp.error_code != 0 {
        return Err(ClientError::Authentication(
            resp.error_message
                .map(|m| m.to_string())
                .unwrap_or_else(|| format!("error {}", resp.error_code)),
        ));
    }
    Ok(resp.auth_bytes.to_vec())
}
