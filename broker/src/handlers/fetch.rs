//! Fetch: whole batches as byte ranges up to the high watermark (or last stable offset),
//! long-polling until `min_bytes` arrive or `max_wait_ms` passes, with incremental fetch
//! sessions.

use std::collections::HashSet;
use std::time::Duration;

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};
use kafka_protocol::ResponseError;
use tern_controller::MetadataImage;
use tokio::sync::watch;

use tern_controller::acls::AclOperation;

use super::{sb, RequestContext};
use crate::blocking::disk_io;
use crate::broker::Broker;
use crate::errors::storage_error_code;
use crate::fetch_session::{FetchItem, RequestedPartitions, SentState};
use crate::replica_manager::Partition;
use crate::replication::delayed_produce::first_of;
use tern_protocol::fetch_response::records_hole;
use tern_storage::FileSlice;

const READ_COMMITTED: i8 = 1;

struct Pass {
    /// One answer per item, with the file range of its records when it has any.
    data: Vec<(PartitionData, Option<FileSlice>)>,
    bytes: usize,
    has_error: bool,
    watchers: Vec<watch::Receiver<i64>>,
}

impl Pass {
    /// An answer without records.
    fn push(&mut self, data: PartitionData) {
        self.data.push((data, None));
    }
}

fn error_data(index: i32, code: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
}

/// Who is fetching.
#[derive(Debug, Clone, Copy)]
struct Fetcher {
    /// A follower's broker id, or -1 for a consumer.
    replica_id: i32,
    isolation_level: i8,
}

/// Where a follower's log parts from the leader's, if it does (KIP-320's check on Fetch
/// v12+): the leader's largest epoch at or below the follower's last fetched epoch, and where
/// it ends, when that is not the follower's epoch or ends before its fetch offset. A leader
/// that knows no epoch reports none (an undefined answer would not even reach the follower:
/// the field equals its default and is not sent); the fetch offset is then checked as usual.
fn diverging_epoch(partition: &Partition, item: &FetchItem) -> Option<EpochEndOffset> {
    if item.last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end_offset) = partition
        .log
        .end_offset_for_epoch(item.last_fetched_epoch)?;
    (epoch < item.last_fetched_epoch || end_offset < item.fetch_offset).then(|| {
        EpochEndOffset::default()
            .with_epoch(epoch)
            .with_end_offset(end_offset)
    })
}

/// Reads every item once; one PartitionData per item, in order. Items of topics in `denied`
/// answer TOPIC_AUTHORIZATION_FAILED. A follower reads up to the log end and its fetch
/// counts as its progress; a consumer reads up to the high watermark (or last stable offset).
fn read_pass(
    broker: &Broker,
    items: &[FetchItem],
    denied: &HashSet<String>,
    max_bytes: usize,
    fetcher: Fetcher,
) -> Pass {
    let isolation_level = fetcher.isolation_level;
    let follower = fetcher.replica_id >= 0;
    let mut pass = Pass {
        data: Vec::with_capacity(items.len()),
        bytes: 0,
        has_error: false,
        watchers: Vec::new(),
    };
    for item in items {
        if item.topic.is_empty() {
            pass.has_error = true;
            pass.push(error_data(item.partition, ResponseError::UnknownTopicId));
            continue;
        }
        if denied.contains(&item.topic) {
            pass.has_error = true;
            pass.push(error_data(
                item.partition,
                ResponseError::TopicAuthorizationFailed,
            ));
            continue;
        }
        let partition = match broker.replicas.partition(&item.topic, item.partition) {
            Some(p) if p.is_leader() => p,
            Some(_) => {
                pass.has_error = true;
                pass.push(error_data(
                    item.partition,
                    ResponseError::NotLeaderOrFollower,
                ));
                continue;
            }
            None => {
                pass.has_error = true;
                pass.push(error_data(
                    item.partition,
                    broker.unhosted_partition_error(&item.topic, item.partition),
                ));
                continue;
            }
        };
        if item.current_leader_epoch >= 0 && item.current_leader_epoch != partition.leader_epoch() {
            pass.has_error = true;
            let code = if item.current_leader_epoch < partition.leader_epoch() {
                ResponseError::FencedLeaderEpoch
            } else {
                ResponseError::UnknownLeaderEpoch
            };
            pass.push(error_data(item.partition, code));
            continue;
        }
        if follower {
            if let Some(diverging) = diverging_epoch(&partition, item) {
                // Nothing to read until the follower truncated; it answers at once.
                pass.has_error = true;
                pass.push(
                    PartitionData::default()
                        .with_partition_index(item.partition)
                        .with_high_watermark(partition.high_watermark())
                        .with_last_stable_offset(partition.last_stable_offset())
                        .with_log_start_offset(partition.log.log_start_offset())
                        .with_diverging_epoch(diverging)
                        .with_records(Some(bytes::Bytes::new())),
                );
                continue;
            }
            if !partition.follower_fetched(fetcher.replica_id, item.fetch_offset) {
                pass.has_error = true;
                pass.push(error_data(
                    item.partition,
                    ResponseError::NotLeaderOrFollower,
                ));
                continue;
            }
        }
        // Subscribe before reading so an append in between still wakes us.
        pass.watchers.push(if follower {
            partition.watch_log_end()
        } else {
            partition.watch_high_watermark()
        });
        let hw = partition.high_watermark();
        let lso = partition.last_stable_offset();
        let upper = if follower {
            None
        } else if isolation_level == READ_COMMITTED {
            Some(lso)
        } else {
            Some(hw)
        };
        let mut data = PartitionData::default()
            .with_partition_index(item.partition)
            .with_high_watermark(hw)
            .with_last_stable_offset(lso)
            .with_log_start_offset(partition.log.log_start_offset());
        // Bytes for followers the topic's leader throttle names count against it; an
        // out-of-sync one gets none while the rate is exceeded, as Kafka's ReplicaManager does.
        let throttled = follower
            && partition.throttled_as_leader()
            && broker.replicas.quotas().leader.is_limited();
        let held_back = throttled
            && broker
                .replicas
                .quotas()
                .leader
                .is_exceeded(crate::group_coordinator::now_ms())
            && !partition.in_sync(fetcher.replica_id);
        let remaining = max_bytes.saturating_sub(pass.bytes);
        let limit = (item.max_bytes.max(0) as usize).min(remaining);
        let mut slice = None;
        match partition
            .log
            .read_slice(item.fetch_offset, limit, upper, pass.bytes == 0)
        {
            // Read first, so that an offset out of range is still answered.
            Ok(_) if held_back => {
                data = data.with_records(Some(bytes::Bytes::new()));
            }
            Ok(read) => {
                let len = read.as_ref().map_or(0, FileSlice::len);
                pass.bytes += len;
                if let (READ_COMMITTED, Some(upper)) = (isolation_level, upper) {
                    let aborted = partition
                        .log
                        .aborted_transactions(item.fetch_offset, upper)
                        .into_iter()
                        .map(|a| {
                            AbortedTransaction::default()
                                .with_producer_id(ProducerId(a.producer_id))
                                .with_first_offset(a.first_offset)
                        })
                        .collect();
                    data = data.with_aborted_transactions(Some(aborted));
                }
                if !follower {
                    broker.metrics.fetched(&item.topic, len as u64);
                }
                if throttled {
                    broker
                        .replicas
                        .quotas()
                        .leader
                        .record(len as u64, crate::group_coordinator::now_ms());
                }
                // The records stay in the file; the writer splices them in.
                data = data.with_records(Some(if read.is_some() {
                    records_hole()
                } else {
                    bytes::Bytes::new()
                }));
                slice = read;
            }
            Err(e) => {
                pass.has_error = true;
                data = data.with_error_code(storage_error_code(&e).code());
            }
        }
        pass.data.push((data, slice));
    }
    pass
}

/// The partitions named in the request, with topic ids resolved to names (unknown ids leave
/// the name empty).
fn requested_partitions(
    req: &FetchRequest,
    version: i16,
    image: &MetadataImage,
) -> RequestedPartitions {
    let name_of = |name: &TopicName, id: &uuid::Uuid| -> String {
        if version >= 13 {
            image
                .topic_by_id(id)
                .map(|t| t.name.clone())
                .unwrap_or_default()
        } else {
            name.0.to_string()
        }
    };
    let mut items = Vec::new();
    for t in &req.topics {
        let topic = name_of(&t.topic, &t.topic_id);
        for p in &t.partitions {
            items.push(FetchItem {
                topic: topic.clone(),
                topic_id: t.topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: if version >= 12 {
                    p.last_fetched_epoch
                } else {
                    -1
                },
            });
        }
    }
    let mut forgotten = Vec::new();
    for f in &req.forgotten_topics_data {
        let topic = name_of(&f.topic, &f.topic_id);
        forgotten.extend(f.partitions.iter().map(|&p| (topic.clone(), p)));
    }
    RequestedPartitions { items, forgotten }
}

/// A Fetch answer whose records are still ranges of log files, one per records hole, in the
/// order the response encodes its partitions.
pub(crate) struct FetchReply {
    /// The response, with [`records_hole`] for each partition's records that are in `slices`.
    pub response: FetchResponse,
    /// The ranges that fill the holes, in order.
    pub slices: Vec<FileSlice>,
}

/// Groups per-partition results by topic, in item order.
fn build_response(
    items: &[FetchItem],
    data: Vec<(PartitionData, Option<FileSlice>)>,
    keep: &[bool],
    version: i16,
    session_id: i32,
) -> FetchReply {
    let mut responses: Vec<FetchableTopicResponse> = Vec::new();
    let mut slices = Vec::new();
    for ((item, (d, slice)), keep) in items.iter().zip(data).zip(keep) {
        if !keep {
            continue;
        }
        let same_topic = responses.last().is_some_and(|r| {
            if version >= 13 {
                r.topic_id == item.topic_id
            } else {
                r.topic.0.as_str() == item.topic
            }
        });
        if !same_topic {
            let mut r = FetchableTopicResponse::default();
            if version >= 13 {
                r.topic_id = item.topic_id;
            } else {
                r.topic = TopicName(sb(item.topic.clone()));
            }
            responses.push(r);
        }
        if let Some(r) = responses.last_mut() {
            r.partitions.push(d);
            slices.extend(slice);
        }
    }
    FetchReply {
        response: FetchResponse::default()
            .with_session_id(session_id)
            .with_responses(responses),
        slices,
    }
}

/// The fetching follower's broker id (-1 for consumers).
fn replica_id_of(req: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    }
}

/// The topics of `items` the principal may not fetch: a follower (replica id >= 0) needs
/// CLUSTER_ACTION on the cluster, a consumer READ on each topic, as in Kafka.
fn denied_topics(
    broker: &Broker,
    ctx: &RequestContext,
    req: &FetchRequest,
    version: i16,
    items: &[FetchItem],
) -> HashSet<String> {
    let authz = ctx.authz(broker);
    if !authz.enabled() {
        return HashSet::new();
    }
    let replica_id = replica_id_of(req, version);
    let follower_allowed = replica_id >= 0 && authz.cluster(AclOperation::ClusterAction);
    let mut denied = HashSet::new();
    for item in items {
        if denied.contains(&item.topic) {
            continue;
        }
        let allowed = if replica_id >= 0 {
            follower_allowed
        } else {
            authz.topic(AclOperation::Read, &item.topic)
        };
        if !allowed {
            denied.insert(item.topic.clone());
        }
    }
    denied
}

/// Answers Fetch.
pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FetchRequest,
    version: i16,
) -> FetchReply {
    let max_bytes = if req.max_bytes <= 0 {
        usize::MAX
    } else {
        req.max_bytes as usize
    };
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let image = broker.controller.image();
    let requested = requested_partitions(&req, version, &image);
    let request_ctx = ctx;
    let ctx = match broker.fetch_sessions.context(
        req.session_id,
        req.session_epoch,
        requested,
        crate::group_coordinator::now_ms(),
    ) {
        Ok(ctx) => ctx,
        Err(e) => {
            return FetchReply {
                response: FetchResponse::default().with_error_code(e.code()),
                slices: Vec::new(),
            }
        }
    };
    let denied = denied_topics(broker, request_ctx, &req, version, &ctx.items);
    let fetcher = Fetcher {
        replica_id: replica_id_of(&req, version),
        isolation_level: req.isolation_level,
    };
    let mut pass = disk_io(|| read_pass(broker, &ctx.items, &denied, max_bytes, fetcher));
    while !(pass.bytes >= min_bytes.max(1)
        || min_bytes == 0
        || pass.has_error
        || pass.watchers.is_empty()
        || tokio::time::Instant::now() >= deadline)
    {
        // Wait for any partition's high watermark to move, or the deadline.
        let waits: Vec<_> = pass
            .watchers
            .iter_mut()
            .map(|w| Box::pin(w.changed()))
            .collect();
        let moved = tokio::time::timeout_at(deadline, first_of(waits))
            .await
            .is_ok();
        pass = disk_io(|| read_pass(broker, &ctx.items, &denied, max_bytes, fetcher));
        if !moved {
            break;
        }
    }
    let keep = if ctx.incremental || ctx.session_id != 0 {
        let sent: Vec<(String, i32, SentState, bool)> = ctx
            .items
            .iter()
            .zip(&pass.data)
            .map(|(item, (d, _))| {
                let has = d.error_code != 0 || d.records.as_ref().is_some_and(|r| !r.is_empty());
                (
                    item.topic.clone(),
                    item.partition,
                    SentState {
                        high_watermark: d.high_watermark,
                        last_stable_offset: d.last_stable_offset,
                        log_start_offset: d.log_start_offset,
                    },
                    has,
                )
            })
            .collect();
        let changed = broker.fetch_sessions.record_sent(ctx.session_id, &sent);
        if ctx.incremental {
            changed
        } else {
            vec![true; ctx.items.len()]
        }
    } else {
        vec![true; ctx.items.len()]
    };
    build_response(&ctx.items, pass.data, &keep, version, ctx.session_id)
}
