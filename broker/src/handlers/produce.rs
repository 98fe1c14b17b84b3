//! Produce: validate, check the topic is writable, append as leader, answer with the offsets.

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use std::collections::{HashMap, HashSet};

use kafka_protocol::ResponseError;
use tern_protocol::record_batch::RecordBatchHeader;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, RequestContext};
use crate::blocking::disk_io;
use crate::broker::Broker;
use crate::errors::{storage_error_code, READ_ONLY_TOPIC};
use crate::produce_validation::{prepare, TopicWritePolicy};
use crate::replication::delayed_produce::{wait_for_isr, PendingAck};
use crate::txn_coordinator::leader_add;

/// Bound on one batch's records when they must be decompressed (recompression, compaction).
const MAX_UNCOMPRESSED_BATCH: usize = 64 * 1024 * 1024;

fn error_partition(index: i32, code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_error_message(message.map(sb))
}

/// The broker's clock in milliseconds, against which record timestamps are checked.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Every partition of the request refused with `code` (Kafka's error response).
fn refuse_all(req: ProduceRequest, code: ResponseError) -> ProduceResponse {
    let responses = req
        .topic_data
        .iter()
        .map(|t| refuse_topic(t, code))
        .collect();
    ProduceResponse::default().with_responses(responses)
}

/// The topic's responses with every partition refused with `code` (the topic named as asked:
/// by name before v13, by id from v13).
fn refuse_topic(
    topic: &kafka_protocol::messages::produce_request::TopicProduceData,
    code: ResponseError,
) -> TopicProduceResponse {
    let partitions = topic
        .partition_data
        .iter()
        .map(|p| error_partition(p.index, code.code(), None))
        .collect();
    TopicProduceResponse::default()
        .with_name(topic.name.clone())
        .with_topic_id(topic.topic_id)
        .with_partition_responses(partitions)
}

/// Transaction version 2 (Produce v12+): the partitions here that a transactional producer
/// writes to for the first time in its transaction join it at the coordinator before anything
/// is appended, as Kafka's leaders add them. Returns the partitions refused, with the error
/// to answer.
async fn join_transaction(
    broker: &Broker,
    authz: &super::Authz<'_>,
    req: &ProduceRequest,
    version: i16,
) -> HashMap<(String, i32), ResponseError> {
    let mut refused = HashMap::new();
    let Some(txn_id) = req.transactional_id.as_ref().filter(|t| !t.is_empty()) else {
        return refused;
    };
    if version < 12 {
        return refused;
    }
    let image = broker.controller.image();
    let mut joining: Vec<(String, i32)> = Vec::new();
    let mut producers = HashSet::new();
    for topic in &req.topic_data {
        let name = if version >= 13 {
            match image.topic_by_id(&topic.topic_id) {
                Some(t) => t.name.clone(),
                None => continue,
            }
        } else {
            topic.name.0.to_string()
        };
        if !authz.topic(AclOperation::Write, &name) || broker.is_mirrored_read_only(&image, &name) {
            continue;
        }
        for pd in &topic.partition_data {
            let Some(header) = pd
                .records
                .as_ref()
                .and_then(|r| RecordBatchHeader::parse(r).ok())
                .filter(|h| h.is_transactional() && h.has_producer_id())
            else {
                continue;
            };
            let Some(partition) = broker
                .replicas
                .partition(&name, pd.index)
                .filter(|p| p.is_leader())
            else {
                continue;
            };
            if partition
                .log
                .in_transaction(header.producer_id, header.producer_epoch)
            {
                continue;
            }
            producers.insert((header.producer_id, header.producer_epoch));
            joining.push((name.clone(), pd.index));
        }
    }
    let outcome = match producers.len() {
        0 => return refused,
        // One transactional producer per request, as Kafka requires.
        1 => {
            let producer = producers.into_iter().next().unwrap_or((-1, -1));
            broker.txns.add_for_leader(txn_id, producer, &joining).await
        }
        _ => Err(ResponseError::InvalidProducerIdMapping),
    };
    if let Err(e) = outcome {
        tracing::debug!(transactional_id = %txn_id.as_str(), error = ?e, "partitions not added to the transaction");
        let e = leader_add::for_produce(e);
        refused.extend(joining.into_iter().map(|tp| (tp, e)));
    }
    refused
}

/// Answers Produce: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions
/// otherwise), and WRITE on the transactional id of a transactional producer.
pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    let authz = ctx.authz(broker);
    if let Some(txn) = req.transactional_id.as_ref().filter(|t| !t.is_empty()) {
        if !authz.allows(AclOperation::Write, AclResourceType::TransactionalId, txn) {
            return refuse_all(req, ResponseError::TransactionalIdAuthorizationFailed);
        }
    }
    let not_joined = join_transaction(broker, &authz, &req, version).await;
    let image = broker.controller.image();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    // acks=all partitions waiting for their ISR, and their (topic, partition) response slots.
    let mut waits: Vec<PendingAck> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    for topic in req.topic_data {
        // From v13 (KIP-516) a topic is named by its id.
        let name = if version >= 13 {
            match image.topic_by_id(&topic.topic_id) {
                Some(t) => t.name.clone(),
                None => {
                    responses.push(refuse_topic(&topic, ResponseError::UnknownTopicId));
                    continue;
                }
            }
        } else {
            topic.name.0.to_string()
        };
        if !authz.topic(AclOperation::Write, &name) {
            responses.push(refuse_topic(
                &topic,
                ResponseError::TopicAuthorizationFailed,
            ));
            continue;
        }
        let configs = image.topic_configs(&name);
        let read_only = broker.is_mirrored_read_only(&image, &name);
        let effective = |key: &str, broker_key: &str, default: &str| -> String {
            configs
                .get(key)
                .cloned()
                .or_else(|| {
                    crate::config::dynamic::effective(
                        &image,
                        broker.config.node_id,
                        &broker.config.properties,
                        broker_key,
                    )
                    .map(|(v, _)| v)
                })
                .unwrap_or_else(|| default.to_string())
        };
        let min_insync: usize = effective("min.insync.replicas", "min.insync.replicas", "1")
            .parse()
            .unwrap_or(1);
        let millis = |key: &str, broker_key: &str, default: i64| -> i64 {
            effective(key, broker_key, "").parse().unwrap_or(default)
        };
        let policy = TopicWritePolicy::from_configs(
            &effective("compression.type", "compression.type", "producer"),
            &effective("cleanup.policy", "log.cleanup.policy", "delete"),
        )
        .with_timestamps(
            &effective(
                "message.timestamp.type",
                "log.message.timestamp.type",
                "CreateTime",
            ),
            millis(
                "message.timestamp.before.max.ms",
                "log.message.timestamp.before.max.ms",
                i64::MAX,
            ),
            millis(
                "message.timestamp.after.max.ms",
                "log.message.timestamp.after.max.ms",
                3_600_000,
            ),
        );
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for pd in topic.partition_data {
            let partition = match broker.replicas.partition(&name, pd.index) {
                Some(p) if p.is_leader() => p,
                Some(_) => {
                    partitions.push(error_partition(
                        pd.index,
                        ResponseError::NotLeaderOrFollower.code(),
                        None,
                    ));
                    continue;
                }
                None => {
                    partitions.push(error_partition(
                        pd.index,
                        broker.unhosted_partition_error(&name, pd.index).code(),
                        None,
                    ));
                    continue;
                }
            };
            if read_only {
                partitions.push(error_partition(
                    pd.index,
                    READ_ONLY_TOPIC,
                    Some(format!(
                        "Topic {name} is read-only: it is mirrored from another cluster"
                    )),
                ));
                continue;
            }
            if let Some(e) = not_joined.get(&(name.clone(), pd.index)) {
                partitions.push(error_partition(pd.index, e.code(), None));
                continue;
            }
            // acks=all promises min.insync.replicas copies: with fewer in sync, refuse before
            // appending, as Kafka does.
            let isr_size = partition.assignment().isr.len();
            if req.acks == -1 && isr_size < min_insync {
                partitions.push(error_partition(
                    pd.index,
                    ResponseError::NotEnoughReplicas.code(),
                    Some(format!(
                        "The size of the current ISR {isr_size} is insufficient to satisfy the \
                         min.isr requirement of {min_insync} for partition {name}-{}",
                        pd.index
                    )),
                ));
                continue;
            }
            let Some(records) = pd.records else {
                partitions.push(error_partition(
                    pd.index,
                    ResponseError::InvalidRecord.code(),
                    Some("produce request without records".into()),
                ));
                continue;
            };
            let partition_name = format!("{name}-{}", pd.index);
            let records = match prepare(
                &records,
                policy,
                MAX_UNCOMPRESSED_BATCH,
                &partition_name,
                now_ms(),
            ) {
                Ok(r) => r,
                Err(refused) => {
                    let record_errors = refused
                        .record_errors
                        .into_iter()
                        .map(|(index, message)| {
                            BatchIndexAndErrorMessage::default()
                                .with_batch_index(index)
                                .with_batch_index_error_message(Some(sb(message)))
                        })
                        .collect();
                    partitions.push(
                        error_partition(
                            pd.index,
                            refused.error.code(),
                            Some(refused.error.message),
                        )
                        .with_record_errors(record_errors),
                    );
                    continue;
                }
            };
            let epoch = partition.leader_epoch();
            let bytes = records.len() as u64;
            match disk_io(|| partition.log.append_as_leader(records, epoch)) {
                Ok(info) => {
                    partition.on_local_append();
                    let appended = (info.last_offset - info.first_offset + 1).max(0) as u64;
                    broker.metrics.produced(&name, appended, bytes);
                    if req.acks == -1 {
                        slots.push((responses.len(), partitions.len()));
                        waits.push(PendingAck {
                            partition: partition.clone(),
                            required_offset: info.last_offset + 1,
                            min_insync,
                        });
                    }
                    partitions.push(
                        PartitionProduceResponse::default()
                            .with_index(pd.index)
                            .with_base_offset(info.first_offset)
                            .with_log_append_time_ms(info.log_append_time)
                            .with_log_start_offset(info.log_start_offset),
                    );
                }
                Err(e) => {
                    tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce rejected");
                    partitions.push(error_partition(
                        pd.index,
                        storage_error_code(&e).code(),
                        Some(e.to_string()),
                    ));
                }
            }
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if !waits.is_empty() {
        let timeout = std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
        for ((t, p), outcome) in slots.into_iter().zip(wait_for_isr(&waits, timeout).await) {
            if let Err(code) = outcome {
                responses[t].partition_responses[p].error_code = code.code();
            }
        }
    }
    ProduceResponse::default().with_responses(responses)
}
