//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::api_error_fields::WithApiError;
use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers CreatePartitions (ALTER on each topic, TOPIC_AUTHORIZATION_FAILED otherwise).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let authz = ctx.authz(broker);
    let mut changed = false;
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let assignments: Vec<Vec<i32>> = t
                .assignments
                .unwrap_or_default()
                .into_iter()
                .map(|a| a.broker_ids.into_iter().map(|b| b.0).collect())
                .collect();
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if !authz.topic(AclOperation::Alter, t.name.0.as_str()) {
                return result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(sb("Authorization failed.")));
            }
            match broker.controller.create_partitions(
                t.name.0.as_str(),
                t.count,
                &assignments,
                req.validate_only,
            ) {
                Ok(()) => {
                    changed |= !req.validate_only;
                    result
                }
                Err(e) => result.with_api_error(e),
            }
        })
        .collect();
    if changed {
        broker.replicas.apply_image(&broker.controller.image());
    }
    CreatePartitionsResponse::default().with_results(results)
}
