//! ListOffsets: earliest, latest, by timestamp, max timestamp.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use tern_controller::acls::AclOperation;

use super::RequestContext;
use crate::broker::Broker;
use crate::errors::storage_error_code;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// KIP-1023 (v11): the earliest offset not yet uploaded to remote storage.
const EARLIEST_PENDING_UPLOAD: i64 = -6;
const READ_COMMITTED: i8 = 1;

/// Answers ListOffsets (DESCRIBE on each topic, TOPIC_AUTHORIZATION_FAILED otherwise).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let authz = ctx.authz(broker);
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let authorized = authz.topic(AclOperation::Describe, &name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let resp = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    if !authorized {
                        return resp
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let partition = match broker.replicas.partition(&name, p.partition_index) {
                        Some(part) if part.is_leader() => part,
                        Some(_) => {
                            return resp.with_error_code(ResponseError::NotLeaderOrFollower.code())
                        }
                        None => {
                            return resp.with_error_code(
                                broker
                                    .unhosted_partition_error(&name, p.partition_index)
                                    .code(),
                            )
                        }
                    };
                    if p.current_leader_epoch >= 0
                        && p.current_leader_epoch < partition.leader_epoch()
                    {
                        return resp.with_error_code(ResponseError::FencedLeaderEpoch.code());
                    }
                    let log = &partition.log;
                    let epoch = log.latest_epoch().unwrap_or(-1);
                    let at = |offset: i64| -> (i64, i64, i32) {
                        (-1, offset, log.epoch_for_offset(offset).unwrap_or(epoch))
                    };
                    let result = match p.timestamp {
                        // A follower (resetting its log) is told the log end, as in Kafka.
                        LATEST if req.replica_id.0 >= 0 => Ok(Some(at(log.log_end_offset()))),
                        LATEST => Ok(Some(at(if req.isolation_level == READ_COMMITTED {
                            partition.last_stable_offset()
                        } else {
                            partition.high_watermark()
                        }))),
                        EARLIEST | EARLIEST_LOCAL => Ok(Some(at(log.log_start_offset()))),
                        // No tiered storage: nothing is tiered or pending upload.
                        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok(Some((-1, -1, -1))),
                        MAX_TIMESTAMP => log.max_timestamp_and_offset().map(|o| {
                            o.map(|t| (t.timestamp, t.offset, t.leader_epoch.unwrap_or(epoch)))
                        }),
                        ts => log.fetch_offset_by_timestamp(ts).map(|o| {
                            o.filter(|t| t.offset < partition.high_watermark())
                                .map(|t| (t.timestamp, t.offset, t.leader_epoch.unwrap_or(epoch)))
                        }),
                    };
                    match result {
                        // The leader epoch field exists from v4 on; encoding it earlier fails.
                        Ok(Some((timestamp, offset, leader_epoch))) => resp
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(if version >= 4 { leader_epoch } else { -1 }),
                        Ok(None) => resp.with_timestamp(-1).with_offset(-1),
                        Err(e) => resp.with_error_code(storage_error_code(&e).code()),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
