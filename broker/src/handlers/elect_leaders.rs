//! ElectLeaders (43): preferred-leader elections (`kafka-leader-election.sh`), run by the
//! active controller.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;
use tern_controller::ElectionType;

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers ElectLeaders (ALTER on the cluster, CLUSTER_AUTHORIZATION_FAILED otherwise).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let partitions: Option<Vec<(String, i32)>> = req.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    let refuse_all = |code: ResponseError, message: &str| {
        let results = group_by_topic(
            partitions
                .iter()
                .flatten()
                .map(|tp| (tp.clone(), code.code(), Some(message.to_string())))
                .collect(),
        );
        ElectLeadersResponse::default()
            .with_error_code(if version >= 1 { code.code() } else { 0 })
            .with_replica_election_results(results)
    };
    if !ctx.authz(broker).cluster(AclOperation::Alter) {
        return refuse_all(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        );
    }
    let election = match (version, req.election_type) {
        (0, _) | (_, 0) => ElectionType::Preferred,
        (_, 1) => ElectionType::Unclean,
        _ => {
            return refuse_all(
                ResponseError::InvalidRequest,
                "Unknown election type (0 is preferred, 1 unclean).",
            )
        }
    };
    match broker
        .controller
        .elect_leaders(partitions.clone(), election)
    {
        Ok(results) => {
            broker.replicas.apply_image(&broker.controller.image());
            let rows = results
                .into_iter()
                .map(|(tp, r)| match r {
                    Ok(()) => (tp, 0, None),
                    Err(e) => (tp, e.code(), Some(e.message)),
                })
                .collect();
            ElectLeadersResponse::default().with_replica_election_results(group_by_topic(rows))
        }
        Err(e) => refuse_all(e.error, &e.message),
    }
}

/// Per-partition rows grouped by topic, in first-seen order.
fn group_by_topic(rows: Vec<((String, i32), i16, Option<String>)>) -> Vec<ReplicaElectionResult> {
    let mut out: Vec<ReplicaElectionResult> = Vec::new();
    for ((topic, partition), code, message) in rows {
        let result = PartitionResult::default()
            .with_partition_id(partition)
            .with_error_code(code)
            .with_error_message(message.map(sb));
        match out.iter_mut().find(|r| r.topic.0.as_str() == topic) {
            Some(r) => r.partition_result.push(result),
            None => out.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(sb(topic)))
                    .with_partition_result(vec![result]),
            ),
        }
    }
    out
}
