//! Idempotent and transactional producer state: for each producer id its epoch, the metadata
//! of its last five batches (for duplicate detection), and its ongoing transaction. Rebuilt
//! from the log on recovery, starting from the latest `.snapshot` file.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use tern_protocol::record_batch::RecordBatchHeader;

use crate::checkpoint::write_atomic;
use crate::error::{IoContext, Result, StorageError};
use crate::txn_index::AbortedTxn;

/// How many recent batches per producer are remembered for duplicate detection (Kafka: 5).
pub(crate) const NUM_BATCHES_TO_RETAIN: usize = 5;
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_ENTRY_SIZE: usize = 46;
/// Suffix of producer state snapshot files.
pub(crate) const SNAPSHOT_SUFFIX: &str = "snapshot";

/// Sequence range and offsets of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Sequence of the last record.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Max timestamp of the batch.
    pub timestamp: i64,
}

/// What the log knows about one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    /// The producer id.
    pub producer_id: i64,
    /// Current producer epoch.
    pub producer_epoch: i16,
    /// The most recent batches, oldest first (at most [`NUM_BATCHES_TO_RETAIN`]).
    pub batches: VecDeque<BatchMetadata>,
    /// Epoch of the transaction coordinator that wrote the last marker.
    pub coordinator_epoch: i32,
    /// First offset of the ongoing transaction, if one is open.
    pub current_txn_first_offset: Option<i64>,
    /// Timestamp of the last batch.
    pub last_timestamp: i64,
}

impl ProducerStateEntry {
    fn new(producer_id: i64, producer_epoch: i16) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }

    /// Sequence of the last record appended, or -1.
    pub fn last_sequence(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    /// Offset of the last record appended, or -1.
    pub fn last_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    fn push(&mut self, b: BatchMetadata) {
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(b);
        self.last_timestamp = b.timestamp;
    }
}

/// A transaction completed by a marker during an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) aborted: bool,
}

/// Producer state changes of one append, applied only once the append is written.
pub(crate) type Staged = HashMap<i64, ProducerStateEntry>;

/// Proof that a partition leader verified, with the transaction coordinator, that a producer's
/// transaction includes this partition (KIP-890 part 1, Kafka's `VerificationGuard`). It holds
/// only while no marker of that producer lands here: a transaction aborted meanwhile must not
/// be restarted by the late batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationGuard(u64);

impl VerificationGuard {
    /// What an append carries for a partition whose transaction was already open when the
    /// leader looked: it matches no verification, so the batch is refused if the transaction
    /// ended meanwhile (Kafka's `VerificationGuard.SENTINEL`).
    pub const SENTINEL: VerificationGuard = VerificationGuard(0);
}

/// Guards are unique across logs and truncations (a truncation replaces the producer state).
static NEXT_GUARD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Verifications kept before old ones are pruned, and how old they must be for that.
const MAX_VERIFYING: usize = 1024;
const STALE_VERIFICATION: std::time::Duration = std::time::Duration::from_secs(3600);

/// A verification under way for one producer.
#[derive(Debug, Clone, Copy)]
struct Verifying {
    guard: VerificationGuard,
    /// The epoch of the batch being verified.
    epoch: i16,
    /// A transaction version 2 producer: the markers ending its previous transaction carry
    /// the epoch of the next one, so they leave this verification be.
    bumps: bool,
    since: std::time::Instant,
}

/// Producer id -> state, plus the ongoing transactions ordered by first offset.
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    ongoing: BTreeMap<i64, i64>,
    /// Verifications under way, by producer id (in memory only, as Kafka's).
    verifying: HashMap<i64, Verifying>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl ProducerStateManager {
    /// Empty state for the log in `dir`.
    pub fn new(dir: &Path) -> Self {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing: BTreeMap::new(),
            verifying: HashMap::new(),
        }
    }

    /// Whether producer `producer_id` at `epoch` has a transaction open in this log.
    pub fn has_ongoing_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.producer_epoch == epoch && e.current_txn_first_offset.is_some())
    }

    /// Starts verifying a transactional producer's first batch here: None when its transaction
    /// is already open in this log (nothing to verify), else the guard the append must carry.
    /// A verification already under way for the same epoch is shared (Kafka's), so that two
    /// requests of one producer do not void each other's. `bumps`: a transaction version 2
    /// producer.
    pub(crate) fn start_verification(
        &mut self,
        producer_id: i64,
        epoch: i16,
        bumps: bool,
    ) -> Option<VerificationGuard> {
        if self.has_ongoing_transaction(producer_id, epoch) {
            return None;
        }
        if let Some(v) = self.verifying.get_mut(&producer_id) {
            // Kafka's: one guard per producer, its epoch only ever raised, so a stale request
            // cannot void a newer one's verification.
            v.epoch = v.epoch.max(epoch);
            v.bumps |= bumps;
            return Some(v.guard);
        }
        if self.verifying.len() >= MAX_VERIFYING {
            // Producers that went away mid-verification; a verification this old has no
            // request waiting on it.
            self.verifying
                .retain(|_, v| v.since.elapsed() < STALE_VERIFICATION);
        }
        let guard =
            VerificationGuard(NEXT_GUARD.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        self.verifying.insert(
            producer_id,
            Verifying {
                guard,
                epoch,
                bumps,
                since: std::time::Instant::now(),
            },
        );
        Some(guard)
    }

    /// A batch that would begin a transaction here, appended under verification (`guard`),
    /// must carry the guard of the producer's verification still under way: the SENTINEL of a
    /// transaction that was open when the leader looked matches none (Kafka's "Record was not
    /// part of an ongoing transaction").
    pub(crate) fn check_verified(
        &self,
        h: &RecordBatchHeader,
        guard: Option<VerificationGuard>,
    ) -> Result<()> {
        let Some(guard) = guard else {
            return Ok(());
        };
        let verified = guard != VerificationGuard::SENTINEL
            && self
                .verifying
                .get(&h.producer_id)
                .is_some_and(|v| v.guard == guard);
        if !h.is_transactional()
            || h.is_control()
            || self.has_ongoing_transaction(h.producer_id, h.producer_epoch)
            || verified
        {
            return Ok(());
        }
        Err(StorageError::InvalidTxnState {
            producer_id: h.producer_id,
        })
    }

    /// A producer's transactional batch or marker was appended. A data batch uses its
    /// verification up (the transaction is open); a marker voids it (the transaction ended),
    /// unless it is a transaction version 2 marker (`bumped_marker`) carrying the verified
    /// epoch, which ends the transaction before the one being verified.
    pub(crate) fn end_verification(&mut self, h: &RecordBatchHeader, bumped_marker: bool) {
        let keep = h.is_control()
            && bumped_marker
            && self
                .verifying
                .get(&h.producer_id)
                .is_some_and(|v| v.bumps && v.epoch == h.producer_epoch);
        if !keep {
            self.verifying.remove(&h.producer_id);
        }
    }

    /// The state of one producer.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer with state in this log, by producer id.
    pub fn all(&self) -> Vec<ProducerStateEntry> {
        let mut all: Vec<ProducerStateEntry> = self.producers.values().cloned().collect();
        all.sort_by_key(|e| e.producer_id);
        all
    }

    /// The largest producer id with state in this log.
    pub fn max_producer_id(&self) -> Option<i64> {
        self.producers.keys().max().copied()
    }

    /// First offset of the earliest ongoing transaction.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    fn staged_entry<'a>(
        &self,
        staged: &'a mut Staged,
        h: &RecordBatchHeader,
    ) -> &'a mut ProducerStateEntry {
        staged.entry(h.producer_id).or_insert_with(|| {
            self.producers
                .get(&h.producer_id)
                .cloned()
                .unwrap_or_else(|| ProducerStateEntry::new(h.producer_id, h.producer_epoch))
        })
    }

    /// Leader-side checks of an idempotent batch against the state (including earlier batches
    /// of the same request, in `staged`). Returns the original batch if `h` is a duplicate.
    pub(crate) fn check_leader(
        &self,
        staged: &mut Staged,
        h: &RecordBatchHeader,
    ) -> Result<Option<BatchMetadata>> {
        if !h.has_producer_id() {
            return Ok(None);
        }
        let known =
            staged.contains_key(&h.producer_id) || self.producers.contains_key(&h.producer_id);
        let entry = self.staged_entry(staged, h);
        if !known {
            // Kafka 2.5+: an unknown producer (e.g. its state expired) may start at any sequence.
            return Ok(None);
        }
        if h.producer_epoch < entry.producer_epoch {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id: h.producer_id,
                current: entry.producer_epoch,
                found: h.producer_epoch,
            });
        }
        if h.is_control() || h.base_sequence < 0 {
            return Ok(None);
        }
        if h.producer_epoch > entry.producer_epoch {
            if h.base_sequence != 0 && !entry.batches.is_empty() {
                return Err(StorageError::OutOfOrderSequence {
                    producer_id: h.producer_id,
                    expected: 0,
                    found: h.base_sequence,
                });
            }
            return Ok(None);
        }
        let last_seq = h.last_sequence();
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
        {
            return Ok(Some(*dup));
        }
        if let Some(last) = entry.batches.back() {
            let expected = next_seq(last.last_seq);
            if h.base_sequence != expected {
                return Err(StorageError::OutOfOrderSequence {
                    producer_id: h.producer_id,
                    expected,
                    found: h.base_sequence,
                });
            }
        }
        Ok(None)
    }

    /// A marker must come from the coordinator that wrote the producer's last one, or a newer
    /// one: a coordinator that lost its partition and still writes is fenced. A transaction
    /// version 2 marker (`bumped_epoch`) must also carry an epoch above the producer's, or
    /// repeat the last marker (same epoch, no transaction open), as Kafka's
    /// ProducerAppendInfo checks it.
    pub(crate) fn check_marker(
        &self,
        h: &RecordBatchHeader,
        coordinator_epoch: i32,
        bumped_epoch: bool,
    ) -> Result<()> {
        let Some(e) = self.producers.get(&h.producer_id) else {
            return Ok(());
        };
        if bumped_epoch && h.producer_epoch <= e.producer_epoch {
            let repeated = h.producer_epoch == e.producer_epoch
                && (e.current_txn_first_offset.is_none() || h.producer_epoch == i16::MAX);
            if !repeated {
                return Err(StorageError::InvalidProducerEpoch {
                    producer_id: h.producer_id,
                    current: e.producer_epoch,
                    found: h.producer_epoch,
                });
            }
        }
        if coordinator_epoch < e.coordinator_epoch {
            return Err(StorageError::CoordinatorFenced {
                producer_id: h.producer_id,
                current: e.coordinator_epoch,
                found: coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a written batch (final offsets in `h`) in `staged`. `control` is the marker of a
    /// control batch (`Some((true, coordinator epoch))` commit). Returns a transaction the batch
    /// completed.
    pub(crate) fn update(
        &self,
        staged: &mut Staged,
        h: &RecordBatchHeader,
        control: Option<(bool, i32)>,
    ) -> Option<CompletedTxn> {
        if !h.has_producer_id() {
            return None;
        }
        let entry = self.staged_entry(staged, h);
        if h.producer_epoch > entry.producer_epoch {
            entry.producer_epoch = h.producer_epoch;
            entry.batches.clear();
        }
        if h.is_control() {
            let first = entry.current_txn_first_offset.take();
            let (commit, coordinator_epoch) = control?;
            entry.coordinator_epoch = coordinator_epoch;
            return first.map(|first_offset| CompletedTxn {
                producer_id: h.producer_id,
                first_offset,
                last_offset: h.last_offset(),
                aborted: !commit,
            });
        }
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset);
        }
        if h.base_sequence >= 0 {
            entry.push(BatchMetadata {
                first_seq: h.base_sequence,
                last_seq: h.last_sequence(),
                first_offset: h.base_offset,
                last_offset: h.last_offset(),
                timestamp: h.max_timestamp,
            });
        } else {
            entry.last_timestamp = h.max_timestamp;
        }
        None
    }

    /// Applies staged changes.
    pub(crate) fn commit(&mut self, staged: Staged) {
        for (pid, entry) in staged {
            if let Some(old) = self.producers.get(&pid) {
                if let Some(f) = old.current_txn_first_offset {
                    self.ongoing.remove(&f);
                }
            }
            if let Some(f) = entry.current_txn_first_offset {
                self.ongoing.insert(f, pid);
            }
            self.producers.insert(pid, entry);
        }
    }

    /// The transaction index entry of the aborted transaction `done`, once its marker is in:
    /// the last stable offset is the first offset of the earliest transaction still open.
    pub(crate) fn aborted_entry(&self, done: &CompletedTxn) -> AbortedTxn {
        AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.last_offset,
            last_stable_offset: self.first_unstable_offset().unwrap_or(done.last_offset + 1),
        }
    }

    /// Applies one batch directly (recovery replay).
    pub(crate) fn replay(
        &mut self,
        h: &RecordBatchHeader,
        control: Option<(bool, i32)>,
    ) -> Option<CompletedTxn> {
        let mut staged = Staged::new();
        let done = self.update(&mut staged, h, control);
        self.commit(staged);
        done
    }

    fn snapshot_path(&self, offset: i64) -> PathBuf {
        self.dir.join(format!("{offset:020}.{SNAPSHOT_SUFFIX}"))
    }

    /// Writes `<offset>.snapshot` atomically; `offset` is the log end offset it describes.
    pub fn take_snapshot(&self, offset: i64) -> Result<()> {
        let mut body = Vec::with_capacity(4 + self.producers.len() * SNAPSHOT_ENTRY_SIZE);
        body.extend_from_slice(&(self.producers.len() as i32).to_be_bytes());
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.producers[id];
            let last = e.batches.back();
            body.extend_from_slice(&e.producer_id.to_be_bytes());
            body.extend_from_slice(&e.producer_epoch.to_be_bytes());
            body.extend_from_slice(&last.map_or(-1, |b| b.last_seq).to_be_bytes());
            body.extend_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
            body.extend_from_slice(
                &last
                    .map_or(0, |b| (b.last_offset - b.first_offset) as i32)
                    .to_be_bytes(),
            );
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        }
        let mut file = Vec::with_capacity(6 + body.len());
        file.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        file.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        file.extend_from_slice(&body);
        let path = self.snapshot_path(offset);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| StorageError::InvalidName(path.display().to_string()))?
            .to_string();
        write_atomic(&self.dir, &name, &file)
    }

    /// Loads a snapshot file into a fresh manager.
    pub fn load_snapshot(dir: &Path, path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).ctx(path)?;
        let corrupt = |reason: &str| StorageError::Corrupt {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        if bytes.len() < 10 {
            return Err(corrupt("too short"));
        }
        if i16::from_be_bytes([bytes[0], bytes[1]]) != SNAPSHOT_VERSION {
            return Err(corrupt("unknown version"));
        }
        let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        let body = &bytes[6..];
        if crc32c::crc32c(body) != crc {
            return Err(corrupt("CRC mismatch"));
        }
        let count = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        if count < 0 || body.len() != 4 + count as usize * SNAPSHOT_ENTRY_SIZE {
            return Err(corrupt("bad entry count"));
        }
        let mut m = ProducerStateManager::new(dir);
        for e in body[4..].chunks_exact(SNAPSHOT_ENTRY_SIZE) {
            let i64_at = |at: usize| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&e[at..at + 8]);
                i64::from_be_bytes(x)
            };
            let i32_at = |at: usize| i32::from_be_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
            let pid = i64_at(0);
            let mut entry = ProducerStateEntry::new(pid, i16::from_be_bytes([e[8], e[9]]));
            let last_seq = i32_at(10);
            let last_offset = i64_at(14);
            let delta = i32_at(22);
            entry.last_timestamp = i64_at(26);
            entry.coordinator_epoch = i32_at(34);
            let txn = i64_at(38);
            if last_offset >= 0 && last_seq >= 0 {
                let first_seq =
                    (last_seq as i64 - delta as i64).rem_euclid(i32::MAX as i64 + 1) as i32;
                entry.batches.push_back(BatchMetadata {
                    first_seq,
                    last_seq,
                    first_offset: last_offset - delta as i64,
                    last_offset,
                    timestamp: entry.last_timestamp,
                });
            }
            if txn >= 0 {
                entry.current_txn_first_offset = Some(txn);
                m.ongoing.insert(txn, pid);
            }
            m.producers.insert(pid, entry);
        }
        Ok(m)
    }

    /// Offsets of the snapshot files in `dir`, ascending.
    pub fn list_snapshots(dir: &Path) -> Result<Vec<(i64, PathBuf)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).ctx(dir)? {
            let path = entry.ctx(dir)?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(stem) = name.strip_suffix(".snapshot") {
                if stem.len() == 20 {
                    if let Ok(o) = stem.parse::<i64>() {
                        out.push((o, path));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, BatchSpec, KeyValue};
    use tern_protocol::record_batch::validate_batch;

    fn header(pid: i64, epoch: i16, seq: i32, n: usize, base_offset: i64) -> RecordBatchHeader {
        let recs: Vec<KeyValue<'_>> = vec![(None, Some(b"v")); n];
        let b = build_batch(
            &BatchSpec {
                base_offset,
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                ..BatchSpec::default()
            },
            &recs,
        );
        validate_batch(&b).unwrap()
    }

    fn append(
        m: &mut ProducerStateManager,
        h: &RecordBatchHeader,
    ) -> Result<Option<BatchMetadata>> {
        let mut s = Staged::new();
        let dup = m.check_leader(&mut s, h)?;
        if dup.is_none() {
            m.update(&mut s, h, None);
            m.commit(s);
        }
        Ok(dup)
    }

    #[test]
    fn sequences_duplicates_and_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        assert_eq!(append(&mut m, &header(7, 0, 5, 2, 0)).unwrap(), None);
        assert_eq!(append(&mut m, &header(7, 0, 7, 3, 2)).unwrap(), None);
        let dup = append(&mut m, &header(7, 0, 5, 2, 100)).unwrap().unwrap();
        assert_eq!((dup.first_offset, dup.last_offset), (0, 1));
        assert!(matches!(
            append(&mut m, &header(7, 0, 11, 1, 5)),
            Err(StorageError::OutOfOrderSequence {
                expected: 10,
                found: 11,
                ..
            })
        ));
        assert!(matches!(
            append(&mut m, &header(7, 1, 3, 1, 5)),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        assert_eq!(append(&mut m, &header(7, 1, 0, 1, 5)).unwrap(), None);
        assert!(matches!(
            append(&mut m, &header(7, 0, 10, 1, 6)),
            Err(StorageError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(m.get(7).unwrap().last_offset(), 5);
    }

    #[test]
    fn snapshot_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path());
        append(&mut m, &header(3, 2, 10, 4, 40)).unwrap();
        m.take_snapshot(44).unwrap();
        let snaps = ProducerStateManager::list_snapshots(dir.path()).unwrap();
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].0, 44);
        let l = ProducerStateManager::load_snapshot(dir.path(), &snaps[0].1).unwrap();
        assert_eq!(l.get(3), m.get(3));
        let mut bytes = std::fs::read(&snaps[0].1).unwrap();
        let n = bytes.len() - 3;
        bytes[n] ^= 1;
        std::fs::write(&snaps[0].1, &bytes).unwrap();
        assert!(ProducerStateManager::load_snapshot(dir.path(), &snaps[0].1).is_err());
        std::fs::write(&snaps[0].1, &bytes[..5]).unwrap();
        assert!(ProducerStateManager::load_snapshot(dir.path(), &snaps[0].1).is_err());
    }
}
