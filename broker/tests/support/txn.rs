//! Transactions on the wire for tests: InitProducerId, AddPartitionsToTxn, EndTxn and
//! transactional batches.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use tern_protocol::client::KafkaConnection;
use tern_protocol::record_batch::Compression;
use tern_protocol::records::RecordBatchBuilder;

use super::name;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn txn_id(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

pub async fn find_coordinator(c: &mut KafkaConnection, id: &str) -> i16 {
    let r = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s(id)]),
            4,
        )
        .await
        .unwrap();
    r.coordinators[0].error_code
}

pub async fn init(c: &mut KafkaConnection, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let r = c
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await
        .unwrap();
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

pub async fn add_partition(
    c: &mut KafkaConnection,
    id: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
    version: i16,
) -> i16 {
    let r = c
        .send(
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id(id))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![0])]),
            version,
        )
        .await
        .unwrap();
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

pub async fn end(c: &mut KafkaConnection, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    c.send(
        &EndTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
        3,
    )
    .await
    .unwrap()
    .error_code
}

pub fn txn_batch(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(true);
    for v in values {
        b.push(1_000, None, Some(v.as_bytes()), &[]).unwrap();
    }
    b.build().unwrap()
}
