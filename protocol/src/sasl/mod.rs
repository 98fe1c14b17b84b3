//! SASL pieces both sides of a connection share: SCRAM (RFC 5802) for the broker's server and
//! for the mirror's client of a secured source, and Kafka's inline JAAS syntax.

pub mod jaas;
pub mod scram;

/// Why a SASL exchange failed; the connection ends after Kafka's error reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// A message that does not follow the mechanism's syntax.
    #[error("{0}")]
    InvalidMessage(String),
    /// Wrong credentials, an unknown user, a refused authorization id.
    #[error("{0}")]
    AuthenticationFailed(String),
}
