//! The coordinator's persisted state: the state and last mirrored offset of every mirror
//! partition whose `__mirror_state` partition this broker leads, kept in memory and written to
//! that compacted topic. Loaded when this broker gains a `__mirror_state` partition, dropped
//! when it loses it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tern_protocol::record_batch::{BatchIter, Compression};
use tern_protocol::records::{decode_records, RecordBatchBuilder};

use crate::host::MirrorHost;
use crate::state::{
    coordinator_partition, decode_record, encode_last_mirrored_offset, encode_state,
    MirrorPartitionKey, MirrorPartitionState, PartitionStateRecord, StateRecord,
    MIRROR_STATE_TOPIC,
};

const LOAD_READ_BYTES: usize = 1 << 20;
const LOAD_MAX_UNCOMPRESSED: usize = 64 << 20;

/// Why a state could not be persisted.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum StoreError {
    /// This broker does not lead the coordinator partition.
    #[error("not the mirror coordinator for {0:?} (partition {1} of {MIRROR_STATE_TOPIC})")]
    NotCoordinator(MirrorPartitionKey, i32),
    /// Building or appending the record failed.
    #[error("writing {MIRROR_STATE_TOPIC}: {0}")]
    Write(String),
}

/// In-memory mirror partition states, backed by `__mirror_state`.
pub(crate) struct StateStore {
    host: Arc<dyn MirrorHost>,
    num_partitions: i32,
    states: HashMap<MirrorPartitionKey, PartitionStateRecord>,
    last_mirrored: HashMap<MirrorPartitionKey, i64>,
    /// The `__mirror_state` partitions loaded (led here when last looked).
    loaded: BTreeSet<i32>,
}

impl StateStore {
    /// An empty store over `num_partitions` coordinator partitions.
    pub(crate) fn new(host: Arc<dyn MirrorHost>, num_partitions: i32) -> Self {
        StateStore {
            host,
            num_partitions,
            states: HashMap::new(),
            last_mirrored: HashMap::new(),
            loaded: BTreeSet::new(),
        }
    }

    /// The number of `__mirror_state` partitions.
    pub(crate) fn num_partitions(&self) -> i32 {
        self.num_partitions
    }

    /// Whether this broker coordinates `key` (leads its `__mirror_state` partition).
    pub(crate) fn coordinates(&self, key: &MirrorPartitionKey) -> bool {
        self.loaded
            .contains(&coordinator_partition(key, self.num_partitions))
    }

    /// Loads the `__mirror_state` partitions this broker now leads and forgets the ones it
    /// no longer leads (another broker coordinates them now).
    pub(crate) fn sync_leadership(&mut self) {
        for p in 0..self.num_partitions {
            let leads = self.host.leader_replica(MIRROR_STATE_TOPIC, p).is_some();
            if leads && !self.loaded.contains(&p) {
                self.load_partition(p);
                self.loaded.insert(p);
            } else if !leads && self.loaded.remove(&p) {
                let n = self.num_partitions;
                self.states.retain(|k, _| coordinator_partition(k, n) != p);
                self.last_mirrored
                    .retain(|k, _| coordinator_partition(k, n) != p);
                tracing::info!(
                    partition = p,
                    "no longer the mirror coordinator of this {MIRROR_STATE_TOPIC} partition"
                );
            }
        }
    }

    /// Replays one `__mirror_state` partition this broker leads.
    fn load_partition(&mut self, p: i32) {
        let Some(replica) = self.host.leader_replica(MIRROR_STATE_TOPIC, p) else {
            return;
        };
        let log = &replica.log;
        let mut offset = log.log_start_offset();
        let end = log.log_end_offset();
        while offset < end {
            let data = match log.read(offset, LOAD_READ_BYTES, Some(end), true) {
                Ok(d) if !d.records.is_empty() => d,
                Ok(_) => break,
                Err(e) => {
                    tracing::error!(partition = p, error = %e, "cannot load mirror states");
                    break;
                }
            };
            for item in BatchIter::new(&data.records) {
                let Ok((header, batch)) = item else { break };
                offset = header.next_offset();
                if header.is_control() {
                    continue;
                }
                let Ok((_, records)) = decode_records(batch, LOAD_MAX_UNCOMPRESSED) else {
                    continue;
                };
                for r in records {
                    if let Some(key) = r.key.as_deref() {
                        self.apply(decode_record(key, r.value.as_deref()));
                    }
                }
            }
        }
        tracing::info!(
            coordinator_partition = p,
            partitions = self.states.len(),
            "loaded mirror partition states"
        );
    }

    fn apply(&mut self, record: Option<StateRecord>) {
        match record {
            Some(StateRecord::State(k, Some(v))) => {
                self.states.insert(k, v);
            }
            Some(StateRecord::State(k, None)) => {
                self.states.remove(&k);
            }
            Some(StateRecord::LastMirroredOffset(k, Some(o))) => {
                self.last_mirrored.insert(k, o);
            }
            Some(StateRecord::LastMirroredOffset(k, None)) => {
                self.last_mirrored.remove(&k);
            }
            None => {}
        }
    }

    /// The persisted record of a partition.
    pub(crate) fn get(&self, key: &MirrorPartitionKey) -> Option<&PartitionStateRecord> {
        self.states.get(key)
    }

    /// The state of a partition (`Unknown` when none is recorded).
    pub(crate) fn state(&self, key: &MirrorPartitionKey) -> MirrorPartitionState {
        self.states
            .get(key)
            .map(|r| r.state)
            .unwrap_or(MirrorPartitionState::Unknown)
    }

    /// The last mirrored offset recorded when the partition was stopped.
    pub(crate) fn last_mirrored_offset(&self, key: &MirrorPartitionKey) -> Option<i64> {
        self.last_mirrored.get(key).copied()
    }

    /// Persists a state and, when given, the last mirrored offset first (a STOPPED partition
    /// always has its offset recorded), then applies them. The write is durable once the
    /// returned [`Pending`] is committed (the ISR of the `__mirror_state` partition has it).
    pub(crate) fn write(
        &mut self,
        key: &MirrorPartitionKey,
        record: PartitionStateRecord,
        last_mirrored_offset: Option<i64>,
    ) -> Result<Pending, StoreError> {
        if let Some(offset) = last_mirrored_offset {
            let (k, v) = encode_last_mirrored_offset(key, offset);
            self.append(key, k, Some(v))?;
            self.last_mirrored.insert(key.clone(), offset);
        }
        let (k, v) = encode_state(key, &record);
        let pending = self.append(key, k, Some(v))?;
        self.states.insert(key.clone(), record);
        Ok(pending)
    }

    fn append(
        &self,
        key: &MirrorPartitionKey,
        k: Bytes,
        v: Option<Bytes>,
    ) -> Result<Pending, StoreError> {
        let p = coordinator_partition(key, self.num_partitions);
        let replica = self
            .host
            .leader_replica(MIRROR_STATE_TOPIC, p)
            .ok_or_else(|| StoreError::NotCoordinator(key.clone(), p))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut builder = RecordBatchBuilder::new(Compression::None);
        builder
            .push(now, Some(&k), v.as_deref(), &[])
            .map_err(|e| StoreError::Write(e.to_string()))?;
        let batch = builder
            .build()
            .map_err(|e| StoreError::Write(e.to_string()))?;
        let info = replica
            .log
            .append_as_leader(BytesMut::from(&batch[..]), replica.leader_epoch)
            .map_err(|e| StoreError::Write(e.to_string()))?;
        self.host.on_mirror_append(MIRROR_STATE_TOPIC, p);
        Ok(Pending {
            partition: p,
            offset: info.last_offset + 1,
        })
    }
}

/// A `__mirror_state` write waiting for the partition's high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The `__mirror_state` partition written.
    pub partition: i32,
    /// Committed once the high watermark reaches this offset.
    pub offset: i64,
}
