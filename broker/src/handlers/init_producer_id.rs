//! InitProducerId for idempotent producers. Transactions need the transaction coordinator,
//! which Tern does not have yet.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::RequestContext;
use crate::broker::Broker;

/// Answers InitProducerId. An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
/// WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka since KIP-679.
pub fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default();
    let authz = ctx.authz(broker);
    if req.transactional_id.is_none()
        && !authz.cluster(AclOperation::IdempotentWrite)
        && !authz.any_of_type(AclOperation::Write, AclResourceType::Topic)
    {
        return resp
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    if req.transactional_id.is_some() {
        return resp
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    match broker.next_producer_id() {
        Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => resp
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
