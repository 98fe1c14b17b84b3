//! The storage error type.

use std::path::PathBuf;

use tern_protocol::record_batch::BatchError;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O operation on a file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A batch in an append request is malformed (bad length, magic or CRC).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A transactional batch would begin a transaction whose verification no longer holds.
    #[error("Record was not part of an ongoing transaction (producer {producer_id})")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
    },
    /// An append request carried no batch.
    #[error("append request holds no record batch")]
    EmptyAppend,
    /// A batch is larger than `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge {
        /// Size of the batch.
        size: usize,
        /// The configured limit.
        max: usize,
    },
    /// Offsets of a replicated append are not above the log end offset or do not increase.
    #[error("invalid offsets in replicated append: batch base offset {base_offset}, expected at least {expected_min}")]
    InvalidOffsets {
        /// The offending batch's base offset.
        base_offset: i64,
        /// The smallest acceptable base offset.
        expected_min: i64,
    },
    /// A requested offset lies outside the log.
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The requested offset.
        offset: i64,
        /// First offset of the log.
        log_start_offset: i64,
        /// Next offset to be written.
        log_end_offset: i64,
    },
    /// An idempotent producer's sequence does not follow its last one.
    #[error("out of order sequence for producer {producer_id}: got {found}, expected {expected}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// Sequence that would have been next.
        expected: i32,
        /// Sequence received.
        found: i32,
    },
    /// A producer epoch older than the one on record.
    #[error("producer {producer_id} epoch {found} is older than current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// Epoch on record.
        current: i16,
        /// Epoch received.
        found: i16,
    },
    /// A transaction marker from a coordinator older than the one that wrote the producer's
    /// last marker here (Kafka's TRANSACTION_COORDINATOR_FENCED).
    #[error(
        "marker of producer {producer_id} from coordinator epoch {found}, older than {current}"
    )]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// Coordinator epoch on record.
        current: i32,
        /// Coordinator epoch of the marker.
        found: i32,
    },
    /// A topic config value that cannot be parsed or is out of range.
    #[error("invalid config {name}: {reason}")]
    InvalidConfig {
        /// Kafka config name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A file on disk does not hold what it should and cannot be repaired.
    #[error("corrupt file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The log saw an I/O failure earlier and refuses further writes.
    #[error("log {0} is offline after an earlier I/O failure")]
    LogOffline(PathBuf),
    /// A topic or partition name that cannot be a directory name.
    #[error("invalid topic partition name {0:?}")]
    InvalidName(String),
}

/// Result with [`StorageError`].
pub(crate) type Result<T> = std::result::Result<T, StorageError>;

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    /// Wraps the error with `path`.
    fn ctx(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
