//! Each listener's security: its protocol and, for SASL listeners, the enabled mechanisms, the
//! PLAIN users of its JAAS entry and the re-authentication interval. Built at startup from
//! Kafka's config names, so a mistake is a startup error naming the setting.

use std::collections::BTreeMap;

use std::sync::Arc;

use super::sasl::SaslMechanism;
use super::tls::{TlsAcceptorSource, TlsSettings};
use tern_protocol::sasl::jaas;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No authentication, no encryption.
    Plaintext,
    /// SASL authentication without encryption.
    SaslPlaintext,
    /// TLS, with the client certificate (if any) as the principal.
    Ssl,
    /// SASL authentication inside TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// The protocol from Kafka's name, if Tern serves it.
    pub fn served(name: &str) -> Option<Self> {
        match name {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    /// Whether clients authenticate with SASL on this protocol.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// The SASL side of one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslListenerConfig {
    /// `sasl.enabled.mechanisms`, in the configured order.
    pub mechanisms: Vec<SaslMechanism>,
    /// PLAIN users from the listener's PlainLoginModule `user_<name>` entries.
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms` (0: sessions never expire).
    pub max_reauth_ms: i64,
}

/// One listener's security settings.
#[derive(Debug, Clone)]
pub struct ListenerSecurity {
    /// The listener name.
    pub name: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// SASL settings when the protocol uses SASL.
    pub sasl: Option<SaslListenerConfig>,
    /// TLS acceptors when the protocol uses TLS.
    pub tls: Option<Arc<TlsAcceptorSource>>,
}

/// The listener-prefixed value of a setting (`listener.name.<l>.<key>`), else the plain one.
fn listener_value<'a>(
    props: &'a BTreeMap<String, String>,
    listener: &str,
    key: &str,
) -> Option<&'a String> {
    props
        .get(&format!(
            "listener.name.{}.{key}",
            listener.to_ascii_lowercase()
        ))
        .or_else(|| props.get(key))
}

const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

impl ListenerSecurity {
    /// The security of listener `name` with protocol `protocol` (a Kafka protocol name).
    pub fn build(
        props: &BTreeMap<String, String>,
        name: &str,
        protocol: &str,
    ) -> Result<Self, String> {
        let protocol = SecurityProtocol::served(protocol)
            .ok_or_else(|| format!("security protocol {protocol} is not implemented yet"))?;
        let sasl = if protocol.uses_sasl() {
            Some(Self::sasl_config(props, name)?)
        } else {
            None
        };
        let tls = if protocol.uses_tls() {
            let settings = TlsSettings::from_props(props, name)?;
            Some(Arc::new(TlsAcceptorSource::new(settings)?))
        } else {
            None
        };
        Ok(ListenerSecurity {
            name: name.to_string(),
            protocol,
            sasl,
            tls,
        })
    }

    fn sasl_config(
        props: &BTreeMap<String, String>,
        listener: &str,
    ) -> Result<SaslListenerConfig, String> {
        let lower = listener.to_ascii_lowercase();
        let Some(enabled) = listener_value(props, listener, "sasl.enabled.mechanisms") else {
            return Err(
                "sasl.enabled.mechanisms is not set and Kafka's default, GSSAPI, is not \
                        implemented; set it to PLAIN, SCRAM-SHA-256 and/or SCRAM-SHA-512"
                    .to_string(),
            );
        };
        let mut mechanisms = Vec::new();
        for name in enabled.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let m = SaslMechanism::from_name(name).ok_or_else(|| {
                format!(
                    "SASL mechanism {name} is not implemented (Tern serves \
                     PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)"
                )
            })?;
            if !mechanisms.contains(&m) {
                mechanisms.push(m);
            }
        }
        if mechanisms.is_empty() {
            return Err("sasl.enabled.mechanisms names no mechanism".to_string());
        }
        let mut plain_users = BTreeMap::new();
        for m in &mechanisms {
            let key = format!(
                "listener.name.{lower}.{}.sasl.jaas.config",
                m.name().to_ascii_lowercase()
            );
            let entry = match props.get(&key) {
                Some(text) => Some(jaas::parse(text).map_err(|e| format!("{key}: {e}"))?),
                None => None,
            };
            match (m, entry) {
                (SaslMechanism::Plain, None) => {
                    return Err(format!(
                        "PLAIN needs its users in {key} \
                         ({PLAIN_LOGIN_MODULE} required user_<name>=\"<password>\";)"
                    ))
                }
                (SaslMechanism::Plain, Some(e)) => {
                    if e.login_module != PLAIN_LOGIN_MODULE {
                        return Err(format!("{key}: PLAIN needs {PLAIN_LOGIN_MODULE}"));
                    }
                    plain_users = e.plain_users();
                }
                (SaslMechanism::Scram(_), Some(e)) if e.login_module != SCRAM_LOGIN_MODULE => {
                    return Err(format!("{key}: SCRAM needs {SCRAM_LOGIN_MODULE}"));
                }
                // SCRAM users live in the metadata log; the entry only names the broker's own
                // client credentials, which a single node never uses.
                (SaslMechanism::Scram(_), _) => {}
            }
        }
        let max_reauth_ms =
            match listener_value(props, listener, "connections.max.reauth.ms") {
                None => 0,
                Some(v) => v.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
                    format!("connections.max.reauth.ms={v} is not a valid number")
                })?,
            };
        Ok(SaslListenerConfig {
            mechanisms,
            plain_users,
            max_reauth_ms,
        })
    }
}

/// Security settings Tern implements, with or without a `listener.name.<l>.` prefix.
const IMPLEMENTED: &[&str] = &[
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol",
    "connections.max.reauth.ms",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
    "ssl.protocol",
    // Client-side (inter-broker) and JVM-specific choices that do not weaken anything.
    "ssl.endpoint.identification.algorithm",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
];

/// Whether a security setting is one Tern implements; the startup policy refuses every other.
pub(crate) fn is_implemented_security_setting(key: &str) -> bool {
    if IMPLEMENTED.contains(&key) {
        return true;
    }
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return false;
    };
    let Some((_, setting)) = rest.split_once('.') else {
        return false;
    };
    IMPLEMENTED.contains(&setting)
        || ["plain", "scram-sha-256", "scram-sha-512"]
            .iter()
            .any(|m| setting == format!("{m}.sasl.jaas.config"))
}

/// The TLS listeners of a broker, following dynamic broker configs that name other stores.
pub(crate) struct DynamicTls {
    node_id: i32,
    properties: BTreeMap<String, String>,
    listeners: Vec<(String, Arc<TlsAcceptorSource>)>,
}

impl DynamicTls {
    /// The TLS listeners of `config`.
    pub(crate) fn of(config: &crate::config::BrokerConfig) -> Self {
        DynamicTls {
            node_id: config.node_id,
            properties: config.properties.clone(),
            listeners: config
                .listener_security
                .iter()
                .filter_map(|l| Some((l.name.clone(), l.tls.clone()?)))
                .collect(),
        }
    }

    /// Serves the stores the settings in force in `image` name; stores that do not load are
    /// logged and the current ones kept.
    pub(crate) fn apply(&self, image: &tern_controller::MetadataImage) {
        if self.listeners.is_empty() {
            return;
        }
        let merged = crate::config::dynamic::overlay(
            &self.properties,
            &image.broker_configs(""),
            &image.broker_configs(&self.node_id.to_string()),
        );
        for (name, source) in &self.listeners {
            match TlsSettings::from_props(&merged, name).and_then(|s| source.reconfigure(s)) {
                Ok(true) => {
                    tracing::info!(listener = %name, "TLS stores changed by dynamic config: reloaded")
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(listener = %name, error = %e, "dynamic TLS stores do not load; keeping the current ones")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::test_props as props;

    #[test]
    fn sasl_listener_reads_mechanisms_users_and_reauth() {
        let p = props(&[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"a\";",
            ),
            ("listener.name.sasl_plaintext.connections.max.reauth.ms", "60000"),
        ]);
        let l = ListenerSecurity::build(&p, "SASL_PLAINTEXT", "SASL_PLAINTEXT").unwrap();
        let sasl = l.sasl.unwrap();
        assert_eq!(
            sasl.mechanisms,
            vec![
                SaslMechanism::Scram(crate::security::sasl::ScramMechanism::Sha512),
                SaslMechanism::Plain
            ]
        );
        assert_eq!(sasl.plain_users["alice"], "a");
        assert_eq!(sasl.max_reauth_ms, 60000);
    }

    #[test]
    fn sasl_listener_mistakes_are_named() {
        let err = |pairs: &[(&str, &str)]| {
            ListenerSecurity::build(&props(pairs), "SASL_PLAINTEXT", "SASL_PLAINTEXT").unwrap_err()
        };
        assert!(err(&[]).contains("GSSAPI"));
        assert!(err(&[("sasl.enabled.mechanisms", "GSSAPI")]).contains("GSSAPI"));
        assert!(err(&[("sasl.enabled.mechanisms", "OAUTHBEARER")]).contains("OAUTHBEARER"));
        assert!(err(&[("sasl.enabled.mechanisms", "PLAIN")])
            .contains("listener.name.sasl_plaintext.plain.sasl.jaas.config"));
        assert!(err(&[
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "com.example.Login required;"
            )
        ])
        .contains("PlainLoginModule"));
        assert!(err(&[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            ("connections.max.reauth.ms", "soon")
        ])
        .contains("connections.max.reauth.ms"));
        assert!(ListenerSecurity::build(&props(&[]), "SSL", "SSL").is_err());
        assert!(ListenerSecurity::build(&props(&[]), "X", "TLS").is_err());
    }

    #[test]
    fn implemented_security_settings() {
        for key in [
            "sasl.enabled.mechanisms",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "listener.name.x.scram-sha-512.sasl.jaas.config",
            "listener.name.x.connections.max.reauth.ms",
            "listener.name.x.ssl.keystore.location",
            "ssl.client.auth",
        ] {
            assert!(is_implemented_security_setting(key), "{key}");
        }
        for key in [
            "sasl.jaas.config",
            "listener.name.x.gssapi.sasl.jaas.config",
            "sasl.kerberos.service.name",
            "ssl.key.password",
            "ssl.cipher.suites",
            "listener.name.x.ssl.keystore.password",
        ] {
            assert!(!is_implemented_security_setting(key), "{key}");
        }
    }
}
