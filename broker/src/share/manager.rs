//! The share-partitions this broker leads, by (group, topic, partition): each starts from the
//! start offset its group's coordinator stored (or `share.auto.offset.reset`, latest), reads
//! whole batches from the log, and reports its start offset back to the coordinator as it
//! moves, so that DescribeShareGroupOffsets, restarts and the mirror see it.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tern_protocol::record_batch::BatchIter;

use super::partition::{ack_type, AcquiredRange, BatchSpan, ShareLimits, SharePartition};
use super::remote_state::{Key, RemoteStates};
use super::sessions::{ShareSessions, TopicPartition};
use crate::broker::Broker;
use crate::group_coordinator::share_group::{ShareGroupConfig, ShareOffsetReset};
use crate::replica_manager::Partition;

/// `group.share.max.share.sessions`, Kafka's default.
const MAX_SHARE_SESSIONS: usize = 2_000;

/// The state epoch of a share-partition not started yet.
const NOT_STARTED: i32 = i32::MIN;

struct Entry {
    partition: SharePartition,
    /// The coordinator's state epoch when this share-partition was started from it (None
    /// where another broker coordinates the group).
    state_epoch: Option<i32>,
    /// The start offset last reported to the coordinator.
    reported_start: i64,
    /// The partition's leader epoch when this share-partition was started: leadership that
    /// went elsewhere and came back starts it again from the stored offset.
    leader_epoch: i32,
}

/// What one partition gave a ShareFetch.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    /// Whole batches holding the acquired records (may hold others the client skips).
    pub(crate) records: Bytes,
    /// The acquired records.
    pub(crate) acquired: Vec<AcquiredRange>,
}

impl Delivery {
    /// How many records were acquired.
    pub(crate) fn record_count(&self) -> i64 {
        self.acquired
            .iter()
            .map(|r| r.last_offset - r.first_offset + 1)
            .sum()
    }
}

/// A share group as one request sees it: its settings and where it is coordinated.
pub(crate) struct GroupView {
    /// Group id.
    pub(crate) group: String,
    /// The broker's share-group settings with the group's configs over them.
    pub(crate) settings: ShareGroupConfig,
    /// This broker should coordinate the group but is still loading it.
    pub(super) loading: bool,
    /// This broker coordinates the group (it stores the start offsets).
    pub(super) coordinated_here: bool,
}

/// Share-partitions and share sessions.
pub(crate) struct ShareManager {
    partitions: Mutex<HashMap<Key, Arc<Mutex<Entry>>>>,
    /// Share sessions of ShareFetch and ShareAcknowledge.
    pub(crate) sessions: ShareSessions,
    /// Start offsets kept by the coordinators of groups this broker does not coordinate.
    pub(super) remote: RemoteStates,
}

impl ShareManager {
    /// A manager of broker `node_id` with no share-partitions or sessions yet, reaching other
    /// brokers' group coordinators on `listener`.
    pub(crate) fn new(node_id: i32, listener: String) -> Self {
        ShareManager {
            partitions: Mutex::new(HashMap::new()),
            sessions: ShareSessions::new(MAX_SHARE_SESSIONS),
            remote: RemoteStates::new(node_id, listener),
        }
    }

    /// Starts the share-partition `key` again from what its coordinator holds, at its next
    /// use (its state epoch was fenced).
    pub(super) fn restart(&self, key: &Key) {
        if let Some(cell) = self.partitions.lock().get(key) {
            cell.lock().state_epoch = Some(NOT_STARTED);
        }
    }

    /// What a request needs to know of `group`, worked out once for all its partitions.
    pub(crate) fn group_view(&self, broker: &Broker, group: &str) -> GroupView {
        let image = broker.controller.image();
        let here = broker.groups.check_coordinator(group).is_ok();
        GroupView {
            group: group.to_string(),
            settings: crate::config::group_configs::share_settings(
                &broker.groups.config.share,
                &image.group_configs(group),
            ),
            // This broker should coordinate the group but cannot yet (it is loading the
            // group's offsets partition): a share-partition must not start before it can read
            // the stored start offset.
            loading: !here
                && broker.groups.coordinator_in(&image, group) == Some(broker.config.node_id),
            coordinated_here: here,
        }
    }

    /// Where a share-partition with no stored start offset starts
    /// (`share.auto.offset.reset`): the log start, the high watermark, or the first record
    /// no older than the duration (the high watermark when there is none).
    fn reset_offset(partition: &Partition, reset: ShareOffsetReset, now_ms: i64) -> i64 {
        match reset {
            ShareOffsetReset::Earliest => partition.log.log_start_offset(),
            ShareOffsetReset::Latest => partition.high_watermark(),
            ShareOffsetReset::ByDurationMs(ms) => partition
                .log
                .fetch_offset_by_timestamp(now_ms.saturating_sub(ms))
                .ok()
                .flatten()
                .map_or(partition.high_watermark(), |t| t.offset),
        }
    }

    /// The led partition, or the error a share consumer gets for it.
    fn led(broker: &Broker, topic: &str, index: i32) -> Result<Arc<Partition>, ResponseError> {
        match broker.replicas.partition(topic, index) {
            Some(p) if p.is_leader() => Ok(p),
            Some(_) => Err(ResponseError::NotLeaderOrFollower),
            None => Err(broker.unhosted_partition_error(topic, index)),
        }
    }

    /// Runs `f` on the share-partition, started (again) from what the coordinator stored when
    /// it is new or its offsets were altered since; reports a moved start offset afterwards.
    /// None while the group's coordinator here is not ready.
    fn with_entry<T>(
        &self,
        broker: &Broker,
        view: &GroupView,
        partition: &Partition,
        f: impl FnOnce(&mut SharePartition, &ShareLimits) -> T,
    ) -> Option<T> {
        if view.loading {
            return None;
        }
        let (group, settings) = (view.group.as_str(), &view.settings);
        let (topic, index) = (partition.topic.as_str(), partition.index);
        let key = (group.to_string(), topic.to_string(), index);
        let coordinated_here = view.coordinated_here;
        let stored = if coordinated_here {
            broker.groups.share_start(group, topic, index)
        } else {
            // Read from the coordinator before the request got here; not yet: nothing to do.
            self.remote.stored(&key)?.stored
        };
        let cell = self
            .partitions
            .lock()
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Entry {
                    partition: SharePartition::new(-1),
                    state_epoch: Some(NOT_STARTED),
                    reported_start: -1,
                    leader_epoch: -1,
                }))
            })
            .clone();
        let mut entry = cell.lock();
        let log_start = partition.log.log_start_offset();
        let leader_epoch = partition.leader_epoch();
        let restart = match (&stored, entry.state_epoch) {
            (_, Some(NOT_STARTED)) => true,
            _ if entry.leader_epoch != leader_epoch => true,
            (Some(s), Some(e)) => s.state_epoch != e,
            // Its offsets were deleted (DeleteShareGroupOffsets, the group deleted).
            (None, Some(_)) => true,
            // Started without a stored offset, which the coordinator has stored since.
            (Some(s), None) => {
                entry.state_epoch = Some(s.state_epoch);
                false
            }
            (None, None) => false,
        };
        if restart {
            let start = match stored {
                Some(s) if s.offset >= 0 => s.offset,
                _ => Self::reset_offset(
                    partition,
                    settings.auto_offset_reset,
                    crate::group_coordinator::now_ms(),
                ),
            };
            entry.partition = SharePartition::new(start.max(log_start));
            entry.state_epoch = stored.map(|s| s.state_epoch);
            entry.reported_start = stored.map_or(-1, |s| s.offset);
            entry.leader_epoch = leader_epoch;
        }
        entry.partition.skip_to(log_start);
        let out = f(&mut entry.partition, &settings.limits);
        let start = entry.partition.start();
        if start != entry.reported_start {
            entry.reported_start = start;
            if coordinated_here {
                let epoch =
                    broker
                        .groups
                        .record_share_progress(group, topic, index, start, leader_epoch);
                if entry.state_epoch.is_none() || restart {
                    entry.state_epoch = epoch;
                }
            } else {
                let state_epoch = entry.state_epoch.unwrap_or(0);
                self.remote.report(key, (start, leader_epoch, state_epoch));
            }
        }
        Some(out)
    }

    /// Acquires records of one partition for `member`: whole batches from the first record
    /// it may take, up to `max_bytes` and about `max_records` records (the pair given).
    pub(crate) fn acquire(
        &self,
        broker: &Broker,
        view: &GroupView,
        member: &str,
        (topic, index): (&str, i32),
        (max_records, record_limit, max_bytes): (i64, bool, usize),
        now_ms: i64,
    ) -> Result<Delivery, ResponseError> {
        let partition = Self::led(broker, topic, index)?;
        let read_committed = view.settings.read_committed;
        // share.isolation.level=read_committed reads up to the last stable offset.
        let hw = if read_committed {
            partition.last_stable_offset()
        } else {
            partition.high_watermark()
        };
        self.with_entry(broker, view, &partition, |sp, limits| {
            sp.expire_locks(limits, now_ms);
            let Some(from) = sp.next_fetch_offset(limits) else {
                return Ok(Delivery::default());
            };
            if from >= hw {
                return Ok(Delivery::default());
            }
            let read = match partition.log.read(from, max_bytes, Some(hw), true) {
                Ok(r) => r.records,
                // The log moved on under us (retention): the next fetch starts from its start.
                Err(tern_storage::StorageError::OffsetOutOfRange { .. }) => {
                    return Ok(Delivery::default())
                }
                Err(e) => return Err(crate::errors::storage_error_code(&e)),
            };
            let aborted = if read_committed {
                partition.log.aborted_transactions(from, hw)
            } else {
                Vec::new()
            };
            let mut spans = Vec::new();
            let mut ends = Vec::new();
            let mut iter = BatchIter::new(&read);
            while let Some(Ok((header, _))) = iter.next() {
                // An aborted transaction's batch is settled unseen, as Kafka archives it.
                let was_aborted = header.is_transactional()
                    && aborted.iter().any(|a| {
                        a.producer_id == header.producer_id
                            && a.first_offset <= header.base_offset
                            && header.last_offset() < a.last_offset
                    });
                spans.push(BatchSpan {
                    base_offset: header.base_offset,
                    last_offset: header.last_offset(),
                    control: header.is_control() || was_aborted,
                });
                ends.push(iter.position());
            }
            let (acquired, used) =
                sp.acquire(member, &spans, (max_records, record_limit), limits, now_ms);
            if acquired.is_empty() {
                return Ok(Delivery::default());
            }
            Ok(Delivery {
                records: read.slice(..ends[used - 1]),
                acquired,
            })
        })
        .unwrap_or_else(|| Ok(Delivery::default()))
    }

    /// Settles `member`'s records of one partition, batch by batch, all or nothing.
    pub(crate) fn acknowledge(
        &self,
        broker: &Broker,
        view: &GroupView,
        member: &str,
        (topic, index): (&str, i32),
        batches: &[(i64, i64, Vec<i8>)],
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let partition = Self::led(broker, topic, index)?;
        // The group config share.renew.acknowledge.enable=false turns renewals away.
        let renews = batches
            .iter()
            .any(|(_, _, types)| types.contains(&ack_type::RENEW));
        if renews && !view.settings.renew_enabled {
            return Err(ResponseError::InvalidRecordState);
        }
        self.with_entry(broker, view, &partition, |sp, limits| {
            // A lock that ran out holds nothing any more: settling or renewing it is refused.
            sp.expire_locks(limits, now_ms);
            let mut trial = sp.clone();
            for (first, last, types) in batches {
                trial.acknowledge(member, (*first, *last), types, limits, now_ms)?;
            }
            *sp = trial;
            Ok(())
        })
        .unwrap_or(Err(ResponseError::CoordinatorLoadInProgress))
    }

    /// Gives back what `member` holds of `partitions` (its share session closed or expired).
    pub(crate) fn release(
        &self,
        broker: &Broker,
        view: &GroupView,
        member: &str,
        partitions: &[TopicPartition],
    ) {
        for (topic, index) in partitions {
            let Ok(partition) = Self::led(broker, topic, *index) else {
                continue;
            };
            let key = (view.group.clone(), topic.clone(), *index);
            if !self.partitions.lock().contains_key(&key) {
                continue;
            }
            let _ = self.with_entry(broker, view, &partition, |sp, limits| {
                sp.release_member(member, limits)
            });
        }
    }

    /// Ends the share sessions opened on `connection`, which closed, giving back their
    /// members' records.
    pub(crate) fn connection_closed(&self, broker: &Broker, connection: u64) {
        for (group, member, partitions) in self.sessions.close_connection(connection) {
            let view = self.group_view(broker, &group);
            self.release(broker, &view, &member, &partitions);
        }
    }
}
