//! How the mirror reaches a secured source: the mirror's `security.protocol`, `sasl.*` and
//! `ssl.*` configs (Kafka's client names, PEM stores only) turned into a [`ClientSecurity`].
//! Files are read at each connection, so renewed certificates are picked up.

use std::collections::BTreeMap;

use tern_protocol::client_security::{ClientSecurity, SaslCredentials, TlsClientPem};
use tern_protocol::sasl::jaas;

use crate::config::InvalidMirrorConfig;

/// The `sasl.*` and `ssl.*` mirror configs Tern implements; any other is refused.
pub(crate) const SECURITY_KEYS: &[&str] = &[
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.endpoint.identification.algorithm",
];

fn err(message: impl Into<String>) -> InvalidMirrorConfig {
    InvalidMirrorConfig(message.into())
}

fn read(path: &str, what: &str) -> Result<Vec<u8>, InvalidMirrorConfig> {
    std::fs::read(path).map_err(|e| err(format!("{what}: cannot read {path}: {e}")))
}

/// The client security of a mirror's configs; the same checks run when the mirror is created.
pub(crate) fn client_security(
    configs: &BTreeMap<String, String>,
) -> Result<ClientSecurity, InvalidMirrorConfig> {
    let get = |k: &str| configs.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    for key in configs.keys() {
        if (key.starts_with("sasl.") || key.starts_with("ssl."))
            && !SECURITY_KEYS.contains(&key.as_str())
        {
            return Err(err(format!(
                "Mirror config {key} is not implemented (PEM stores, PLAIN and SCRAM are)"
            )));
        }
    }
    let protocol = get("security.protocol").unwrap_or("PLAINTEXT");
    let (tls, sasl) = match protocol {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(err(format!(
                "Invalid value {other} for security.protocol: one of PLAINTEXT, SSL, \
                 SASL_PLAINTEXT, SASL_SSL"
            )))
        }
    };
    let sasl = if sasl {
        let mechanism = get("sasl.mechanism").unwrap_or("GSSAPI");
        if !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&mechanism) {
            return Err(err(format!(
                "sasl.mechanism={mechanism} is not implemented (PLAIN, SCRAM-SHA-256 and \
                 SCRAM-SHA-512 are)"
            )));
        }
        let text = get("sasl.jaas.config")
            .ok_or_else(|| err("SASL needs sasl.jaas.config with a username and a password"))?;
        // The JAAS text holds the password: say what is wrong without echoing it.
        let entry = jaas::parse(text)
            .map_err(|_| err("sasl.jaas.config is not a valid JAAS login module entry"))?;
        let (Some(username), Some(password)) =
            (entry.options.get("username"), entry.options.get("password"))
        else {
            return Err(err("sasl.jaas.config needs username and password options"));
        };
        Some(SaslCredentials {
            mechanism: mechanism.to_string(),
            username: username.clone(),
            password: password.clone(),
        })
    } else {
        None
    };
    let tls = if tls {
        for key in ["ssl.truststore.type", "ssl.keystore.type"] {
            if let Some(t) = get(key) {
                if !t.eq_ignore_ascii_case("PEM") {
                    return Err(err(format!("{key}={t}: Tern reads PEM stores only")));
                }
            }
        }
        let trusted_cas = match (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        ) {
            (Some(path), None) => read(path, "ssl.truststore.location")?,
            (None, Some(pem)) => pem.as_bytes().to_vec(),
            (None, None) => {
                return Err(err("TLS to the source needs ssl.truststore.location or \
                     ssl.truststore.certificates (PEM CA certificates)"))
            }
            _ => {
                return Err(err(
                    "set either ssl.truststore.location or ssl.truststore.certificates",
                ))
            }
        };
        let client_cert = match (
            get("ssl.keystore.location"),
            get("ssl.keystore.key"),
            get("ssl.keystore.certificate.chain"),
        ) {
            (None, None, None) => None,
            (Some(path), None, None) => {
                let pem = read(path, "ssl.keystore.location")?;
                Some((pem.clone(), pem))
            }
            (None, Some(key), Some(chain)) => {
                Some((chain.as_bytes().to_vec(), key.as_bytes().to_vec()))
            }
            _ => {
                return Err(err(
                    "set either ssl.keystore.location or ssl.keystore.key with \
                     ssl.keystore.certificate.chain",
                ))
            }
        };
        let verify_hostname = match configs.get("ssl.endpoint.identification.algorithm") {
            None => true,
            Some(v) if v.trim().eq_ignore_ascii_case("https") => true,
            Some(v) if v.trim().is_empty() => false,
            Some(v) => {
                return Err(err(format!(
                    "ssl.endpoint.identification.algorithm={v}: https or empty"
                )))
            }
        };
        let pem = TlsClientPem {
            trusted_cas,
            client_cert,
            verify_hostname,
        };
        Some(pem.client_config().map_err(err)?)
    } else {
        None
    };
    Ok(ClientSecurity { tls, sasl })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sasl_configs_become_credentials_and_mistakes_never_echo_the_password() {
        let s = client_security(&cfg(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"m\" password=\"p4ss\";",
            ),
        ]))
        .unwrap();
        let sasl = s.sasl.unwrap();
        assert_eq!(
            (sasl.username.as_str(), sasl.password.as_str()),
            ("m", "p4ss")
        );
        assert!(
            !format!("{sasl:?}").contains("p4ss"),
            "Debug hides the password"
        );
        for (pairs, expect) in [
            (
                vec![("security.protocol", "SASL_SSL")],
                "sasl.mechanism=GSSAPI",
            ),
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "PLAIN"),
                ],
                "sasl.jaas.config",
            ),
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanism", "PLAIN"),
                    ("sasl.jaas.config", "X required password=\"p4ss\""),
                ],
                "not a valid JAAS",
            ),
            (vec![("security.protocol", "SSL")], "ssl.truststore"),
            (
                vec![("security.protocol", "SSL"), ("ssl.truststore.type", "JKS")],
                "PEM",
            ),
            (
                vec![("sasl.kerberos.service.name", "kafka")],
                "not implemented",
            ),
            (vec![("ssl.key.password", "p4ss")], "ssl.key.password"),
        ] {
            let e = client_security(&cfg(&pairs)).unwrap_err().0;
            assert!(e.contains(expect), "{pairs:?}: {e}");
            assert!(!e.contains("p4ss"), "the password leaked: {e}");
        }
    }
}
