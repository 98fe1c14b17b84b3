//! Errors as Kafka reports them on the wire: an error code and a message.

pub use kafka_protocol::error::ResponseError;

/// A failure to report to a client: a Kafka error code and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {message}")]
pub struct ApiError {
    /// The Kafka error.
    pub error: ResponseError,
    /// Why, for the client's error message field.
    pub message: String,
}

impl ApiError {
    /// An error with a message.
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        ApiError {
            error,
            message: message.into(),
        }
    }

    /// Kafka's numeric error code.
    pub fn code(&self) -> i16 {
        self.error.code()
    }
}
