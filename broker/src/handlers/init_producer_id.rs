//! InitProducerId for idempotent producers. Transactions need the transaction coordinator,
//! which Tern does not have yet.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use crate::broker::Broker;

/// Answers InitProducerId.
pub fn handle(broker: &Broker, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default();
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
