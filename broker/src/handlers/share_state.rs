//! ReadShareGroupStateSummary and WriteShareGroupState from the other brokers (CLUSTER_ACTION):
//! the start offsets of share-partitions led elsewhere, which this broker's group coordinator
//! keeps with the group (`broker/src/share/remote_state.rs` is the leader's side). Tern keeps a
//! start offset and its epochs, not Kafka's state batches: a partition with none stored answers
//! start offset -1.

use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult as ReadResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult as WriteResult, WriteStateResult,
};
use kafka_protocol::messages::{
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::RequestContext;
use crate::broker::Broker;

/// Why a whole request is refused: not allowed, or the group is not coordinated here.
fn refusal(broker: &Broker, ctx: &RequestContext, group: &str) -> Option<ResponseError> {
    if !ctx.authz(broker).cluster(AclOperation::ClusterAction) {
        return Some(ResponseError::ClusterAuthorizationFailed);
    }
    broker.groups.check_coordinator(group).err()
}

/// Answers ReadShareGroupStateSummary: each share-partition's stored start offset, with its
/// state and leader epochs.
pub(crate) fn read_summary(
    broker: &Broker,
    ctx: &RequestContext,
    req: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let group = req.group_id.to_string();
    let refused = refusal(broker, ctx, &group);
    let image = broker.controller.image();
    let results = req
        .topics
        .iter()
        .map(|t| {
            let name = image.topic_by_id(&t.topic_id).map(|i| i.name.clone());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = ReadResult::default()
                        .with_partition(p.partition)
                        .with_state_epoch(-1)
                        .with_leader_epoch(-1)
                        .with_start_offset(-1);
                    let error = refused.or(name
                        .is_none()
                        .then_some(ResponseError::UnknownTopicOrPartition));
                    if let Some(e) = error {
                        return answer.with_error_code(e.code());
                    }
                    let topic = name.as_deref().unwrap_or_default();
                    match broker.groups.share_start(&group, topic, p.partition) {
                        Some(s) => answer
                            .with_state_epoch(s.state_epoch)
                            .with_leader_epoch(s.leader_epoch)
                            .with_start_offset(s.offset),
                        None => answer,
                    }
                })
                .collect();
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    ReadShareGroupStateSummaryResponse::default().with_results(results)
}

/// Answers WriteShareGroupState: stores each share-partition's start offset, unless the state
/// epoch it was started from is no longer the stored one (FENCED_STATE_EPOCH: an admin reset or
/// deleted the offsets meanwhile, and the leader must start again) or a newer leader has
/// written (FENCED_LEADER_EPOCH).
pub(crate) fn write(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let group = req.group_id.to_string();
    let refused = refusal(broker, ctx, &group);
    let image = broker.controller.image();
    let results = req
        .topics
        .iter()
        .map(|t| {
            let name = image.topic_by_id(&t.topic_id).map(|i| i.name.clone());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error = refused
                        .or(name
                            .is_none()
                            .then_some(ResponseError::UnknownTopicOrPartition))
                        .or_else(|| {
                            let topic = name.as_deref().unwrap_or_default();
                            store(broker, &group, topic, p).err()
                        });
                    WriteResult::default()
                        .with_partition(p.partition)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect();
            WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    WriteShareGroupStateResponse::default().with_results(results)
}

fn store(
    broker: &Broker,
    group: &str,
    topic: &str,
    p: &kafka_protocol::messages::write_share_group_state_request::PartitionData,
) -> Result<(), ResponseError> {
    let stored = broker.groups.share_start(group, topic, p.partition);
    if stored.is_some_and(|s| s.state_epoch != p.state_epoch) {
        return Err(ResponseError::FencedStateEpoch);
    }
    // A leader that has since lost the partition reports no more.
    if stored.is_some_and(|s| s.leader_epoch > p.leader_epoch) {
        return Err(ResponseError::FencedLeaderEpoch);
    }
    if p.start_offset < 0 {
        // Nothing to write ("-1 if the start offset is not being written").
        return Ok(());
    }
    broker
        .groups
        .record_share_progress(group, topic, p.partition, p.start_offset, p.leader_epoch)
        .map(|_| ())
        .ok_or(ResponseError::CoordinatorNotAvailable)
}
