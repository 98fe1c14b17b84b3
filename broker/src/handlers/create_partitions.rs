//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::sb;
use crate::broker::Broker;

/// Answers CreatePartitions.
pub fn handle(broker: &Broker, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
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
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(sb(e.message))),
            }
        })
        .collect();
    if changed {
        broker.replicas.apply_image(&broker.controller.image());
    }
    CreatePartitionsResponse::default().with_results(results)
}
