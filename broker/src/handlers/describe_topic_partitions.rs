//! DescribeTopicPartitions: topic and partition metadata, paginated by a partition limit and a
//! cursor (Kafka 3.8+ admin clients prefer it to Metadata).

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// The broker-side cap on partitions per response (Kafka's
/// `max.request.partition.size.limit` default).
const MAX_PARTITIONS: i32 = 2000;

/// Answers DescribeTopicPartitions: listing every topic shows those the principal may
/// DESCRIBE; a named one it may not describe answers TOPIC_AUTHORIZATION_FAILED.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let authz = ctx.authz(broker);
    let image = broker.controller.image();
    let mut names: Vec<String> = if req.topics.is_empty() {
        image
            .topic_ids
            .keys()
            .filter(|t| authz.topic(AclOperation::Describe, t))
            .cloned()
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = match &req.cursor {
        Some(c) => (Some(c.topic_name.0.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    let mut budget = if req.response_partition_limit > 0 {
        req.response_partition_limit.min(MAX_PARTITIONS)
    } else {
        MAX_PARTITIONS
    };
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if cursor_topic.as_ref().is_some_and(|c| name < *c) {
            continue;
        }
        let topic_name = TopicName(sb(name.clone()));
        if !authz.topic(AclOperation::Describe, &name) {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(topic_name))
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(topic_name))
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code()),
            );
            continue;
        };
        if budget == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name)
                    .with_partition_index(0),
            );
            break;
        }
        let first = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition
        } else {
            0
        };
        let mut partitions = Vec::new();
        for (&index, p) in topic.partitions.range(first..) {
            if budget == 0 {
                next_cursor = Some(
                    Cursor::default()
                        .with_topic_name(topic_name.clone())
                        .with_partition_index(index),
                );
                break;
            }
            budget -= 1;
            let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(index)
                    .with_leader_id(BrokerId(p.leader))
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(ids(&p.replicas))
                    .with_isr_nodes(ids(&p.isr))
                    .with_offline_replicas(ids(&image.offline_replicas(p)))
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new())),
            );
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name))
                .with_topic_id(topic.id)
                .with_is_internal(name.starts_with("__"))
                .with_topic_authorized_operations(
                    authz.authorized_operations(AclResourceType::Topic, &name),
                )
                .with_partitions(partitions),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}
