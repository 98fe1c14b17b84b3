//! The coordinator's persisted state: every mirror partition's state and last mirrored offset,
//! kept in memory and written to the compacted `__mirror_state` topic.

use std::collections::HashMap;
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
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// This broker does not lead the coordinator partition.
    #[error("not the mirror coordinator for {0:?} (partition {1} of {MIRROR_STATE_TOPIC})")]
    NotCoordinator(MirrorPartitionKey, i32),
    /// Building or appending the record failed.
    #[error("writing {MIRROR_STATE_TOPIC}: {0}")]
    Write(String),
}

/// In-memory mirror partition states, backed by `__mirror_state`.
pub struct StateStore {
    host: Arc<dyn MirrorHost>,
    num_partitions: i32,
    states: HashMap<MirrorPartitionKey, PartitionStateRecord>,
    last_mirrored: HashMap<MirrorPartitionKey, i64>,
}

impl StateStore {
    /// An empty store over `num_partitions` coordinator partitions.
    pub fn new(host: Arc<dyn MirrorHost>, num_partitions: i32) -> Self {
        StateStore {
            host,
            num_partitions,
            states: HashMap::new(),
            last_mirrored: HashMap::new(),
        }
    }

    /// Replays every `__mirror_state` partition this broker leads.
    pub fn load(&mut self) {
        for p in 0..self.num_partitions {
            let Some(replica) = self.host.leader_replica(MIRROR_STATE_TOPIC, p) else {
                continue;
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
        }
        tracing::info!(
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
    pub fn get(&self, key: &MirrorPartitionKey) -> Option<&PartitionStateRecord> {
        self.states.get(key)
    }

    /// The state of a partition (`Unknown` when none is recorded).
    pub fn state(&self, key: &MirrorPartitionKey) -> MirrorPartitionState {
        self.states
            .get(key)
            .map(|r| r.state)
            .unwrap_or(MirrorPartitionState::Unknown)
    }

    /// All recorded states.
    pub fn all(&self) -> impl Iterator<Item = (&MirrorPartitionKey, &PartitionStateRecord)> {
        self.states.iter()
    }

    /// The last mirrored offset recorded when the partition was stopped.
    pub fn last_mirrored_offset(&self, key: &MirrorPartitionKey) -> Option<i64> {
        self.last_mirrored.get(key).copied()
    }

    /// Persists a new state, then applies it.
    pub fn write_state(
        &mut self,
        key: &MirrorPartitionKey,
        record: PartitionStateRecord,
    ) -> Result<(), StoreError> {
        let (k, v) = encode_state(key, &record);
        self.append(key, k, Some(v))?;
        self.states.insert(key.clone(), record);
        Ok(())
    }

    /// Persists a stopped partition's last mirrored offset, then applies it.
    pub fn write_last_mirrored_offset(
        &mut self,
        key: &MirrorPartitionKey,
        offset: i64,
    ) -> Result<(), StoreError> {
        let (k, v) = encode_last_mirrored_offset(key, offset);
        self.append(key, k, Some(v))?;
        self.last_mirrored.insert(key.clone(), offset);
        Ok(())
    }

    fn append(
        &self,
        key: &MirrorPartitionKey,
        k: Bytes,
        v: Option<Bytes>,
    ) -> Result<(), StoreError> {
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
        replica
            .log
            .append_as_leader(BytesMut::from(&batch[..]), replica.leader_epoch)
            .map_err(|e| StoreError::Write(e.to_string()))?;
        self.host.on_mirror_append(MIRROR_STATE_TOPIC, p);
        Ok(())
    }
}
