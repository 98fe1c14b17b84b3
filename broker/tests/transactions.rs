//! The transaction coordinator over the wire: a whole transaction with offsets, Kafka's errors
//! for bad requests with nothing half-written, and an open transaction surviving a restart to
//! be aborted by the producer's next InitProducerId.

mod support;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, FetchRequest, GroupId, OffsetFetchRequest, ProducerId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::ResponseError;
use support::txn::{add_partition, end, find_coordinator, init, s, txn_batch, txn_id};
use support::{create_topic, name, produce, start_in};
use tern_protocol::client::KafkaConnection;

async fn describe(c: &mut KafkaConnection, id: &str) -> (String, i16, usize) {
    let r = c
        .send(
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]),
            0,
        )
        .await
        .unwrap();
    let t = &r.transaction_states[0];
    assert_eq!(t.error_code, 0);
    (
        t.transaction_state.to_string(),
        t.producer_epoch,
        t.topics.iter().map(|t| t.partitions.len()).sum(),
    )
}

/// (high watermark, last stable offset, values) of a read_committed fetch of partition 0.
async fn read_committed(c: &mut KafkaConnection, topic: &str) -> (i64, i64, Vec<String>) {
    let r = c
        .send(
            &FetchRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_isolation_level(1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]),
            11,
        )
        .await
        .unwrap();
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut values = Vec::new();
    let bytes = p.records.clone().unwrap_or_default();
    for item in tern_protocol::record_batch::BatchIter::new(&bytes) {
        let (h, batch) = item.unwrap();
        if h.is_control() {
            continue;
        }
        if h.is_transactional()
            && aborted
                .iter()
                .any(|&(pid, first)| pid == h.producer_id && first <= h.base_offset)
        {
            continue;
        }
        let (_, records) = tern_protocol::records::decode_records(batch, 1 << 20).unwrap();
        for rec in records {
            values.push(String::from_utf8(rec.value.unwrap().to_vec()).unwrap());
        }
    }
    (p.high_watermark, p.last_stable_offset, values)
}

async fn add_offsets(c: &mut KafkaConnection, id: &str, pid: i64, epoch: i16, group: &str) -> i16 {
    c.send(
        &AddOffsetsToTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(s(group))),
        3,
    )
    .await
    .unwrap()
    .error_code
}

async fn committed_offset(c: &mut KafkaConnection, group: &str, topic: &str) -> i64 {
    let r = c
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![0])])),
            5,
        )
        .await
        .unwrap();
    r.topics[0].partitions[0].committed_offset
}

#[allow(clippy::too_many_arguments)]
async fn txn_offset_commit(
    c: &mut KafkaConnection,
    id: &str,
    pid: i64,
    epoch: i16,
    group: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let r = c
        .send(
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(id))
                .with_group_id(GroupId(s(group)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(generation)
                .with_member_id(s(member))
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)])]),
            3,
        )
        .await
        .unwrap();
    r.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn commit_abort_offsets_and_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    create_topic(&mut c, "out", 1, &[]).await;
    create_topic(&mut c, "other", 1, &[]).await;
    // The first FindCoordinator for a transactional id creates `__transaction_state`.
    assert_eq!(
        init(&mut c, "app", 60_000).await.0,
        ResponseError::CoordinatorNotAvailable.code()
    );
    assert_eq!(find_coordinator(&mut c, "app").await, 0);

    // Bad requests before any state exists.
    assert_eq!(
        init(&mut c, "app", 900_001).await.0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    assert_eq!(
        init(&mut c, "", 1000).await.0,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        end(&mut c, "app", 0, 0, true).await,
        ResponseError::InvalidProducerIdMapping.code()
    );

    let (code, pid, epoch) = init(&mut c, "app", 60_000).await;
    assert_eq!((code, epoch), (0, 0));
    // EndTxn with no transaction open, AddPartitionsToTxn with a stale epoch or another
    // producer id: refused, and the state is as it was.
    assert_eq!(
        end(&mut c, "app", pid, epoch, true).await,
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(
        add_partition(&mut c, "app", pid, epoch + 1, "out", 3).await,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        add_partition(&mut c, "app", pid, epoch + 1, "out", 1).await,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(
        add_partition(&mut c, "app", pid + 1, epoch, "out", 3).await,
        ResponseError::InvalidProducerIdMapping.code()
    );
    assert_eq!(
        add_partition(&mut c, "app", pid, epoch, "missing", 3).await,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(describe(&mut c, "app").await, ("Empty".to_string(), 0, 0));

    // A committed transaction with offsets, then an aborted one.
    assert_eq!(add_partition(&mut c, "app", pid, epoch, "out", 3).await, 0);
    let r = produce(&mut c, "out", 0, txn_batch(pid, epoch, 0, &["a", "b"])).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(add_offsets(&mut c, "app", pid, epoch, "readers").await, 0);
    // A generation or a member the group does not have is refused (Kafka 4's classic groups
    // check the member first: UNKNOWN_MEMBER_ID for both; ILLEGAL_GENERATION for a known
    // member is in the group's unit tests).
    assert_eq!(
        txn_offset_commit(&mut c, "app", pid, epoch, "readers", -1, "", "out", 7).await,
        0
    );
    assert_eq!(
        txn_offset_commit(&mut c, "app", pid, epoch, "readers", 5, "", "out", 9).await,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        txn_offset_commit(&mut c, "app", pid, epoch, "readers", 1, "ghost", "out", 9).await,
        ResponseError::UnknownMemberId.code()
    );
    // A partition leader asking (v4, verify only) learns which partitions are in the open
    // transaction.
    let verify = c
        .send(
            &AddPartitionsToTxnRequest::default().with_transactions(vec![
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(txn_id("app"))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_verify_only(true)
                    .with_topics(vec![
                        AddPartitionsToTxnTopic::default()
                            .with_name(name("out"))
                            .with_partitions(vec![0]),
                        AddPartitionsToTxnTopic::default()
                            .with_name(name("other"))
                            .with_partitions(vec![0]),
                    ]),
            ]),
            4,
        )
        .await
        .unwrap();
    let codes: Vec<(String, i16)> = verify.results_by_transaction[0]
        .topic_results
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect();
    let not_in_txn = ResponseError::InvalidTxnState.code();
    assert_eq!(
        codes,
        vec![("out".to_string(), 0), ("other".to_string(), not_in_txn)]
    );
    // Verifying added nothing.
    assert_eq!(describe(&mut c, "app").await, ("Ongoing".to_string(), 0, 2));
    // Not visible before the commit: neither the records nor the offset.
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso, values.len()), (2, 0, 0));
    assert_eq!(committed_offset(&mut c, "readers", "out").await, -1);
    assert_eq!(end(&mut c, "app", pid, epoch, true).await, 0);
    // A retried commit is answered the same; an abort now is refused.
    let mut tries = 0;
    while describe(&mut c, "app").await.0 != "CompleteCommit" {
        tries += 1;
        assert!(tries < 100, "markers never completed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(end(&mut c, "app", pid, epoch, true).await, 0);
    assert_eq!(
        end(&mut c, "app", pid, epoch, false).await,
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(committed_offset(&mut c, "readers", "out").await, 7);
    // The partition knows the producer, with the coordinator epoch of its last marker (the
    // leader epoch of its `__transaction_state` partition) and no open transaction.
    let producers = c
        .send(
            &DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                .with_name(name("out"))
                .with_partition_indexes(vec![0])]),
            0,
        )
        .await
        .unwrap();
    let part = &producers.topics[0].partitions[0];
    assert_eq!(part.error_code, 0);
    let states: Vec<(i64, i32, i64)> = part
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        })
        .collect();
    assert_eq!(states, vec![(pid, 0, -1)]);
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso), (3, 3));
    assert_eq!(values, vec!["a", "b"]);

    assert_eq!(add_partition(&mut c, "app", pid, epoch, "out", 3).await, 0);
    produce(&mut c, "out", 0, txn_batch(pid, epoch, 2, &["x"])).await;
    assert_eq!(add_offsets(&mut c, "app", pid, epoch, "readers").await, 0);
    assert_eq!(
        txn_offset_commit(&mut c, "app", pid, epoch, "readers", -1, "", "out", 99).await,
        0
    );
    assert_eq!(end(&mut c, "app", pid, epoch, false).await, 0);
    let mut tries = 0;
    while describe(&mut c, "app").await.0 != "CompleteAbort" {
        tries += 1;
        assert!(tries < 100, "markers never completed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso), (5, 5));
    assert_eq!(values, vec!["a", "b"]);
    assert_eq!(committed_offset(&mut c, "readers", "out").await, 7);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_open_transaction_survives_a_restart_and_the_next_init_aborts_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    create_topic(&mut c, "out", 1, &[]).await;
    assert_eq!(find_coordinator(&mut c, "app").await, 0);
    let (_, pid, epoch) = init(&mut c, "app", 60_000).await;
    assert_eq!(add_partition(&mut c, "app", pid, epoch, "out", 3).await, 0);
    produce(&mut c, "out", 0, txn_batch(pid, epoch, 0, &["lost"])).await;
    drop(c);
    server.shutdown().await.unwrap();

    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    assert_eq!(describe(&mut c, "app").await, ("Ongoing".to_string(), 0, 1));
    let (hw, lso, _) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso), (1, 0));
    // The producer starts again: its open transaction is fenced and aborted first.
    let mut outcome = init(&mut c, "app", 60_000).await;
    let mut tries = 0;
    while outcome.0 == ResponseError::ConcurrentTransactions.code() {
        tries += 1;
        assert!(tries < 100, "the fenced transaction never completed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        outcome = init(&mut c, "app", 60_000).await;
    }
    assert_eq!(outcome, (0, pid, 2));
    // The old epoch is fenced.
    assert_eq!(
        add_partition(&mut c, "app", pid, epoch, "out", 3).await,
        ResponseError::ProducerFenced.code()
    );
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso), (2, 2));
    assert!(values.is_empty());
    server.shutdown().await.unwrap();
}
