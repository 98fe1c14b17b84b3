//! DescribeCluster: cluster id, controller and brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use tern_controller::acls::{AclOperation, AclResourceType, CLUSTER_RESOURCE_NAME};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers DescribeCluster. As in Kafka, anyone may describe the cluster; DESCRIBE on the
/// cluster only decides whether the asked-for authorized operations are shown (0 otherwise).
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let image = broker.controller.image();
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| {
            let (host, port) = broker.endpoint_of(b, &ctx.listener);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(sb(host))
                .with_port(port as i32)
                .with_rack(b.rack.clone().map(sb))
        })
        .collect();
    let mut response = DescribeClusterResponse::default()
        .with_cluster_id(sb(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_brokers(brokers);
    if req.include_cluster_authorized_operations {
        let authz = ctx.authz(broker);
        response.cluster_authorized_operations = if authz.cluster(AclOperation::Describe) {
            authz.authorized_operations(AclResourceType::Cluster, CLUSTER_RESOURCE_NAME)
        } else {
            0
        };
    }
    response
}
