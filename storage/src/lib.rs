//! The partition log: segments, offset and time indexes, recovery, retention, compaction,
//! truncation, the leader epoch cache and producer state, with atomic checkpoints.
//! See `storage/DESIGN.md` for the on-disk format and fsync ordering.

mod checkpoint;
mod cleaner;
mod cleaner_txn;
mod config;
mod epoch;
mod error;
pub mod fault;
mod file_slice;
mod index;
mod loader;
mod local_log;
mod log;
mod log_cleaner;
mod manager;
mod producer_state;
pub mod record;
mod segment;
mod segments;
mod txn_index;

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod log_tests;

pub use checkpoint::{read_entries, write_entries};
pub use cleaner::CompactionStats;
pub use config::{CleanupPolicy, LogConfig, TimestampType};
pub use epoch::LeaderEpochFileCache;
pub use error::StorageError;
pub use file_slice::FileSlice;
pub use log::{FetchDataInfo, Log, LogAppendInfo, TimestampAndOffset};
pub use log_cleaner::{CleanerConfig, LogCleaner};
pub use manager::{BackgroundHandle, LogManager};
pub use producer_state::{
    BatchMetadata, ProducerStateEntry, ProducerStateManager, VerificationGuard,
};
pub use segment::LogSegment;
pub use txn_index::AbortedTxn;

/// (total, available) bytes of the file system holding `path`, if it can be read.
#[allow(unsafe_code)]
pub fn disk_space(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; an all-zero value is valid and is overwritten below.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is NUL-terminated and `st` is a valid, writable statvfs.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let block = st.f_frsize as u64;
    Some((
        (st.f_blocks as u64).saturating_mul(block),
        (st.f_bavail as u64).saturating_mul(block),
    ))
}
