//! A partition leader and the transaction coordinator, as Kafka's AddPartitionsToTxnManager
//! has them talk. Transaction version 2's implicit add (KIP-890 part 2): a producer no longer
//! sends AddPartitionsToTxn; the leader of each partition it writes to (and the group
//! coordinator of its TxnOffsetCommit) adds the partition to the transaction before appending.
//! Verification (KIP-890 part 1, `transaction.partition.verification.enable`): for an older
//! producer, which adds its partitions itself, the leader checks that the transaction holds
//! the partition before its first batch there, so that a late batch cannot open a transaction
//! nobody will end. Both go to the coordinator on this broker, or with AddPartitionsToTxn v5
//! (`VerifyOnly` false or true) to the one elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::metadata::TXN_VERSION_2;
use super::TransactionCoordinator;

/// Pause before retrying CONCURRENT_TRANSACTIONS (Kafka's
/// `add.partitions.to.txn.retry.backoff.ms`): the producer's previous transaction is still
/// writing its markers.
const RETRY_BACKOFF: Duration = Duration::from_millis(20);
/// How long CONCURRENT_TRANSACTIONS is retried before the producer is told
/// (`add.partitions.to.txn.retry.backoff.max.ms`).
const RETRY_MAX: Duration = Duration::from_millis(100);
/// The version a leader sends: v5, whose answers may carry TRANSACTION_ABORTABLE.
const ADD_PARTITIONS_VERSION: i16 = 5;

impl TransactionCoordinator {
    /// Adds `partitions`, which this broker leads, to the transaction version 2 transaction of
    /// `producer` (id, epoch) before records of it are appended there. The errors are the
    /// coordinator's (NETWORK_EXCEPTION when it could not be reached); callers translate them
    /// as Kafka does for their API.
    pub(crate) async fn add_for_leader(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), ResponseError> {
        let deadline = Instant::now() + RETRY_MAX;
        loop {
            match self.add_once(transactional_id, producer, partitions).await {
                Err(ResponseError::ConcurrentTransactions)
                    if Instant::now() + RETRY_BACKOFF <= deadline =>
                {
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                outcome => return outcome,
            }
        }
    }

    async fn add_once(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), ResponseError> {
        let (image, coordinator) = self.coordinator_of(transactional_id)?;
        if coordinator == self.node_id {
            let ack = self.add_partitions(transactional_id, producer, partitions, TXN_VERSION_2)?;
            return crate::internal_topic::replicated(ack).await;
        }
        let request = txn_request(transactional_id, producer, partitions, false);
        let response = self
            .coordinators
            .send(&image, coordinator, &request, ADD_PARTITIONS_VERSION)
            .await?;
        response_error(&response).map_or(Ok(()), Err)
    }

    /// The metadata image and the node coordinating `transactional_id` in it.
    fn coordinator_of(
        &self,
        transactional_id: &str,
    ) -> Result<(Arc<tern_controller::MetadataImage>, i32), ResponseError> {
        let image = self.controller.image();
        let coordinator = self
            .coordinator_in(&image, transactional_id)
            .filter(|&node| node >= 0)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        Ok((image, coordinator))
    }

    /// Whether the transaction of `producer` (id, epoch) holds each of `partitions` (None) or
    /// not (the coordinator's error for it); an error for all of them when the coordinator
    /// cannot answer (NETWORK_EXCEPTION when it could not be reached).
    pub(crate) async fn verify_for_leader(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let (image, coordinator) = self.coordinator_of(transactional_id)?;
        if coordinator == self.node_id {
            return self.verify_partitions(transactional_id, producer.0, producer.1, partitions);
        }
        let request = txn_request(transactional_id, producer, partitions, true);
        let response = self
            .coordinators
            .send(&image, coordinator, &request, ADD_PARTITIONS_VERSION)
            .await?;
        if response.error_code != 0 {
            return Err(code_error(response.error_code));
        }
        let codes: BTreeMap<(&str, i32), i16> = response
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| {
                t.results_by_partition.iter().map(move |p| {
                    (
                        (t.name.0.as_str(), p.partition_index),
                        p.partition_error_code,
                    )
                })
            })
            .collect();
        Ok(partitions
            .iter()
            .map(
                |(topic, index)| match codes.get(&(topic.as_str(), *index)) {
                    Some(0) => None,
                    Some(&code) => Some(code_error(code)),
                    None => Some(ResponseError::UnknownServerError),
                },
            )
            .collect())
    }
}

/// AddPartitionsToTxn v5 for one producer's `partitions`, adding them or (`verify_only`)
/// asking whether its transaction holds them.
fn txn_request(
    transactional_id: &str,
    producer: (i64, i16),
    partitions: &[(String, i32)],
    verify_only: bool,
) -> AddPartitionsToTxnRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, index) in partitions {
        by_topic.entry(topic).or_default().push(*index);
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, indexes)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(indexes)
        })
        .collect();
    AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(verify_only)
            .with_topics(topics),
    ])
}

/// The error of a coordinator's answer: the top-level one, else the first partition's that is
/// not OPERATION_NOT_ATTEMPTED (which only says another partition failed).
fn response_error(response: &AddPartitionsToTxnResponse) -> Option<ResponseError> {
    if response.error_code != 0 {
        return Some(code_error(response.error_code));
    }
    let codes = response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .filter(|&c| c != 0);
    let not_attempted = ResponseError::OperationNotAttempted.code();
    let mut first = None;
    for code in codes {
        if code != not_attempted {
            return Some(code_error(code));
        }
        first.get_or_insert(code);
    }
    first.map(code_error)
}

fn code_error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}

/// A coordinator's refusal as the producer of a Produce v12+ sees it (Kafka's
/// ReplicaManager): unreachable or moving coordinators are NOT_ENOUGH_REPLICAS (retried), a
/// fenced producer INVALID_PRODUCER_EPOCH, and a transaction version 2 producer gets
/// CONCURRENT_TRANSACTIONS itself (it retries).
pub(crate) fn for_produce(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::NetworkException
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::RequestTimedOut => ResponseError::NotEnoughReplicas,
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        ResponseError::ClusterAuthorizationFailed => ResponseError::InvalidTxnState,
        other => other,
    }
}

/// A coordinator's answer to a verification as the producer of a Produce v11 or older sees
/// it, with the message Kafka gives (Kafka's AddPartitionsToTxnManager and ReplicaManager): a
/// partition missing from the transaction is INVALID_TXN_STATE through v10 and
/// TRANSACTION_ABORTABLE from v11; a coordinator that cannot answer now (or a transaction
/// still ending) is NOT_ENOUGH_REPLICAS, which such producers retry.
pub(crate) fn for_verified_produce(
    e: ResponseError,
    version: i16,
) -> (ResponseError, Option<String>) {
    let underlying = match e {
        // Tern's inter-broker client times out where Kafka's sees the connection fail.
        ResponseError::NetworkException | ResponseError::RequestTimedOut => {
            Some("NETWORK_EXCEPTION")
        }
        ResponseError::CoordinatorLoadInProgress => Some("COORDINATOR_LOAD_IN_PROGRESS"),
        ResponseError::CoordinatorNotAvailable => Some("COORDINATOR_NOT_AVAILABLE"),
        ResponseError::NotCoordinator => Some("NOT_COORDINATOR"),
        ResponseError::ConcurrentTransactions => Some("CONCURRENT_TRANSACTIONS"),
        _ => None,
    };
    if let Some(underlying) = underlying {
        return (
            ResponseError::NotEnoughReplicas,
            Some(format!(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: {underlying}"
            )),
        );
    }
    match e {
        ResponseError::InvalidTxnState | ResponseError::TransactionAbortable if version >= 11 => {
            (ResponseError::TransactionAbortable, None)
        }
        ResponseError::InvalidTxnState
        | ResponseError::TransactionAbortable
        | ResponseError::ClusterAuthorizationFailed => (
            ResponseError::InvalidTxnState,
            Some("Partition was not added to the transaction".into()),
        ),
        ResponseError::ProducerFenced => (ResponseError::InvalidProducerEpoch, None),
        other => (other, None),
    }
}

/// A coordinator's refusal as a TxnOffsetCommit v5+ answers it (Kafka's
/// CoordinatorOperationExceptionHelper): retriable coordinator errors the client knows.
pub(crate) fn for_txn_offset_commit(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::NetworkException => ResponseError::CoordinatorLoadInProgress,
        ResponseError::NotEnoughReplicas
        | ResponseError::RequestTimedOut
        | ResponseError::UnknownTopicOrPartition => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
    };

    fn answer(codes: &[i16]) -> AddPartitionsToTxnResponse {
        let results = codes
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(i as i32)
                    .with_partition_error_code(c)
            })
            .collect();
        AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![
            AddPartitionsToTxnResult::default().with_topic_results(vec![
                AddPartitionsToTxnTopicResult::default().with_results_by_partition(results),
            ]),
        ])
    }

    #[test]
    fn the_error_named_is_the_cause_not_operation_not_attempted() {
        let not_attempted = ResponseError::OperationNotAttempted.code();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(response_error(&answer(&[0, 0])), None);
        assert_eq!(
            response_error(&answer(&[not_attempted, unknown])),
            Some(ResponseError::UnknownTopicOrPartition)
        );
        assert_eq!(
            response_error(
                &answer(&[0]).with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            ),
            Some(ResponseError::ClusterAuthorizationFailed)
        );
    }

    #[test]
    fn the_request_groups_partitions_by_topic() {
        let r = txn_request(
            "t",
            (7, 3),
            &[("b".into(), 1), ("a".into(), 0), ("b".into(), 0)],
            false,
        );
        let txn = &r.transactions[0];
        assert_eq!(
            (txn.producer_id.0, txn.producer_epoch, txn.verify_only),
            (7, 3, false)
        );
        let topics: Vec<(String, Vec<i32>)> = txn
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.clone()))
            .collect();
        assert_eq!(
            topics,
            vec![("a".to_string(), vec![0]), ("b".to_string(), vec![1, 0])]
        );
    }
}
