//! ListConfigResources (74, KIP-1142): the resources DescribeConfigs can describe, by type.

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::describe_configs::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use super::{sb, RequestContext};
use crate::broker::Broker;

/// The types v1 lists when none is named, as Kafka 4.4 does.
const LISTED_TYPES: &[i8] = &[
    RESOURCE_TOPIC,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
];

/// Answers ListConfigResources (DESCRIBE_CONFIGS on the cluster). Version 0 (Kafka's former
/// ListClientMetricsResources) lists client-metrics subscriptions only, of which Tern has none.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let response = ListConfigResourcesResponse::default();
    if !ctx.authz(broker).cluster(AclOperation::DescribeConfigs) {
        return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let types: Vec<i8> = if version == 0 {
        vec![RESOURCE_CLIENT_METRICS]
    } else if req.resource_types.is_empty() {
        LISTED_TYPES.to_vec()
    } else {
        req.resource_types.clone()
    };
    if types.iter().any(|t| !LISTED_TYPES.contains(t)) {
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let image = broker.controller.image();
    let mut resources = Vec::new();
    let mut push = |name: String, resource_type: i8| {
        resources.push(
            ConfigResource::default()
                .with_resource_name(sb(name))
                .with_resource_type(resource_type),
        )
    };
    for t in types {
        match t {
            RESOURCE_TOPIC => {
                for name in image.topic_ids.keys() {
                    push(name.clone(), t);
                }
            }
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
                for id in image.brokers.keys() {
                    push(id.to_string(), t);
                }
            }
            // The groups that have configs, as Kafka 4.4 lists them (its GroupConfigManager).
            RESOURCE_GROUP => {
                for id in image.groups_with_configs() {
                    push(id, t);
                }
            }
            _ => {} // client metrics subscriptions: Tern has none
        }
    }
    response.with_config_resources(resources)
}
