//! DescribeCluster: cluster id, controller and brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType, CLUSTER_RESOURCE_NAME};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Kafka's EndpointType of a DescribeCluster asking for the controllers.
const ENDPOINT_TYPE_CONTROLLER: i8 = 2;

/// Answers DescribeCluster. As in Kafka, anyone may describe the cluster; DESCRIBE on the
/// cluster only decides whether the asked-for authorized operations are shown (0 otherwise).
/// Fenced brokers are listed (v2) only when asked for; the controllers are described on the
/// controller listener, as Kafka's brokers answer MISMATCHED_ENDPOINT_TYPE.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    if req.endpoint_type == ENDPOINT_TYPE_CONTROLLER {
        return DescribeClusterResponse::default()
            .with_error_code(ResponseError::MismatchedEndpointType.code())
            .with_error_message(Some(sb(
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            )));
    }
    let image = broker.controller.image();
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced || req.include_fenced_brokers)
        .map(|b| {
            let (host, port) = broker.endpoint_of(b, &ctx.listener);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(sb(host))
                .with_port(port as i32)
                .with_rack(b.rack.clone().map(sb))
                .with_is_fenced(b.fenced)
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
