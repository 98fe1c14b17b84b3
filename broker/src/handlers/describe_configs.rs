//! DescribeConfigs: every topic config with its value and where it comes from; broker configs.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;
use tern_controller::topic_configs::TOPIC_CONFIGS;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;

/// ConfigResource type of a topic.
pub const RESOURCE_TOPIC: i8 = 2;
/// ConfigResource type of a broker.
pub const RESOURCE_BROKER: i8 = 4;
/// ConfigResource type of a cluster mirror (the prototype's number).
pub const RESOURCE_CLUSTER_MIRROR: i8 = 64;

/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// One resolved config: value, source, and the chain of synonyms that could have set it.
pub struct ConfigEntry {
    /// Config name.
    pub name: String,
    /// Effective value.
    pub value: String,
    /// Kafka config source code.
    pub source: i8,
    /// Value type code.
    pub config_type: i8,
    /// (name, value, source) from most to least specific.
    pub synonyms: Vec<(String, String, i8)>,
}

/// Resolves every topic config given the topic's explicit settings.
pub fn topic_config_entries(
    broker: &Broker,
    explicit: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = explicit.get(def.name) {
                synonyms.push((def.name.to_string(), v.clone(), SOURCE_TOPIC));
            }
            if let Some(syn) = def.broker_synonym {
                if let Some(v) = broker.config.properties.get(syn) {
                    synonyms.push((syn.to_string(), v.clone(), SOURCE_STATIC_BROKER));
                }
            }
            synonyms.push((
                def.broker_synonym.unwrap_or(def.name).to_string(),
                def.default.to_string(),
                SOURCE_DEFAULT,
            ));
            let (value, source) = (synonyms[0].1.clone(), synonyms[0].2);
            ConfigEntry {
                name: def.name.to_string(),
                value,
                source,
                config_type: def.kind.code(),
                synonyms,
            }
        })
        .collect()
}

fn broker_config_entries(broker: &Broker) -> Vec<ConfigEntry> {
    broker
        .config
        .properties
        .iter()
        .map(|(k, v)| ConfigEntry {
            name: k.clone(),
            value: v.clone(),
            source: SOURCE_STATIC_BROKER,
            config_type: 2,
            synonyms: vec![(k.clone(), v.clone(), SOURCE_STATIC_BROKER)],
        })
        .collect()
}

/// ConfigResource type of a broker's loggers.
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// ConfigResource type of client metrics subscriptions.
const RESOURCE_CLIENT_METRICS: i8 = 16;
/// ConfigResource type of a group.
const RESOURCE_GROUP: i8 = 32;

/// The authorization error for `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource,
/// as Kafka's ConfigHelper and ConfigAdminManager map it, or None when allowed (or the type is
/// one no authorization applies to; such types are refused elsewhere).
pub(crate) fn config_authorization(
    authz: &Authz<'_>,
    op: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    let (allowed, error) = match resource_type {
        RESOURCE_TOPIC => (
            authz.topic(op, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => {
            (authz.cluster(op), ResponseError::ClusterAuthorizationFailed)
        }
        RESOURCE_GROUP => (
            authz.group(op, name),
            ResponseError::GroupAuthorizationFailed,
        ),
        RESOURCE_CLUSTER_MIRROR => (
            authz.allows(op, AclResourceType::ClusterMirror, name),
            tern_protocol::mirror::errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED,
        ),
        _ => (true, ResponseError::InvalidRequest),
    };
    (!allowed).then_some(error)
}

/// Answers DescribeConfigs (DESCRIBE_CONFIGS on each resource).
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let authz = ctx.authz(broker);
    let image = broker.controller.image();
    let results = req
        .resources
        .into_iter()
        .map(|res| {
            let name = res.resource_name.to_string();
            let result = DescribeConfigsResult::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name.clone());
            if let Some(e) = config_authorization(
                &authz,
                AclOperation::DescribeConfigs,
                res.resource_type,
                &name,
            ) {
                return result.with_error_code(e.code());
            }
            let entries = match res.resource_type {
                RESOURCE_TOPIC => {
                    if image.topic(&name).is_none() {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(sb(format!("Topic {name} does not exist"))));
                    }
                    topic_config_entries(broker, &image.topic_configs(&name))
                }
                RESOURCE_BROKER => {
                    if !name.is_empty() && name != broker.config.node_id.to_string() {
                        return result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(sb(format!(
                                "Unexpected broker id, expected {} but received {name}",
                                broker.config.node_id
                            ))));
                    }
                    broker_config_entries(broker)
                }
                RESOURCE_CLUSTER_MIRROR => {
                    return match broker.mirrors.mirror_configs(&name) {
                        None => result
                            .with_error_code(
                                tern_protocol::mirror::errors::UNKNOWN_CLUSTER_MIRROR.code(),
                            )
                            .with_error_message(Some(sb(format!(
                                "Cluster mirror {name} does not exist"
                            )))),
                        // Secrets (sasl.jaas.config, passwords) are never returned.
                        Some(configs) => result.with_configs(
                            configs
                                .into_iter()
                                .map(|(k, v)| {
                                    DescribeConfigsResourceResult::default()
                                        .with_is_sensitive(v.is_none())
                                        .with_name(sb(k))
                                        .with_value(v.map(sb))
                                        .with_config_source(SOURCE_TOPIC)
                                        .with_config_type(2)
                                })
                                .collect(),
                        ),
                    };
                }
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(sb(format!("Unsupported resource type {other}"))))
                }
            };
            // An empty key list asks for every config, like a null one (as Kafka does).
            let keys = res
                .configuration_keys
                .filter(|k| !k.is_empty())
                .map(|k| k.into_iter().map(|s| s.to_string()).collect::<Vec<_>>());
            let configs = entries
                .into_iter()
                .filter(|e| keys.as_ref().is_none_or(|k| k.contains(&e.name)))
                .map(|e| {
                    let mut r = DescribeConfigsResourceResult::default()
                        .with_name(sb(e.name))
                        .with_value(Some(sb(e.value)))
                        .with_config_source(e.source)
                        .with_config_type(e.config_type);
                    if version == 0 {
                        r.config_source = -1;
                    }
                    if req.include_synonyms {
                        r.synonyms = e
                            .synonyms
                            .into_iter()
                            .map(|(n, v, s)| {
                                DescribeConfigsSynonym::default()
                                    .with_name(sb(n))
                                    .with_value(Some(sb(v)))
                                    .with_source(s)
                            })
                            .collect();
                    }
                    r
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
