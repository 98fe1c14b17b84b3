//! One connection's authentication, as Kafka's SaslServerAuthenticator runs it: on a SASL
//! listener only ApiVersions and SaslHandshake are served until SaslAuthenticate succeeds; a
//! failed exchange is answered with Kafka's error and the connection closed; a session older
//! than `connections.max.reauth.ms` must re-authenticate (KIP-368) or is closed. Sans-I/O: the
//! connection task feeds it requests and the time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::listener::ListenerSecurity;
use super::sasl::{CredentialStore, SaslExchange, SaslMechanism, SaslStep};

/// The principal of connections that did not authenticate (PLAINTEXT listeners).
pub(crate) const ANONYMOUS: &str = "User:ANONYMOUS";

#[derive(Debug)]
enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed too).
    Handshake,
    /// The mechanism is chosen; tokens come in SaslAuthenticate (or raw after handshake v0).
    Authenticate {
        exchange: SaslExchange,
        raw_tokens: bool,
    },
    /// Authenticated (or a listener without authentication).
    Authenticated,
}

/// Whether a request may be served now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Serve it.
    Serve,
    /// Close the connection without an answer (Kafka's behaviour for these cases).
    Close(&'static str),
}

/// What to do after a SASL request's answer is sent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterReply {
    /// Keep serving.
    Continue,
    /// Close the connection.
    Close,
}

/// One connection's authentication state.
#[derive(Debug)]
pub(crate) struct Authenticator {
    listener: Arc<ListenerSecurity>,
    state: State,
    principal: Option<String>,
    session_expires: Option<Instant>,
}

fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

impl Authenticator {
    /// A new connection on `listener`; `tls_principal` is the principal of the client's TLS
    /// certificate (SSL listeners without SASL authenticate by it; ANONYMOUS without one).
    pub(crate) fn new(listener: Arc<ListenerSecurity>, tls_principal: Option<String>) -> Self {
        let sasl = listener.sasl.is_some();
        Authenticator {
            listener,
            state: if sasl {
                State::Handshake
            } else {
                State::Authenticated
            },
            principal: (!sasl).then(|| tls_principal.unwrap_or_else(|| ANONYMOUS.to_string())),
            session_expires: None,
        }
    }

    /// The name of the listener the connection came in on.
    pub(crate) fn listener_name(&self) -> &str {
        &self.listener.name
    }

    /// The authenticated principal (`User:<name>`), once there is one.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The listener's PLAIN users (empty on listeners without PLAIN).
    pub(crate) fn plain_users(&self) -> std::collections::BTreeMap<String, String> {
        self.listener
            .sasl
            .as_ref()
            .map(|s| s.plain_users.clone())
            .unwrap_or_default()
    }

    /// After SaslHandshake v0 the client sends bare tokens, not Kafka requests.
    pub(crate) fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            State::Authenticate {
                raw_tokens: true,
                ..
            }
        )
    }

    /// Whether a request with `api_key` (None: a key the kafka-protocol crate does not know,
    /// such as the mirror RPCs) may be served at `now`.
    pub(crate) fn admit(&self, api_key: Option<ApiKey>, now: Instant) -> Admission {
        match &self.state {
            State::Handshake => match api_key {
                Some(ApiKey::ApiVersions) | Some(ApiKey::SaslHandshake) => Admission::Serve,
                _ => Admission::Close("a request before SASL authentication"),
            },
            State::Authenticate { .. } => match api_key {
                Some(ApiKey::SaslAuthenticate) => Admission::Serve,
                _ => Admission::Close("a request during SASL authentication"),
            },
            State::Authenticated => {
                let expired = self.session_expires.is_some_and(|t| now >= t);
                if expired && api_key != Some(ApiKey::SaslHandshake) {
                    Admission::Close("the SASL session expired without re-authentication")
                } else {
                    Admission::Serve
                }
            }
        }
    }

    /// Answers SaslHandshake.
    pub(crate) fn handshake(
        &mut self,
        mechanism: &str,
        version: i16,
    ) -> (SaslHandshakeResponse, AfterReply) {
        let Some(sasl) = &self.listener.sasl else {
            return (
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code()),
                AfterReply::Continue,
            );
        };
        let enabled: Vec<StrBytes> = sasl.mechanisms.iter().map(|m| sb(m.name())).collect();
        let reauthenticating = matches!(self.state, State::Authenticated);
        if reauthenticating && version < 1 {
            return (
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code())
                    .with_mechanisms(enabled),
                AfterReply::Close,
            );
        }
        if matches!(self.state, State::Authenticate { .. }) {
            return (
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code())
                    .with_mechanisms(enabled),
                AfterReply::Close,
            );
        }
        match SaslMechanism::from_name(mechanism).filter(|m| sasl.mechanisms.contains(m)) {
            Some(m) => {
                self.state = State::Authenticate {
                    exchange: SaslExchange::new(m),
                    raw_tokens: version == 0,
                };
                (
                    SaslHandshakeResponse::default().with_mechanisms(enabled),
                    AfterReply::Continue,
                )
            }
            None => (
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
                    .with_mechanisms(enabled),
                AfterReply::Close,
            ),
        }
    }

    /// Takes one token; `Ok` holds the token to send back, `Err` the message of a failure
    /// after which the connection closes.
    pub(crate) fn step(
        &mut self,
        token: &[u8],
        store: &dyn CredentialStore,
        now: Instant,
    ) -> Result<Vec<u8>, String> {
        let State::Authenticate { exchange, .. } = &mut self.state else {
            return Err("Unexpected SASL token".into());
        };
        match exchange.step(token, store) {
            Ok(SaslStep::Challenge(c)) => Ok(c),
            Ok(SaslStep::Authenticated { user, token }) => {
                let principal = format!("User:{user}");
                if self.principal.as_ref().is_some_and(|p| *p != principal) {
                    self.state = State::Handshake;
                    return Err("Cannot change principals during re-authentication".into());
                }
                self.principal = Some(principal);
                self.state = State::Authenticated;
                let reauth = self.listener.sasl.as_ref().map_or(0, |s| s.max_reauth_ms);
                self.session_expires =
                    (reauth > 0).then(|| now + Duration::from_millis(reauth as u64));
                Ok(token)
            }
            Err(e) => {
                self.state = State::Handshake;
                Err(e.to_string())
            }
        }
    }

    /// Answers SaslAuthenticate.
    pub(crate) fn authenticate(
        &mut self,
        token: &[u8],
        store: &dyn CredentialStore,
        now: Instant,
    ) -> (SaslAuthenticateResponse, AfterReply) {
        if !matches!(self.state, State::Authenticate { .. }) {
            return (
                SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::IllegalSaslState.code())
                    .with_error_message(Some(sb("SaslAuthenticate without SaslHandshake"))),
                if self.listener.sasl.is_some() {
                    AfterReply::Close
                } else {
                    AfterReply::Continue
                },
            );
        }
        match self.step(token, store, now) {
            Ok(reply) => {
                let lifetime = match (&self.state, self.session_expires) {
                    (State::Authenticated, Some(t)) => t.saturating_duration_since(now).as_millis(),
                    _ => 0,
                };
                (
                    SaslAuthenticateResponse::default()
                        .with_auth_bytes(reply.into())
                        .with_session_lifetime_ms(lifetime as i64),
                    AfterReply::Continue,
                )
            }
            Err(message) => (
                SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(sb(message))),
                AfterReply::Close,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::security::listener::{SaslListenerConfig, SecurityProtocol};
    use crate::security::sasl::{ScramCredential, ScramMechanism};

    struct Store(BTreeMap<String, String>);
    impl CredentialStore for Store {
        fn plain_users(&self) -> &BTreeMap<String, String> {
            &self.0
        }
        fn scram_credential(&self, _: ScramMechanism, _: &str) -> Option<ScramCredential> {
            None
        }
    }

    fn sasl_listener(reauth_ms: i64) -> Arc<ListenerSecurity> {
        Arc::new(ListenerSecurity {
            name: "SASL_PLAINTEXT".into(),
            protocol: SecurityProtocol::SaslPlaintext,
            sasl: Some(SaslListenerConfig {
                mechanisms: vec![SaslMechanism::Plain],
                plain_users: BTreeMap::new(),
                max_reauth_ms: reauth_ms,
            }),
            tls: None,
        })
    }

    fn store() -> Store {
        Store(
            [
                ("alice".to_string(), "pw".to_string()),
                ("bob".into(), "pw".into()),
            ]
            .into(),
        )
    }

    #[test]
    fn only_versions_and_handshake_before_authentication() {
        let now = Instant::now();
        let mut a = Authenticator::new(sasl_listener(0), None);
        assert_eq!(a.admit(Some(ApiKey::ApiVersions), now), Admission::Serve);
        assert!(matches!(
            a.admit(Some(ApiKey::Metadata), now),
            Admission::Close(_)
        ));
        assert!(matches!(a.admit(None, now), Admission::Close(_)));
        let (r, after) = a.handshake("SCRAM-SHA-256", 1);
        assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
        assert_eq!(r.mechanisms, vec![sb("PLAIN")]);
        assert_eq!(after, AfterReply::Close);
        let mut a = Authenticator::new(sasl_listener(0), None);
        let (r, after) = a.handshake("PLAIN", 1);
        assert_eq!((r.error_code, after), (0, AfterReply::Continue));
        assert!(matches!(
            a.admit(Some(ApiKey::Produce), now),
            Admission::Close(_)
        ));
        let (r, after) = a.authenticate(b"\0alice\0wrong", &store(), now);
        assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
        assert_eq!(after, AfterReply::Close);
        assert_eq!(a.principal(), None);
    }

    #[test]
    fn sessions_expire_and_reauthentication_keeps_the_principal() {
        let now = Instant::now();
        let mut a = Authenticator::new(sasl_listener(1000), None);
        a.handshake("PLAIN", 1);
        let (r, after) = a.authenticate(b"\0alice\0pw", &store(), now);
        assert_eq!((r.error_code, after), (0, AfterReply::Continue));
        assert_eq!(r.session_lifetime_ms, 1000);
        assert_eq!(a.principal(), Some("User:alice"));
        assert_eq!(a.admit(Some(ApiKey::Produce), now), Admission::Serve);
        let later = now + Duration::from_millis(1500);
        assert!(matches!(
            a.admit(Some(ApiKey::Produce), later),
            Admission::Close(_)
        ));
        assert_eq!(
            a.admit(Some(ApiKey::SaslHandshake), later),
            Admission::Serve
        );
        a.handshake("PLAIN", 1);
        let (r, _) = a.authenticate(b"\0alice\0pw", &store(), later);
        assert_eq!(r.error_code, 0);
        assert_eq!(a.admit(Some(ApiKey::Produce), later), Admission::Serve);
        // Re-authenticating as someone else is refused.
        a.handshake("PLAIN", 1);
        let (r, after) = a.authenticate(b"\0bob\0pw", &store(), later);
        assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
        assert_eq!(after, AfterReply::Close);
    }

    #[test]
    fn handshake_v0_switches_to_raw_tokens() {
        let mut a = Authenticator::new(sasl_listener(0), None);
        a.handshake("PLAIN", 0);
        assert!(a.expects_raw_token());
        assert_eq!(a.step(b"\0alice\0pw", &store(), Instant::now()), Ok(vec![]));
        assert!(!a.expects_raw_token());
        assert_eq!(a.principal(), Some("User:alice"));
    }

    #[test]
    fn plaintext_listeners_answer_sasl_with_illegal_state_and_stay_open() {
        let plaintext = Arc::new(ListenerSecurity {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
        });
        let mut a = Authenticator::new(plaintext, None);
        assert_eq!(a.principal(), Some(ANONYMOUS));
        let (r, after) = a.handshake("PLAIN", 1);
        assert_eq!(r.error_code, ResponseError::IllegalSaslState.code());
        assert_eq!(after, AfterReply::Continue);
        let (r, after) = a.authenticate(b"x", &store(), Instant::now());
        assert_eq!(r.error_code, ResponseError::IllegalSaslState.code());
        assert_eq!(after, AfterReply::Continue);
    }
}
