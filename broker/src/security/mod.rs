//! Client security: listener protocols, TLS (rustls), SASL authentication (PLAIN, SCRAM) and
//! the per-connection authenticator, and the ACL authorizer.

pub(crate) mod authenticator;
pub(crate) mod authorizer;
pub(crate) mod listener;
pub(crate) mod sasl;
pub(crate) mod ssl_principal;
pub(crate) mod tls;

use std::collections::BTreeMap;
use std::sync::Arc;

use tern_controller::MetadataImage;

use sasl::{CredentialStore, ScramCredential, ScramMechanism};

/// Credentials as a listener sees them: its PLAIN users and the SCRAM users of the metadata.
pub(crate) struct ListenerCredentials<'a> {
    /// The listener's PLAIN users.
    pub plain_users: &'a BTreeMap<String, String>,
    /// The metadata image holding SCRAM credentials.
    pub image: Arc<MetadataImage>,
}

impl CredentialStore for ListenerCredentials<'_> {
    fn plain_users(&self) -> &BTreeMap<String, String> {
        self.plain_users
    }

    fn scram_credential(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.image
            .scram_credentials
            .get(&(user.to_string(), mechanism.code()))
            .map(|c| ScramCredential {
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: c.iterations,
            })
    }
}
