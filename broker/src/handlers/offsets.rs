//! Committed offsets: OffsetCommit, OffsetFetch (single and multi-group), OffsetDelete.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::ResponseError;

use tern_controller::acls::AclOperation;

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;
use crate::group_coordinator::group::GroupState;
use crate::group_coordinator::now_ms;
use crate::group_coordinator::offsets_topic::{offset_key, OffsetValue};
use crate::group_coordinator::Committer;

/// A partition of an OffsetCommit or TxnOffsetCommit request (generated types with the same
/// fields).
pub(super) trait CommitPartition {
    /// The row to store for it in `topic`: topic, partition and the value committed at `now`.
    fn to_commit(&self, topic: &TopicName, now: i64) -> (String, i32, OffsetValue);
}

/// Implements [`CommitPartition`] through the generated `committed_*` fields.
macro_rules! commit_partition {
    ($($part:ty),* $(,)?) => {
        $(impl CommitPartition for $part {
            fn to_commit(&self, topic: &TopicName, now: i64) -> (String, i32, OffsetValue) {
                let value = OffsetValue::committed(
                    self.committed_offset,
                    self.committed_leader_epoch,
                    self.committed_metadata.as_deref(),
                    now,
                );
                (topic.0.to_string(), self.partition_index, value)
            }
        })*
    };
}

commit_partition!(
    kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition,
    kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition,
);

/// Answers OffsetCommit: READ on the group (GROUP_AUTHORIZATION_FAILED on every partition)
/// and READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions, which are not
/// committed), as in Kafka.
pub(crate) async fn offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let mut req = req;
    let image = broker.controller.image();
    // v10 names topics by id (KIP-848): resolve them; an id the cluster lacks answers
    // UNKNOWN_TOPIC_ID for its partitions.
    let unknown_ids: Vec<bool> = if version >= 10 {
        req.topics
            .iter_mut()
            .map(|t| match image.topic_by_id(&t.topic_id) {
                Some(ti) => {
                    t.name = TopicName(sb(ti.name.clone()));
                    false
                }
                None => true,
            })
            .collect()
    } else {
        vec![false; req.topics.len()]
    };
    let group_id = req.group_id.0.to_string();
    let now = now_ms();
    let authz = ctx.authz(broker);
    let group_allowed = authz.group(AclOperation::Read, &group_id);
    let allowed: Vec<bool> = req
        .topics
        .iter()
        .map(|t| group_allowed && authz.topic(AclOperation::Read, t.name.0.as_str()))
        .collect();
    // As Kafka: a partition the cluster does not have answers UNKNOWN_TOPIC_OR_PARTITION and
    // is not committed; the others are.
    let known: Vec<Vec<bool>> = req
        .topics
        .iter()
        .map(|t| {
            let topic = image.topic(t.name.0.as_str());
            t.partitions
                .iter()
                .map(|p| topic.is_some_and(|ti| ti.partitions.contains_key(&p.partition_index)))
                .collect()
        })
        .collect();
    let mut offsets = Vec::new();
    for ((t, _), known) in req
        .topics
        .iter()
        .zip(&allowed)
        .zip(&known)
        .filter(|((_, a), _)| **a)
    {
        for (p, _) in t.partitions.iter().zip(known).filter(|(_, k)| **k) {
            offsets.push(p.to_commit(&t.name, now));
        }
    }
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let result = if offsets.is_empty() {
        Ok(Vec::new())
    } else if version < 9
        && broker
            .groups
            .is_consumer_protocol_member(&group_id, req.member_id.as_str())
    {
        // As Kafka: a member of the KIP-848 protocol commits with OffsetCommit v9 or later.
        Err(ResponseError::UnsupportedVersion)
    } else {
        let committer = Committer {
            member_id: req.member_id.as_str(),
            instance: instance.as_deref(),
            generation: req.generation_id_or_member_epoch,
        };
        broker.groups.commit_offsets(&group_id, committer, offsets)
    };
    // Acknowledged only once the ISR of the offsets partition has the commit, so that a
    // coordinator failover never loses it (Kafka's errors for a commit that did not make it).
    let result = match result {
        Ok(codes) if !codes.is_empty() => {
            crate::internal_topic::replicated(broker.groups.replication_of(&group_id))
                .await
                .map(|()| codes)
        }
        other => other,
    };
    let refused = if group_allowed {
        ResponseError::TopicAuthorizationFailed.code()
    } else {
        ResponseError::GroupAuthorizationFailed.code()
    };
    let mut codes = match result {
        Ok(codes) => codes.into_iter(),
        Err(e) => {
            let n: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
            vec![e.code(); n].into_iter()
        }
    };
    let topics = req
        .topics
        .iter()
        .zip(&allowed)
        .zip(&known)
        .zip(&unknown_ids)
        .map(|(((t, allowed), known), unknown_id)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(known)
                        .map(|(p, known)| {
                            let code = if *unknown_id {
                                ResponseError::UnknownTopicId.code()
                            } else if !*allowed {
                                refused
                            } else if !*known {
                                ResponseError::UnknownTopicOrPartition.code()
                            } else {
                                codes.next().unwrap_or(0)
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// (partition, offset, epoch, metadata, error code) of one partition.
type FetchedRow = (i32, i64, i32, String, i16);

/// (topic, [`FetchedRow`]) for the requested or all partitions.
type FetchedTopic = (String, Vec<FetchedRow>);

/// A partition of an OffsetFetch answer (v0-7 and v8+ have their own generated types with the
/// same fields).
trait FetchedPartition: Default {
    /// This part filled from `row`.
    fn with_row(self, row: FetchedRow) -> Self;
}

/// Implements [`FetchedPartition`] through the generated setters.
macro_rules! fetched_partition {
    ($($part:ty),* $(,)?) => {
        $(impl FetchedPartition for $part {
            fn with_row(self, (p, o, e, m, code): FetchedRow) -> Self {
                self.with_error_code(code)
                    .with_partition_index(p)
                    .with_committed_offset(o)
                    .with_committed_leader_epoch(e)
                    .with_metadata(Some(sb(m)))
            }
        })*
    };
}

fetched_partition!(OffsetFetchResponsePartition, OffsetFetchResponsePartitions);

/// The answer parts of `rows`, in order.
fn fetched_partitions<P: FetchedPartition>(rows: Vec<FetchedRow>) -> Vec<P> {
    rows.into_iter()
        .map(|row| P::default().with_row(row))
        .collect()
}

/// The committed offsets of a group: DESCRIBE on the group is needed; a requested topic the
/// principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED per partition, and when all
/// topics are asked for, such topics are left out (as in Kafka).
fn fetch_group(
    broker: &Broker,
    authz: &Authz<'_>,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<FetchedTopic>, ResponseError> {
    if !authz.group(AclOperation::Describe, group_id) {
        return Err(ResponseError::GroupAuthorizationFailed);
    }
    broker.groups.check_coordinator(group_id)?;
    let stored = broker
        .groups
        .with_group(group_id, false, |g| g.offsets().clone())
        .unwrap_or_default();
    let lookup = |t: &str, p: i32| {
        if !authz.topic(AclOperation::Describe, t) {
            return (
                p,
                -1,
                -1,
                String::new(),
                ResponseError::TopicAuthorizationFailed.code(),
            );
        }
        // An offset an open transaction is about to replace is not stable yet.
        if require_stable && broker.groups.has_pending_txn_offset(group_id, t, p) {
            return (
                p,
                -1,
                -1,
                String::new(),
                ResponseError::UnstableOffsetCommit.code(),
            );
        }
        match stored.get(&(t.to_string(), p)) {
            Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone(), 0),
            None => (p, -1, -1, String::new(), 0),
        }
    };
    Ok(match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(t, parts)| {
                let rows = parts.iter().map(|&p| lookup(&t, p)).collect();
                (t, rows)
            })
            .collect(),
        None => {
            let mut by_topic: std::collections::BTreeMap<String, Vec<_>> = Default::default();
            for ((t, p), v) in stored {
                if !authz.topic(AclOperation::Describe, &t) {
                    continue;
                }
                let row = if require_stable && broker.groups.has_pending_txn_offset(group_id, &t, p)
                {
                    let unstable = ResponseError::UnstableOffsetCommit.code();
                    (p, -1, -1, String::new(), unstable)
                } else {
                    (p, v.offset, v.leader_epoch, v.metadata, 0)
                };
                by_topic.entry(t).or_default().push(row);
            }
            by_topic
                .into_iter()
                .map(|(t, mut rows)| {
                    rows.sort_by_key(|r| r.0);
                    (t, rows)
                })
                .collect()
        }
    })
}

/// Answers OffsetFetch.
pub(crate) fn offset_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let authz = ctx.authz(broker);
    if version >= 8 {
        let image = broker.controller.image();
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                // v10 names topics by id (KIP-848); an id the cluster lacks answers
                // UNKNOWN_TOPIC_ID for its partitions.
                let mut unknown_ids = Vec::new();
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .filter_map(|t| {
                            if version < 10 {
                                return Some((t.name.0.to_string(), t.partition_indexes));
                            }
                            match image.topic_by_id(&t.topic_id) {
                                Some(ti) => Some((ti.name.clone(), t.partition_indexes)),
                                None => {
                                    unknown_ids.push((t.topic_id, t.partition_indexes));
                                    None
                                }
                            }
                        })
                        .collect()
                });
                let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                // v9: a member of a consumer-protocol group reads at its current epoch.
                if let Err(e) = broker.groups.check_offset_fetch(
                    g.group_id.0.as_str(),
                    g.member_id.as_deref(),
                    g.member_epoch,
                ) {
                    return group.with_error_code(e.code());
                }
                match fetch_group(
                    broker,
                    &authz,
                    g.group_id.0.as_str(),
                    topics,
                    req.require_stable,
                ) {
                    Ok(rows) => {
                        let mut listed: Vec<OffsetFetchResponseTopics> = rows
                            .into_iter()
                            .filter_map(|(t, parts)| {
                                let id = image.topic(&t).map(|ti| ti.id);
                                // v10 answers by id: offsets of a topic gone are left out.
                                if version >= 10 && id.is_none() {
                                    return None;
                                }
                                Some(
                                    OffsetFetchResponseTopics::default()
                                        .with_name(TopicName(sb(t)))
                                        .with_topic_id(id.unwrap_or_default())
                                        .with_partitions(fetched_partitions(parts)),
                                )
                            })
                            .collect();
                        listed.extend(unknown_ids.into_iter().map(|(id, parts)| {
                            OffsetFetchResponseTopics::default()
                                .with_topic_id(id)
                                .with_partitions(
                                    parts
                                        .into_iter()
                                        .map(|p| {
                                            OffsetFetchResponsePartitions::default()
                                                .with_partition_index(p)
                                                .with_committed_offset(-1)
                                                .with_error_code(
                                                    ResponseError::UnknownTopicId.code(),
                                                )
                                        })
                                        .collect(),
                                )
                        }));
                        group.with_topics(listed)
                    }
                    Err(e) => group.with_error_code(e.code()),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    match fetch_group(
        broker,
        &authz,
        req.group_id.0.as_str(),
        topics,
        req.require_stable,
    ) {
        Ok(rows) => OffsetFetchResponse::default().with_topics(
            rows.into_iter()
                .map(|(t, parts)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(fetched_partitions(parts))
                })
                .collect(),
        ),
        Err(e) => OffsetFetchResponse::default().with_error_code(e.code()),
    }
}

/// Answers OffsetDelete: removes offsets of topics the group does not subscribe to. Needs
/// DELETE on the group and READ on each topic, as in Kafka.
pub(crate) fn offset_delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    let authz = ctx.authz(broker);
    if !authz.group(AclOperation::Delete, &group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return OffsetDeleteResponse::default().with_error_code(e.code());
    }
    let state = broker
        .groups
        .with_group(&group_id, false, |g| (g.state(), g.subscribed_topics()));
    let Some((state, subscribed)) = state else {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    };
    if state == GroupState::Dead {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupIdNotFound.code());
    }
    let mut tombstones = Vec::new();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let busy = state != GroupState::Empty && subscribed.contains(&name);
            let readable = authz.topic(AclOperation::Read, &name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = if !readable {
                        ResponseError::TopicAuthorizationFailed.code()
                    } else if busy {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        tombstones.push((name.clone(), p.partition_index));
                        0
                    };
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let records: Vec<_> = tombstones
        .iter()
        .map(|(t, p)| (offset_key(&group_id, t, *p), None))
        .collect();
    if let Err(e) = broker.groups.store(&group_id, &records) {
        return OffsetDeleteResponse::default().with_error_code(e.code());
    }
    broker.groups.with_group(&group_id, false, |g| {
        for k in &tombstones {
            g.remove_offset(k);
        }
    });
    OffsetDeleteResponse::default().with_topics(topics)
}

/// A group id as the protocol type.
pub(crate) fn gid(s: &str) -> GroupId {
    GroupId(sb(s))
}
