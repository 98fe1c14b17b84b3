//! The partition log: segments, offset and time indexes, recovery, retention, compaction,
//! truncation, the leader epoch cache and producer state, with atomic checkpoints.
//! See `storage/DESIGN.md` for the on-disk format and fsync ordering.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod epoch;
pub mod error;
pub mod index;
pub mod log;
pub mod manager;
pub mod producer_state;
pub mod record;
pub mod segment;
pub mod txn_index;

#[cfg(test)]
mod log_tests;

pub use cleaner::CompactionStats;
pub use config::{CleanupPolicy, LogConfig, TimestampType};
pub use epoch::LeaderEpochFileCache;
pub use error::StorageError;
pub use log::{FetchDataInfo, Log, LogAppendInfo, TimestampAndOffset};
pub use manager::{BackgroundHandle, LogManager};
pub use producer_state::{BatchMetadata, ProducerStateEntry, ProducerStateManager};
pub use segment::LogSegment;
pub use txn_index::AbortedTxn;
