//! Where a mirror partition's state is kept and how it is read and written. The coordinator of
//! a partition is the leader of its `__mirror_state` partition: this broker's [`StateStore`]
//! when that is here, else a peer reached with ReadMirrorStates / WriteMirrorStates. The broker
//! that leads the mirror partition itself drives it (its state machine holds the state).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::read_mirror_states_response::PartitionResult as ReadPartition;
use kafka_protocol::messages::write_mirror_states_request::PartitionData as WritePartition;
use kafka_protocol::messages::{
    read_mirror_states_request, write_mirror_states_request, ReadMirrorStatesRequest,
    WriteMirrorStatesRequest,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Mutex, MutexGuard};
use tern_controller::{Controller, MetadataImage};
use tern_protocol::error::ResponseError;
use uuid::Uuid;

use super::store::{Pending, StateStore, StoreError};
use super::StoredState;
use crate::host::MirrorHost;
use crate::peers::{PeerError, Peers};
use crate::state::{
    coordinator_partition, MirrorPartitionKey, MirrorPartitionState, PartitionStateRecord,
    MIRROR_STATE_TOPIC,
};

/// How long a state write may wait for the `__mirror_state` ISR.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Who coordinates a mirror partition.
enum Coordinator {
    Here,
    Peer(i32),
}

/// Why a mirror partition's state could not be read or written at its coordinator. Each
/// answers a ReadMirrorStates / WriteMirrorStates partition with [`CoordinationError::error`]
/// and its message.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CoordinationError {
    /// The `__mirror_state` partition that coordinates the partition has no leader (or this
    /// broker leads it but has not loaded it).
    #[error("{MIRROR_STATE_TOPIC} partition {partition} has no leader")]
    NotAvailable {
        /// The `__mirror_state` partition.
        partition: i32,
    },
    /// The peer that coordinates the partition did not answer (or answered another API).
    #[error("{0}")]
    Peer(Arc<PeerError>),
    /// The peer that coordinates the partition answered with an error.
    #[error("{message}")]
    Refused {
        /// Kafka's error code, as the peer sent it.
        code: i16,
        /// The peer's message.
        message: String,
    },
    /// The peer's answer did not include the partition.
    #[error("broker {node} left {} out", left_out(.partition))]
    LeftOut {
        /// The peer.
        node: i32,
        /// The partition, named in the message of a read.
        partition: Option<i32>,
    },
    /// This broker does not lead the `__mirror_state` partition the write was sent to.
    #[error("this broker does not lead {MIRROR_STATE_TOPIC} partition {partition}")]
    NotCoordinator {
        /// The `__mirror_state` partition.
        partition: i32,
    },
    /// The writer's leader epoch of the mirror partition is older than the current one.
    #[error("leader epoch {epoch} is older than the partition's current epoch {current}")]
    FencedLeaderEpoch {
        /// The writer's epoch.
        epoch: i32,
        /// The partition's current epoch.
        current: i32,
    },
    /// The spec does not allow this state change.
    #[error("invalid mirror state transition {} -> {}", .from.name(), .to.name())]
    InvalidTransition {
        /// The stored state.
        from: MirrorPartitionState,
        /// The state written.
        to: MirrorPartitionState,
    },
    /// The mirror partition's topic does not exist.
    #[error("Topic {0} does not exist")]
    UnknownTopic(String),
    /// Appending the state to `__mirror_state` failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The `__mirror_state` write was not committed (replicated to its ISR) in time.
    #[error("{MIRROR_STATE_TOPIC} partition {partition} did not commit offset {offset} in time")]
    CommitTimeout {
        /// The `__mirror_state` partition.
        partition: i32,
        /// The offset that had to be committed.
        offset: i64,
    },
}

impl From<PeerError> for CoordinationError {
    fn from(e: PeerError) -> Self {
        CoordinationError::Peer(Arc::new(e))
    }
}

fn left_out(partition: &Option<i32>) -> String {
    match partition {
        Some(p) => format!("partition {p}"),
        None => "the partition".to_string(),
    }
}

impl CoordinationError {
    /// The Kafka error a ReadMirrorStates / WriteMirrorStates partition answers with.
    pub(crate) fn error(&self) -> ResponseError {
        match self {
            CoordinationError::NotAvailable { .. } | CoordinationError::Peer(_) => {
                ResponseError::CoordinatorNotAvailable
            }
            CoordinationError::Refused { code, .. } => {
                ResponseError::try_from_code(*code).unwrap_or(ResponseError::UnknownServerError)
            }
            CoordinationError::LeftOut { .. } => ResponseError::UnknownServerError,
            CoordinationError::NotCoordinator { .. } | CoordinationError::Store(_) => {
                ResponseError::NotCoordinator
            }
            CoordinationError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            CoordinationError::InvalidTransition { .. } => ResponseError::InvalidRequest,
            CoordinationError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
            CoordinationError::CommitTimeout { .. } => ResponseError::RequestTimedOut,
        }
    }

    /// Kafka's numeric error code of [`CoordinationError::error`].
    pub(crate) fn code(&self) -> i16 {
        self.error().code()
    }
}

/// Mirror partition states, at this broker's store or at the peers that coordinate them.
pub(crate) struct PartitionStates {
    host: Arc<dyn MirrorHost>,
    controller: Arc<Controller>,
    store: Mutex<StateStore>,
    peers: Arc<Peers>,
}

impl PartitionStates {
    /// States over `num_partitions` `__mirror_state` partitions, reaching peers through `peers`.
    pub(crate) fn new(
        host: Arc<dyn MirrorHost>,
        controller: Arc<Controller>,
        num_partitions: i32,
        peers: Arc<Peers>,
    ) -> Self {
        PartitionStates {
            store: Mutex::new(StateStore::new(host.clone(), num_partitions)),
            host,
            controller,
            peers,
        }
    }

    /// This broker's store (the `__mirror_state` partitions it leads).
    pub(crate) fn store(&self) -> MutexGuard<'_, StateStore> {
        self.store.lock()
    }

    /// The coordinator of `key`, from the metadata image (loading a `__mirror_state` partition
    /// this broker has just come to lead).
    fn coordinator_of(
        &self,
        image: &MetadataImage,
        key: &MirrorPartitionKey,
    ) -> Result<Coordinator, CoordinationError> {
        let mut store = self.store.lock();
        if store.coordinates(key) {
            return Ok(Coordinator::Here);
        }
        let p = coordinator_partition(key, store.num_partitions());
        let leader = image
            .topic(MIRROR_STATE_TOPIC)
            .and_then(|t| t.partitions.get(&p))
            .map(|info| info.leader)
            .filter(|&l| l >= 0);
        let not_available = || CoordinationError::NotAvailable { partition: p };
        match leader {
            Some(l) if l == self.host.node_id() => {
                store.sync_leadership();
                if store.coordinates(key) {
                    Ok(Coordinator::Here)
                } else {
                    Err(not_available())
                }
            }
            Some(l) => Ok(Coordinator::Peer(l)),
            None => Err(not_available()),
        }
    }

    /// The coordinators' states of some partitions of one topic.
    pub(crate) async fn read(
        &self,
        mirror: &str,
        topic: &str,
        topic_id: Uuid,
        partitions: &[i32],
    ) -> BTreeMap<i32, Result<StoredState, CoordinationError>> {
        let image = self.controller.image();
        let mut out = BTreeMap::new();
        let mut remote: HashMap<i32, Vec<i32>> = HashMap::new();
        for &p in partitions {
            let key = MirrorPartitionKey {
                mirror: mirror.to_string(),
                topic_id,
                partition: p,
            };
            match self.coordinator_of(&image, &key) {
                Ok(Coordinator::Here) => {
                    let store = self.store.lock();
                    out.insert(p, Ok(stored_here(&store, &key)));
                }
                Ok(Coordinator::Peer(node)) => remote.entry(node).or_default().push(p),
                Err(e) => {
                    out.insert(p, Err(e));
                }
            }
        }
        for (node, ps) in remote {
            let partitions = ps.iter().map(|&p| {
                read_mirror_states_request::PartitionData::default().with_partition_index(p)
            });
            let request = ReadMirrorStatesRequest::default()
                .with_mirror_name(StrBytes::from_string(mirror.to_string()))
                .with_topics(vec![read_mirror_states_request::TopicData::default()
                    .with_name(StrBytes::from_string(topic.to_string()))
                    .with_partitions(partitions.collect())]);
            let answer = match self.peers.send_kafka(node, &request, 0).await {
                Ok(r) if r.error_code != 0 => Err(CoordinationError::Refused {
                    code: r.error_code,
                    message: r
                        .error_message
                        .map_or_else(|| format!("broker {node} refused"), |m| m.to_string()),
                }),
                Ok(r) => Ok(r),
                Err(e) => Err(e.into()),
            };
            let answered: HashMap<i32, ReadPartition> = match &answer {
                Ok(r) => r
                    .topics
                    .iter()
                    .filter(|t| *t.name == *topic)
                    .flat_map(|t| t.partitions.iter().cloned())
                    .map(|p| (p.partition_index, p))
                    .collect(),
                Err(_) => HashMap::new(),
            };
            for p in ps {
                let result = match (&answer, answered.get(&p)) {
                    (Err(e), _) => Err(e.clone()),
                    (Ok(_), None) => Err(CoordinationError::LeftOut {
                        node,
                        partition: Some(p),
                    }),
                    (Ok(_), Some(a)) if a.error_code != 0 => Err(CoordinationError::Refused {
                        code: a.error_code,
                        message: a
                            .error_message
                            .as_ref()
                            .map_or_else(|| format!("broker {node} refused"), |m| m.to_string()),
                    }),
                    (Ok(_), Some(a)) => Ok(stored_from_wire(a)),
                };
                out.insert(p, result);
            }
        }
        out
    }

    /// Records a partition's new state with its coordinator.
    pub(crate) async fn write(
        &self,
        key: &MirrorPartitionKey,
        topic: &str,
        write: WritePartition,
    ) -> Result<(), CoordinationError> {
        let image = self.controller.image();
        match self.coordinator_of(&image, key)? {
            Coordinator::Here => {
                let pending = apply_write(&mut self.store.lock(), &image, key, &write)?;
                self.committed(pending).await
            }
            Coordinator::Peer(node) => {
                let request = WriteMirrorStatesRequest::default()
                    .with_mirror_name(StrBytes::from_string(key.mirror.clone()))
                    .with_topics(vec![write_mirror_states_request::TopicData::default()
                        .with_name(StrBytes::from_string(topic.to_string()))
                        .with_partitions(vec![write])]);
                match self.peers.send_kafka(node, &request, 0).await {
                    Ok(r) => {
                        if r.error_code != 0 {
                            return Err(CoordinationError::Refused {
                                code: r.error_code,
                                message: r.error_message.map(|m| m.to_string()).unwrap_or_default(),
                            });
                        }
                        let result = r
                            .topics
                            .iter()
                            .flat_map(|t| t.partitions.iter())
                            .find(|p| p.partition_index == key.partition);
                        match result {
                            Some(p) if p.error_code == 0 => Ok(()),
                            Some(p) => Err(CoordinationError::Refused {
                                code: p.error_code,
                                message: p
                                    .error_message
                                    .as_ref()
                                    .map(|m| m.to_string())
                                    .unwrap_or_default(),
                            }),
                            None => Err(CoordinationError::LeftOut {
                                node,
                                partition: None,
                            }),
                        }
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Waits until a `__mirror_state` write is committed: the partition's ISR has it, so a new
    /// coordinator after a leader change loads it too.
    pub(crate) async fn committed(&self, pending: Pending) -> Result<(), CoordinationError> {
        let timed_out = || CoordinationError::CommitTimeout {
            partition: pending.partition,
            offset: pending.offset,
        };
        let Some(mut hw) = self
            .host
            .watch_high_watermark(MIRROR_STATE_TOPIC, pending.partition)
        else {
            return Err(timed_out());
        };
        let wait = async {
            while *hw.borrow_and_update() < pending.offset {
                if hw.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        match tokio::time::timeout(COMMIT_TIMEOUT, wait).await {
            Ok(true) => Ok(()),
            _ => Err(timed_out()),
        }
    }
}

/// What this broker's store holds of `key` (it coordinates it).
pub(crate) fn stored_here(store: &StateStore, key: &MirrorPartitionKey) -> StoredState {
    StoredState {
        record: store.get(key).cloned(),
        last_mirrored_offset: store.last_mirrored_offset(key),
    }
}

/// A ReadMirrorStates answer as a [`StoredState`].
fn stored_from_wire(p: &ReadPartition) -> StoredState {
    let state = MirrorPartitionState::from_id(p.state);
    StoredState {
        record: (state != MirrorPartitionState::Unknown).then(|| PartitionStateRecord {
            state,
            previous_state: MirrorPartitionState::from_id(p.previous_state),
            retry_attempt: p.retry_attempt,
            error_message: p.error_message.as_ref().map(|m| m.to_string()),
        }),
        last_mirrored_offset: (p.last_mirrored_offset >= 0).then_some(p.last_mirrored_offset),
    }
}

/// The coordinator's side of a write, local or from WriteMirrorStates: a writer fenced by a
/// newer leader epoch of the partition, a write to a broker that does not coordinate the key,
/// or a transition the spec does not allow changes nothing.
pub(crate) fn apply_write(
    store: &mut StateStore,
    image: &MetadataImage,
    key: &MirrorPartitionKey,
    write: &WritePartition,
) -> Result<Pending, CoordinationError> {
    if !store.coordinates(key) {
        return Err(CoordinationError::NotCoordinator {
            partition: coordinator_partition(key, store.num_partitions()),
        });
    }
    if write.leader_epoch >= 0 {
        let current = image
            .topic_by_id(&key.topic_id)
            .and_then(|t| t.partitions.get(&key.partition))
            .map(|info| info.leader_epoch);
        if let Some(current) = current.filter(|&c| write.leader_epoch < c) {
            return Err(CoordinationError::FencedLeaderEpoch {
                epoch: write.leader_epoch,
                current,
            });
        }
    }
    let cur = store.state(key);
    let next = MirrorPartitionState::from_id(write.state);
    if next == MirrorPartitionState::Unknown || !cur.can_become(next) {
        return Err(CoordinationError::InvalidTransition {
            from: cur,
            to: next,
        });
    }
    let previous_state = if write.previous_state == -1 {
        cur
    } else {
        MirrorPartitionState::from_id(write.previous_state)
    };
    let record = PartitionStateRecord {
        state: next,
        previous_state,
        retry_attempt: write.retry_attempt,
        error_message: write.error_message.as_ref().map(|m| m.to_string()),
    };
    let lmo = (write.last_mirrored_offset >= 0).then_some(write.last_mirrored_offset);
    store
        .write(key, record, lmo)
        .map_err(CoordinationError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_answer_kafkas_codes_with_their_messages() {
        use CoordinationError as E;
        let cases: Vec<(CoordinationError, ResponseError, &str)> = vec![
            (
                E::NotAvailable { partition: 3 },
                ResponseError::CoordinatorNotAvailable,
                "__mirror_state partition 3 has no leader",
            ),
            (
                PeerError::Timeout { node: 2 }.into(),
                ResponseError::CoordinatorNotAvailable,
                "broker 2 did not answer in time",
            ),
            (
                E::Refused {
                    code: 146,
                    message: "still mirrored".into(),
                },
                ResponseError::Unknown(146),
                "still mirrored",
            ),
            (
                E::LeftOut {
                    node: 2,
                    partition: Some(5),
                },
                ResponseError::UnknownServerError,
                "broker 2 left partition 5 out",
            ),
            (
                E::LeftOut {
                    node: 2,
                    partition: None,
                },
                ResponseError::UnknownServerError,
                "broker 2 left the partition out",
            ),
            (
                E::NotCoordinator { partition: 7 },
                ResponseError::NotCoordinator,
                "this broker does not lead __mirror_state partition 7",
            ),
            (
                E::FencedLeaderEpoch {
                    epoch: 3,
                    current: 4,
                },
                ResponseError::FencedLeaderEpoch,
                "leader epoch 3 is older than the partition's current epoch 4",
            ),
            (
                E::InvalidTransition {
                    from: MirrorPartitionState::Stopped,
                    to: MirrorPartitionState::Mirroring,
                },
                ResponseError::InvalidRequest,
                "invalid mirror state transition STOPPED -> MIRRORING",
            ),
            (
                E::UnknownTopic("orders".into()),
                ResponseError::UnknownTopicOrPartition,
                "Topic orders does not exist",
            ),
            (
                E::CommitTimeout {
                    partition: 1,
                    offset: 9,
                },
                ResponseError::RequestTimedOut,
                "__mirror_state partition 1 did not commit offset 9 in time",
            ),
        ];
        for (e, error, message) in cases {
            assert_eq!((e.code(), e.to_string()), (error.code(), message.into()));
        }
    }
}
