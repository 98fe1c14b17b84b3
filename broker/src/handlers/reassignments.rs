//! AlterPartitionReassignments (45) and ListPartitionReassignments (46):
//! `kafka-reassign-partitions.sh`. The active controller adds the new replicas, their leader
//! adds them to the ISR once they caught up, and the controller then removes the old ones.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::api_error_fields::WithApiError;
use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers AlterPartitionReassignments (ALTER on the cluster).
pub(crate) fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !ctx.authz(broker).cluster(AclOperation::Alter) {
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb("Cluster authorization failed.")));
    }
    let image = broker.controller.image();
    let mut changes = Vec::new();
    let mut refused = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = (t.name.0.to_string(), p.partition_index);
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
            // Kafka 4.1's allowReplicationFactorChange=false: the target keeps the current
            // replication factor (ongoing additions do not count).
            let current_rf = image
                .topic(&tp.0)
                .and_then(|topic| topic.partitions.get(&tp.1))
                .map(|p| p.original_replicas().len());
            match (&target, current_rf) {
                (Some(target), Some(rf))
                    if !req.allow_replication_factor_change && target.len() != rf =>
                {
                    refused.push((
                        tp,
                        ResponseError::InvalidReplicationFactor.code(),
                        format!(
                            "The replication factor is changed from {rf} to {} but \
                             allowReplicationFactorChange is false.",
                            target.len()
                        ),
                    ));
                }
                _ => changes.push((tp, target)),
            }
        }
    }
    let mut rows: Vec<((String, i32), i16, Option<String>)> = refused
        .into_iter()
        .map(|(tp, code, m)| (tp, code, Some(m)))
        .collect();
    if !changes.is_empty() {
        match broker.controller.alter_reassignments(changes.clone()) {
            Ok(results) => {
                broker.replicas.apply_image(&broker.controller.image());
                rows.extend(results.into_iter().map(|(tp, r)| match r {
                    Ok(()) => (tp, 0, None),
                    Err(e) => (tp, e.code(), Some(e.message)),
                }));
            }
            Err(e) => return AlterPartitionReassignmentsResponse::default().with_api_error(e),
        }
    }
    let mut responses: Vec<ReassignableTopicResponse> = Vec::new();
    for ((topic, partition), code, message) in rows {
        let r = ReassignablePartitionResponse::default()
            .with_partition_index(partition)
            .with_error_code(code)
            .with_error_message(message.map(sb));
        match responses.iter_mut().find(|x| x.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(r),
            None => responses.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![r]),
            ),
        }
    }
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(req.allow_replication_factor_change)
        .with_responses(responses)
}

/// Answers ListPartitionReassignments (DESCRIBE on the cluster) from this broker's image.
pub(crate) fn list(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authz(broker).cluster(AclOperation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb("Cluster authorization failed.")));
    }
    let image = broker.controller.image();
    let wanted: Option<Vec<(String, i32)>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|p| (t.name.0.to_string(), *p))
            })
            .collect()
    });
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for (name, id) in &image.topic_ids {
        let Some(topic) = image.topics.get(id) else {
            continue;
        };
        let partitions: Vec<OngoingPartitionReassignment> = topic
            .partitions
            .iter()
            .filter(|(i, p)| {
                p.reassigning()
                    && wanted
                        .as_ref()
                        .is_none_or(|w| w.iter().any(|(t, x)| t == name && x == *i))
            })
            .map(|(i, p)| {
                let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect();
                OngoingPartitionReassignment::default()
                    .with_partition_index(*i)
                    .with_replicas(ids(&p.replicas))
                    .with_adding_replicas(ids(&p.adding))
                    .with_removing_replicas(ids(&p.removing))
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(sb(name.clone())))
                    .with_partitions(partitions),
            );
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
