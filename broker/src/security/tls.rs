//! TLS for `SSL` and `SASL_SSL` listeners with rustls: Kafka's PEM keystore and truststore
//! settings (files or inline), `ssl.client.auth`, `ssl.enabled.protocols`, and certificates
//! reloaded when their files change, without a restart.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::ssl_principal::PrincipalMapper;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate asked for.
    None,
    /// Asked for; a client without one connects as ANONYMOUS.
    Requested,
    /// Required: a client without a trusted certificate is refused.
    Required,
}

/// Where PEM text comes from: a file (reloaded when it changes) or the config itself.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PemSource {
    File(PathBuf),
    Inline(String),
}

impl PemSource {
    fn read(&self) -> Result<Vec<u8>, String> {
        match self {
            PemSource::File(p) => {
                std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()))
            }
            PemSource::Inline(text) => Ok(text.clone().into_bytes()),
        }
    }

    fn modified(&self) -> Option<SystemTime> {
        match self {
            PemSource::File(p) => std::fs::metadata(p).and_then(|m| m.modified()).ok(),
            PemSource::Inline(_) => None,
        }
    }
}

/// A listener's TLS settings, as read from Kafka's `ssl.*` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    key: PemSource,
    chain: PemSource,
    truststore: Option<PemSource>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// `ssl.principal.mapping.rules`.
    pub mapper: PrincipalMapper,
    tls12: bool,
    tls13: bool,
}

fn value<'a>(props: &'a BTreeMap<String, String>, listener: &str, key: &str) -> Option<&'a str> {
    props
        .get(&format!(
            "listener.name.{}.{key}",
            listener.to_ascii_lowercase()
        ))
        .or_else(|| props.get(key))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

impl TlsSettings {
    /// Reads the settings of `listener`; a missing or unsupported one is an error naming it.
    pub fn from_props(props: &BTreeMap<String, String>, listener: &str) -> Result<Self, String> {
        let get = |key: &str| value(props, listener, key);
        for key in ["ssl.keystore.type", "ssl.truststore.type"] {
            if let Some(t) = get(key) {
                if !t.eq_ignore_ascii_case("PEM") {
                    return Err(format!("{key}={t}: Tern reads PEM stores only"));
                }
            }
        }
        for key in [
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "ssl.cipher.suites",
            "ssl.engine.factory.class",
            "ssl.provider",
        ] {
            if get(key).is_some() {
                return Err(format!(
                    "{key} is not implemented (PEM keys must be unencrypted; rustls chooses \
                     its own cipher suites)"
                ));
            }
        }
        let (key, chain) = match (
            get("ssl.keystore.location"),
            get("ssl.keystore.key"),
            get("ssl.keystore.certificate.chain"),
        ) {
            (Some(path), None, None) => (
                PemSource::File(PathBuf::from(path)),
                PemSource::File(PathBuf::from(path)),
            ),
            (None, Some(key), Some(chain)) => (
                PemSource::Inline(key.to_string()),
                PemSource::Inline(chain.to_string()),
            ),
            (None, None, None) => {
                return Err(
                    "needs ssl.keystore.location (a PEM file with the private key and the \
                     certificate chain) or ssl.keystore.key with ssl.keystore.certificate.chain"
                        .into(),
                )
            }
            _ => {
                return Err("set either ssl.keystore.location or ssl.keystore.key with \
                            ssl.keystore.certificate.chain, not both"
                    .into())
            }
        };
        let truststore = match (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        ) {
            (Some(path), None) => Some(PemSource::File(PathBuf::from(path))),
            (None, Some(pem)) => Some(PemSource::Inline(pem.to_string())),
            (None, None) => None,
            _ => {
                return Err(
                    "set either ssl.truststore.location or ssl.truststore.certificates".into(),
                )
            }
        };
        let client_auth = match get("ssl.client.auth").unwrap_or("none") {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => {
                return Err(format!(
                    "ssl.client.auth={other}: none, requested or required"
                ))
            }
        };
        if client_auth != ClientAuth::None && truststore.is_none() {
            return Err(
                "ssl.client.auth asks for client certificates but no ssl.truststore.* says \
                 which CAs to trust"
                    .into(),
            );
        }
        let mapper =
            PrincipalMapper::parse(get("ssl.principal.mapping.rules").unwrap_or("DEFAULT"))?;
        let (mut tls12, mut tls13) = (false, false);
        for p in get("ssl.enabled.protocols")
            .unwrap_or("TLSv1.2,TLSv1.3")
            .split(',')
            .map(str::trim)
        {
            match p {
                "TLSv1.2" => tls12 = true,
                "TLSv1.3" => tls13 = true,
                other => {
                    return Err(format!(
                        "ssl.enabled.protocols: {other} is not served (TLSv1.2 and TLSv1.3 are)"
                    ))
                }
            }
        }
        if let Some(p) = get("ssl.protocol") {
            if !["TLS", "TLSv1.2", "TLSv1.3"].contains(&p) {
                return Err(format!("ssl.protocol={p}: TLS, TLSv1.2 or TLSv1.3"));
            }
        }
        Ok(TlsSettings {
            key,
            chain,
            truststore,
            client_auth,
            mapper,
            tls12,
            tls13,
        })
    }

    fn stamps(&self) -> Vec<Option<SystemTime>> {
        let mut s = vec![self.key.modified(), self.chain.modified()];
        if let Some(t) = &self.truststore {
            s.push(t.modified());
        }
        s
    }

    /// Builds the rustls server config from the current files.
    fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&self.chain.read()?)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("keystore certificate chain: {e}"))?;
        if chain.is_empty() {
            return Err("keystore holds no certificate (PEM expected)".into());
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key.read()?)
            .map_err(|e| format!("keystore private key (unencrypted PEM expected): {e}"))?;
        let mut versions = Vec::new();
        if self.tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            versions.push(&rustls::version::TLS12);
        }
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = match (&self.truststore, self.client_auth) {
            (Some(trust), auth) if auth != ClientAuth::None => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(&trust.read()?) {
                    let cert = cert.map_err(|e| format!("truststore: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("truststore certificate: {e}"))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(
                    verifier.build().map_err(|e| format!("truststore: {e}"))?,
                )
            }
            _ => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("keystore: {e}"))?;
        Ok(Arc::new(config))
    }
}

/// Hands out TLS acceptors, rebuilt when the key, chain or truststore files change, or when
/// dynamic broker configs name other stores.
pub struct TlsAcceptorSource {
    current: Mutex<Current>,
}

/// The settings in force, their files' modification times, and the acceptor built from them.
struct Current {
    settings: Arc<TlsSettings>,
    stamps: Vec<Option<SystemTime>>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsAcceptorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptorSource")
            .field("settings", &self.current.lock().settings)
            .finish_non_exhaustive()
    }
}

impl TlsAcceptorSource {
    /// Loads the certificates once; a broken store is a startup error.
    pub fn new(settings: TlsSettings) -> Result<Self, String> {
        let stamps = settings.stamps();
        let config = settings.server_config()?;
        Ok(TlsAcceptorSource {
            current: Mutex::new(Current {
                settings: Arc::new(settings),
                stamps,
                acceptor: TlsAcceptor::from(config),
            }),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> Arc<TlsSettings> {
        self.current.lock().settings.clone()
    }

    /// Whether `settings` load: the stores they name can be read and make a server config.
    pub fn check(settings: &TlsSettings) -> Result<(), String> {
        settings.server_config().map(|_| ())
    }

    /// Serves `settings` from the next connection on (a dynamic broker config named other
    /// stores); returns false when they are the ones in force. Settings that do not load leave
    /// the current ones in force.
    pub fn reconfigure(&self, settings: TlsSettings) -> Result<bool, String> {
        if *self.current.lock().settings == settings {
            return Ok(false);
        }
        let stamps = settings.stamps();
        let config = settings.server_config()?;
        *self.current.lock() = Current {
            settings: Arc::new(settings),
            stamps,
            acceptor: TlsAcceptor::from(config),
        };
        Ok(true)
    }

    /// The acceptor for the next connection: rebuilt first if a file changed since the last
    /// build. A file caught half-written keeps the previous certificates until it is whole.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut current = self.current.lock();
        let stamps = current.settings.stamps();
        if current.stamps != stamps {
            match current.settings.server_config() {
                Ok(config) => {
                    tracing::info!("TLS certificates changed on disk: reloaded");
                    current.stamps = stamps;
                    current.acceptor = TlsAcceptor::from(config);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "TLS certificates changed but do not load; keeping the previous ones");
                }
            }
        }
        current.acceptor.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::test_props as props;

    #[test]
    fn settings_mistakes_are_named() {
        let err =
            |pairs: &[(&str, &str)]| TlsSettings::from_props(&props(pairs), "SSL").unwrap_err();
        assert!(err(&[]).contains("ssl.keystore.location"));
        assert!(err(&[("ssl.keystore.type", "JKS")]).contains("PEM"));
        assert!(err(&[
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.key.password", "x")
        ])
        .contains("ssl.key.password"));
        assert!(err(&[
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.client.auth", "required")
        ])
        .contains("truststore"));
        assert!(err(&[
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.client.auth", "maybe")
        ])
        .contains("ssl.client.auth"));
        assert!(err(&[
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.enabled.protocols", "TLSv1.1")
        ])
        .contains("TLSv1.1"));
        assert!(err(&[
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256")
        ])
        .contains("ssl.cipher.suites"));
        let s = TlsSettings::from_props(
            &props(&[
                ("listener.name.ssl.ssl.keystore.location", "/k.pem"),
                ("ssl.client.auth", "requested"),
                ("ssl.truststore.location", "/ca.pem"),
            ]),
            "SSL",
        )
        .unwrap();
        assert_eq!(s.client_auth, ClientAuth::Requested);
        assert!(TlsAcceptorSource::new(s).unwrap_err().contains("/k.pem"));
    }
}
