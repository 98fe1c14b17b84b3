//! Why a configuration cannot be used: the message names the setting or argument.

use std::path::PathBuf;

/// A configuration Tern cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The properties file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A setting or argument is malformed, unknown or refused; the text names it.
    #[error("{0}")]
    Invalid(String),
}

/// `ConfigError::Invalid` with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::config::ConfigError::Invalid(format!($($arg)*))
    };
}

/// Returns early with `ConfigError::Invalid` and a formatted message.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::config::error::invalid!($($arg)*))
    };
}

pub(crate) use invalid;
pub(crate) use refuse;
