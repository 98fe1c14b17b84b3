//! SASL mechanisms the broker serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as sans-I/O
//! exchanges: tokens in, challenges out, a user name at the end.

pub(crate) mod plain;

use std::collections::BTreeMap;

pub(crate) use tern_protocol::sasl::scram::{self, ScramCredential, ScramMechanism};
pub(crate) use tern_protocol::sasl::SaslError;

/// A SASL mechanism Tern serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616).
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism from its SASL name (case as Kafka writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            other => ScramMechanism::from_name(other).map(SaslMechanism::Scram),
        }
    }
}

/// Where an exchange looks credentials up.
pub(crate) trait CredentialStore {
    /// PLAIN users and passwords of the listener (its JAAS `user_<name>` entries).
    fn plain_users(&self) -> &BTreeMap<String, String>;
    /// A user's SCRAM credential for one mechanism.
    fn scram_credential(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential>;
}

/// One step's outcome.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SaslStep {
    /// Send this challenge; the client answers with another SaslAuthenticate.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; send `token` as the last server message.
    Authenticated {
        /// The authenticated user name.
        user: String,
        /// The final server message (empty for PLAIN).
        token: Vec<u8>,
    },
}

/// The server side of one SASL exchange.
#[derive(Debug)]
pub(crate) struct SaslExchange {
    mechanism: SaslMechanism,
    scram: Option<scram::ScramServer>,
}

impl SaslExchange {
    /// Starts an exchange for a mechanism the client chose in SaslHandshake.
    pub(crate) fn new(mechanism: SaslMechanism) -> Self {
        SaslExchange {
            mechanism,
            scram: match mechanism {
                SaslMechanism::Plain => None,
                SaslMechanism::Scram(m) => Some(scram::ScramServer::new(m)),
            },
        }
    }

    /// Takes the client's next token.
    pub(crate) fn step(
        &mut self,
        token: &[u8],
        store: &dyn CredentialStore,
    ) -> Result<SaslStep, SaslError> {
        match (&mut self.scram, self.mechanism) {
            (Some(server), SaslMechanism::Scram(m)) => {
                match server.step(token, |user| store.scram_credential(m, user))? {
                    scram::ScramStep::Challenge(c) => Ok(SaslStep::Challenge(c)),
                    scram::ScramStep::Authenticated { user, server_final } => {
                        Ok(SaslStep::Authenticated {
                            user,
                            token: server_final,
                        })
                    }
                }
            }
            _ => Ok(SaslStep::Authenticated {
                user: plain::authenticate(token, store.plain_users())?,
                token: Vec::new(),
            }),
        }
    }
}
