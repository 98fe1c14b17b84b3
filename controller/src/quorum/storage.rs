//! The raft log, HardState, ConfState and snapshot metadata, persisted in RocksDB.
//!
//! Layout (format version 1), in two column families:
//!
//! - `raft_log`: key = entry index as 8 big-endian bytes, value = the `eraftpb::Entry` protobuf.
//! - `raft_state`: keys `format_version` (u32 big-endian), `hard_state`, `conf_state` and
//!   `snapshot_metadata` (protobufs), and `snapshot_data` (the state machine's snapshot bytes).
//!
//! Everything one raft `Ready` asks to persist (new entries, the log suffix they replace, the
//! HardState) goes into one `WriteBatch` written with `sync`, so a crash leaves either all of it
//! or none of it (RocksDB's WAL replays whole batches). A commit index that moved after the
//! entries were persisted is written without sync: like etcd, a lost commit index is relearned
//! (a leader re-commits its log), while a lost entry or vote could break Raft's guarantees.
//!
//! On open everything is read back and checked (contiguous indexes, terms that never go down,
//! a commit index inside the log) and then served from memory, so that the raft core, which
//! treats most storage errors as fatal, never meets a read error or a bad byte.
//! The log after the latest snapshot therefore lives in memory. A snapshot (taken by this node
//! with [`RaftStorage::compact`], or received from the leader and installed with
//! [`RaftStorage::apply_snapshot`]) replaces every entry up to its index, in one synced batch
//! with its data and metadata, so restart time and disk use follow the state, not its history.

use std::path::Path;

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use rocksdb::{DBCompressionType, IteratorMode, LogLevel, Options, WriteBatch, WriteOptions, DB};

use crate::ControllerError;

const CF_LOG: &str = "raft_log";
const CF_STATE: &str = "raft_state";
const KEY_FORMAT_VERSION: &[u8] = b"format_version";
const KEY_HARD_STATE: &[u8] = b"hard_state";
const KEY_CONF_STATE: &[u8] = b"conf_state";
const KEY_SNAPSHOT_METADATA: &[u8] = b"snapshot_metadata";
const KEY_SNAPSHOT_DATA: &[u8] = b"snapshot_data";
const FORMAT_VERSION: u32 = 1;

/// Raft's persistent state: in memory, and in RocksDB unless built with [`RaftStorage::in_memory`].
pub(crate) struct RaftStorage {
    hard_state: HardState,
    conf_state: ConfState,
    /// Index and term just before the first entry: (0, 0) until log compaction exists.
    snapshot_metadata: SnapshotMetadata,
    /// The state machine at `snapshot_metadata.index` (empty before the first snapshot).
    snapshot_data: Vec<u8>,
    /// `entries[i].index == snapshot_metadata.index + 1 + i`.
    entries: Vec<Entry>,
    db: Option<DB>,
}

impl std::fmt::Debug for RaftStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftStorage")
            .field("hard_state", &self.hard_state)
            .field("conf_state", &self.conf_state)
            .field("first_index", &self.first())
            .field("last_index", &self.last())
            .field("durable", &self.db.is_some())
            .finish()
    }
}

fn corrupt(what: impl Into<String>) -> ControllerError {
    ControllerError::Corrupt(what.into())
}

fn encode(message: &impl protobuf::Message) -> Result<Vec<u8>, ControllerError> {
    message
        .write_to_bytes()
        .map_err(|e| corrupt(format!("encoding a raft protobuf: {e}")))
}

fn decode<M: protobuf::Message>(bytes: &[u8], what: &str) -> Result<M, ControllerError> {
    M::parse_from_bytes(bytes).map_err(|e| corrupt(format!("{what} does not decode: {e}")))
}

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

impl RaftStorage {
    /// Empty storage that keeps nothing on disk (simulations and tests).
    pub(crate) fn in_memory() -> Self {
        RaftStorage {
            hard_state: HardState::default(),
            conf_state: ConfState::default(),
            snapshot_metadata: SnapshotMetadata::default(),
            snapshot_data: Vec::new(),
            entries: Vec::new(),
            db: None,
        }
    }

    /// Opens (creating if missing) the RocksDB database in `dir` and loads and checks it.
    pub(crate) fn open(dir: &Path) -> Result<Self, ControllerError> {
        std::fs::create_dir_all(dir)?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_paranoid_checks(true);
        // The WAL tail of a crash holds at most the one unacknowledged batch; drop it.
        opts.set_wal_recovery_mode(rocksdb::DBRecoveryMode::PointInTime);
        // Metadata is small; no compression library is built in.
        opts.set_compression_type(DBCompressionType::None);
        opts.set_bottommost_compression_type(DBCompressionType::None);
        opts.set_log_level(LogLevel::Warn);
        opts.set_keep_log_file_num(2);
        // The state column family is written on every ready and never fills a memtable, so
        // without a bound it would pin every write-ahead log file, history included.
        opts.set_max_total_wal_size(4 << 20);
        opts.set_max_log_file_size(1 << 20);
        let db = DB::open_cf(&opts, dir, [CF_LOG, CF_STATE])?;
        let mut storage = RaftStorage::in_memory();
        storage.load(&db)?;
        storage.db = Some(db);
        Ok(storage)
    }

    fn load(&mut self, db: &DB) -> Result<(), ControllerError> {
        let (cf_log, cf_state) = cfs(db)?;
        match db.get_cf(cf_state, KEY_FORMAT_VERSION)? {
            Some(v) if v.as_slice() == FORMAT_VERSION.to_be_bytes() => {}
            Some(v) => {
                return Err(corrupt(format!(
                    "unknown metadata log format version {v:?} (this build writes {FORMAT_VERSION})"
                )))
            }
            None => {
                let empty = db.iterator_cf(cf_log, IteratorMode::Start).next().is_none()
                    && db
                        .iterator_cf(cf_state, IteratorMode::Start)
                        .next()
                        .is_none();
                if !empty {
                    return Err(corrupt("metadata log has data but no format version"));
                }
                let mut batch = WriteBatch::default();
                batch.put_cf(cf_state, KEY_FORMAT_VERSION, FORMAT_VERSION.to_be_bytes());
                write(db, batch, true)?;
                return Ok(());
            }
        }
        if let Some(v) = db.get_cf(cf_state, KEY_HARD_STATE)? {
            self.hard_state = decode(&v, "raft HardState")?;
        }
        if let Some(v) = db.get_cf(cf_state, KEY_CONF_STATE)? {
            self.conf_state = decode(&v, "raft ConfState")?;
        }
        if let Some(v) = db.get_cf(cf_state, KEY_SNAPSHOT_METADATA)? {
            self.snapshot_metadata = decode(&v, "raft snapshot metadata")?;
        }
        if let Some(v) = db.get_cf(cf_state, KEY_SNAPSHOT_DATA)? {
            self.snapshot_data = v;
        }
        let mut prev_term = self.snapshot_metadata.term;
        for item in db.iterator_cf(cf_log, IteratorMode::Start) {
            let (key, value) = item?;
            let expected = self.last() + 1;
            let key: [u8; 8] = key
                .as_ref()
                .try_into()
                .map_err(|_| corrupt(format!("raft log key of {} bytes", key.len())))?;
            let index = u64::from_be_bytes(key);
            if index != expected {
                return Err(corrupt(format!(
                    "raft log has entry {index} where {expected} should be"
                )));
            }
            let entry: Entry = decode(&value, &format!("raft log entry {index}"))?;
            if entry.index != index || entry.term < prev_term {
                return Err(corrupt(format!(
                    "raft log entry under key {index} has index {} term {} after term {prev_term}",
                    entry.index, entry.term
                )));
            }
            prev_term = entry.term;
            self.entries.push(entry);
        }
        let commit = self.hard_state.commit;
        if commit < self.snapshot_metadata.index || commit > self.last() {
            return Err(corrupt(format!(
                "raft commit index {commit} outside the log [{}, {}]",
                self.snapshot_metadata.index,
                self.last()
            )));
        }
        if self.hard_state.term < prev_term {
            return Err(corrupt(format!(
                "raft HardState term {} below the last entry's term {prev_term}",
                self.hard_state.term
            )));
        }
        Ok(())
    }

    /// Whether the voters are known (set by [`RaftStorage::bootstrap`] or loaded).
    pub(crate) fn is_initialized(&self) -> bool {
        !self.conf_state.voters.is_empty()
    }

    /// The configuration this storage holds.
    pub(crate) fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// The persisted HardState (term, vote, commit).
    pub(crate) fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// Records the initial voter set of a new quorum; durable on return.
    pub(crate) fn bootstrap(&mut self, voters: &[u64]) -> Result<(), ControllerError> {
        assert!(
            !self.is_initialized(),
            "bootstrap of an initialized raft log"
        );
        assert!(!voters.is_empty(), "bootstrap with no voters");
        let conf_state = ConfState {
            voters: voters.to_vec(),
            ..ConfState::default()
        };
        if let Some(db) = &self.db {
            let (_, cf_state) = cfs(db)?;
            let mut batch = WriteBatch::default();
            batch.put_cf(cf_state, KEY_CONF_STATE, encode(&conf_state)?);
            write(db, batch, true)?;
        }
        self.conf_state = conf_state;
        Ok(())
    }

    /// Persists what one raft `Ready` asks for in one synced batch: `entries` (replacing any
    /// suffix of the log from their first index on) and the new HardState.
    pub(crate) fn persist(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), ControllerError> {
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        let first_new = entries.first().map(|e| e.index);
        if let Some(first_new) = first_new {
            assert!(
                first_new > self.snapshot_metadata.index && first_new <= self.last() + 1,
                "raft appended at {first_new} to a log of [{}, {}]",
                self.first(),
                self.last()
            );
            for pair in entries.windows(2) {
                assert_eq!(pair[0].index + 1, pair[1].index, "raft appended a gap");
            }
        }
        if let Some(db) = &self.db {
            let (cf_log, cf_state) = cfs(db)?;
            let mut batch = WriteBatch::default();
            if let Some(first_new) = first_new {
                if first_new <= self.last() {
                    batch.delete_range_cf(cf_log, index_key(first_new), index_key(self.last() + 1));
                }
                for entry in entries {
                    batch.put_cf(cf_log, index_key(entry.index), encode(entry)?);
                }
            }
            if let Some(hs) = hard_state {
                batch.put_cf(cf_state, KEY_HARD_STATE, encode(hs)?);
            }
            write(db, batch, true)?;
        }
        if let Some(first_new) = first_new {
            let keep = (first_new - self.first()) as usize;
            self.entries.truncate(keep);
            self.entries.extend_from_slice(entries);
        }
        if let Some(hs) = hard_state {
            self.hard_state = hs.clone();
        }
        Ok(())
    }

    /// Persists a commit index that moved after its entries were persisted (not synced).
    pub(crate) fn persist_commit(&mut self, commit: u64) -> Result<(), ControllerError> {
        assert!(commit <= self.last(), "commit {commit} past the log end");
        let mut hard_state = self.hard_state.clone();
        hard_state.commit = commit;
        if let Some(db) = &self.db {
            let (_, cf_state) = cfs(db)?;
            let mut batch = WriteBatch::default();
            batch.put_cf(cf_state, KEY_HARD_STATE, encode(&hard_state)?);
            write(db, batch, false)?;
        }
        self.hard_state = hard_state;
        Ok(())
    }

    /// The latest snapshot's index and data, if there is one.
    pub(crate) fn snapshot_state(&self) -> Option<(u64, &[u8])> {
        (self.snapshot_metadata.index > 0)
            .then_some((self.snapshot_metadata.index, self.snapshot_data.as_slice()))
    }

    /// Replaces the log up to `index` (committed, applied by the caller) with `data`, the
    /// state machine at that index. Durable on return.
    pub(crate) fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), ControllerError> {
        if index <= self.snapshot_metadata.index {
            return Ok(());
        }
        if index > self.hard_state.commit {
            return Err(ControllerError::Quorum(format!(
                "snapshot at {index} beyond the commit index {}",
                self.hard_state.commit
            )));
        }
        let term = self.entries[(index - self.first()) as usize].term;
        let metadata = SnapshotMetadata {
            conf_state: Some(self.conf_state.clone()).into(),
            index,
            term,
            ..SnapshotMetadata::default()
        };
        if let Some(db) = &self.db {
            let (cf_log, cf_state) = cfs(db)?;
            let mut batch = WriteBatch::default();
            batch.put_cf(cf_state, KEY_SNAPSHOT_METADATA, encode(&metadata)?);
            batch.put_cf(cf_state, KEY_SNAPSHOT_DATA, &data);
            batch.delete_range_cf(cf_log, index_key(self.first()), index_key(index + 1));
            write(db, batch, true)?;
            // A range deletion only hides the entries; compacting the range frees their space,
            // so disk use and the next start's read follow the state, not its history.
            db.compact_range_cf(cf_log, None::<&[u8]>, Some(&index_key(index + 1)[..]));
        }
        self.entries.drain(..(index + 1 - self.first()) as usize);
        self.snapshot_metadata = metadata;
        self.snapshot_data = data;
        Ok(())
    }

    /// Installs a snapshot the leader sent: the whole log is replaced by it, and the commit
    /// index is at least its index. Durable on return.
    pub(crate) fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), ControllerError> {
        let metadata = snapshot.get_metadata().clone();
        if metadata.index <= self.snapshot_metadata.index {
            return Ok(());
        }
        let mut hard_state = self.hard_state.clone();
        hard_state.commit = hard_state.commit.max(metadata.index);
        hard_state.term = hard_state.term.max(metadata.term);
        let conf_state = metadata.get_conf_state().clone();
        if let Some(db) = &self.db {
            let (cf_log, cf_state) = cfs(db)?;
            let mut batch = WriteBatch::default();
            batch.put_cf(cf_state, KEY_SNAPSHOT_METADATA, encode(&metadata)?);
            batch.put_cf(cf_state, KEY_SNAPSHOT_DATA, &snapshot.data);
            batch.put_cf(cf_state, KEY_HARD_STATE, encode(&hard_state)?);
            batch.put_cf(cf_state, KEY_CONF_STATE, encode(&conf_state)?);
            if !self.entries.is_empty() {
                batch.delete_range_cf(cf_log, index_key(self.first()), index_key(self.last() + 1));
            }
            write(db, batch, true)?;
        }
        self.entries.clear();
        self.snapshot_data = snapshot.data.to_vec();
        self.snapshot_metadata = metadata;
        self.hard_state = hard_state;
        self.conf_state = conf_state;
        Ok(())
    }

    /// The committed entries after the latest snapshot, oldest first.
    pub(crate) fn committed_entries(&self) -> &[Entry] {
        let committed = (self.hard_state.commit - self.snapshot_metadata.index) as usize;
        &self.entries[..committed.min(self.entries.len())]
    }

    fn first(&self) -> u64 {
        self.snapshot_metadata.index + 1
    }

    fn last(&self) -> u64 {
        self.snapshot_metadata.index + self.entries.len() as u64
    }
}

fn cfs(db: &DB) -> Result<(&rocksdb::ColumnFamily, &rocksdb::ColumnFamily), ControllerError> {
    match (db.cf_handle(CF_LOG), db.cf_handle(CF_STATE)) {
        (Some(log), Some(state)) => Ok((log, state)),
        _ => Err(corrupt("RocksDB column families missing")),
    }
}

fn write(db: &DB, batch: WriteBatch, sync: bool) -> Result<(), ControllerError> {
    let mut opts = WriteOptions::default();
    opts.set_sync(sync);
    db.write_opt(batch, &opts)?;
    Ok(())
}

impl Storage for RaftStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let offset = self.first();
        let mut entries = self.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index == self.snapshot_metadata.index {
            return Ok(self.snapshot_metadata.term);
        }
        if index < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if index > self.last() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(index - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        // Only a follower behind the compacted log asks; without a snapshot (none yet) raft
        // retries later on this error instead of failing.
        if self.snapshot_metadata.index == 0 || self.snapshot_metadata.index < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        let mut snapshot = Snapshot::default();
        snapshot.set_metadata(self.snapshot_metadata.clone());
        snapshot.data = self.snapshot_data.clone().into();
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, data: &str) -> Entry {
        Entry {
            index,
            term,
            data: data.as_bytes().to_vec().into(),
            ..Entry::default()
        }
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..HardState::default()
        }
    }

    fn raw_db(dir: &Path) -> DB {
        DB::open_cf(&Options::default(), dir, [CF_LOG, CF_STATE]).unwrap()
    }

    /// A database with voters [1, 2, 3], entries 1..=3 (entry 3 replaced once) and commit 2.
    fn populated(dir: &Path) -> Vec<Entry> {
        let mut s = RaftStorage::open(dir).unwrap();
        s.bootstrap(&[1, 2, 3]).unwrap();
        s.persist(
            &[entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "lost")],
            Some(&hard_state(1, 1, 1)),
        )
        .unwrap();
        // A new leader's log replaces the uncommitted suffix.
        s.persist(&[entry(3, 2, "c")], Some(&hard_state(2, 2, 1)))
            .unwrap();
        s.persist_commit(2).unwrap();
        vec![entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 2, "c")]
    }

    #[test]
    fn state_survives_reopen_and_serves_raft() {
        let dir = tempfile::tempdir().unwrap();
        let expected = populated(dir.path());
        let s = RaftStorage::open(dir.path()).unwrap();
        assert_eq!(s.conf_state().voters, vec![1, 2, 3]);
        assert_eq!(s.hard_state(), &hard_state(2, 2, 2));
        assert_eq!(s.committed_entries(), &expected[..2]);
        assert_eq!(s.first_index().unwrap(), 1);
        assert_eq!(s.last_index().unwrap(), 3);
        assert_eq!(s.term(0).unwrap(), 0);
        assert_eq!(s.term(3).unwrap(), 2);
        assert!(s.term(4).is_err());
        let all = s
            .entries(1, 4, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(all, expected);
        let one = s
            .entries(1, 4, Some(0), GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(one.len(), 1, "max_size still returns one entry");
        assert!(s
            .entries(1, 5, None, GetEntriesContext::empty(false))
            .is_err());
        let state = s.initial_state().unwrap();
        assert!(state.initialized());
    }

    #[test]
    fn a_value_that_does_not_decode_is_a_corrupt_error() {
        let dir = tempfile::tempdir().unwrap();
        populated(dir.path());
        {
            let db = raw_db(dir.path());
            let cf = db.cf_handle(CF_STATE).unwrap();
            db.put_cf(cf, KEY_HARD_STATE, [0xff, 0xff, 0xff]).unwrap();
        }
        let err = RaftStorage::open(dir.path()).unwrap_err();
        assert!(matches!(err, ControllerError::Corrupt(_)), "{err}");
        assert!(err.to_string().contains("HardState"), "{err}");
    }

    #[test]
    fn a_gap_in_the_log_is_a_corrupt_error() {
        let dir = tempfile::tempdir().unwrap();
        populated(dir.path());
        {
            let db = raw_db(dir.path());
            let cf = db.cf_handle(CF_LOG).unwrap();
            db.delete_cf(cf, index_key(2)).unwrap();
        }
        let err = RaftStorage::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("where 2 should be"), "{err}");
    }

    #[test]
    fn a_commit_index_past_the_log_is_a_corrupt_error() {
        let dir = tempfile::tempdir().unwrap();
        populated(dir.path());
        {
            let db = raw_db(dir.path());
            let cf = db.cf_handle(CF_STATE).unwrap();
            db.put_cf(cf, KEY_HARD_STATE, encode(&hard_state(2, 2, 9)).unwrap())
                .unwrap();
        }
        let err = RaftStorage::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("commit index 9"), "{err}");
    }

    #[test]
    fn an_unknown_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        populated(dir.path());
        {
            let db = raw_db(dir.path());
            let cf = db.cf_handle(CF_STATE).unwrap();
            db.put_cf(cf, KEY_FORMAT_VERSION, 99u32.to_be_bytes())
                .unwrap();
        }
        let err = RaftStorage::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("format version"), "{err}");
    }

    #[test]
    fn a_garbled_current_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        populated(dir.path());
        std::fs::write(dir.path().join("CURRENT"), b"MANIFEST-garbage\n").unwrap();
        let err = RaftStorage::open(dir.path()).unwrap_err();
        assert!(matches!(err, ControllerError::RocksDb(_)), "{err}");
    }

    /// Torn and flipped bytes in every file RocksDB wrote: open either fails with an error or
    /// yields a consistent prefix of what was written (RocksDB's point-in-time WAL recovery).
    #[test]
    fn damaged_files_give_an_error_or_a_consistent_prefix() {
        let pristine = tempfile::tempdir().unwrap();
        let expected = populated(pristine.path());
        let files: Vec<_> = std::fs::read_dir(pristine.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with("LOG") && n != "LOCK")
            .collect();
        assert!(files.iter().any(|n| n.ends_with(".log")), "{files:?}");
        let mut errors = 0;
        for name in &files {
            let len = std::fs::metadata(pristine.path().join(name)).unwrap().len() as usize;
            for damage in ["truncate-half", "truncate-tail", "flip-middle", "flip-tail"] {
                let copy = tempfile::tempdir().unwrap();
                for f in &files {
                    std::fs::copy(pristine.path().join(f), copy.path().join(f)).unwrap();
                }
                let path = copy.path().join(name);
                let mut bytes = std::fs::read(&path).unwrap();
                match damage {
                    "truncate-half" => bytes.truncate(len / 2),
                    "truncate-tail" => bytes.truncate(len.saturating_sub(3)),
                    "flip-middle" if len > 0 => bytes[len / 2] ^= 0x5a,
                    "flip-tail" if len > 2 => bytes[len - 2] ^= 0x5a,
                    _ => {}
                }
                std::fs::write(&path, &bytes).unwrap();
                match RaftStorage::open(copy.path()) {
                    Err(_) => errors += 1,
                    Ok(s) => {
                        let got = s
                            .entries(1, s.last() + 1, None, GetEntriesContext::empty(false))
                            .unwrap();
                        // The log as it stood after some batch: before or after the rewrite.
                        let before = [entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "lost")];
                        assert!(
                            expected.starts_with(&got) || before.starts_with(&got),
                            "{name} {damage}: {got:?}"
                        );
                        assert!(s.hard_state().commit <= s.last());
                    }
                }
            }
        }
        assert!(errors > 0, "some damage must be detected");
    }
}
