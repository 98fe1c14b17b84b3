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
pub type ObserverProgress = std::collections::BTreeMap<i32, (u64, i64)>;

struct Applied {
    image: MetadataImage,
    /// Raft index of the last applied entry.
    index: u64,
    /// Every applied entry with records, oldest first (until snapshots bound it).
    entries: Vec<Arc<LogEntry>>,
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
        let image = Arc::new(a.image.clone());
        drop(a);
        self.publisher.send_replace(image);
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
    pub fn entries_after(
        &self,
        after: u64,
        max_records: usize,
        wait: Duration,
    ) -> (Vec<Arc<LogEntry>>, u64) {
        let deadline = Instant::now() + wait;
        let mut a = self.applied.lock();
        while a.index <= after {
            if self.advanced.wait_until(&mut a, deadline).timed_out() {
                break;
            }
        }
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
        (out, seen)
    }
}
