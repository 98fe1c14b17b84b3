//! [`Log`]: one partition's log (Kafka's UnifiedLog): the [`LocalLog`] of segments with the
//! log start offset, the leader epoch cache, producer state and the cleaner checkpoint, and
//! the public API: appends as leader or follower, bounded reads, truncation, retention.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use tern_protocol::record_batch::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch,
    RecordBatchHeader,
};

use crate::checkpoint::{
    fsync_dir, write_atomic, write_offset, write_synced, CLEANER_OFFSET_CHECKPOINT,
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use crate::config::{LogConfig, TimestampType};
use crate::epoch::LeaderEpochFileCache;
use crate::error::{IoContext, Result, StorageError};
use crate::file_slice::FileSlice;
use crate::loader::{load, load_producer_state};
use crate::local_log::{CleanedSegment, LocalLog};
use crate::producer_state::{
    CompletedTxn, ProducerStateEntry, ProducerStateManager, Staged, VerificationGuard,
};
use crate::segment::{control_of, now_ms, LogSegment, SegmentRead, LOG_SUFFIX, TXN_INDEX_SUFFIX};
use crate::txn_index::{self, AbortedTxn};

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

/// Batches on their way into the log: a producer's are patched in place (offsets, epoch,
/// append time); a replica's or a mirror's are written as received, copied only if their
/// leader epoch is rewritten.
struct Incoming {
    /// The bytes as received, shared with the rest of their fetch response.
    received: Bytes,
    /// Owned bytes the append may change; when present, these are what is appended.
    patched: Option<BytesMut>,
}

impl Incoming {
    /// A producer's batches, owned.
    fn owned(records: BytesMut) -> Self {
        Incoming {
            received: Bytes::new(),
            patched: Some(records),
        }
    }

    /// Fetched batches, appended as they are.
    fn received(records: Bytes) -> Self {
        Incoming {
            received: records,
            patched: None,
        }
    }

    /// The bytes to patch, copied out of the shared buffer the first time.
    fn patchable(&mut self) -> &mut BytesMut {
        self.patched
            .get_or_insert_with(|| BytesMut::from(&self.received[..]))
    }
}

impl std::ops::Deref for Incoming {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.patched.as_deref().unwrap_or(&self.received)
    }
}

#[derive(Debug, Clone, Copy)]
enum Origin {
    /// `bumped_marker`: a transaction version 2 marker (its epoch must exceed the data's).
    /// `guard`: the append's transaction verification, if it went through one.
    Leader {
        epoch: i32,
        bumped_marker: bool,
        guard: Option<VerificationGuard>,
    },
    Replicated {
        rewrite_epoch: Option<i32>,
    },
}

#[derive(Debug)]
struct WriterState {
    unflushed_messages: i64,
    last_flush_ms: i64,
}

/// Validated batches of one append with their final offsets, and the producer state changes
/// they make once written.
struct Assigned {
    batches: Vec<(usize, RecordBatchHeader)>,
    /// Offset after the last batch.
    next_offset: i64,
    staged: Staged,
    completed: Vec<CompletedTxn>,
}

/// A partition log. `Send + Sync`; one writer at a time (internal mutex), readers never wait
/// for an append's file I/O and see only fully appended batches.
pub struct Log {
    config: RwLock<LogConfig>,
    writer: Mutex<WriterState>,
    local: LocalLog,
    log_start_offset: AtomicI64,
    epochs: RwLock<LeaderEpochFileCache>,
    producers: Mutex<ProducerStateManager>,
    /// Offset up to which the cleaner has compacted (exclusive).
    cleaner_checkpoint: AtomicI64,
    /// Truncations so far: a cleaner pass that saw one happen does not advance its checkpoint
    /// over data it did not map.
    truncations: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir())
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish()
    }
}

impl Log {
    /// Opens the log in `dir`, creating it if missing and recovering after a crash.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log> {
        let loaded = load(dir, &config)?;
        let (log_start, leo) = (loaded.log_start_offset, loaded.log_end_offset);
        let log = Log {
            config: RwLock::new(config),
            writer: Mutex::new(WriterState {
                unflushed_messages: 0,
                last_flush_ms: now_ms(),
            }),
            local: LocalLog::new(dir, loaded.segments, leo),
            log_start_offset: AtomicI64::new(log_start),
            epochs: RwLock::new(loaded.epochs),
            producers: Mutex::new(loaded.producers),
            cleaner_checkpoint: AtomicI64::new(loaded.cleaner_checkpoint),
            truncations: std::sync::atomic::AtomicU64::new(0),
        };
        write_offset(dir, RECOVERY_POINT_CHECKPOINT, leo)?;
        write_offset(dir, LOG_START_OFFSET_CHECKPOINT, log_start)?;
        Ok(log)
    }

    /// Directory of the log.
    pub fn dir(&self) -> &Path {
        self.local.dir()
    }

    /// Takes the log offline when an I/O error hits it (see [`LocalLog::io_guard`]).
    pub(crate) fn io_guard<T>(&self, r: Result<T>) -> Result<T> {
        self.local.io_guard(r)
    }

    /// Appends batches from a producer: validates all, assigns offsets and the leader epoch.
    pub fn append_as_leader(&self, records: BytesMut, leader_epoch: i32) -> Result<LogAppendInfo> {
        self.append_verified(records, leader_epoch, None)
    }

    /// As [`Log::append_as_leader`], for batches whose transaction the leader verified with
    /// the coordinator (`guard` from [`Log::start_transaction_verification`]): a batch that
    /// would begin its producer's transaction here is refused with
    /// [`StorageError::InvalidTxnState`] if a marker of that producer landed since.
    pub fn append_verified(
        &self,
        records: BytesMut,
        leader_epoch: i32,
        guard: Option<VerificationGuard>,
    ) -> Result<LogAppendInfo> {
        self.append(
            Incoming::owned(records),
            Origin::Leader {
                epoch: leader_epoch,
                bumped_marker: false,
                guard,
            },
        )
    }

    /// Begins verifying that `producer_id` at `epoch` may write its transaction here: None when
    /// the transaction is already open in this log (append with
    /// [`VerificationGuard::SENTINEL`]), else the guard to append with. `bumps`: a transaction
    /// version 2 producer, whose markers carry the next transaction's epoch.
    pub fn start_transaction_verification(
        &self,
        producer_id: i64,
        epoch: i16,
        bumps: bool,
    ) -> Option<VerificationGuard> {
        self.producers
            .lock()
            .start_verification(producer_id, epoch, bumps)
    }

    /// Appends a transaction marker from a coordinator, as [`Log::append_as_leader`].
    /// `bumped_epoch`: the transaction is of version 2 (KIP-890), whose marker carries the epoch
    /// after the transaction's, so a marker not above the producer's epoch is refused (unless
    /// it repeats one already written: the same epoch with no transaction open).
    pub fn append_marker_as_leader(
        &self,
        records: BytesMut,
        leader_epoch: i32,
        bumped_epoch: bool,
    ) -> Result<LogAppendInfo> {
        self.append(
            Incoming::owned(records),
            Origin::Leader {
                epoch: leader_epoch,
                bumped_marker: bumped_epoch,
                guard: None,
            },
        )
    }

    /// Appends batches fetched from a leader or a mirror source, keeping their offsets. The
    /// bytes are written as received (no copy) unless their leader epoch is rewritten.
    pub fn append_replicated(
        &self,
        records: Bytes,
        rewrite_leader_epoch: Option<i32>,
    ) -> Result<LogAppendInfo> {
        self.append(
            Incoming::received(records),
            Origin::Replicated {
                rewrite_epoch: rewrite_leader_epoch,
            },
        )
    }

    fn append(&self, mut records: Incoming, origin: Origin) -> Result<LogAppendInfo> {
        let mut w = self.writer.lock();
        self.local.check_online()?;
        let config = self.config.read().clone();
        // Validate everything before touching anything: all or nothing.
        let batches = validate(&records, &config)?;
        let now = now_ms();
        let log_append_time = match (origin, config.message_timestamp_type) {
            (Origin::Leader { .. }, TimestampType::LogAppendTime) => now,
            _ => -1,
        };
        let assigned = match self.assign(&mut records, batches, origin, log_append_time)? {
            Ok(assigned) => assigned,
            Err(duplicate) => return Ok(duplicate),
        };
        let Assigned {
            batches,
            next_offset: next,
            staged,
            completed,
        } = assigned;

        let first_offset = batches[0].1.base_offset;
        let last_offset = next - 1;
        let (max_timestamp, offset_of_max_timestamp) =
            batches.iter().fold((-1i64, -1i64), |(ts, off), (_, h)| {
                if h.max_timestamp > ts {
                    (h.max_timestamp, h.last_offset())
                } else {
                    (ts, off)
                }
            });
        let record_count: usize = batches.iter().map(|(_, h)| h.records_count as usize).sum();

        let mut active = self.local.segments().active();
        if self
            .local
            .should_roll(records.len(), last_offset, &config, now)
        {
            active = self.io_guard(self.roll_locked(first_offset))?;
        }
        self.io_guard(active.append(&records[..], &batches, config.index_interval_bytes))?;
        self.assign_epochs(&batches)?;
        {
            let mut producers = self.producers.lock();
            producers.commit(staged);
            let bumped_marker = matches!(
                origin,
                Origin::Leader {
                    bumped_marker: true,
                    ..
                }
            );
            for (_, h) in batches.iter().filter(|(_, h)| h.is_transactional()) {
                producers.end_verification(h, bumped_marker);
            }
            for done in completed.iter().filter(|d| d.aborted) {
                self.io_guard(active.append_aborted_txn(producers.aborted_entry(done)))?;
            }
        }
        self.local.set_log_end_offset(next);

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

    /// Gives the validated `batches` their offsets (as leader) or checks them (replicated),
    /// stamps epochs and times, and stages their producer state. `Err` carries the answer to
    /// a duplicate of one of the producer's recent batches: nothing is to be appended.
    fn assign(
        &self,
        records: &mut Incoming,
        mut batches: Vec<(usize, RecordBatchHeader)>,
        origin: Origin,
        log_append_time: i64,
    ) -> Result<std::result::Result<Assigned, LogAppendInfo>> {
        let producers = self.producers.lock();
        let mut staged = Staged::new();
        let mut completed = Vec::new();
        let mut next = self.log_end_offset();
        for (pos, h) in batches.iter_mut() {
            let range = *pos..*pos + h.size();
            match origin {
                Origin::Leader {
                    epoch,
                    bumped_marker,
                    guard,
                } => {
                    let batch = &mut records.patchable()[range.clone()];
                    set_base_offset(batch, next);
                    set_partition_leader_epoch(batch, epoch);
                    if log_append_time >= 0 {
                        set_log_append_time(batch, log_append_time);
                    }
                    *h = RecordBatchHeader::parse(batch)?;
                    if let Some((_, coordinator_epoch)) = control_of(h, batch) {
                        producers.check_marker(h, coordinator_epoch, bumped_marker)?;
                    }
                    // A duplicate is answered as one before the verification is looked at
                    // (Kafka's order): a retry of a batch already written is no new start.
                    if let Some(dup) = producers.check_leader(&mut staged, h)? {
                        return Ok(Err(LogAppendInfo {
                            first_offset: dup.first_offset,
                            last_offset: dup.last_offset,
                            max_timestamp: dup.timestamp,
                            offset_of_max_timestamp: dup.last_offset,
                            log_append_time,
                            log_start_offset: self.log_start_offset(),
                            record_count: 0,
                            bytes: 0,
                            duplicate: true,
                        }));
                    }
                    producers.check_verified(h, guard)?;
                }
                Origin::Replicated { rewrite_epoch } => {
                    if h.base_offset < next {
                        return Err(StorageError::InvalidOffsets {
                            base_offset: h.base_offset,
                            expected_min: next,
                        });
                    }
                    if let Some(e) = rewrite_epoch {
                        set_partition_leader_epoch(&mut records.patchable()[range.clone()], e);
                        h.partition_leader_epoch = e;
                    }
                }
            }
            if let Some(done) = producers.update(&mut staged, h, control_of(h, &records[range])) {
                completed.push(done);
            }
            next = h.next_offset();
        }
        Ok(Ok(Assigned {
            batches,
            next_offset: next,
            staged,
            completed,
        }))
    }

    /// Records the leader epochs the appended `batches` start.
    fn assign_epochs(&self, batches: &[(usize, RecordBatchHeader)]) -> Result<()> {
        let mut epochs = self.epochs.write();
        let mut changed = false;
        for (_, h) in batches {
            if h.partition_leader_epoch >= 0 {
                changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
            }
        }
        if changed {
            self.io_guard(epochs.flush())?;
        }
        Ok(())
    }

    /// Rolls to a new segment at `new_base` and snapshots producer state there. Writer lock
    /// held.
    fn roll_locked(&self, new_base: i64) -> Result<Arc<LogSegment>> {
        let config = self.config.read().clone();
        let Some(seg) = self.local.roll(new_base, &config)? else {
            return Ok(self.local.segments().active());
        };
        // Kafka snapshots producer state at each roll, so recovery replays at most one segment.
        self.producers.lock().take_snapshot(new_base)?;
        self.prune_snapshots()?;
        fsync_dir(self.dir())?;
        Ok(seg)
    }

    /// Deletes the producer-state snapshots taken at or before `offset`, before the cleaner
    /// swaps in a segment without the marker at `offset`: recovery then replays from a later
    /// snapshot or from the start, never from one that still has the marker's transaction
    /// open.
    pub(crate) fn drop_snapshots_through(&self, offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        for (at, path) in ProducerStateManager::list_snapshots(self.dir())? {
            if at > offset {
                continue;
            }
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).ctx(&path),
                _ => {}
            }
        }
        // Durable before the swap's commit point, which a separate fsync does not order.
        fsync_dir(self.dir())
    }

    fn prune_snapshots(&self) -> Result<()> {
        let snapshots = ProducerStateManager::list_snapshots(self.dir())?;
        let keep_from = snapshots.len().saturating_sub(SNAPSHOTS_TO_KEEP);
        for (_, path) in &snapshots[..keep_from] {
            std::fs::remove_file(path).ctx(path)?;
        }
        Ok(())
    }

    /// Rolls the active segment if it holds data.
    pub fn roll(&self) -> Result<()> {
        let _w = self.writer.lock();
        self.local.check_online()?;
        let leo = self.log_end_offset();
        if self.local.segments().active().size() > 0 {
            self.io_guard(self.roll_locked(leo))?;
        }
        Ok(())
    }

    /// Rolls the active segment if it is older than `segment.ms` (background task).
    pub fn maybe_roll_by_time(&self, now_ms: i64) -> Result<bool> {
        let segment_ms = self.config.read().max_segment_ms();
        let active = self.local.segments().active();
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

    /// The common part of the reads: checks `start_offset` against the log's range, then
    /// reads the segment holding it (or the next one past a gap) with `read_segment`.
    fn read_with<T>(
        &self,
        start_offset: i64,
        max_offset: Option<i64>,
        empty: T,
        read_segment: impl Fn(&LogSegment) -> Result<SegmentRead<T>>,
    ) -> Result<FetchDataInfo<T>> {
        self.local.check_readable()?;
        let leo = self.log_end_offset();
        let log_start = self.log_start_offset();
        if start_offset < log_start || start_offset > leo {
            return Err(StorageError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset: log_start,
                log_end_offset: leo,
            });
        }
        let (records, first_offset) =
            if start_offset == leo || max_offset.is_some_and(|m| start_offset >= m) {
                (empty, start_offset)
            } else {
                self.local
                    .read(start_offset, read_segment)?
                    .unwrap_or((empty, start_offset))
            };
        Ok(FetchDataInfo {
            records,
            first_offset,
            log_start_offset: log_start,
            log_end_offset: leo,
        })
    }

    /// First offset of the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    /// Offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.local.log_end_offset()
    }

    /// Offset below which everything is known to be fsynced.
    pub fn recovery_point(&self) -> i64 {
        self.local.recovery_point()
    }

    /// ListOffsets by timestamp: the first offset whose timestamp is >= `timestamp`.
    pub fn fetch_offset_by_timestamp(&self, timestamp: i64) -> Result<Option<TimestampAndOffset>> {
        let log_start = self.log_start_offset();
        for seg in self.local.segments().all() {
            if seg.max_timestamp_and_offset().0 < timestamp && seg.size() > 0 {
                // The time index's max is exact for appended data; skip segments wholly older.
                continue;
            }
            if let Some((ts, offset)) = seg.find_offset_by_timestamp(timestamp, log_start)? {
                return Ok(Some(self.with_epoch(ts, offset)));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the largest timestamp and its offset.
    pub fn max_timestamp_and_offset(&self) -> Result<Option<TimestampAndOffset>> {
        let mut best: Option<(i64, i64)> = None;
        for seg in self.local.segments().all() {
            let (ts, off) = seg.max_timestamp_and_offset();
            if seg.size() > 0 && ts >= 0 && best.is_none_or(|(b, _)| ts > b) {
                best = Some((ts, off));
            }
        }
        Ok(best.map(|(ts, offset)| self.with_epoch(ts, offset)))
    }

    fn with_epoch(&self, timestamp: i64, offset: i64) -> TimestampAndOffset {
        TimestampAndOffset {
            timestamp,
            offset,
            leader_epoch: self.epoch_for_offset(offset),
        }
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
        self.local.check_online()?;
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
        let active = self.local.truncate_to(offset)?;
        let new_leo = active.next_offset()?;
        if new_leo <= self.log_start_offset() {
            // Nothing readable remains: start afresh at the log start (epochs and producer
            // state go too, so a reopen computes the same state).
            return self.truncate_fully_locked(self.log_start_offset());
        }
        active.make_active()?;
        self.local.set_log_end_offset(new_leo);
        {
            let mut epochs = self.epochs.write();
            if epochs.truncate_from_end(new_leo) {
                epochs.flush()?;
            }
        }
        let segments = self.local.segments().all();
        let state = load_producer_state(self.dir(), &segments, new_leo, None)?;
        *self.producers.lock() = state;
        if self.recovery_point() > new_leo {
            self.local.checkpoint_recovery_point(new_leo)?;
        }
        self.cleaner_checkpoint.fetch_min(new_leo, Ordering::AcqRel);
        self.truncations.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (log start = log end = `offset`).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        self.local.check_online()?;
        self.io_guard(self.truncate_fully_locked(offset))
    }

    fn truncate_fully_locked(&self, offset: i64) -> Result<()> {
        let config = self.config.read().clone();
        self.local.truncate_fully(offset, &config)?;
        self.log_start_offset.store(offset, Ordering::Release);
        self.cleaner_checkpoint.store(offset, Ordering::Release);
        self.truncations.fetch_add(1, Ordering::AcqRel);
        {
            let mut epochs = self.epochs.write();
            epochs.clear();
            epochs.flush()?;
        }
        for (_, path) in ProducerStateManager::list_snapshots(self.dir())? {
            std::fs::remove_file(&path).ctx(&path)?;
        }
        *self.producers.lock() = ProducerStateManager::new(self.dir());
        write_offset(self.dir(), LOG_START_OFFSET_CHECKPOINT, offset)?;
        write_offset(self.dir(), RECOVERY_POINT_CHECKPOINT, offset)?;
        fsync_dir(self.dir())
    }

    /// DeleteRecords: raises the log start offset to `offset` (persisted) and deletes the
    /// segments wholly below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let _w = self.writer.lock();
        self.local.check_online()?;
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
        write_offset(self.dir(), LOG_START_OFFSET_CHECKPOINT, offset)?;
        self.log_start_offset.store(offset, Ordering::Release);
        if offset >= self.log_end_offset() && self.local.segments().active().size() > 0 {
            self.roll_locked(offset)?;
        }
        self.local.delete_segments_below(offset)?;
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
        self.local.check_online()?;
        let config = self.config.read().clone();
        let segs = self.local.segments().all();
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
        self.io_guard(self.raise_log_start_locked(new_start.max(log_start)))?;
        Ok(before - self.num_segments())
    }

    /// fsyncs every segment that may hold unflushed data and advances the recovery point.
    pub fn flush(&self) -> Result<()> {
        let (leo, segs) = {
            let _w = self.writer.lock();
            let segs = self.local.segments().floor_and_later(self.recovery_point());
            (self.log_end_offset(), segs)
        };
        // fsync outside the writer lock so appends keep flowing.
        for s in &segs {
            self.io_guard(s.flush())?;
        }
        let _w = self.writer.lock();
        if leo > self.recovery_point() {
            self.io_guard(self.local.checkpoint_recovery_point(leo))?;
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
        self.local.segments().size_bytes()
    }

    /// Number of segments.
    pub fn num_segments(&self) -> usize {
        self.local.segments().len()
    }

    /// Base offsets of the segments, ascending.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.local.segments().base_offsets()
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

    /// Whether `producer_id` has a transaction open here at `epoch` (its first batch of a
    /// transaction needs the coordinator; the rest do not).
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .lock()
            .has_ongoing_transaction(producer_id, epoch)
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
        let mut out = Vec::new();
        for s in self.local.segments().all() {
            s.collect_aborted(start_offset, upper_offset, &mut out);
        }
        out
    }

    /// Flushes, writes checkpoints and the producer snapshot, and marks a clean shutdown.
    pub fn close(self) -> Result<()> {
        self.close_ref()
    }

    pub(crate) fn close_ref(&self) -> Result<()> {
        if self.is_offline() {
            return Ok(());
        }
        self.flush()?;
        let _w = self.writer.lock();
        let leo = self.log_end_offset();
        self.local.segments().active().make_inactive()?;
        self.producers.lock().take_snapshot(leo)?;
        self.prune_snapshots()?;
        self.epochs.read().flush()?;
        write_offset(
            self.dir(),
            LOG_START_OFFSET_CHECKPOINT,
            self.log_start_offset(),
        )?;
        write_offset(self.dir(), RECOVERY_POINT_CHECKPOINT, leo)?;
        write_atomic(self.dir(), CLEAN_SHUTDOWN_FILE, b"")?;
        // Closed: refuse further writes through this handle.
        self.local.mark_offline();
        Ok(())
    }

    /// Removes the whole log directory.
    pub fn delete(self) -> Result<()> {
        let _w = self.writer.lock();
        self.local.mark_offline();
        self.local.segments().clear();
        std::fs::remove_dir_all(self.dir()).ctx(self.dir())
    }

    /// True once an I/O error (or close or delete) has taken the log offline for writes.
    pub fn is_offline(&self) -> bool {
        self.local.is_offline()
    }

    /// True once an I/O error (a full disk included) has taken the log offline: a failed
    /// replica, unlike a log closed or deleted.
    pub fn has_failed(&self) -> bool {
        self.local.has_failed()
    }

    /// True once an I/O error other than a full disk has taken the log offline for reads too.
    pub fn is_unreadable(&self) -> bool {
        self.local.is_unreadable()
    }

    /// Refuses further writes (the log is being deleted).
    pub(crate) fn mark_offline(&self) {
        self.local.mark_offline();
    }

    /// The segments, oldest first (the cleaner's view; it changes them only through
    /// [`Self::replace_segment`]).
    pub(crate) fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.local.segments().all()
    }

    /// Offset up to which the cleaner has compacted (exclusive).
    pub(crate) fn cleaner_checkpoint(&self) -> i64 {
        self.cleaner_checkpoint.load(Ordering::Acquire)
    }

    /// How many times the log was truncated since it was opened.
    pub(crate) fn truncations(&self) -> u64 {
        self.truncations.load(Ordering::Acquire)
    }

    /// Raises the cleaner checkpoint to `offset` and persists it, unless the log was
    /// truncated since the pass began (`truncations` then): what was appended after that
    /// truncation was not mapped. Returns whether it moved.
    pub(crate) fn advance_cleaner_checkpoint(&self, offset: i64, truncations: u64) -> Result<bool> {
        let _w = self.writer.lock();
        if self.truncations() != truncations {
            return Ok(false);
        }
        let now = self
            .cleaner_checkpoint
            .fetch_max(offset, Ordering::AcqRel)
            .max(offset);
        self.io_guard(write_offset(self.dir(), CLEANER_OFFSET_CHECKPOINT, now))?;
        Ok(true)
    }

    /// The cleaner's swap, the one way it changes the log: replaces the inactive segment `old`
    /// by `data` (no data: drops it) if it still holds the `size` bytes it was read at. The
    /// `.cleaned` file is written outside the writer lock, the swap under it; any I/O error
    /// takes the log offline and refuses writes, as on every other path. Returns false when
    /// the segment changed meanwhile (truncated, deleted or became active).
    pub(crate) fn replace_segment(
        &self,
        old: &Arc<LogSegment>,
        size: u64,
        data: &[u8],
        aborts: &[AbortedTxn],
    ) -> Result<bool> {
        let base = old.base_offset();
        let cleaned = self.local.cleaned_path(base, LOG_SUFFIX);
        let cleaned_txn = self.local.cleaned_path(base, TXN_INDEX_SUFFIX);
        let mut current = Vec::new();
        old.collect_aborted(i64::MIN, i64::MAX, &mut current);
        let txn_changed = !data.is_empty() && current != aborts;
        if !data.is_empty() {
            self.io_guard(write_synced(&cleaned, data))?;
        }
        if txn_changed {
            self.io_guard(write_synced(&cleaned_txn, &txn_index::encode(aborts)))?;
        }
        let _w = self.writer.lock();
        self.local.check_online()?;
        let config = self.config.read().clone();
        let cleaned = (!data.is_empty()).then(|| CleanedSegment {
            log: cleaned.as_path(),
            txn_index: txn_changed.then_some(cleaned_txn.as_path()),
        });
        self.io_guard(self.local.replace_segment(old, size, cleaned, &config))
    }

    /// The first offset of the earliest transaction not yet committed or aborted.
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.lock().first_unstable_offset()
    }

    /// Whether `h` is the batch that holds its producer's state, which compaction keeps (as an
    /// empty header if nothing else of it is left), as Kafka's cleaner does: the producer's last
    /// data batch, or, when the producer has none (an epoch bump cleared them), a marker of its
    /// current epoch.
    pub(crate) fn is_producers_last_batch(&self, h: &RecordBatchHeader) -> bool {
        if !h.has_producer_id() {
            return false;
        }
        let producers = self.producers.lock();
        let Some(entry) = producers.get(h.producer_id) else {
            return false;
        };
        match entry.last_offset() {
            -1 => h.is_control() && h.producer_epoch == entry.producer_epoch,
            last => h.last_offset() == last,
        }
    }
}

/// Validates every batch of `records` and its size; returns each one's position and header.
fn validate(records: &[u8], config: &LogConfig) -> Result<Vec<(usize, RecordBatchHeader)>> {
    let mut batches = Vec::new();
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
    Ok(batches)
}
