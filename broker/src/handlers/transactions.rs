//! Transactional producers: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, and
//! WriteTxnMarkers from transaction coordinators. InitProducerId is in `init_producer_id`.

use std::collections::HashSet;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::offsets::CommitPartition;
use super::{Authz, RequestContext};
use crate::broker::Broker;
use crate::errors::READ_ONLY_TOPIC;
use crate::group_coordinator::now_ms;
use crate::group_coordinator::offsets_topic::OFFSETS_TOPIC;
use crate::group_coordinator::Committer;
use crate::internal_topic::replicated;
use crate::replication::delayed_produce::{wait_for_isr, PendingAck};
use crate::txn_coordinator::leader_add;
use crate::txn_coordinator::markers::{append_marker, Marker};
use crate::txn_coordinator::metadata::TXN_VERSION_2;

/// How long markers and transactional offset commits wait for their ISR.
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5_000);

/// Older versions of each API name PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (as Kafka does).
fn fenced_as(e: ResponseError, version: i16, first_with_fenced: i16) -> ResponseError {
    if e == ResponseError::ProducerFenced && version < first_with_fenced {
        ResponseError::InvalidProducerEpoch
    } else {
        e
    }
}

/// TxnOffsetCommit names a stale member epoch STALE_MEMBER_EPOCH from v6 only; before, as
/// ILLEGAL_GENERATION, which older producers know (Kafka's supportsStaleMemberEpochError).
fn stale_epoch_as(e: ResponseError, version: i16) -> ResponseError {
    if e == ResponseError::StaleMemberEpoch && version < 6 {
        ResponseError::IllegalGeneration
    } else {
        e
    }
}

/// The error code of a transaction state change (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn)
/// once the coordinator's answer is replicated: 0, or the refusal (PRODUCER_FENCED as v0-1
/// name it).
async fn txn_change_code(accepted: Result<Option<PendingAck>, ResponseError>, version: i16) -> i16 {
    let outcome = match accepted {
        Ok(ack) => replicated(ack).await,
        Err(e) => Err(e),
    };
    outcome.err().map_or(0, |e| fenced_as(e, version, 2).code())
}

fn may_write_txn(authz: &Authz<'_>, transactional_id: &str) -> bool {
    authz.allows(
        AclOperation::Write,
        AclResourceType::TransactionalId,
        transactional_id,
    )
}

/// Every partition of `topics` with the same error.
fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code(t.name.0.as_str(), p))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Adds one transaction's partitions (or, with `verify_only`, checks they are in it).
async fn add_partitions_of(
    broker: &Broker,
    authz: &Authz<'_>,
    txn: &AddPartitionsToTxnTransaction,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let transactional_id = txn.transactional_id.0.as_str();
    let (producer_id, epoch) = (txn.producer_id.0, txn.producer_epoch);
    let (verify_only, topics) = (txn.verify_only, txn.topics.as_slice());
    // From v4 the sender is a partition leader, allowed by CLUSTER_ACTION alone (as Kafka).
    let from_broker = version >= 4;
    if !from_broker && !may_write_txn(authz, transactional_id) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return topic_results(topics, |_, _| code);
    }
    let denied: HashSet<&str> = topics
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|t| !from_broker && !authz.topic(AclOperation::Write, t))
        .collect();
    let not_attempted = ResponseError::OperationNotAttempted.code();
    if !denied.is_empty() {
        let code = ResponseError::TopicAuthorizationFailed.code();
        return topic_results(topics, |t, _| {
            if denied.contains(t) {
                code
            } else {
                not_attempted
            }
        });
    }
    let image = broker.controller.image();
    let unknown: HashSet<(String, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.name.0.to_string(), p)))
        .filter(|(t, p)| {
            image
                .topic(t)
                .is_none_or(|info| !info.partitions.contains_key(p))
        })
        .collect();
    if !unknown.is_empty() {
        let code = ResponseError::UnknownTopicOrPartition.code();
        return topic_results(topics, |t, p| {
            if unknown.contains(&(t.to_string(), p)) {
                code
            } else {
                not_attempted
            }
        });
    }
    // A mirrored topic takes no writes, so no transaction either: its markers would shift
    // the mirror's offsets.
    let read_only: HashSet<&str> = topics
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|t| broker.is_mirrored_read_only(&image, t))
        .collect();
    if !read_only.is_empty() {
        return topic_results(topics, |t, _| {
            if read_only.contains(t) {
                READ_ONLY_TOPIC
            } else {
                not_attempted
            }
        });
    }
    let partitions: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.name.0.to_string(), p)))
        .collect();
    if verify_only {
        return match broker.txns.verify_partitions(
            transactional_id,
            producer_id,
            epoch,
            &partitions,
        ) {
            Ok(errors) => {
                let mut errors = errors.into_iter();
                topic_results(topics, |_, _| {
                    errors
                        .next()
                        .flatten()
                        .map_or(0, |e| not_in_transaction_as(e, version).code())
                })
            }
            Err(e) => topic_results(topics, |_, _| e.code()),
        };
    }
    // v4+ comes from partition leaders adding for a transaction version 2 producer.
    let txn_version = if version >= 4 { TXN_VERSION_2 } else { 0 };
    let accepted = broker.txns.add_partitions(
        transactional_id,
        (producer_id, epoch),
        &partitions,
        txn_version,
    );
    let code = txn_change_code(accepted, version).await;
    topic_results(topics, |_, _| code)
}

/// A partition missing from the transaction, as a verify-only AddPartitionsToTxn names it:
/// from v5 TRANSACTION_ABORTABLE, as Kafka's coordinator answers (the producer can abort and go
/// on), before it INVALID_TXN_STATE.
fn not_in_transaction_as(e: ResponseError, version: i16) -> ResponseError {
    if e == ResponseError::InvalidTxnState && version >= 5 {
        ResponseError::TransactionAbortable
    } else {
        e
    }
}

/// Answers AddPartitionsToTxn: one transaction from a producer (v0-3), or several from
/// partition leaders (v4+, CLUSTER_ACTION).
pub(crate) async fn add_partitions_to_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let authz = ctx.authz(broker);
    if version < 4 {
        // The one transaction of v0-3, never verify-only, as v4+ names each of its several.
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(req.v3_and_below_transactional_id)
            .with_producer_id(req.v3_and_below_producer_id)
            .with_producer_epoch(req.v3_and_below_producer_epoch)
            .with_topics(req.v3_and_below_topics);
        let results = add_partitions_of(broker, &authz, &txn, version).await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !authz.cluster(AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for txn in &req.transactions {
        let topic_results = add_partitions_of(broker, &authz, txn, version).await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// Answers AddOffsetsToTxn: the group's offsets partition joins the transaction.
pub(crate) async fn add_offsets_to_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let authz = ctx.authz(broker);
    let txn_id = req.transactional_id.0.as_str();
    let group = req.group_id.0.as_str();
    let accepted = if !may_write_txn(&authz, txn_id) {
        Err(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz.group(AclOperation::Read, group) {
        Err(ResponseError::GroupAuthorizationFailed)
    } else if !broker.ensure_offsets_topic() {
        Err(ResponseError::CoordinatorNotAvailable)
    } else {
        let partition = (
            OFFSETS_TOPIC.to_string(),
            broker.groups.partition_for(group),
        );
        broker.txns.add_partitions(
            txn_id,
            (req.producer_id.0, req.producer_epoch),
            &[partition],
            0,
        )
    };
    AddOffsetsToTxnResponse::default().with_error_code(txn_change_code(accepted, version).await)
}

/// Answers EndTxn: the commit or abort is decided (and replicated) before the answer; its
/// markers follow. From v5 (transaction version 2) the transaction ends with a new epoch, or a
/// new producer id, which the answer names.
pub(crate) async fn end_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let authz = ctx.authz(broker);
    let txn_id = req.transactional_id.0.as_str();
    let producer = (req.producer_id.0, req.producer_epoch);
    let ended = if !may_write_txn(&authz, txn_id) {
        Err(ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        broker
            .txns
            .end_txn(txn_id, producer, req.committed, version >= 5)
    };
    let (accepted, continues_with) = match ended {
        Ok((ack, continues_with)) => (Ok(ack), continues_with),
        Err(e) => (Err(e), (-1, -1)),
    };
    let code = txn_change_code(accepted, version).await;
    let (producer_id, epoch) = if code == 0 { continues_with } else { (-1, -1) };
    EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(kafka_protocol::messages::ProducerId(producer_id))
        .with_producer_epoch(epoch)
}

/// Answers TxnOffsetCommit: offsets stored as part of the producer's transaction. From v5
/// (transaction version 2) the producer sent no AddOffsetsToTxn: the group's offsets partition
/// joins its transaction here first. From v6 topics are named by id (as Kafka 4.4 names them).
pub(crate) async fn txn_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let authz = ctx.authz(broker);
    let group_id = req.group_id.0.to_string();
    let txn_id = req.transactional_id.0.as_str();
    let producer = (req.producer_id.0, req.producer_epoch);
    let now = now_ms();
    let image = broker.controller.image();
    // Per-request refusal before any partition is looked at.
    let mut first_error = if !may_write_txn(&authz, txn_id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz.group(AclOperation::Read, &group_id) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    // The topic names (v6 names topics by id; an unknown id is UNKNOWN_TOPIC_ID).
    let names: Vec<Option<String>> = req
        .topics
        .iter()
        .map(|t| {
            if version >= 6 {
                image.topic_by_id(&t.topic_id).map(|i| i.name.clone())
            } else {
                Some(t.name.0.to_string())
            }
        })
        .collect();
    if first_error.is_none() && version >= 5 {
        first_error = if !broker.ensure_offsets_topic() {
            Some(ResponseError::CoordinatorNotAvailable)
        } else {
            let offsets_partition = (
                OFFSETS_TOPIC.to_string(),
                broker.groups.partition_for(&group_id),
            );
            broker
                .txns
                .add_for_leader(txn_id, producer, &[offsets_partition])
                .await
                .err()
                .map(|e| fenced_as(leader_add::for_txn_offset_commit(e), version, 3))
        };
    }
    // Per-partition outcome before the commit: None means it is committed.
    let pre: Vec<Vec<Option<ResponseError>>> = req
        .topics
        .iter()
        .zip(&names)
        .map(|(t, name)| {
            let readable = name
                .as_deref()
                .is_some_and(|n| authz.topic(AclOperation::Read, n));
            t.partitions
                .iter()
                .map(|p| {
                    first_error.or_else(|| match name {
                        None => Some(ResponseError::UnknownTopicId),
                        Some(_) if !readable => Some(ResponseError::TopicAuthorizationFailed),
                        Some(n)
                            if image
                                .topic(n)
                                .is_none_or(|i| !i.partitions.contains_key(&p.partition_index)) =>
                        {
                            Some(ResponseError::UnknownTopicOrPartition)
                        }
                        Some(_) => None,
                    })
                })
                .collect()
        })
        .collect();
    let mut offsets = Vec::new();
    for ((t, name), pre) in req.topics.iter().zip(&names).zip(&pre) {
        let Some(name) = name else { continue };
        let name = TopicName(StrBytes::from_string(name.clone()));
        for (p, _) in t.partitions.iter().zip(pre).filter(|(_, e)| e.is_none()) {
            offsets.push(p.to_commit(&name, now));
        }
    }
    let result = if offsets.is_empty() {
        Ok(Vec::new())
    } else {
        let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
        let committer = Committer {
            member_id: req.member_id.as_str(),
            instance: instance.as_deref(),
            generation: req.generation_id_or_member_epoch,
        };
        let codes = broker
            .groups
            .txn_commit_offsets(&group_id, producer, committer, offsets);
        match codes {
            Ok(codes) => replicated(broker.groups.replication_of(&group_id))
                .await
                .map(|()| codes),
            Err(e) => Err(e),
        }
    };
    let mut codes = match &result {
        Ok(codes) => codes.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let failure = result
        .err()
        .map(|e| stale_epoch_as(fenced_as(e, version, 3), version).code());
    let topics = req
        .topics
        .iter()
        .zip(pre)
        .map(|(t, pre)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(pre)
                        .map(|(p, e)| {
                            let code = match e {
                                Some(e) => e.code(),
                                None => failure.unwrap_or_else(|| codes.next().unwrap_or(0)),
                            };
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Answers WriteTxnMarkers (from a transaction coordinator, or an admin aborting a hanging
/// transaction): appends each marker to the partitions this broker leads, acks=all.
pub(crate) async fn write_txn_markers(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let authz = ctx.authz(broker);
    let allowed = authz.cluster(AclOperation::ClusterAction);
    let mut results = Vec::with_capacity(req.markers.len());
    for marker in &req.markers {
        let mut waits = Vec::new();
        // (topic index, partition index, immediate error or index into waits)
        let mut slots: Vec<(usize, i32, Result<usize, ResponseError>)> = Vec::new();
        for (ti, topic) in marker.topics.iter().enumerate() {
            for &p in &topic.partition_indexes {
                let outcome = if !allowed {
                    Err(ResponseError::ClusterAuthorizationFailed)
                } else {
                    match broker.replicas.partition(topic.name.0.as_str(), p) {
                        None => Err(broker.unhosted_partition_error(topic.name.0.as_str(), p)),
                        Some(part) => append_marker(
                            &part,
                            &Marker {
                                producer_id: marker.producer_id.0,
                                producer_epoch: marker.producer_epoch,
                                coordinator_epoch: marker.coordinator_epoch,
                                commit: marker.transaction_result,
                                txn_version: marker.transaction_version,
                            },
                        )
                        .map(|ack| {
                            waits.push(ack);
                            waits.len() - 1
                        }),
                    }
                };
                slots.push((ti, p, outcome));
            }
        }
        let outcomes = wait_for_isr(&waits, REPLICATION_TIMEOUT).await;
        for (ack, outcome) in waits.iter().zip(&outcomes) {
            if outcome.is_ok() && ack.partition.topic == OFFSETS_TOPIC {
                broker.groups.complete_txn_offsets(
                    ack.partition.index,
                    marker.producer_id.0,
                    marker.transaction_result,
                );
            }
        }
        let topics = marker
            .topics
            .iter()
            .enumerate()
            .map(|(ti, topic)| {
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(
                        slots
                            .iter()
                            .filter(|(t, _, _)| *t == ti)
                            .map(|(_, p, outcome)| {
                                let code = match outcome {
                                    Ok(i) => outcomes[*i].err().map_or(0, |e| e.code()),
                                    Err(e) => e.code(),
                                };
                                WritableTxnMarkerPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}
