//! [`Log`]: one partition's log (Kafka's UnifiedLog): the segments, the log start and end
//! offsets, the leader epoch cache and producer state, with recovery on open.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use tern_protocol::record_batch::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch,
    RecordBatchHeader,
};

use crate::checkpoint::{
    fsync_dir, read_offset, write_atomic, write_offset, CLEANER_OFFSET_CHECKPOINT,
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use crate::config::{LogConfig, TimestampType};
use crate::epoch::LeaderEpochFileCache;
use crate::error::{IoContext, Result, StorageError};
use crate::file_slice::FileSlice;
use crate::producer_state::{ProducerStateEntry, ProducerStateManager, Staged};
use crate::segment::{
    control_of, file_name, now_ms, LogSegment, SegmentRead, CLEANED_SUFFIX, DELETED_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::txn_index::AbortedTxn;

/// Producer snapshots kept on disk (the newest ones).
const SNAPSHOTS_TO_KEEP: usize = 3;

/// Result of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// Offset of the first record appended (or of the original append for a duplicate).
    pub first_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// Largest timestamp among the batches, -1 if none.
    pub max_timestamp: i64,
    /// Last offset of the batch holding `max_timestamp`, -1 if none.
    pub offset_of_max_timestamp: i64,
    /// Broker time set on LogAppendTime topics, -1 otherwise.
    pub log_append_time: i64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
    /// Records appended.
    pub record_count: usize,
    /// Bytes appended.
    pub bytes: usize,
    /// The request repeated one of the producer's last five batches; nothing was appended.
    pub duplicate: bool,
}

/// Result of a read: the records as bytes ([`Log::read`]: whole batches back to back, possibly
/// none) or as a range of a segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchDataInfo<T = Bytes> {
    /// What was read.
    pub records: T,
    /// Base offset of the first returned batch, or the requested offset when empty.
    pub first_offset: i64,
    /// Log start offset at the time of the read.
    pub log_start_offset: i64,
    /// Log end offset at the time of the read.
    pub log_end_offset: i64,
}

/// Answer to a ListOffsets lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    /// Timestamp found.
    pub timestamp: i64,
    /// Offset of the record.
    pub offset: i64,
    /// Leader epoch of that offset, if known.
    pub leader_epoch: Option<i32>,
}

#[derive(Debug, Clone, Copy)]
enum Origin {
    Leader { epoch: i32 },
    Replicated { rewrite_epoch: Option<i32> },
}

#[derive(Debug)]
struct WriterState {
    unflushed_messages: i64,
    last_flush_ms: i64,
}

/// A partition log. `Send + Sync`; one writer at a time (internal mutex), readers never wait
/// for an append's file I/O and see only fully appended batches.
pub struct Log {
    dir: PathBuf,
    config: RwLock<LogConfig>,
    writer: Mutex<WriterState>,
    segments: RwLock<BTreeMap<i64, Arc<LogSegment>>>,
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    recovery_point: AtomicI64,
    epochs: RwLock<LeaderEpochFileCache>,
    producers: Mutex<ProducerStateManager>,
    offline: AtomicBool,
    /// Reads refused too: an I/O error other than a full disk, after which the bytes on disk
    /// cannot be trusted (Kafka takes such a log dir wholly offline).
    unreadable: AtomicBool,
    /// Offset up to which the cleaner has compacted (exclusive).
    cleaner_checkpoint: AtomicI64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish()
    }
}

fn base_of(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

impl Log {
    /// Opens the log in `dir`, creating it if missing and recovering after a crash.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log> {
        std::fs::create_dir_all(dir).ctx(dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        if clean {
            // Must be durable before any write, or a later crash would skip recovery.
            std::fs::remove_file(&marker).ctx(&marker)?;
            fsync_dir(dir)?;
        }
        let must_recover = cleanup_stray_files(dir)?;

        let mut bases = Vec::new();
        let mut index_files = Vec::new();
        for entry in std::fs::read_dir(dir).ctx(dir)? {
            let path = entry.ctx(dir)?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            if let Some(b) = base_of(&name, LOG_SUFFIX) {
                bases.push(b);
            } else if let Some(b) = ["index", "timeindex", "txnindex"]
                .iter()
                .find_map(|s| base_of(&name, s))
            {
                index_files.push((b, path));
            }
        }
        bases.sort_unstable();
        let mut must_recover = must_recover;
        for &b in &bases {
            let has_index = index_files
                .iter()
                .any(|(ib, p)| *ib == b && p.extension().is_some_and(|e| e == "index"));
            let log_len =
                std::fs::metadata(dir.join(file_name(b, LOG_SUFFIX))).map_or(0, |m| m.len());
            if !has_index && log_len > 0 {
                // A cleaner swap (or a user) removed the index: rebuild rather than trust an empty one.
                must_recover.insert(b);
            }
        }
        for (b, path) in index_files {
            if bases.binary_search(&b).is_err() {
                std::fs::remove_file(&path).ctx(&path)?;
            }
        }

        let checkpointed_start =
            read_offset(dir, LOG_START_OFFSET_CHECKPOINT).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "ignoring unreadable log start offset checkpoint");
                None
            });
        let recovery_point = if clean {
            read_offset(dir, RECOVERY_POINT_CHECKPOINT)
                .ok()
                .flatten()
                .unwrap_or(0)
        } else {
            read_offset(dir, RECOVERY_POINT_CHECKPOINT).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "ignoring unreadable recovery point checkpoint; recovering everything");
                None
            }).unwrap_or(0)
        };
        if bases.is_empty() {
            bases.push(checkpointed_start.unwrap_or(0).max(0));
        }
        let preallocate = config.preallocate.then_some(config.segment_bytes);
        let mut segments = BTreeMap::new();
        for (i, &b) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let seg = LogSegment::open(
                dir,
                b,
                config.segment_index_bytes,
                if last { preallocate } else { None },
            )?;
            segments.insert(b, Arc::new(seg));
        }

        let (mut epochs, rebuild_epochs) = match LeaderEpochFileCache::load(dir) {
            Ok(Some(c)) => (c, false),
            Ok(None) => (LeaderEpochFileCache::empty(dir), false),
            Err(e) => {
                tracing::warn!(error = %e, "rebuilding the leader epoch cache from the log");
                (LeaderEpochFileCache::empty(dir), true)
            }
        };

        // Recover segments that may hold unflushed data, were swapped in by the cleaner, or
        // whose indexes fail the sanity check.
        let seg_list: Vec<Arc<LogSegment>> = segments.values().cloned().collect();
        let mut first_recovered: Option<i64> = None;
        let mut leo = seg_list.first().map_or(0, |s| s.base_offset());
        let mut cut_after: Option<usize> = None;
        for (i, seg) in seg_list.iter().enumerate() {
            let next_base = seg_list.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
            let mut recover =
                must_recover.contains(&seg.base_offset()) || (!clean && next_base > recovery_point);
            let mut next = None;
            if !recover {
                match seg.next_offset() {
                    Ok(n) if seg.sanity_check(n) => next = Some(n),
                    _ => recover = true,
                }
            }
            if recover {
                first_recovered.get_or_insert(seg.base_offset());
                let end = seg.recover(config.index_interval_bytes, |h, _| {
                    // Kafka's recovery rule: only a newer epoch starts an entry, so scanning
                    // from the middle of an epoch cannot move its start offset.
                    if epochs
                        .latest_epoch()
                        .is_none_or(|e| h.partition_leader_epoch > e)
                    {
                        epochs.assign(h.partition_leader_epoch, h.base_offset);
                    }
                    Ok(())
                })?;
                seg.flush()?;
                if i + 1 != seg_list.len() {
                    seg.make_inactive()?;
                }
                next = Some(end.next_offset.unwrap_or(seg.base_offset()));
                if end.error.is_some() {
                    // Anything after a torn or corrupt batch is not a valid prefix.
                    cut_after = Some(i);
                }
            }
            leo = next.unwrap_or(seg.base_offset());
            if cut_after.is_some() {
                break;
            }
        }
        if let Some(i) = cut_after {
            for seg in &seg_list[i + 1..] {
                segments.remove(&seg.base_offset());
                seg.delete_files()?;
            }
        }
        // A later segment whose base is below the end of the previous one cannot be trusted.
        let mut log_start = checkpointed_start
            .unwrap_or(i64::MIN)
            .max(segments.keys().next().copied().unwrap_or(0));
        if log_start > leo {
            // Everything below the checkpointed start was deleted: start empty there.
            for seg in segments.values() {
                seg.delete_files()?;
            }
            segments.clear();
            segments.insert(
                log_start,
                Arc::new(LogSegment::open(
                    dir,
                    log_start,
                    config.segment_index_bytes,
                    preallocate,
                )?),
            );
            leo = log_start;
            epochs.clear();
        }
        log_start = log_start.min(leo);
        if rebuild_epochs {
            // Start over: the recovery pass above only saw the recovered segments.
            epochs.clear();
            for seg in segments.values() {
                seg.scan(0, seg.size(), false, |_, h, _| {
                    // Kafka's recovery rule: only a newer epoch starts an entry, so scanning
                    // from the middle of an epoch cannot move its start offset.
                    if epochs
                        .latest_epoch()
                        .is_none_or(|e| h.partition_leader_epoch > e)
                    {
                        epochs.assign(h.partition_leader_epoch, h.base_offset);
                    }
                    Ok(())
                })?;
            }
        }
        // An entry may start exactly at the log end (a new leader, or DeleteRecords up to the
        // end); only entries beyond it lost their data.
        epochs.truncate_from_end(leo + 1);
        epochs.truncate_from_start(log_start);
        epochs.flush()?;
        if let Some((_, active)) = segments.iter().next_back() {
            active.make_active()?;
        }

        let log = Log {
            dir: dir.to_path_buf(),
            config: RwLock::new(config),
            writer: Mutex::new(WriterState {
                unflushed_messages: 0,
                last_flush_ms: now_ms(),
            }),
            segments: RwLock::new(segments),
            log_start_offset: AtomicI64::new(log_start),
            log_end_offset: AtomicI64::new(leo),
            recovery_point: AtomicI64::new(leo),
            epochs: RwLock::new(epochs),
            producers: Mutex::new(ProducerStateManager::new(dir)),
            offline: AtomicBool::new(false),
            unreadable: AtomicBool::new(false),
            cleaner_checkpoint: AtomicI64::new(
                read_offset(dir, CLEANER_OFFSET_CHECKPOINT)
                    .ok()
                    .flatten()
                    .unwrap_or(log_start)
                    .clamp(log_start, leo),
            ),
        };
        let producers = log.load_producer_state(leo, first_recovered)?;
        *log.producers.lock() = producers;
        write_offset(dir, RECOVERY_POINT_CHECKPOINT, leo)?;
        write_offset(dir, LOG_START_OFFSET_CHECKPOINT, log_start)?;
        Ok(log)
    }

    /// Rebuilds producer state up to `upto` from the newest usable snapshot. Segments at or
    /// after `rebuild_txn_from` get their transaction index entries re-added.
    fn load_producer_state(
        &self,
        upto: i64,
        rebuild_txn_from: Option<i64>,
    ) -> Result<ProducerStateManager> {
        let limit = rebuild_txn_from.map_or(upto, |b| b.min(upto));
        let mut snapshots = ProducerStateManager::list_snapshots(&self.dir)?;
        let mut state = None;
        while let Some((offset, path)) = snapshots.pop() {
            if offset > upto {
                std::fs::remove_file(&path).ctx(&path)?;
                continue;
            }
            if offset > limit || state.is_some() {
                continue;
            }
            match ProducerStateManager::load_snapshot(&self.dir, &path) {
                Ok(m) => state = Some((offset, m)),
                Err(e) => {
                    tracing::warn!(error = %e, "deleting unreadable producer snapshot");
                    std::fs::remove_file(&path).ctx(&path)?;
                }
            }
        }
        let (from, mut state) =
            state.unwrap_or_else(|| (i64::MIN, ProducerStateManager::new(&self.dir)));
        let segs: Vec<Arc<LogSegment>> = self.segments.read().values().cloned().collect();
        for (i, seg) in segs.iter().enumerate() {
            let next_base = segs.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
            if next_base <= from || seg.base_offset() >= upto {
                continue;
            }
            let rebuild = rebuild_txn_from.is_some_and(|b| seg.base_offset() >= b);
            if rebuild {
                seg.reset_txn_index()?;
            }
            seg.scan(0, seg.size(), false, |_, h, batch| {
                if h.base_offset < from || h.base_offset >= upto {
                    return Ok(());
                }
                if let Some(done) = state.replay(h, control_of(h, batch)) {
                    if done.aborted && rebuild {
                        let lso = state
                            .first_unstable_offset()
                            .unwrap_or(done.last_offset + 1);
                        seg.append_aborted_txn(AbortedTxn {
                            producer_id: done.producer_id,
                            first_offset: done.first_offset,
                            last_offset: done.last_offset,
                            last_stable_offset: lso,
                        })?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(state)
    }

    /// Directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_online(&self) -> Result<()> {
        if self.offline.load(Ordering::Acquire) {
            return Err(StorageError::LogOffline(self.dir.clone()));
        }
        Ok(())
    }

    fn check_readable(&self) -> Result<()> {
        if self.unreadable.load(Ordering::Acquire) {
            return Err(StorageError::LogOffline(self.dir.clone()));
        }
        Ok(())
    }

    /// Takes the log offline when an I/O error hits it (redb's rule: no guessing). A full disk
    /// only stops writes: what was written before is intact and consumers may drain it. Any
    /// other error (EIO on a write, an fsync or a read) stops reads too, as Kafka takes its log
    /// dir offline: after a failed fsync the page cache may hold bytes the disk never got.
    pub(crate) fn io_guard<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e @ StorageError::Io { source, .. }) = &r {
            let full = matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
            if !full && !self.unreadable.swap(true, Ordering::AcqRel) {
                self.offline.store(true, Ordering::Release);
                tracing::error!(dir = %self.dir.display(), error = %e, "log offline after an I/O error: it serves no reads or writes until the broker restarts");
            } else if full && !self.offline.swap(true, Ordering::AcqRel) {
                tracing::error!(dir = %self.dir.display(), error = %e, "log offline after a failed write: no further writes to it until the broker restarts");
            }
        }
        r
    }

    fn active_segment(&self) -> Arc<LogSegment> {
        let segs = self.segments.read();
        match segs.values().next_back() {
            Some(s) => s.clone(),
            None => unreachable!("a log always has an active segment"),
        }
    }

    /// Appends batches from a producer: validates all, assigns offsets and the leader epoch.
    pub fn append_as_leader(&self, records: BytesMut, leader_epoch: i32) -> Result<LogAppendInfo> {
        self.append(
            records,
            Origin::Leader {
                epoch: leader_epoch,
            },
        )
    }

    /// Appends batches fetched from a leader or a mirror source, keeping their offsets.
    pub fn append_replicated(
        &self,
        records: BytesMut,
        rewrite_leader_epoch: Option<i32>,
    ) -> Result<LogAppendInfo> {
        self.append(
            records,
            Origin::Replicated {
                rewrite_epoch: rewrite_leader_epoch,
            },
        )
    }

    fn append(&self, mut records: BytesMut, origin: Origin) -> Result<LogAppendInfo> {
        let mut w = self.writer.lock();
        self.check_online()?;
        let config = self.config.read().clone();
        // Validate everything before touching anything: all or nothing.
        let mut batches: Vec<(usize, RecordBatchHeader)> = Vec::new();
        let mut pos = 0usize;
        while pos < records.len() {
            let h = validate_batch(&records[pos..])?;
            if h.size() > config.max_message_bytes {
                return Err(StorageError::RecordTooLarge {
                    size: h.size(),
                    max: config.max_message_bytes,
                });
            }
            batches.push((pos, h));
            pos += h.size();
        }
        if batches.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        let leo = self.log_end_offset();
        let now = now_ms();
        let log_append_time = match (origin, config.message_timestamp_type) {
            (Origin::Leader { .. }, TimestampType::LogAppendTime) => now,
            _ => -1,
        };
        let producers = self.producers.lock();
        let mut staged = Staged::new();
        let mut completed = Vec::new();
        let mut next = leo;
        for (pos, h) in batches.iter_mut() {
            let batch = &mut records[*pos..*pos + h.size()];
            match origin {
                Origin::Leader { epoch } => {
                    set_base_offset(batch, next);
                    set_partition_leader_epoch(batch, epoch);
                    if log_append_time >= 0 {
                        set_log_append_time(batch, log_append_time);
                    }
                    *h = RecordBatchHeader::parse(batch)?;
                    if let Some((_, coordinator_epoch)) = control_of(h, batch) {
                        producers.check_marker(h.producer_id, coordinator_epoch)?;
                    }
                    if let Some(dup) = producers.check_leader(&mut staged, h)? {
                        return Ok(LogAppendInfo {
                            first_offset: dup.first_offset,
                            last_offset: dup.last_offset,
                            max_timestamp: dup.timestamp,
                            offset_of_max_timestamp: dup.last_offset,
                            log_append_time,
                            log_start_offset: self.log_start_offset(),
                            record_count: 0,
                            bytes: 0,
                            duplicate: true,
                        });
                    }
                }
                Origin::Replicated { rewrite_epoch } => {
                    if h.base_offset < next {
                        return Err(StorageError::InvalidOffsets {
                            base_offset: h.base_offset,
                            expected_min: next,
                        });
                    }
                    if let Some(e) = rewrite_epoch {
                        set_partition_leader_epoch(batch, e);
                        h.partition_leader_epoch = e;
                    }
                }
            }
            if let Some(done) = producers.update(&mut staged, h, control_of(h, batch)) {
                completed.push(done);
            }
            next = h.next_offset();
        }
        drop(producers);

        let first_offset = batches[0].1.base_offset;
        let last_offset = next - 1;
        let mut max_timestamp = -1i64;
        let mut offset_of_max_timestamp = -1i64;
        let mut record_count = 0usize;
        for (_, h) in &batches {
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
            record_count += h.records_count as usize;
        }

        let mut active = self.active_segment();
        if self.should_roll(&active, records.len(), last_offset, &config, now) {
            active = self.io_guard(self.roll_locked(first_offset))?;
        }
        self.io_guard(active.append(&records, &batches, config.index_interval_bytes))?;

        {
            let mut epochs = self.epochs.write();
            let mut changed = false;
            for (_, h) in &batches {
                if h.partition_leader_epoch >= 0 {
                    changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
                }
            }
            if changed {
                self.io_guard(epochs.flush())?;
            }
        }
        {
            let mut producers = self.producers.lock();
            producers.commit(staged);
            for done in completed {
                if done.aborted {
                    let lso = producers
                        .first_unstable_offset()
                        .unwrap_or(done.last_offset + 1);
                    self.io_guard(active.append_aborted_txn(AbortedTxn {
                        producer_id: done.producer_id,
                        first_offset: done.first_offset,
                        last_offset: done.last_offset,
                        last_stable_offset: lso,
                    }))?;
                }
            }
        }
        self.log_end_offset.store(next, Ordering::Release);

        w.unflushed_messages += record_count as i64;
        if w.unflushed_messages >= config.flush_messages {
            w.unflushed_messages = 0;
            w.last_flush_ms = now;
            drop(w);
            self.flush()?;
        }
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time,
            log_start_offset: self.log_start_offset(),
            record_count,
            bytes: records.len(),
            duplicate: false,
        })
    }

    fn should_roll(
        &self,
        active: &LogSegment,
        bytes: usize,
        last_offset: i64,
        config: &LogConfig,
        now: i64,
    ) -> bool {
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

    /// Closes the active segment and opens a new one at `new_base`. Writer lock held.
    fn roll_locked(&self, new_base: i64) -> Result<Arc<LogSegment>> {
        let old = self.active_segment();
        let config = self.config.read().clone();
        if old.size() == 0 {
            if old.base_offset() == new_base {
                return Ok(old);
            }
            // Replace an empty active segment rather than keep an empty one behind.
            self.segments.write().remove(&old.base_offset());
            old.delete_files()?;
        } else {
            old.make_inactive()?;
        }
        let seg = Arc::new(LogSegment::open(
            &self.dir,
            new_base,
            config.segment_index_bytes,
            config.preallocate.then_some(config.segment_bytes),
        )?);
        seg.make_active()?;
        self.segments.write().insert(new_base, seg.clone());
        // Kafka snapshots producer state at each roll, so recovery replays at most one segment.
        self.producers.lock().take_snapshot(new_base)?;
        self.prune_snapshots()?;
        fsync_dir(&self.dir)?;
        Ok(seg)
    }

    fn prune_snapshots(&self) -> Result<()> {
        let snapshots = ProducerStateManager::list_snapshots(&self.dir)?;
        let keep_from = snapshots.len().saturating_sub(SNAPSHOTS_TO_KEEP);
        for (_, path) in &snapshots[..keep_from] {
            std::fs::remove_file(path).ctx(path)?;
        }
        Ok(())
    }

    /// Rolls the active segment if it holds data.
    pub fn roll(&self) -> Result<()> {
        let _w = self.writer.lock();
        self.check_online()?;
        let leo = self.log_end_offset();
        if self.active_segment().size() > 0 {
            self.io_guard(self.roll_locked(leo))?;
        }
        Ok(())
    }

    /// Rolls the active segment if it is older than `segment.ms` (background task).
    pub fn maybe_roll_by_time(&self, now_ms: i64) -> Result<bool> {
        let segment_ms = self.config.read().segment_ms;
        let active = self.active_segment();
        if active.size() > 0
            && active.first_append_ms() >= 0
            && now_ms - active.first_append_ms() > segment_ms
        {
            self.roll()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Reads whole batches from one segment starting at `start_offset`.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo> {
        self.read_with(start_offset, max_offset, Bytes::new(), |s| {
            s.read(start_offset, max_bytes, max_offset, min_one_batch)
        })
    }

    /// What a fetch sends: the range of one segment file starting at `start_offset`, bounded
    /// as [`LogSegment::read_slice`] bounds it (it may end inside a batch). The bytes are not
    /// read; the slice keeps the file open until it is sent.
    pub fn read_slice(
        &self,
        start_offset: i64,
        max_bytes: usize,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>> {
        let read = self.read_with(start_offset, max_offset, None, |s| {
            Ok(
                match s.read_slice(start_offset, max_bytes, max_offset, min_one_batch)? {
                    SegmentRead::Data(slice, first) => {
                        SegmentRead::Data((!slice.is_empty()).then_some(slice), first)
                    }
                    SegmentRead::NotHere => SegmentRead::NotHere,
                },
            )
        })?;
        Ok(read.records)
    }

    /// The common part of the reads: checks `start_offset` against the log's range, finds the
    /// segment holding it (or the next one past a gap) and reads it with `read_segment`.
    fn read_with<T>(
        &self,
        start_offset: i64,
        max_offset: Option<i64>,
        empty: T,
        read_segment: impl Fn(&LogSegment) -> Result<SegmentRead<T>>,
    ) -> Result<FetchDataInfo<T>> {
        self.check_readable()?;
        let leo = self.log_end_offset();
        let log_start = self.log_start_offset();
        if start_offset < log_start || start_offset > leo {
            return Err(StorageError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset: log_start,
                log_end_offset: leo,
            });
        }
        let info = |records, first_offset| FetchDataInfo {
            records,
            first_offset,
            log_start_offset: log_start,
            log_end_offset: leo,
        };
        if start_offset == leo || max_offset.is_some_and(|m| start_offset >= m) {
            return Ok(info(empty, start_offset));
        }
        let mut seg = {
            let segs = self.segments.read();
            segs.range(..=start_offset)
                .next_back()
                .or_else(|| segs.iter().next())
                .map(|(_, s)| s.clone())
        };
        while let Some(s) = seg {
            match self.io_guard(read_segment(&s))? {
                SegmentRead::Data(data, first_offset) => return Ok(info(data, first_offset)),
                SegmentRead::NotHere => {
                    // Past the end of this segment's data (e.g. a gap): try the next one.
                    let segs = self.segments.read();
                    seg = segs
                        .range((Bound::Excluded(s.base_offset()), Bound::Unbounded))
                        .next()
                        .map(|(_, s)| s.clone());
                }
            }
        }
        Ok(info(empty, start_offset))
    }

    /// First offset of the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    /// Offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// Offset below which everything is known to be fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// ListOffsets by timestamp: the first offset whose timestamp is >= `timestamp`.
    pub fn fetch_offset_by_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        let log_start = self.log_start_offset();
        let segs: Vec<Arc<LogSegment>> = self.segments.read().values().cloned().collect();
        for seg in segs {
            if seg.max_timestamp_and_offset().0 < timestamp && seg.size() > 0 {
                // The time index's max is exact for appended data; skip segments wholly older.
                continue;
            }
            if let Some((ts, offset)) = seg.find_offset_by_timestamp(timestamp, log_start)? {
                return Ok(Some(TimestampAndOffset {
                    timestamp: ts,
                    offset,
                    leader_epoch: self.epoch_for_offset(offset),
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the largest timestamp and its offset.
    pub fn max_timestamp_and_offset(&self) -> Result<Option<TimestampAndOffset>> {
        let segs: Vec<Arc<LogSegment>> = self.segments.read().values().cloned().collect();
        let mut best: Option<(i64, i64)> = None;
        for seg in segs {
            let (ts, off) = seg.max_timestamp_and_offset();
            if seg.size() > 0 && ts >= 0 && best.is_none_or(|(b, _)| ts > b) {
                best = Some((ts, off));
            }
        }
        Ok(best.map(|(timestamp, offset)| TimestampAndOffset {
            timestamp,
            offset,
            leader_epoch: self.epoch_for_offset(offset),
        }))
    }

    /// The latest leader epoch seen in the log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.read().latest_epoch()
    }

    /// OffsetForLeaderEpoch: (epoch, end offset) per Kafka's `endOffsetFor`.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.epochs
            .read()
            .end_offset_for(epoch, self.log_end_offset())
    }

    /// The leader epoch in which `offset` was written.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.epochs.read().epoch_for_offset(offset)
    }

    /// The epoch cache entries (epoch, start offset).
    pub fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs.read().entries().to_vec()
    }

    /// Removes all batches holding offsets >= `offset`. The log end offset becomes the end of
    /// the remaining data (at most `offset`; Kafka sets it to `offset` even when that leaves a
    /// gap or cuts a batch), or the log start offset if no readable data remains.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        self.check_online()?;
        let leo = self.log_end_offset();
        if offset >= leo {
            return Ok(());
        }
        if offset < self.log_start_offset() || offset < 0 {
            return self.io_guard(self.truncate_fully_locked(offset.max(0)));
        }
        self.io_guard(self.truncate_locked(offset))
    }

    fn truncate_locked(&self, offset: i64) -> Result<()> {
        let removed: Vec<Arc<LogSegment>> = {
            let mut segs = self.segments.write();
            let later: Vec<i64> = segs
                .range((Bound::Excluded(offset), Bound::Unbounded))
                .map(|(b, _)| *b)
                .collect();
            // Keep at least one segment.
            let later: Vec<i64> = if later.len() == segs.len() {
                later[1..].to_vec()
            } else {
                later
            };
            later.iter().filter_map(|b| segs.remove(b)).collect()
        };
        for seg in &removed {
            seg.delete_files()?;
        }
        let mut active = self.active_segment();
        active.truncate_to(offset)?;
        // An emptied active segment gives way to the previous one, so the log end offset is
        // the end of the remaining data, the same value a reopen computes.
        while active.size() == 0 {
            let prev = {
                let mut segs = self.segments.write();
                if segs.len() < 2 {
                    break;
                }
                segs.remove(&active.base_offset());
                segs.values().next_back().cloned()
            };
            active.delete_files()?;
            match prev {
                Some(p) => active = p,
                None => break,
            }
        }
        let new_leo = active.next_offset()?;
        if new_leo <= self.log_start_offset() {
            // Nothing readable remains: start afresh at the log start (epochs and producer
            // state go too, so a reopen computes the same state).
            return self.truncate_fully_locked(self.log_start_offset());
        }
        active.make_active()?;
        self.log_end_offset.store(new_leo, Ordering::Release);
        {
            let mut epochs = self.epochs.write();
            if epochs.truncate_from_end(new_leo) {
                epochs.flush()?;
            }
        }
        let state = self.load_producer_state(new_leo, None)?;
        *self.producers.lock() = state;
        if self.recovery_point() > new_leo {
            self.recovery_point.store(new_leo, Ordering::Release);
            write_offset(&self.dir, RECOVERY_POINT_CHECKPOINT, new_leo)?;
        }
        self.cleaner_checkpoint.fetch_min(new_leo, Ordering::AcqRel);
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (log start = log end = `offset`).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        self.check_online()?;
        self.io_guard(self.truncate_fully_locked(offset))
    }

    fn truncate_fully_locked(&self, offset: i64) -> Result<()> {
        let config = self.config.read().clone();
        let seg = Arc::new(LogSegment::open(
            &self.dir,
            offset,
            config.segment_index_bytes,
            config.preallocate.then_some(config.segment_bytes),
        )?);
        let old: Vec<Arc<LogSegment>> = {
            let mut segs = self.segments.write();
            let old = std::mem::take(&mut *segs).into_values().collect();
            segs.insert(offset, seg.clone());
            old
        };
        for s in old {
            if s.base_offset() != offset {
                s.delete_files()?;
            }
        }
        // A segment that reused the base offset still has the old data and index entries.
        seg.clear()?;
        seg.make_active()?;
        self.log_end_offset.store(offset, Ordering::Release);
        self.log_start_offset.store(offset, Ordering::Release);
        self.recovery_point.store(offset, Ordering::Release);
        self.cleaner_checkpoint.store(offset, Ordering::Release);
        {
            let mut epochs = self.epochs.write();
            epochs.clear();
            epochs.flush()?;
        }
        for (_, path) in ProducerStateManager::list_snapshots(&self.dir)? {
            std::fs::remove_file(&path).ctx(&path)?;
        }
        *self.producers.lock() = ProducerStateManager::new(&self.dir);
        write_offset(&self.dir, LOG_START_OFFSET_CHECKPOINT, offset)?;
        write_offset(&self.dir, RECOVERY_POINT_CHECKPOINT, offset)?;
        fsync_dir(&self.dir)
    }

    /// DeleteRecords: raises the log start offset to `offset` (persisted) and deletes the
    /// segments wholly below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let _w = self.writer.lock();
        self.check_online()?;
        let leo = self.log_end_offset();
        let start = self.log_start_offset();
        if offset > leo || offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: leo,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        self.io_guard(self.raise_log_start_locked(offset))?;
        Ok(offset)
    }

    fn raise_log_start_locked(&self, offset: i64) -> Result<()> {
        write_offset(&self.dir, LOG_START_OFFSET_CHECKPOINT, offset)?;
        self.log_start_offset.store(offset, Ordering::Release);
        if offset >= self.log_end_offset() && self.active_segment().size() > 0 {
            self.roll_locked(offset)?;
        }
        let doomed: Vec<Arc<LogSegment>> = {
            let mut segs = self.segments.write();
            let bases: Vec<i64> = segs.keys().copied().collect();
            let mut doomed = Vec::new();
            for w in bases.windows(2) {
                if w[1] <= offset {
                    if let Some(s) = segs.remove(&w[0]) {
                        doomed.push(s);
                    }
                }
            }
            doomed
        };
        for s in &doomed {
            s.delete_files()?;
        }
        {
            let mut epochs = self.epochs.write();
            if epochs.truncate_from_start(offset) {
                epochs.flush()?;
            }
        }
        if self.cleaner_checkpoint.load(Ordering::Acquire) < offset {
            self.cleaner_checkpoint.store(offset, Ordering::Release);
        }
        Ok(())
    }

    /// Deletes whole inactive segments past `retention.ms` or beyond `retention.bytes`.
    /// Returns how many were deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let _w = self.writer.lock();
        self.check_online()?;
        let config = self.config.read().clone();
        let segs: Vec<Arc<LogSegment>> = self.segments.read().values().cloned().collect();
        let log_start = self.log_start_offset();
        let total: u64 = segs.iter().map(|s| s.size()).sum();
        let mut excess = if config.retention_bytes >= 0 {
            total as i64 - config.retention_bytes
        } else {
            0
        };
        let mut new_start = None;
        for (i, seg) in segs.iter().enumerate() {
            let Some(next) = segs.get(i + 1) else { break };
            let below_start = next.base_offset() <= log_start;
            let by_time = config.cleanup_policy.delete
                && config.retention_ms >= 0
                && now_ms - seg.largest_timestamp() > config.retention_ms;
            let by_size = config.cleanup_policy.delete
                && config.retention_bytes >= 0
                && excess >= seg.size() as i64;
            if !(below_start || by_time || by_size) {
                break;
            }
            excess -= seg.size() as i64;
            new_start = Some(next.base_offset());
        }
        let Some(new_start) = new_start else {
            return Ok(0);
        };
        let before = segs.len();
        if new_start > log_start {
            self.io_guard(self.raise_log_start_locked(new_start))?;
        } else {
            self.io_guard(self.raise_log_start_locked(log_start))?;
        }
        let after = self.segments.read().len();
        Ok(before - after)
    }

    /// fsyncs every segment that may hold unflushed data and advances the recovery point.
    pub fn flush(&self) -> Result<()> {
        let (leo, segs) = {
            let _w = self.writer.lock();
            let rp = self.recovery_point();
            let segs = self.segments.read();
            let from = segs.range(..=rp).next_back().map_or(i64::MIN, |(b, _)| *b);
            let list: Vec<Arc<LogSegment>> = segs.range(from..).map(|(_, s)| s.clone()).collect();
            (self.log_end_offset(), list)
        };
        // fsync outside the writer lock so appends keep flowing.
        for s in &segs {
            self.io_guard(s.flush())?;
        }
        let _w = self.writer.lock();
        if leo > self.recovery_point() {
            self.recovery_point.store(leo, Ordering::Release);
            self.io_guard(write_offset(&self.dir, RECOVERY_POINT_CHECKPOINT, leo))?;
        }
        Ok(())
    }

    /// Flushes if `flush.ms` has passed since the last flush (background task).
    pub fn maybe_flush_by_time(&self, now_ms: i64) -> Result<bool> {
        let flush_ms = self.config.read().flush_ms;
        let due = {
            let mut w = self.writer.lock();
            let due = flush_ms != i64::MAX
                && now_ms - w.last_flush_ms >= flush_ms
                && self.log_end_offset() > self.recovery_point();
            if due {
                w.last_flush_ms = now_ms;
                w.unflushed_messages = 0;
            }
            due
        };
        if due {
            self.flush()?;
        }
        Ok(due)
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.read().values().map(|s| s.size()).sum()
    }

    /// Number of segments.
    pub fn num_segments(&self) -> usize {
        self.segments.read().len()
    }

    /// Base offsets of the segments, ascending.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.read().keys().copied().collect()
    }

    /// A copy of the current config.
    pub fn config(&self) -> LogConfig {
        self.config.read().clone()
    }

    /// Replaces the config (takes effect on the next append / roll / retention pass).
    pub fn update_config(&self, config: LogConfig) {
        *self.config.write() = config;
    }

    /// State of one idempotent producer.
    pub fn producer_state(&self, producer_id: i64) -> Option<ProducerStateEntry> {
        self.producers.lock().get(producer_id).cloned()
    }

    /// Every producer with state in this log (DescribeProducers).
    pub fn producer_states(&self) -> Vec<ProducerStateEntry> {
        self.producers.lock().all()
    }

    /// The largest producer id with state in this log (mirrored logs carry the source's ids).
    pub fn max_producer_id(&self) -> Option<i64> {
        self.producers.lock().max_producer_id()
    }

    /// min(`high_watermark`, first offset of the earliest ongoing transaction).
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        match self.producers.lock().first_unstable_offset() {
            Some(f) => f.min(high_watermark),
            None => high_watermark,
        }
    }

    /// Aborted transactions overlapping `[start_offset, upper_offset)`, from the `.txnindex` files.
    pub fn aborted_transactions(&self, start_offset: i64, upper_offset: i64) -> Vec<AbortedTxn> {
        let segs: Vec<Arc<LogSegment>> = self.segments.read().values().cloned().collect();
        let mut out = Vec::new();
        for s in segs {
            s.collect_aborted(start_offset, upper_offset, &mut out);
        }
        out
    }

    /// Flushes, writes checkpoints and the producer snapshot, and marks a clean shutdown.
    pub fn close(self) -> Result<()> {
        self.close_ref()
    }

    pub(crate) fn close_ref(&self) -> Result<()> {
        if self.offline.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush()?;
        let _w = self.writer.lock();
        let leo = self.log_end_offset();
        self.active_segment().make_inactive()?;
        self.producers.lock().take_snapshot(leo)?;
        self.prune_snapshots()?;
        self.epochs.read().flush()?;
        write_offset(
            &self.dir,
            LOG_START_OFFSET_CHECKPOINT,
            self.log_start_offset(),
        )?;
        write_offset(&self.dir, RECOVERY_POINT_CHECKPOINT, leo)?;
        write_atomic(&self.dir, CLEAN_SHUTDOWN_FILE, b"")?;
        // Closed: refuse further writes through this handle.
        self.offline.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes the whole log directory.
    pub fn delete(self) -> Result<()> {
        let _w = self.writer.lock();
        self.offline.store(true, Ordering::Release);
        self.segments.write().clear();
        std::fs::remove_dir_all(&self.dir).ctx(&self.dir)
    }

    /// True once an I/O error (or close or delete) has taken the log offline for writes.
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// True once an I/O error other than a full disk has taken the log offline for reads too.
    pub fn is_unreadable(&self) -> bool {
        self.unreadable.load(Ordering::Acquire)
    }

    /// Refuses further writes (the log is being deleted).
    pub(crate) fn mark_offline(&self) {
        self.offline.store(true, Ordering::Release);
    }

    /// The segments, oldest first (the cleaner's view; it changes them only through
    /// [`Self::replace_segment`]).
    pub(crate) fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments.read().values().cloned().collect()
    }

    /// Offset up to which the cleaner has compacted (exclusive).
    pub(crate) fn cleaner_checkpoint(&self) -> i64 {
        self.cleaner_checkpoint.load(Ordering::Acquire)
    }

    /// Raises the cleaner checkpoint to `offset` and persists it.
    pub(crate) fn advance_cleaner_checkpoint(&self, offset: i64) -> Result<()> {
        let now = self
            .cleaner_checkpoint
            .fetch_max(offset, Ordering::AcqRel)
            .max(offset);
        self.io_guard(write_offset(&self.dir, CLEANER_OFFSET_CHECKPOINT, now))
    }

    /// The cleaner's swap: replaces the inactive segment `old` by `data` (no data: drops it)
    /// if it still holds the `size` bytes it was read at. The `.cleaned` file is written
    /// outside the writer lock, the swap under it; any I/O error takes the log offline and
    /// refuses writes, as on every other path. Returns false when the segment changed
    /// meanwhile (truncated, deleted or became active) and the work was dropped.
    pub(crate) fn replace_segment(
        &self,
        old: &Arc<LogSegment>,
        size: u64,
        data: &[u8],
    ) -> Result<bool> {
        let base = old.base_offset();
        let log_name = file_name(base, LOG_SUFFIX);
        let cleaned = self.dir.join(format!("{log_name}.{CLEANED_SUFFIX}"));
        if !data.is_empty() {
            self.io_guard(write_cleaned(&cleaned, data))?;
        }
        let _w = self.writer.lock();
        self.check_online()?;
        self.io_guard(self.swap_in_locked(old, size, &cleaned, data.is_empty()))
    }

    fn swap_in_locked(
        &self,
        old: &Arc<LogSegment>,
        size: u64,
        cleaned: &Path,
        empty: bool,
    ) -> Result<bool> {
        let dir = &self.dir;
        let base = old.base_offset();
        let current = self.segments.read().get(&base).cloned();
        let unchanged = current.is_some_and(|c| Arc::ptr_eq(&c, old) && c.size() == size);
        let is_active = self.segments.read().keys().next_back() == Some(&base);
        if !unchanged || is_active {
            let _ = std::fs::remove_file(cleaned);
            return Ok(false);
        }
        if empty {
            self.segments.write().remove(&base);
            old.delete_files()?;
            return Ok(true);
        }
        let log_name = file_name(base, LOG_SUFFIX);
        let swap = dir.join(format!("{log_name}.{SWAP_SUFFIX}"));
        crate::fault::rename(cleaned, &swap).ctx(cleaned)?;
        fsync_dir(dir)?;
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
        let config = self.config();
        let seg = LogSegment::open(dir, base, config.segment_index_bytes, None)?;
        seg.recover(config.index_interval_bytes, |_, _| Ok(()))?;
        seg.make_inactive()?;
        seg.flush()?;
        self.segments.write().insert(base, Arc::new(seg));
        Ok(true)
    }

    pub(crate) fn producer_last_offset(&self, producer_id: i64) -> Option<i64> {
        self.producers
            .lock()
            .get(producer_id)
            .map(|e| e.last_offset())
    }
}

/// Writes and fsyncs the cleaner's output for a segment.
fn write_cleaned(path: &Path, data: &[u8]) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .ctx(path)?;
    crate::fault::write_all(&mut f, path, data).ctx(path)?;
    crate::fault::sync_all(&f, path).ctx(path)
}

/// Removes temp/cleaned/deleted files and finishes or rolls back interrupted cleaner swaps.
/// Returns base offsets of segments that must be recovered.
fn cleanup_stray_files(dir: &Path) -> Result<BTreeSet<i64>> {
    let mut swaps: BTreeMap<i64, Vec<PathBuf>> = BTreeMap::new();
    let mut committed = BTreeSet::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let path = entry.ctx(dir)?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if name.ends_with(".tmp")
            || name.ends_with(&format!(".{DELETED_SUFFIX}"))
            || name.ends_with(&format!(".{CLEANED_SUFFIX}"))
        {
            std::fs::remove_file(&path).ctx(&path)?;
        } else if let Some(inner) = name.strip_suffix(&format!(".{SWAP_SUFFIX}")) {
            let base = ["log", "index", "timeindex", "txnindex"]
                .iter()
                .find_map(|s| base_of(inner, s));
            if let Some(b) = base {
                if inner.ends_with(".log") {
                    committed.insert(b);
                }
                swaps.entry(b).or_default().push(path);
            }
        }
    }
    for (base, mut files) in swaps {
        if committed.contains(&base) {
            // The swap was committed (the .log.swap exists): finish it, log last.
            files.sort_by_key(|p| p.to_string_lossy().ends_with(".log.swap"));
            for f in files {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let target = dir.join(name.trim_end_matches(&format!(".{SWAP_SUFFIX}")));
                std::fs::rename(&f, &target).ctx(&f)?;
            }
        } else {
            for f in files {
                std::fs::remove_file(&f).ctx(&f)?;
            }
        }
    }
    if !committed.is_empty() {
        fsync_dir(dir)?;
    }
    Ok(committed)
}
