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

use super::sb;
use crate::broker::Broker;
use crate::group_coordinator::group::GroupState;
use crate::group_coordinator::now_ms;
use crate::group_coordinator::offsets_topic::{offset_key, OffsetValue};

/// Answers OffsetCommit.
pub fn offset_commit(broker: &Broker, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let now = now_ms();
    let mut offsets = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            offsets.push((
                t.name.0.to_string(),
                p.partition_index,
                OffsetValue {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p
                        .committed_metadata
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                    commit_timestamp: now,
                },
            ));
        }
    }
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let result = broker.groups.commit_offsets(
        &group_id,
        req.member_id.as_str(),
        instance.as_deref(),
        req.generation_id_or_member_epoch,
        offsets,
    );
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
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(codes.next().unwrap_or(0))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// (topic, [(partition, offset, epoch, metadata)]) for the requested or all partitions.
type FetchedTopic = (String, Vec<(i32, i64, i32, String)>);

fn fetch_group(
    broker: &Broker,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Vec<FetchedTopic>, ResponseError> {
    broker.groups.check_coordinator(group_id)?;
    let stored = broker
        .groups
        .with_group(group_id, false, |g| g.offsets.clone())
        .unwrap_or_default();
    let lookup = |t: &str, p: i32| match stored.get(&(t.to_string(), p)) {
        Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone()),
        None => (p, -1, -1, String::new()),
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
            let mut by_topic: std::collections::BTreeMap<String, Vec<(i32, i64, i32, String)>> =
                Default::default();
            for ((t, p), v) in stored {
                by_topic
                    .entry(t)
                    .or_default()
                    .push((p, v.offset, v.leader_epoch, v.metadata));
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
pub fn offset_fetch(broker: &Broker, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes))
                        .collect()
                });
                let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                match fetch_group(broker, g.group_id.0.as_str(), topics) {
                    Ok(rows) => group.with_topics(
                        rows.into_iter()
                            .map(|(t, parts)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(sb(t)))
                                    .with_partitions(
                                        parts
                                            .into_iter()
                                            .map(|(p, o, e, m)| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(o)
                                                    .with_committed_leader_epoch(e)
                                                    .with_metadata(Some(sb(m)))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
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
    match fetch_group(broker, req.group_id.0.as_str(), topics) {
        Ok(rows) => OffsetFetchResponse::default().with_topics(
            rows.into_iter()
                .map(|(t, parts)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|(p, o, e, m)| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(e)
                                        .with_metadata(Some(sb(m)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(e) => OffsetFetchResponse::default().with_error_code(e.code()),
    }
}

/// Answers OffsetDelete: removes offsets of topics the group does not subscribe to.
pub fn offset_delete(broker: &Broker, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return OffsetDeleteResponse::default().with_error_code(e.code());
    }
    let state = broker
        .groups
        .with_group(&group_id, false, |g| (g.state, g.subscribed_topics()));
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
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = if busy {
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
            g.offsets.remove(k);
        }
    });
    OffsetDeleteResponse::default().with_topics(topics)
}

/// A group id as the protocol type.
pub(crate) fn gid(s: &str) -> GroupId {
    GroupId(sb(s))
}
