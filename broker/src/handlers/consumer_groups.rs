//! The consumer group protocol of KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe.
//! Topics travel by id on the wire and by name inside the coordinator.

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedTopic,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as HeartbeatAssignment, TopicPartitions as HeartbeatTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::{AclOperation, AclResourceType};
use tern_controller::MetadataImage;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group_coordinator::assignor::Assignment;
use crate::group_coordinator::consumer_group::{ConsumerGroup, Heartbeat};

/// Answers ConsumerGroupHeartbeat (READ on the group).
pub(crate) fn heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    let error = |e: ResponseError, message: String| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message((!message.is_empty()).then(|| sb(message)))
    };
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return error(ResponseError::GroupAuthorizationFailed, String::new());
    }
    let image = broker.controller.image();
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut owned = Assignment::new();
        for tp in tps {
            // A topic deleted since is owned no more.
            if let Some(t) = image.topic_by_id(&tp.topic_id) {
                owned
                    .entry(t.name.clone())
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        owned
    });
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ns| ns.iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
    };
    let settings = crate::config::group_configs::consumer_settings(
        &broker.groups.config.consumer,
        &image.group_configs(&group_id),
    );
    match broker
        .groups
        .consumer_heartbeat(&group_id, hb, version, &*image, &settings)
    {
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(settings.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|a| {
                HeartbeatAssignment::default().with_topic_partitions(
                    by_id(&image, &a)
                        .into_iter()
                        .map(|(id, _, ps)| {
                            HeartbeatTopic::default()
                                .with_topic_id(id)
                                .with_partitions(ps)
                        })
                        .collect(),
                )
            })),
        Err(r) => error(r.error, r.message),
    }
}

/// An assignment by topic id (topics deleted meanwhile left out).
fn by_id(image: &MetadataImage, a: &Assignment) -> Vec<(uuid::Uuid, String, Vec<i32>)> {
    a.iter()
        .filter_map(|(t, ps)| {
            let id = image.topic(t)?.id;
            Some((id, t.clone(), ps.iter().copied().collect()))
        })
        .collect()
}

fn described_assignment(image: &MetadataImage, a: &Assignment) -> DescribedAssignment {
    DescribedAssignment::default().with_topic_partitions(
        by_id(image, a)
            .into_iter()
            .map(|(id, name, ps)| {
                DescribedTopic::default()
                    .with_topic_id(id)
                    .with_topic_name(TopicName(sb(name)))
                    .with_partitions(ps)
            })
            .collect(),
    )
}

/// `typed`: from v1 each member's type, 0 classic or 1 consumer (v0 has none: -1).
fn describe_one(
    image: &MetadataImage,
    group: DescribedGroup,
    c: &ConsumerGroup,
    typed: bool,
) -> DescribedGroup {
    let empty = Assignment::new();
    let members = c
        .members
        .values()
        .map(|m| {
            Member::default()
                .with_member_id(sb(m.member_id.clone()))
                .with_instance_id(m.instance_id.clone().map(sb))
                .with_rack_id(m.rack_id.clone().map(sb))
                .with_member_epoch(m.member_epoch)
                .with_client_id(sb(m.client_id.clone()))
                .with_client_host(sb(m.client_host.clone()))
                .with_subscribed_topic_names(
                    m.subscribed_topic_names
                        .iter()
                        .map(|t| TopicName(sb(t.clone())))
                        .collect(),
                )
                .with_subscribed_topic_regex(m.subscribed_topic_regex.clone().map(sb))
                .with_assignment(described_assignment(image, &m.assigned))
                .with_target_assignment(described_assignment(
                    image,
                    c.target.get(&m.member_id).unwrap_or(&empty),
                ))
                .with_member_type(match (typed, m.classic.is_some()) {
                    (false, _) => -1,
                    (true, true) => 0,
                    (true, false) => 1,
                })
        })
        .collect();
    group
        .with_group_state(sb(c.state().name()))
        .with_group_epoch(c.group_epoch)
        .with_assignment_epoch(c.assignment_epoch)
        .with_assignor_name(sb(c.assignor.clone()))
        .with_members(members)
}

/// Answers ConsumerGroupDescribe (DESCRIBE on each group); a classic group, or none, answers
/// GROUP_ID_NOT_FOUND as Kafka's does (admin clients then ask DescribeGroups).
pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let authz = ctx.authz(broker);
    let image = broker.controller.image();
    let typed = version >= 1;
    let groups = req
        .group_ids
        .into_iter()
        .map(|g| {
            let id = g.0.to_string();
            let described = DescribedGroup::default().with_group_id(g);
            let error = |e: ResponseError, message: Option<String>| {
                described
                    .clone()
                    .with_error_code(e.code())
                    .with_error_message(message.map(sb))
            };
            if !authz.group(AclOperation::Describe, &id) {
                return error(ResponseError::GroupAuthorizationFailed, None);
            }
            if let Err(e) = broker.groups.check_coordinator(&id) {
                return error(e, None);
            }
            let mut described = described.clone();
            if req.include_authorized_operations {
                described.authorized_operations =
                    authz.authorized_operations(AclResourceType::Group, &id);
            }
            let found = broker.groups.with_group(&id, false, |group| {
                group
                    .consumer()
                    .map(|c| describe_one(&image, described.clone(), c, typed))
            });
            match found {
                Some(Some(d)) => d,
                Some(None) => error(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {id} is not a consumer group.")),
                ),
                None => error(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {id} not found.")),
                ),
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
