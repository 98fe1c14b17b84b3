//! [`LocalLog`]: the segments of one log in its directory (Kafka's LocalLog): the log end
//! offset and recovery point, rolling, appending to the active segment, reading, truncating,
//! the cleaner's segment swap, and the offline flags every I/O error raises.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use crate::checkpoint::{fsync_dir, write_offset, RECOVERY_POINT_CHECKPOINT};
use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::loader::open_segment;
use crate::segment::{
    file_name, LogSegment, SegmentRead, CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::segments::LogSegments;

/// The segment files of a log and the offsets they define. Mutations run under the owning
/// [`crate::Log`]'s writer lock; reads may run at any time.
#[derive(Debug)]
pub(crate) struct LocalLog {
    dir: PathBuf,
    segments: LogSegments,
    log_end_offset: AtomicI64,
    recovery_point: AtomicI64,
    /// Writes refused: an I/O error hit the log, or it was closed or deleted.
    offline: AtomicBool,
    /// Reads refused too: an I/O error other than a full disk, after which the bytes on disk
    /// cannot be trusted (Kafka takes such a log dir wholly offline).
    unreadable: AtomicBool,
    /// An I/O error (a full disk included) took the log offline, not a close or a delete.
    failed: AtomicBool,
}

/// The cleaner's output for one segment, written and fsynced beside it.
pub(crate) struct CleanedSegment<'a> {
    /// The new log file.
    pub log: &'a Path,
    /// The new transaction index, when it changes.
    pub txn_index: Option<&'a Path>,
}

impl LocalLog {
    /// The log in `dir` made of `segments` (oldest first), all fsynced up to `log_end_offset`.
    pub(crate) fn new(dir: &Path, segments: Vec<Arc<LogSegment>>, log_end_offset: i64) -> Self {
        LocalLog {
            dir: dir.to_path_buf(),
            segments: LogSegments::new(segments),
            log_end_offset: AtomicI64::new(log_end_offset),
            recovery_point: AtomicI64::new(log_end_offset),
            offline: AtomicBool::new(false),
            unreadable: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }

    /// Directory of the log.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments.
    pub(crate) fn segments(&self) -> &LogSegments {
        &self.segments
    }

    /// Offset the next appended record gets.
    pub(crate) fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// Publishes a new log end offset (after the data below it is in the segments).
    pub(crate) fn set_log_end_offset(&self, offset: i64) {
        self.log_end_offset.store(offset, Ordering::Release);
    }

    /// Offset below which everything is known to be fsynced.
    pub(crate) fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// Sets the recovery point and persists it.
    pub(crate) fn checkpoint_recovery_point(&self, offset: i64) -> Result<()> {
        self.recovery_point.store(offset, Ordering::Release);
        write_offset(&self.dir, RECOVERY_POINT_CHECKPOINT, offset)
    }

    /// Fails with [`StorageError::LogOffline`] once writes are refused.
    pub(crate) fn check_online(&self) -> Result<()> {
        if self.is_offline() {
            return Err(StorageError::LogOffline(self.dir.clone()));
        }
        Ok(())
    }

    /// Fails with [`StorageError::LogOffline`] once reads are refused.
    pub(crate) fn check_readable(&self) -> Result<()> {
        if self.is_unreadable() {
            return Err(StorageError::LogOffline(self.dir.clone()));
        }
        Ok(())
    }

    /// True once writes are refused.
    pub(crate) fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// True once an I/O error took the log offline.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// True once reads are refused too.
    pub(crate) fn is_unreadable(&self) -> bool {
        self.unreadable.load(Ordering::Acquire)
    }

    /// Refuses further writes (closed or being deleted).
    pub(crate) fn mark_offline(&self) {
        self.offline.store(true, Ordering::Release);
    }

    /// Takes the log offline when an I/O error hits it (redb's rule: no guessing). A full disk
    /// only stops writes: what was written before is intact and consumers may drain it. Any
    /// other error (EIO on a write, an fsync or a read) stops reads too, as Kafka takes its log
    /// dir offline: after a failed fsync the page cache may hold bytes the disk never got.
    pub(crate) fn io_guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e @ StorageError::Io { source, .. }) = &r {
            let full = matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
            self.failed.store(true, Ordering::Release);
            if !full && !self.unreadable.swap(true, Ordering::AcqRel) {
                self.offline.store(true, Ordering::Release);
                tracing::error!(dir = %self.dir.display(), error = %e, "log offline after an I/O error: it serves no reads or writes until the broker restarts");
            } else if full && !self.offline.swap(true, Ordering::AcqRel) {
                tracing::error!(dir = %self.dir.display(), error = %e, "log offline after a failed write: no further writes to it until the broker restarts");
            }
        }
        r
    }

    /// True if an append of `bytes` ending at `last_offset` must go to a new segment.
    pub(crate) fn should_roll(
        &self,
        bytes: usize,
        last_offset: i64,
        config: &LogConfig,
        now: i64,
    ) -> bool {
        let active = self.segments.active();
        let size = active.size();
        if size == 0 {
            // An empty segment takes any append whose offsets fit its base.
            return last_offset - active.base_offset() > u32::MAX as i64 / 2
                || last_offset < active.base_offset();
        }
        size + bytes as u64 > config.segment_bytes
            || (active.first_append_ms() >= 0 && now - active.first_append_ms() > config.segment_ms)
            || active.indexes_full()
            || last_offset - active.base_offset() > i32::MAX as i64
    }

    /// Closes the active segment and opens a new one at `new_base` (an empty active segment is
    /// replaced rather than kept behind). Returns the new active segment, or `None` when the
    /// active one is empty and based at `new_base` already.
    pub(crate) fn roll(
        &self,
        new_base: i64,
        config: &LogConfig,
    ) -> Result<Option<Arc<LogSegment>>> {
        let old = self.segments.active();
        if old.size() == 0 {
            if old.base_offset() == new_base {
                return Ok(None);
            }
            self.segments.remove(old.base_offset());
            old.delete_files()?;
        } else {
            old.make_inactive()?;
        }
        let seg = Arc::new(open_segment(&self.dir, new_base, config, true)?);
        seg.make_active()?;
        self.segments.add(seg.clone());
        Ok(Some(seg))
    }

    /// Reads the segment that may hold `offset` with `read_segment`, or the next ones past a
    /// gap; `None` when no segment has data at or past `offset`.
    pub(crate) fn read<T>(
        &self,
        offset: i64,
        read_segment: impl Fn(&LogSegment) -> Result<SegmentRead<T>>,
    ) -> Result<Option<(T, i64)>> {
        let mut seg = self.segments.floor_or_first(offset);
        while let Some(s) = seg {
            match self.io_guard(read_segment(&s))? {
                SegmentRead::Data(data, first_offset) => return Ok(Some((data, first_offset))),
                SegmentRead::NotHere => seg = self.segments.higher(s.base_offset()),
            }
        }
        Ok(None)
    }

    /// Removes all batches holding offsets >= `offset`, dropping emptied segments (but never
    /// the last one). Returns the new active segment; the log end offset is left to the caller.
    pub(crate) fn truncate_to(&self, offset: i64) -> Result<Arc<LogSegment>> {
        for seg in self.segments.remove_after(offset) {
            seg.delete_files()?;
        }
        let mut active = self.segments.active();
        active.truncate_to(offset)?;
        // An emptied active segment gives way to the previous one, so the log end offset is
        // the end of the remaining data, the same value a reopen computes.
        while active.size() == 0 {
            let Some(prev) = self.segments.remove_active() else {
                break;
            };
            active.delete_files()?;
            active = prev;
        }
        Ok(active)
    }

    /// Replaces every segment by an empty one at `offset`, which becomes the log end offset
    /// and the recovery point.
    pub(crate) fn truncate_fully(&self, offset: i64, config: &LogConfig) -> Result<()> {
        let seg = Arc::new(open_segment(&self.dir, offset, config, true)?);
        for s in self.segments.replace_all(seg.clone()) {
            if s.base_offset() != offset {
                s.delete_files()?;
            }
        }
        // A segment that reused the base offset still has the old data and index entries.
        seg.clear()?;
        seg.make_active()?;
        self.log_end_offset.store(offset, Ordering::Release);
        self.recovery_point.store(offset, Ordering::Release);
        Ok(())
    }

    /// Deletes the segments wholly below `offset`.
    pub(crate) fn delete_segments_below(&self, offset: i64) -> Result<()> {
        for s in self.segments.remove_below(offset) {
            s.delete_files()?;
        }
        Ok(())
    }

    /// The cleaner's swap, with the writer lock held: replaces the inactive segment `old` by
    /// the cleaned file at `cleaned` (`None`: the segment cleaned to nothing and goes) if `old`
    /// is still in the log holding the `size` bytes it was read at. Returns false otherwise.
    pub(crate) fn replace_segment(
        &self,
        old: &Arc<LogSegment>,
        size: u64,
        cleaned: Option<CleanedSegment<'_>>,
        config: &LogConfig,
    ) -> Result<bool> {
        let dir = &self.dir;
        let base = old.base_offset();
        let current = self.segments.get(base);
        let unchanged = current.is_some_and(|c| Arc::ptr_eq(&c, old) && c.size() == size);
        if !unchanged || self.segments.is_active(base) {
            // Truncated, deleted or became active meanwhile: drop the work.
            if let Some(cleaned) = cleaned {
                let _ = std::fs::remove_file(cleaned.log);
                if let Some(txn) = cleaned.txn_index {
                    let _ = std::fs::remove_file(txn);
                }
            }
            return Ok(false);
        }
        let Some(CleanedSegment {
            log: cleaned,
            txn_index,
        }) = cleaned
        else {
            self.segments.remove(base);
            old.delete_files()?;
            return Ok(true);
        };
        let log_name = file_name(base, LOG_SUFFIX);
        let swap = dir.join(format!("{log_name}.{SWAP_SUFFIX}"));
        // The transaction index's swap file goes first: recovery finishes it with the log's
        // (or removes it when the log's swap never came).
        let txn_swap = match txn_index {
            Some(txn) => {
                let name = file_name(base, TXN_INDEX_SUFFIX);
                let txn_swap = dir.join(format!("{name}.{SWAP_SUFFIX}"));
                crate::fault::rename(txn, &txn_swap).ctx(txn)?;
                Some((txn_swap, dir.join(name)))
            }
            None => None,
        };
        crate::fault::rename(cleaned, &swap).ctx(cleaned)?;
        fsync_dir(dir)?;
        if let Some((txn_swap, txn_index)) = txn_swap {
            crate::fault::rename(&txn_swap, &txn_index).ctx(&txn_swap)?;
        }
        // Stale indexes go before the new log takes the name, so a crash cannot pair them.
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let p = dir.join(file_name(base, suffix));
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx(&p),
                _ => {}
            }
        }
        crate::fault::rename(&swap, &dir.join(&log_name)).ctx(&swap)?;
        fsync_dir(dir)?;
        let seg = open_segment(dir, base, config, false)?;
        seg.recover(config.index_interval_bytes, |_, _| Ok(()))?;
        seg.make_inactive()?;
        seg.flush()?;
        self.segments.add(Arc::new(seg));
        Ok(true)
    }

    /// Path the cleaner writes its output for the `suffix` file of the segment at `base` to.
    pub(crate) fn cleaned_path(&self, base: i64, suffix: &str) -> PathBuf {
        let name = file_name(base, suffix);
        self.dir.join(format!("{name}.{CLEANED_SUFFIX}"))
    }
}
