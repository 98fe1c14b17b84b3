//! CreateTopics: validate, create through the controller, report the resulting configs.

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;
use tern_controller::CreateTopic;

use super::describe_configs::topic_config_entries;
use tern_controller::acls::AclOperation;

use super::api_error_fields::WithApiError;
use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers CreateTopics: CREATE on the cluster or on each topic (TOPIC_AUTHORIZATION_FAILED
/// otherwise); the configs of v5+ answers need DESCRIBE_CONFIGS on the topic.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let authz = ctx.authz(broker);
    let may_create_any = authz.cluster(AclOperation::Create);
    let mut seen = std::collections::HashSet::new();
    let mut created_any = false;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            if !seen.insert(name.clone()) {
                return result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(sb("Duplicate topic name in the request.")));
            }
            if !may_create_any && !authz.topic(AclOperation::Create, &name) {
                return result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(sb("Authorization failed.")));
            }
            let mut configs = Vec::with_capacity(t.configs.len());
            for c in &t.configs {
                if c.name.as_str() == tern_controller::topic_configs::MIRROR_NAME_CONFIG {
                    return result
                        .with_error_code(ResponseError::InvalidConfig.code())
                        .with_error_message(Some(sb(
                            "mirror.name is managed by cluster mirroring (tern mirrors --start)",
                        )));
                }
                match &c.value {
                    Some(v) => configs.push((c.name.to_string(), v.to_string())),
                    None => {
                        return result
                            .with_error_code(ResponseError::InvalidConfig.code())
                            .with_error_message(Some(sb(format!(
                                "Null value not supported for topic configs: {}",
                                c.name.as_str()
                            ))))
                    }
                }
            }
            let mut assignments: Vec<(i32, Vec<i32>)> = t
                .assignments
                .iter()
                .map(|a| {
                    (
                        a.partition_index,
                        a.broker_ids.iter().map(|b| b.0).collect(),
                    )
                })
                .collect();
            assignments.sort_by_key(|(p, _)| *p);
            if assignments
                .iter()
                .enumerate()
                .any(|(i, (p, _))| *p != i as i32)
            {
                return result
                    .with_error_code(ResponseError::InvalidReplicaAssignment.code())
                    .with_error_message(Some(sb(
                        "Partitions in the assignment must be consecutive from 0.",
                    )));
            }
            let request = CreateTopic {
                name: name.clone(),
                num_partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                assignments: assignments.into_iter().map(|(_, r)| r).collect(),
                configs,
                topic_id: None,
            };
            match broker.controller.create_topic(&request, req.validate_only) {
                Ok(topic_id) => {
                    created_any |= !req.validate_only;
                    let image = broker.controller.image();
                    let (partitions, rf) = match image.topic(&name) {
                        Some(ti) => (
                            ti.partitions.len() as i32,
                            ti.partitions
                                .values()
                                .next()
                                .map(|p| p.replicas.len() as i16)
                                .unwrap_or(-1),
                        ),
                        None => (
                            if t.num_partitions == -1 {
                                broker.config.num_partitions
                            } else {
                                t.num_partitions
                            },
                            if t.replication_factor == -1 {
                                broker.config.default_replication_factor
                            } else {
                                t.replication_factor
                            },
                        ),
                    };
                    let mut result = result
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf);
                    if version >= 5 && !authz.topic(AclOperation::DescribeConfigs, &name) {
                        result = result
                            .with_topic_config_error_code(
                                ResponseError::TopicAuthorizationFailed.code(),
                            )
                            .with_configs(Some(Vec::new()));
                    } else if version >= 5 {
                        let explicit = request.configs.iter().cloned().collect();
                        let entries = topic_config_entries(broker, &explicit)
                            .into_iter()
                            .map(|e| {
                                CreatableTopicConfigs::default()
                                    .with_name(sb(e.name))
                                    .with_value(e.value.map(sb))
                                    .with_config_source(e.source)
                            })
                            .collect();
                        result = result.with_configs(Some(entries));
                    }
                    if version >= 7 {
                        result = result.with_topic_id(topic_id);
                    }
                    result
                }
                Err(e) => result.with_api_error(e),
            }
        })
        .collect();
    if created_any {
        broker.replicas.apply_image(&broker.controller.image());
    }
    CreateTopicsResponse::default().with_topics(topics)
}
