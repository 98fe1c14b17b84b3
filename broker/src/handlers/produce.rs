//! Produce: validate, check the topic is writable, append as leader, answer with the offsets.

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use std::collections::{HashMap, HashSet};

use kafka_protocol::ResponseError;
use tern_protocol::record_batch::RecordBatchHeader;

use tern_controller::acls::{AclOperation, AclResourceType};
use tern_controller::topic_configs::compression_level;

use super::{sb, RequestContext};
use crate::blocking::disk_io;
use crate::broker::Broker;
use crate::errors::{storage_error_code, READ_ONLY_TOPIC};
use crate::produce_validation::{prepare, TopicWritePolicy};
use crate::replication::delayed_produce::{wait_for_isr, PendingAck};
use crate::txn_coordinator::leader_add;
use tern_storage::VerificationGuard;

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

/// What the transaction coordinator said about the partitions where a transactional
/// producer's batch would open its transaction: the ones refused (with the error and message
/// to answer) and the verification guards to append the others with.
#[derive(Default)]
struct TransactionGate {
    refused: HashMap<(String, i32), (ResponseError, Option<String>)>,
    guards: HashMap<(String, i32), VerificationGuard>,
}

/// Before anything is appended, the partitions here where a transactional producer writes for
/// the first time in its transaction go to the coordinator, as Kafka's leaders send them:
/// from Produce v12 (transaction version 2) they join the transaction; before it, with
/// `transaction.partition.verification.enable`, the coordinator must confirm that the
/// producer added them itself (KIP-890 part 1).
async fn transaction_gate(
    broker: &Broker,
    authz: &super::Authz<'_>,
    req: &ProduceRequest,
    version: i16,
) -> TransactionGate {
    let mut gate = TransactionGate::default();
    let Some(txn_id) = req.transactional_id.as_ref().filter(|t| !t.is_empty()) else {
        return gate;
    };
    let image = broker.controller.image();
    if version < 12 && !verification_enabled(broker, &image) {
        return gate;
    }
    let mut producers = HashSet::new();
    let mut open_already = HashMap::new();
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
            let tp = (name.clone(), pd.index);
            let Some(guard) = partition.log.start_transaction_verification(
                header.producer_id,
                header.producer_epoch,
                version >= 12,
            ) else {
                // Open here already: nothing to ask, but the append still checks that it is.
                open_already.insert(tp, VerificationGuard::SENTINEL);
                continue;
            };
            producers.insert((header.producer_id, header.producer_epoch));
            gate.guards.insert(tp, guard);
        }
    }
    let partitions: Vec<(String, i32)> = gate.guards.keys().cloned().collect();
    gate.guards.extend(open_already);
    let producer = match producers.len() {
        0 => return gate,
        1 => producers.into_iter().next().unwrap_or((-1, -1)),
        // One transactional producer per request, as Kafka requires.
        _ => {
            let e = (ResponseError::InvalidProducerIdMapping, None);
            gate.refused
                .extend(partitions.into_iter().map(|tp| (tp, e.clone())));
            return gate;
        }
    };
    if version >= 12 {
        if let Err(e) = broker
            .txns
            .add_for_leader(txn_id, producer, &partitions)
            .await
        {
            tracing::debug!(transactional_id = %txn_id.as_str(), error = ?e, "partitions not added to the transaction");
            let e = (leader_add::for_produce(e), None);
            gate.refused
                .extend(partitions.into_iter().map(|tp| (tp, e.clone())));
        }
        return gate;
    }
    let verified = broker
        .txns
        .verify_for_leader(txn_id, producer, &partitions)
        .await;
    let outcomes: Vec<Option<ResponseError>> = match verified {
        Ok(per_partition) => per_partition,
        Err(e) => vec![Some(e); partitions.len()],
    };
    for (tp, outcome) in partitions.into_iter().zip(outcomes) {
        if let Some(e) = outcome {
            tracing::debug!(transactional_id = %txn_id.as_str(), topic = %tp.0, partition = tp.1, error = ?e, "transaction not verified");
            gate.refused
                .insert(tp, leader_add::for_verified_produce(e, version));
        }
    }
    gate
}

/// `transaction.partition.verification.enable` in force (Kafka's default: true).
fn verification_enabled(broker: &Broker, image: &tern_controller::MetadataImage) -> bool {
    crate::config::dynamic::effective(
        image,
        broker.config.node_id,
        &broker.config.properties,
        VERIFICATION_ENABLE,
    )
    .is_none_or(|(v, _)| !v.trim().eq_ignore_ascii_case("false"))
}

/// The broker setting that turns KIP-890 part 1's verification on or off.
pub(crate) const VERIFICATION_ENABLE: &str = "transaction.partition.verification.enable";

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
    let gate = transaction_gate(broker, &authz, &req, version).await;
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
        let compression_type = effective("compression.type", "compression.type", "producer");
        let policy = TopicWritePolicy::from_configs(
            &compression_type,
            &effective("cleanup.policy", "log.cleanup.policy", "delete"),
        )
        .with_compression_level(compression_level(&compression_type, |config| {
            Some(effective(config, config, "")).filter(|v| !v.is_empty())
        }))
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
            let tp = (name.clone(), pd.index);
            if let Some((e, message)) = gate.refused.get(&tp) {
                partitions.push(error_partition(pd.index, e.code(), message.clone()));
                continue;
            }
            let guard = gate.guards.get(&tp).copied();
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
            // From v3 a partition takes exactly one batch (Kafka's
            // ProduceRequest.validateRecords): the transaction check reads that batch.
            if version >= 3 && tern_protocol::record_batch::BatchIter::new(&records).count() != 1 {
                partitions.push(error_partition(
                    pd.index,
                    ResponseError::InvalidRecord.code(),
                    None,
                ));
                continue;
            }
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
            match disk_io(|| partition.log.append_verified(records, epoch, guard)) {
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
