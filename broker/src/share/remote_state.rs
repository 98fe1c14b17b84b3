//! Share-partitions whose group another broker coordinates: the leader reads the start offset
//! the coordinator stored (ReadShareGroupStateSummary) before it starts the share-partition, and
//! again every few seconds to notice an admin's reset, and reports the start offset as it moves
//! (WriteShareGroupState). A write with a state epoch the coordinator has moved past (the offsets
//! were altered or deleted) is FENCED_STATE_EPOCH: the share-partition starts again from what
//! the coordinator holds. Kafka keeps this state with a separate share coordinator; Tern's group
//! coordinator keeps it with the group, and these are the same RPCs between brokers.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::messages::read_share_group_state_summary_request::{
    PartitionData as ReadPartition, ReadStateSummaryData,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData as WritePartition, WriteStateData,
};
use kafka_protocol::messages::{ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

use super::manager::{GroupView, ShareManager};
use super::sessions::TopicPartition;
use crate::broker::Broker;
use crate::group_coordinator::share_group::ShareStartOffset;
use crate::inter_broker::BrokerClient;

/// How old a start offset read from the coordinator may be before it is read again.
const REFRESH_AFTER: Duration = Duration::from_secs(5);
/// How long a request waits on the coordinator (an unreachable one must not hold up every
/// share request here; what is not done stays queued).
const REQUEST_BUDGET: Duration = Duration::from_secs(1);
/// The versions sent (v1: DeliveryCompleteCount, which Tern leaves at -1).
const READ_VERSION: i16 = 1;
const WRITE_VERSION: i16 = 1;
/// ListOffsets for a leader's high watermark (flexible, topics by name).
const LIST_OFFSETS_VERSION: i16 = 6;

/// A share-partition: (group, topic, partition).
pub(crate) type Key = (String, String, i32);

/// What the coordinator of a group elsewhere holds for one share-partition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RemoteStart {
    /// The stored start offset, or None when the coordinator has none.
    pub(crate) stored: Option<ShareStartOffset>,
    read_at: Instant,
}

/// A start offset to report: (offset, the partition's leader epoch, the state epoch it was
/// started from).
type PendingWrite = (i64, i32, i32);

/// The leader's view of share-partition state kept on other brokers.
pub(crate) struct RemoteStates {
    read: Mutex<HashMap<Key, RemoteStart>>,
    /// When each share-partition's last write was acknowledged: a read sent before it is
    /// older than what the coordinator holds, and is not kept.
    written: Mutex<HashMap<Key, Instant>>,
    pending: Mutex<HashMap<Key, PendingWrite>>,
    /// One flush at a time, so that writes of a share-partition reach its coordinator in order.
    flushing: tokio::sync::Mutex<()>,
    client: BrokerClient,
}

impl RemoteStates {
    /// For broker `node_id`, reaching the coordinators on `listener`.
    pub(crate) fn new(node_id: i32, listener: String) -> Self {
        RemoteStates {
            read: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            flushing: tokio::sync::Mutex::new(()),
            client: BrokerClient::new(node_id, listener, "share-state"),
        }
    }

    /// What was last read for `key`; None before the first read.
    pub(crate) fn stored(&self, key: &Key) -> Option<RemoteStart> {
        self.read.lock().get(key).copied()
    }

    /// Queues the report of a moved start offset.
    pub(crate) fn report(&self, key: Key, write: PendingWrite) {
        self.pending.lock().insert(key, write);
    }

    /// Forgets what was read for `key`, so that it is read again.
    fn forget(&self, key: &Key) {
        self.read.lock().remove(key);
    }
}

impl ShareManager {
    /// Reads from the group's coordinator the start offsets of `partitions` not read yet or
    /// read too long ago (nothing when this broker coordinates the group).
    pub(crate) async fn refresh_remote(
        &self,
        broker: &Broker,
        view: &GroupView,
        partitions: &[TopicPartition],
    ) {
        if view.coordinated_here || view.loading {
            return;
        }
        let now = Instant::now();
        let stale: Vec<&TopicPartition> = {
            let read = self.remote.read.lock();
            partitions
                .iter()
                .filter(|(topic, index)| {
                    let key = (view.group.clone(), topic.clone(), *index);
                    read.get(&key)
                        .is_none_or(|r| now.duration_since(r.read_at) >= REFRESH_AFTER)
                })
                .collect()
        };
        if stale.is_empty() {
            return;
        }
        let image = broker.controller.image();
        let Some(coordinator) = broker.groups.coordinator_in(&image, &view.group) else {
            return;
        };
        let mut by_topic: BTreeMap<Uuid, Vec<ReadPartition>> = BTreeMap::new();
        let mut names: HashMap<Uuid, String> = HashMap::new();
        for (topic, index) in stale {
            let Some(t) = image.topic(topic) else {
                continue;
            };
            let leader_epoch = t.partitions.get(index).map_or(-1, |p| p.leader_epoch);
            names.insert(t.id, topic.clone());
            by_topic.entry(t.id).or_default().push(
                ReadPartition::default()
                    .with_partition(*index)
                    .with_leader_epoch(leader_epoch),
            );
        }
        let request = ReadShareGroupStateSummaryRequest::default()
            .with_group_id(crate::handlers::sb(view.group.clone()))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(id, partitions)| {
                        ReadStateSummaryData::default()
                            .with_topic_id(id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let sent = tokio::time::timeout(
            REQUEST_BUDGET,
            self.remote
                .client
                .send(&image, coordinator, &request, READ_VERSION),
        )
        .await;
        let response = match sent {
            Ok(Ok(r)) => r,
            failed => {
                tracing::debug!(group = %view.group, error = ?failed.err(), "share-group state not read");
                return;
            }
        };
        let written = self.remote.written.lock();
        let mut read = self.remote.read.lock();
        for topic in response.results {
            let Some(name) = names.get(&topic.topic_id) else {
                continue;
            };
            for p in topic.partitions {
                if p.error_code != 0 {
                    continue;
                }
                let stored = (p.start_offset >= 0).then_some(ShareStartOffset {
                    offset: p.start_offset,
                    leader_epoch: p.leader_epoch,
                    state_epoch: p.state_epoch,
                });
                let key = (view.group.clone(), name.clone(), p.partition);
                if written.get(&key).is_some_and(|at| *at >= now) {
                    continue; // a write was acknowledged after this read was sent
                }
                read.insert(
                    key,
                    RemoteStart {
                        stored,
                        read_at: now,
                    },
                );
            }
        }
    }

    /// Reports the queued start offsets to their groups' coordinators, one flush at a time
    /// (another in progress: nothing to do, it or the next one sends them). A write leaves the
    /// queue once acknowledged (unless a newer one came meanwhile); a fenced state epoch
    /// restarts the share-partition; writes of partitions this broker no longer leads at that
    /// epoch are dropped. `budget` bounds the wait for the coordinators.
    pub(crate) async fn flush_remote(&self, broker: &Broker, budget: Option<Duration>) {
        let Ok(_one) = self.remote.flushing.try_lock() else {
            return;
        };
        let pending: Vec<(Key, PendingWrite)> = {
            let mut queued = self.remote.pending.lock();
            queued.retain(|(_, topic, index), (_, leader_epoch, _)| {
                broker
                    .replicas
                    .partition(topic, *index)
                    .is_some_and(|p| p.is_leader() && p.leader_epoch() == *leader_epoch)
            });
            queued.iter().map(|(k, w)| (k.clone(), *w)).collect()
        };
        if pending.is_empty() {
            return;
        }
        let work = self.send_writes(broker, pending);
        match budget {
            Some(b) => {
                let _ = tokio::time::timeout(b, work).await;
            }
            None => work.await,
        }
    }

    async fn send_writes(&self, broker: &Broker, pending: Vec<(Key, PendingWrite)>) {
        let image = broker.controller.image();
        let mut by_group: BTreeMap<String, Vec<(Key, PendingWrite)>> = BTreeMap::new();
        for (key, write) in pending {
            by_group
                .entry(key.0.clone())
                .or_default()
                .push((key, write));
        }
        for (group, writes) in by_group {
            let mut by_topic: BTreeMap<Uuid, Vec<WritePartition>> = BTreeMap::new();
            let mut keys: HashMap<(Uuid, i32), (Key, PendingWrite)> = HashMap::new();
            for (key, write @ (offset, leader_epoch, state_epoch)) in writes {
                let Some(id) = image.topic(&key.1).map(|t| t.id) else {
                    self.remote.pending.lock().remove(&key); // the topic is gone
                    continue;
                };
                by_topic.entry(id).or_default().push(
                    WritePartition::default()
                        .with_partition(key.2)
                        .with_state_epoch(state_epoch)
                        .with_leader_epoch(leader_epoch)
                        .with_start_offset(offset)
                        .with_delivery_complete_count(-1),
                );
                keys.insert((id, key.2), (key, write));
            }
            let request = WriteShareGroupStateRequest::default()
                .with_group_id(crate::handlers::sb(group.clone()))
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(id, partitions)| {
                            WriteStateData::default()
                                .with_topic_id(id)
                                .with_partitions(partitions)
                        })
                        .collect(),
                );
            let sent = match broker.groups.coordinator_in(&image, &group) {
                Some(node) => {
                    self.remote
                        .client
                        .send(&image, node, &request, WRITE_VERSION)
                        .await
                }
                None => Err(ResponseError::CoordinatorNotAvailable),
            };
            let Ok(response) = sent else {
                continue; // still queued
            };
            for topic in response.results {
                for p in topic.partitions {
                    if let Some((key, write)) = keys.remove(&(topic.topic_id, p.partition)) {
                        self.after_write(key, write, p.error_code);
                    }
                }
            }
        }
    }

    fn after_write(&self, key: Key, write: PendingWrite, code: i16) {
        let (offset, leader_epoch, state_epoch) = write;
        let done = || {
            let mut pending = self.remote.pending.lock();
            if pending.get(&key) == Some(&write) {
                pending.remove(&key);
            }
        };
        if code == 0 {
            done();
            let now = Instant::now();
            self.remote.written.lock().insert(key.clone(), now);
            self.remote.read.lock().insert(
                key,
                RemoteStart {
                    stored: Some(ShareStartOffset {
                        offset,
                        leader_epoch,
                        state_epoch,
                    }),
                    read_at: now,
                },
            );
        } else if code == ResponseError::FencedStateEpoch.code() {
            done();
            tracing::info!(group = %key.0, topic = %key.1, partition = key.2, "share-partition state was reset by its coordinator; starting again");
            self.remote.forget(&key);
            self.restart(&key);
        } else if code == ResponseError::FencedLeaderEpoch.code()
            || code == ResponseError::UnknownTopicOrPartition.code()
        {
            // A newer leader writes now, or the topic is gone: nothing left to report.
            done();
        } else {
            tracing::debug!(group = %key.0, topic = %key.1, partition = key.2, code, "share-partition start offset not stored; retrying");
        }
    }

    /// Reports what is queued every second, for share-partitions whose start offset moves
    /// outside a request (a closed session's records given back, locks running out). Ends when
    /// the broker goes.
    pub(crate) fn spawn_flusher(broker: std::sync::Weak<Broker>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let Some(b) = broker.upgrade() else { return };
                b.share.flush_remote(&b, None).await;
            }
        });
    }
}

impl ShareManager {
    /// The high watermarks of `partitions` (led by other brokers), asked of their leaders with
    /// ListOffsets (the latest offset a read_uncommitted consumer sees); those not answered are
    /// left out. DescribeShareGroupOffsets works out lags with them.
    pub(crate) async fn high_watermarks(
        &self,
        broker: &Broker,
        partitions: &[TopicPartition],
    ) -> HashMap<TopicPartition, i64> {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::{BrokerId, ListOffsetsRequest};
        let image = broker.controller.image();
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        for (topic, index) in partitions {
            let leader = image
                .topic(topic)
                .and_then(|t| t.partitions.get(index))
                .map_or(-1, |p| p.leader);
            if leader >= 0 {
                by_leader
                    .entry(leader)
                    .or_default()
                    .entry(topic.as_str())
                    .or_default()
                    .push(*index);
            }
        }
        let mut out = HashMap::new();
        for (leader, topics) in by_leader {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(topic, indexes)| {
                            ListOffsetsTopic::default()
                                .with_name(kafka_protocol::messages::TopicName(
                                    crate::handlers::sb(topic),
                                ))
                                .with_partitions(
                                    indexes
                                        .into_iter()
                                        .map(|i| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(i)
                                                .with_timestamp(-1)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let Ok(response) = self
                .remote
                .client
                .send(&image, leader, &request, LIST_OFFSETS_VERSION)
                .await
            else {
                continue;
            };
            for t in response.topics {
                for p in t.partitions.into_iter().filter(|p| p.error_code == 0) {
                    out.insert((t.name.0.to_string(), p.partition_index), p.offset);
                }
            }
        }
        out
    }
}
