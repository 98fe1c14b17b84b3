//! InitProducerId: a producer id for idempotent producers, and for transactional ones the id
//! and epoch the transaction coordinator keeps for their transactional id.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::RequestContext;
use crate::broker::Broker;
use crate::internal_topic::replicated;

/// Answers InitProducerId. An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
/// WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka since KIP-679; a
/// transactional one WRITE on its transactional id.
pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
    version: i16,
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
    if let Some(txn_id) = req.transactional_id.as_ref() {
        let outcome = if !authz.allows(
            AclOperation::Write,
            AclResourceType::TransactionalId,
            txn_id.as_str(),
        ) {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        } else {
            let expected =
                (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
            match broker.txns.init_producer_id(
                txn_id.as_str(),
                req.transaction_timeout_ms,
                expected,
            ) {
                Ok((ids, ack)) => replicated(ack).await.map(|()| ids),
                Err(e) => Err(e),
            }
        };
        return match outcome {
            Ok((producer_id, epoch)) => resp
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
            Err(e) => {
                // Clients before v4 know a fenced producer as INVALID_PRODUCER_EPOCH.
                let e = if e == ResponseError::ProducerFenced && version < 4 {
                    ResponseError::InvalidProducerEpoch
                } else {
                    e
                };
                resp.with_error_code(e.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            }
        };
    }
    match broker.next_producer_id() {
        Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => resp
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
