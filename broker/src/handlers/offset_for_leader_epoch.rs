//! OffsetForLeaderEpoch: the end offset of a leader epoch, for truncation after leader changes.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::ResponseError;

use tern_controller::acls::AclOperation;

use super::RequestContext;
use crate::broker::Broker;

/// Answers OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster covers every topic (brokers),
/// otherwise DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let authz = ctx.authz(broker);
    let cluster_action = authz.cluster(AclOperation::ClusterAction);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.to_string();
            let authorized = cluster_action || authz.topic(AclOperation::Describe, &name);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let r = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if !authorized {
                        return r.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let partition = match broker.replicas.partition(&name, p.partition) {
                        Some(part) if part.is_leader() => part,
                        Some(_) => {
                            return r.with_error_code(ResponseError::NotLeaderOrFollower.code())
                        }
                        None => {
                            return r.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        }
                    };
                    if p.current_leader_epoch >= 0
                        && p.current_leader_epoch < partition.leader_epoch()
                    {
                        return r.with_error_code(ResponseError::FencedLeaderEpoch.code());
                    }
                    match partition.log.end_offset_for_epoch(p.leader_epoch) {
                        Some((epoch, end)) => r.with_leader_epoch(epoch).with_end_offset(end),
                        None => r,
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
