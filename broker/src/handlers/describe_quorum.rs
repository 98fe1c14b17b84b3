//! DescribeQuorum: the metadata quorum's leader, epoch, high watermark, voters and observers,
//! as `kafka-metadata-quorum.sh describe --status / --replication` shows them.

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;
use tern_controller::ReplicaDescription;

use super::{sb, RequestContext};
use crate::broker::Broker;

/// The metadata log's name and partition, as Kafka calls them.
const METADATA_TOPIC: &str = "__cluster_metadata";

fn replica(r: &ReplicaDescription) -> ReplicaState {
    ReplicaState::default()
        .with_replica_id(BrokerId(r.node_id))
        .with_log_end_offset(r.log_end_offset)
        .with_last_fetch_timestamp(r.last_fetch_timestamp)
        .with_last_caught_up_timestamp(r.last_caught_up_timestamp)
}

/// Answers DescribeQuorum (DESCRIBE on the cluster), asking the active controller.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let failed = |code: ResponseError, message: String| {
        DescribeQuorumResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(sb(message)))
    };
    if !ctx.authz(broker).cluster(AclOperation::Describe) {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        );
    }
    let asks_metadata_log = req.topics.iter().any(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.iter().any(|p| p.partition_index == 0)
    });
    if !asks_metadata_log {
        return failed(
            ResponseError::UnknownTopicOrPartition,
            format!("Only {METADATA_TOPIC}-0 has a quorum"),
        );
    }
    let quorum = match broker.controller.describe_quorum() {
        Ok(q) => q,
        Err(e) => return failed(e.error, e.message),
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(quorum.leader_id))
        .with_leader_epoch(quorum.leader_epoch)
        .with_high_watermark(quorum.high_watermark)
        .with_current_voters(quorum.voters.iter().map(replica).collect())
        .with_observers(quorum.observers.iter().map(replica).collect());
    let mut response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(sb(METADATA_TOPIC)))
        .with_partitions(vec![partition])]);
    if version >= 2 {
        // The voters' controller endpoints, as configured.
        response.nodes = broker
            .config
            .quorum_voters
            .iter()
            .filter_map(|(id, addr)| {
                let (host, port) = addr.rsplit_once(':')?;
                let port: u16 = port.parse().ok()?;
                let listener = broker
                    .config
                    .controller_listener
                    .as_ref()
                    .map_or("CONTROLLER".to_string(), |l| l.name.clone());
                Some(Node::default().with_node_id(BrokerId(*id)).with_listeners(
                    vec![Listener::default()
                            .with_name(sb(listener))
                            .with_host(sb(host.trim_start_matches('[').trim_end_matches(']')))
                            .with_port(port)],
                ))
            })
            .collect();
    }
    response
}
