//! Share groups (KIP-932), their admin side: DescribeShareGroupOffsets,
//! AlterShareGroupOffsets, DeleteShareGroupOffsets and ShareGroupDescribe. The consumers'
//! side is in `share_consumers`.

use std::collections::HashMap;

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    TopicName,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::{AclOperation, AclResourceType};
use tern_controller::MetadataImage;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group_coordinator::consumer_group::Refusal;
use crate::group_coordinator::share_group::ShareGroup;
use crate::group_coordinator::ShareOffsetChange;

fn topic_name(name: &str) -> TopicName {
    TopicName(sb(name.to_string()))
}

fn refusal_message(r: &Refusal) -> Option<kafka_protocol::protocol::StrBytes> {
    (!r.message.is_empty()).then(|| sb(r.message.clone()))
}

/// High watermarks of partitions led by other brokers, by (topic, partition).
type RemoteHighWatermarks = HashMap<(String, i32), i64>;

/// The share-partition lag: records from the start offset to the high watermark (this
/// broker's, or the leader's elsewhere as `remote` has it); -1 where it is not known, and for a
/// start offset that is none or past the high watermark, as Kafka answers.
fn lag(
    broker: &Broker,
    remote: &RemoteHighWatermarks,
    (topic, partition): (&str, i32),
    start: i64,
) -> i64 {
    let hw = match broker.replicas.partition(topic, partition) {
        Some(p) if p.is_leader() => Some(p.high_watermark()),
        _ => remote.get(&(topic.to_string(), partition)).copied(),
    };
    match hw {
        Some(hw) if (0..=hw).contains(&start) => hw - start,
        _ => -1,
    }
}

/// One group's DescribeShareGroupOffsets answer: `topics` None for every partition with a
/// start offset; a partition asked for without one answers start offset -1, as Kafka's.
fn describe_group(
    (broker, image, remote): (&Broker, &MetadataImage, &RemoteHighWatermarks),
    share: &ShareGroup,
    topics: Option<Vec<(String, Vec<i32>)>>,
    may_describe_topic: &dyn Fn(&str) -> bool,
) -> Vec<DescribeShareGroupOffsetsResponseTopic> {
    let wanted: Vec<(String, Vec<i32>)> = match topics {
        Some(t) => t,
        None => {
            let mut by_topic: std::collections::BTreeMap<String, Vec<i32>> = Default::default();
            for (t, p) in share.start_offsets.keys() {
                by_topic.entry(t.clone()).or_default().push(*p);
            }
            by_topic.into_iter().collect()
        }
    };
    wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let id = image.topic(&topic).map(|t| t.id).unwrap_or_default();
            let partitions = partitions
                .into_iter()
                .map(|p| {
                    let answer = DescribeShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(p);
                    if !may_describe_topic(&topic) {
                        return answer
                            .with_start_offset(-1)
                            .with_leader_epoch(-1)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    match share.start_offsets.get(&(topic.clone(), p)) {
                        Some(s) => answer
                            .with_start_offset(s.offset)
                            .with_leader_epoch(s.leader_epoch)
                            .with_lag(lag(broker, remote, (&topic, p), s.offset)),
                        None => answer.with_start_offset(-1).with_leader_epoch(-1),
                    }
                })
                .collect();
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(topic_name(&topic))
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect()
}

/// The partitions with a start offset in the groups of `req` that other brokers lead.
fn led_elsewhere(
    broker: &Broker,
    authz: &super::Authz<'_>,
    req: &DescribeShareGroupOffsetsRequest,
) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for g in &req.groups {
        if !authz.group(AclOperation::Describe, &g.group_id.0) {
            continue;
        }
        let Ok(share) = broker.groups.share_offsets(&g.group_id.0) else {
            continue;
        };
        for (topic, p) in share.start_offsets.keys() {
            let here = broker
                .replicas
                .partition(topic, *p)
                .is_some_and(|part| part.is_leader());
            if !here {
                out.push((topic.clone(), *p));
            }
        }
    }
    out
}

/// Answers DescribeShareGroupOffsets (DESCRIBE on the group, and on each topic). Lags of
/// partitions led elsewhere come from their leaders' high watermarks.
pub(crate) async fn describe_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let authz = ctx.authz(broker);
    let elsewhere = led_elsewhere(broker, &authz, &req);
    let remote = if elsewhere.is_empty() {
        RemoteHighWatermarks::new()
    } else {
        broker.share.high_watermarks(broker, &elsewhere).await
    };
    let image = broker.controller.image();
    let groups = req
        .groups
        .into_iter()
        .map(|g| {
            let id = g.group_id.0.to_string();
            let answer =
                DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id);
            if !authz.group(AclOperation::Describe, &id) {
                return answer.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            let share = match broker.groups.share_offsets(&id) {
                Ok(s) => s,
                // As Kafka's: no share group of that id has no start offsets, no error.
                Err(r) if r.error == ResponseError::GroupIdNotFound => ShareGroup::default(),
                Err(r) => {
                    return answer
                        .with_error_code(r.error.code())
                        .with_error_message(refusal_message(&r))
                }
            };
            let topics = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.topic_name.0.to_string(), t.partitions))
                    .collect()
            });
            let may_describe = |t: &str| authz.topic(AclOperation::Describe, t);
            answer.with_topics(describe_group(
                (broker, &image, &remote),
                &share,
                topics,
                &may_describe,
            ))
        })
        .collect();
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

/// Answers AlterShareGroupOffsets (READ on the group, and on each topic): each partition must
/// exist; the accepted ones are stored together.
pub(crate) fn alter_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let authz = ctx.authz(broker);
    let group_id = req.group_id.0.to_string();
    if !authz.group(AclOperation::Read, &group_id) {
        return AlterShareGroupOffsetsResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let image = broker.controller.image();
    let mut changes: Vec<ShareOffsetChange> = Vec::new();
    let mut answers = Vec::new();
    for t in req.topics {
        let name = t.topic_name.0.to_string();
        let topic = image.topic(&name);
        let readable = authz.topic(AclOperation::Read, &name);
        let partitions = t
            .partitions
            .into_iter()
            .map(|p| {
                let answer = AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index);
                let refuse = |e: ResponseError| answer.clone().with_error_code(e.code());
                if !readable {
                    return refuse(ResponseError::TopicAuthorizationFailed);
                }
                let Some(info) = topic.and_then(|t| t.partitions.get(&p.partition_index)) else {
                    return refuse(ResponseError::UnknownTopicOrPartition);
                };
                // As Kafka: any offset is taken; a negative one leaves the partition without a
                // start offset (-1, shown as none), and one past the end has no lag.
                changes.push((
                    name.clone(),
                    p.partition_index,
                    p.start_offset.max(-1),
                    info.leader_epoch,
                ));
                answer
            })
            .collect();
        answers.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name)
                .with_topic_id(topic.map(|t| t.id).unwrap_or_default())
                .with_partitions(partitions),
        );
    }
    match broker.groups.alter_share_offsets(&group_id, changes) {
        Ok(()) => AlterShareGroupOffsetsResponse::default().with_responses(answers),
        Err(r) => AlterShareGroupOffsetsResponse::default()
            .with_error_code(r.error.code())
            .with_error_message(refusal_message(&r)),
    }
}

/// Answers DeleteShareGroupOffsets (DELETE on the group, READ on each topic).
pub(crate) fn delete_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let authz = ctx.authz(broker);
    let group_id = req.group_id.0.to_string();
    if !authz.group(AclOperation::Delete, &group_id) {
        return DeleteShareGroupOffsetsResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let image = broker.controller.image();
    let names: Vec<String> = req
        .topics
        .iter()
        .map(|t| t.topic_name.0.to_string())
        .collect();
    let readable: Vec<String> = names
        .iter()
        .filter(|n| authz.topic(AclOperation::Read, n))
        .cloned()
        .collect();
    let results = match broker.groups.delete_share_offsets(&group_id, &readable) {
        Ok(r) => r,
        Err(r) => {
            return DeleteShareGroupOffsetsResponse::default()
                .with_error_code(r.error.code())
                .with_error_message(refusal_message(&r))
        }
    };
    let results: std::collections::HashMap<String, Option<ResponseError>> =
        readable.into_iter().zip(results).collect();
    let topics = names
        .into_iter()
        .map(|name| {
            let answer = DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_id(image.topic(&name).map(|t| t.id).unwrap_or_default());
            let error = results
                .get(&name)
                .copied()
                .unwrap_or(Some(ResponseError::TopicAuthorizationFailed));
            let answer = answer.with_topic_name(topic_name(&name));
            match error {
                None => answer,
                Some(e) => answer.with_error_code(e.code()),
            }
        })
        .collect();
    DeleteShareGroupOffsetsResponse::default().with_responses(topics)
}

/// A share group's members as ShareGroupDescribe shows them.
fn described_members(image: &MetadataImage, share: &ShareGroup) -> Vec<Member> {
    share
        .members
        .values()
        .map(|m| {
            let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
            for (t, p) in &m.assigned {
                by_topic.entry(t).or_default().push(*p);
            }
            let topics = by_topic
                .into_iter()
                .map(|(t, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(image.topic(t).map(|i| i.id).unwrap_or_default())
                        .with_topic_name(topic_name(t))
                        .with_partitions(partitions)
                })
                .collect();
            Member::default()
                .with_member_id(sb(m.member_id.clone()))
                .with_rack_id(m.rack_id.clone().map(sb))
                .with_member_epoch(m.member_epoch)
                .with_client_id(sb(m.client_id.clone()))
                .with_client_host(sb(m.client_host.clone()))
                .with_subscribed_topic_names(
                    m.subscribed_topic_names
                        .iter()
                        .map(|t| topic_name(t))
                        .collect(),
                )
                .with_assignment(Assignment::default().with_topic_partitions(topics))
        })
        .collect()
}

/// Answers ShareGroupDescribe (DESCRIBE on each group), with each member's partitions.
pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let authz = ctx.authz(broker);
    let image = broker.controller.image();
    let groups = req
        .group_ids
        .into_iter()
        .map(|g| {
            let id = g.0.to_string();
            let mut described = DescribedGroup::default().with_group_id(g);
            if !authz.group(AclOperation::Describe, &id) {
                return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            if req.include_authorized_operations {
                described.authorized_operations =
                    authz.authorized_operations(AclResourceType::Group, &id);
            }
            match broker.groups.share_offsets(&id) {
                Ok(share) => described
                    .with_group_state(sb(share.state_name()))
                    .with_group_epoch(share.epoch)
                    .with_assignment_epoch(share.assignment_epoch)
                    .with_assignor_name(sb("simple"))
                    .with_members(described_members(&image, &share)),
                Err(r) => described
                    .with_error_code(r.error.code())
                    .with_error_message(refusal_message(&r)),
            }
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}
