//! The applied side of the metadata log on one node: the MetadataImage, its publisher, and
//! the committed entries that nodes following the log without voting fetch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::ControllerError;

/// One committed metadata log entry: its raft index and the records it holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LogEntry {
    /// Raft log index.
    pub index: u64,
    /// The records, in order.
    pub records: Vec<MetadataRecord>,
}

/// What an observer last fetched: (raft index, when, ms since the epoch).
pub(crate) type ObserverProgress = std::collections::BTreeMap<i32, (u64, i64)>;

/// The image at one raft index, as a snapshot stores and sends it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotPayload {
    /// Raft index of the last entry the snapshot covers.
    pub index: u64,
    /// The image's offset (records applied) at that index.
    pub offset: u64,
    /// Records that rebuild the image.
    pub records: Vec<MetadataRecord>,
}

impl SnapshotPayload {
    /// Encodes the payload for storage or the wire.
    pub fn encode(&self) -> Result<Vec<u8>, ControllerError> {
        serde_json::to_vec(self)
            .map_err(|e| ControllerError::Corrupt(format!("encode snapshot: {e}")))
    }

    /// Decodes a payload; bytes that are not one are corrupt.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControllerError> {
        serde_json::from_slice(bytes)
            .map_err(|e| ControllerError::Corrupt(format!("metadata snapshot: {e}")))
    }
}

/// What a fetching node gets: a snapshot if it is behind the retained entries, then entries.
#[derive(Debug, Clone)]
pub struct FetchAnswer {
    /// The latest snapshot, if the fetcher is behind the first retained entry.
    pub snapshot: Option<Arc<SnapshotPayload>>,
    /// Entries with records, in log order.
    pub entries: Vec<Arc<LogEntry>>,
    /// The fetcher has seen everything up to this raft index.
    pub seen: u64,
}

struct Applied {
    image: MetadataImage,
    /// Raft index of the last applied entry.
    index: u64,
    /// Applied entries with records since the latest snapshot, oldest first.
    entries: Vec<Arc<LogEntry>>,
    /// The latest snapshot (this node's or one installed from the leader).
    snapshot: Option<Arc<SnapshotPayload>>,
}

/// The image as committed entries built it, published to subscribers after every entry.
pub struct MetadataState {
    applied: Mutex<Applied>,
    advanced: Condvar,
    publisher: watch::Sender<Arc<MetadataImage>>,
    observers: Mutex<ObserverProgress>,
}

impl std::fmt::Debug for MetadataState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.applied.lock();
        f.debug_struct("MetadataState")
            .field("index", &a.index)
            .field("offset", &a.image.offset)
            .finish()
    }
}

impl Default for MetadataState {
    fn default() -> Self {
        Self::new()
    }
}

impl MetadataState {
    /// An empty image.
    pub fn new() -> Self {
        let (publisher, _) = watch::channel(Arc::new(MetadataImage::default()));
        MetadataState {
            applied: Mutex::new(Applied {
                image: MetadataImage::default(),
                index: 0,
                entries: Vec::new(),
                snapshot: None,
            }),
            advanced: Condvar::new(),
            publisher,
            observers: Mutex::new(ObserverProgress::new()),
        }
    }

    /// Decodes a raft entry's data as records (an empty entry holds none).
    pub fn decode(index: u64, data: &[u8]) -> Result<Vec<MetadataRecord>, ControllerError> {
        if data.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_slice(data)
            .map_err(|e| ControllerError::Corrupt(format!("raft log entry {index}: {e}")))
    }

    /// Applies one committed entry (entries at or below the applied index are skipped: a
    /// follower may be sent what it already has) and publishes the new image.
    pub fn apply(&self, entry: LogEntry) {
        let mut a = self.applied.lock();
        if entry.index <= a.index {
            return;
        }
        a.index = entry.index;
        if entry.records.is_empty() {
            return;
        }
        for record in &entry.records {
            a.image.apply(record);
        }
        a.entries.push(Arc::new(entry));
        // Published before the lock is released: a waiter that sees the applied offset under
        // the lock (wait_for_offset) must find the image it waited for in image().
        self.publisher.send_replace(Arc::new(a.image.clone()));
        drop(a);
        self.advanced.notify_all();
    }

    /// The image at the applied index as a snapshot payload.
    pub fn snapshot(&self) -> SnapshotPayload {
        let a = self.applied.lock();
        SnapshotPayload {
            index: a.index,
            offset: a.image.offset,
            records: a.image.to_records(),
        }
    }

    /// The log up to the snapshot's index was replaced by it: entries up to there are dropped
    /// and fetchers further behind get the snapshot.
    pub fn compacted(&self, snapshot: SnapshotPayload) {
        let mut a = self.applied.lock();
        let index = snapshot.index;
        a.entries.retain(|e| e.index > index);
        a.snapshot = Some(Arc::new(snapshot));
    }

    /// Replaces the image by a snapshot's (installed from the leader, loaded at start, or
    /// fetched by an observer); a snapshot not newer than the applied index is ignored.
    pub fn restore(&self, snapshot: SnapshotPayload) {
        let mut a = self.applied.lock();
        if snapshot.index <= a.index && a.index > 0 {
            return;
        }
        a.image = MetadataImage::from_records(&snapshot.records, snapshot.offset);
        a.index = snapshot.index;
        a.entries.clear();
        a.snapshot = Some(Arc::new(snapshot));
        self.publisher.send_replace(Arc::new(a.image.clone()));
        drop(a);
        self.advanced.notify_all();
    }

    /// Records that everything up to raft index `index` is applied (entries without records
    /// are not sent to observers).
    pub fn advance_to(&self, index: u64) {
        let mut a = self.applied.lock();
        a.index = a.index.max(index);
    }

    /// Notes that observer `node_id` has fetched everything up to `index`.
    pub fn note_observer(&self, node_id: i32, index: u64) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.observers.lock().insert(node_id, (index, now_ms));
    }

    /// What each observer last fetched.
    pub fn observers(&self) -> ObserverProgress {
        self.observers.lock().clone()
    }

    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.borrow().clone()
    }

    /// A receiver that sees every new image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.publisher.subscribe()
    }

    /// Raft index of the last applied entry.
    pub fn applied_index(&self) -> u64 {
        self.applied.lock().index
    }

    /// Waits until the image has applied `offset` records; false on timeout.
    pub fn wait_for_offset(&self, offset: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut a = self.applied.lock();
        while a.image.offset < offset {
            if self.advanced.wait_until(&mut a, deadline).timed_out() {
                return a.image.offset >= offset;
            }
        }
        true
    }

    /// Committed entries after raft index `after`, at most `max_records` records (at least one
    /// entry if there is one), waiting up to `wait` for the first; with the raft index the
    /// reader has seen everything up to (entries without records are not kept).
    pub fn entries_after(&self, after: u64, max_records: usize, wait: Duration) -> FetchAnswer {
        let deadline = Instant::now() + wait;
        let mut a = self.applied.lock();
        while a.index <= after {
            if self.advanced.wait_until(&mut a, deadline).timed_out() {
                break;
            }
        }
        let snapshot = a.snapshot.clone().filter(|s| s.index > after);
        let after = snapshot.as_ref().map_or(after, |s| s.index);
        let start = a.entries.partition_point(|e| e.index <= after);
        let mut out = Vec::new();
        let mut records = 0;
        for e in &a.entries[start..] {
            if !out.is_empty() && records + e.records.len() > max_records {
                break;
            }
            records += e.records.len();
            out.push(e.clone());
        }
        let seen = if start + out.len() == a.entries.len() {
            a.index
        } else {
            out.last().map_or(after, |e| e.index)
        };
        FetchAnswer {
            snapshot,
            entries: out,
            seen,
        }
    }
}
