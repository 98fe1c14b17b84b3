//! DeleteRecords: move a partition's log start offset forward.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use tern_controller::acls::AclOperation;

use super::RequestContext;
use crate::broker::Broker;
use crate::errors::storage_error_code;

/// Offset -1 in a DeleteRecords request means "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Answers DeleteRecords (DELETE on each topic, TOPIC_AUTHORIZATION_FAILED otherwise).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let authz = ctx.authz(broker);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let authorized = authz.topic(AclOperation::Delete, &name);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let r = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !authorized {
                        return r.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let partition = match broker.replicas.partition(&name, p.partition_index) {
                        Some(part) if part.is_leader() => part,
                        Some(_) => {
                            return r.with_error_code(ResponseError::NotLeaderOrFollower.code())
                        }
                        None => {
                            return r.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        }
                    };
                    let hw = partition.high_watermark();
                    let offset = if p.offset == HIGH_WATERMARK {
                        hw
                    } else {
                        p.offset
                    };
                    if offset < 0 || offset > hw {
                        return r.with_error_code(ResponseError::OffsetOutOfRange.code());
                    }
                    match partition.log.delete_records_before(offset) {
                        Ok(low) => r.with_low_watermark(low),
                        Err(e) => r.with_error_code(storage_error_code(&e).code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
