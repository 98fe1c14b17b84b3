//! Why a broker could not be formatted, started or stopped: errors for the operator, each
//! naming what failed, with the underlying error as its source.

use tern_controller::ControllerError;
use tern_storage::StorageError;

use crate::config::ConfigError;

/// A failure to format, start or stop a broker.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting or argument cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file, directory or socket operation failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The logs could not be opened or closed.
    #[error("{what}")]
    Storage {
        /// What was being done.
        what: String,
        /// The failure.
        #[source]
        source: StorageError,
    },
    /// The metadata quorum could not be opened or joined.
    #[error("{what}")]
    Controller {
        /// What was being done.
        what: &'static str,
        /// The failure.
        #[source]
        source: ControllerError,
    },
    /// The cluster or the log dirs refuse this node; the text says why.
    #[error("{0}")]
    Refused(String),
}

impl StartError {
    /// An I/O failure while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> StartError {
        StartError::Io {
            what: what.into(),
            source,
        }
    }

    /// A storage failure while doing `what`.
    pub fn storage(what: impl Into<String>, source: StorageError) -> StartError {
        StartError::Storage {
            what: what.into(),
            source,
        }
    }
}

/// Results of formatting, starting and stopping.
pub(crate) type Result<T, E = StartError> = std::result::Result<T, E>;
