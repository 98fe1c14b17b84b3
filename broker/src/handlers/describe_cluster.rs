//! DescribeCluster: cluster id, controller and brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers DescribeCluster.
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    _req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let image = broker.controller.image();
    let brokers = image
        .brokers
        .values()
        .map(|b| {
            let (host, port) = if b.id == broker.config.node_id {
                broker.endpoint_for(&ctx.listener)
            } else {
                (b.host.clone(), b.port)
            };
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(sb(host))
                .with_port(port as i32)
                .with_rack(b.rack.clone().map(sb))
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(sb(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.config.node_id))
        .with_brokers(brokers)
}
