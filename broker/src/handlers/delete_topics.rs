//! DeleteTopics: by name (all versions) or topic id (v6+).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::ResponseError;

use tern_controller::acls::AclOperation;

use super::api_error_fields::WithApiError;
use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers DeleteTopics (DELETE on each topic, TOPIC_AUTHORIZATION_FAILED otherwise).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let authz = ctx.authz(broker);
    let targets: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut deleted_any = false;
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let image = broker.controller.image();
            let name = match name {
                Some(n) => n,
                None => match image.topic_by_id(&id) {
                    Some(t) => t.name.clone(),
                    None => {
                        return DeletableTopicResult::default()
                            .with_topic_id(id)
                            .with_error_code(ResponseError::UnknownTopicId.code())
                    }
                },
            };
            let mut result =
                DeletableTopicResult::default().with_name(Some(TopicName(sb(name.clone()))));
            if !authz.topic(AclOperation::Delete, &name) {
                return result.with_error_code(ResponseError::TopicAuthorizationFailed.code());
            }
            match broker.controller.delete_topic(&name) {
                Ok(topic_id) => {
                    deleted_any = true;
                    if version >= 6 {
                        result = result.with_topic_id(topic_id);
                    }
                    result
                }
                Err(e) => result.with_api_error(e),
            }
        })
        .collect();
    if deleted_any {
        broker.replicas.apply_image(&broker.controller.image());
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
