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
use support::{create_topic, incremental_alter, name, produce, start_in, wait_until};
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
    // As a read_committed consumer skips them: from an aborted transaction's first offset to
    // its producer's next marker.
    let mut values = Vec::new();
    let mut aborting = std::collections::HashSet::new();
    let bytes = p.records.clone().unwrap_or_default();
    for item in tern_protocol::record_batch::BatchIter::new(&bytes) {
        let (h, batch) = item.unwrap();
        for &(pid, first) in &aborted {
            if pid == h.producer_id && first == h.base_offset {
                aborting.insert(pid);
            }
        }
        if h.is_control() {
            aborting.remove(&h.producer_id);
            continue;
        }
        if h.is_transactional() && aborting.contains(&h.producer_id) {
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
                .with_generation_id_or_member_epoch(generation)
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
    wait_for_state(&mut c, "app", "CompleteCommit").await;
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
    wait_for_state(&mut c, "app", "CompleteAbort").await;
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

/// Produce v12+ (transaction version 2) of a transactional batch: the error code.
async fn produce_v2(c: &mut KafkaConnection, id: &str, topic: &str, batch: bytes::Bytes) -> i16 {
    produce_as(c, id, topic, batch, 12).await.0
}

/// A transactional Produce of `version` to partition 0: (error code, error message).
async fn produce_as(
    c: &mut KafkaConnection,
    id: &str,
    topic: &str,
    batch: bytes::Bytes,
    version: i16,
) -> (i16, Option<String>) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let r = c
        .send(
            &kafka_protocol::messages::ProduceRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name(topic))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch))])]),
            version,
        )
        .await
        .unwrap();
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// EndTxn v5: (error code, producer id, epoch) the producer goes on with.
async fn end_v5(
    c: &mut KafkaConnection,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> (i16, i64, i16) {
    let r = c
        .send(
            &kafka_protocol::messages::EndTxnRequest::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(commit),
            5,
        )
        .await
        .unwrap();
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

async fn wait_for_state(c: &mut KafkaConnection, id: &str, state: &str) {
    let mut tries = 0;
    while describe(c, id).await.0 != state {
        tries += 1;
        assert!(tries < 100, "{id} never reached {state}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn transaction_version_2_adds_partitions_on_write_and_bumps_the_epoch_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    // The features a Java producer reads to turn transaction version 2 on.
    let versions = c
        .send(&kafka_protocol::messages::ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    let finalized: Vec<(String, i16)> = versions
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    assert!(finalized.contains(&("transaction.version".to_string(), 2)));
    assert!(versions.finalized_features_epoch >= 0);

    create_topic(&mut c, "out", 1, &[]).await;
    create_topic(&mut c, "in", 1, &[]).await;
    init(&mut c, "v2", 60_000).await;
    assert_eq!(find_coordinator(&mut c, "v2").await, 0);
    let (code, pid, epoch) = init(&mut c, "v2", 60_000).await;
    assert_eq!((code, epoch), (0, 0));

    // No AddPartitionsToTxn, no AddOffsetsToTxn: the write and the offset commit add them.
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 0, 0, &["a", "b"])).await,
        0
    );
    assert_eq!(describe(&mut c, "v2").await, ("Ongoing".to_string(), 0, 1));
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 0, 2, &["c"])).await,
        0
    );
    let commit = c
        .send(
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id("v2"))
                .with_group_id(GroupId(s("readers")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(0)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(name("in"))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(11)])]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(commit.topics[0].partitions[0].error_code, 0);
    assert_eq!(describe(&mut c, "v2").await, ("Ongoing".to_string(), 0, 2));
    assert_eq!(read_committed(&mut c, "out").await.1, 0);

    // The commit answers with the next epoch; the markers carry it.
    assert_eq!(end_v5(&mut c, "v2", pid, 0, true).await, (0, pid, 1));
    wait_for_state(&mut c, "v2", "CompleteCommit").await;
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!(
        (hw, lso, values),
        (4, 4, vec!["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(committed_offset(&mut c, "readers", "in").await, 11);
    // A retried commit is answered the same, with the epoch handed out.
    assert_eq!(end_v5(&mut c, "v2", pid, 0, true).await, (0, pid, 1));
    // The old epoch is fenced at the partition and the coordinator.
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 0, 3, &["zombie"])).await,
        ResponseError::InvalidProducerEpoch.code()
    );

    // The next transaction runs at epoch 1 from sequence 0, and is aborted. Its offsets go by
    // topic id (TxnOffsetCommit v6); an id no topic has is UNKNOWN_TOPIC_ID.
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 1, 0, &["x"])).await,
        0
    );
    let in_id = support::topic_id(&mut c, "in").await;
    let unknown_id = uuid::Uuid::from_u128(7);
    let by_id = c
        .send(
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id("v2"))
                .with_group_id(GroupId(s("readers")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(1)
                .with_topics(
                    [in_id, unknown_id]
                        .into_iter()
                        .map(|id| {
                            TxnOffsetCommitRequestTopic::default()
                                .with_topic_id(id)
                                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(20)])
                        })
                        .collect(),
                ),
            6,
        )
        .await
        .unwrap();
    let answers: Vec<(uuid::Uuid, i16)> = by_id
        .topics
        .iter()
        .map(|t| (t.topic_id, t.partitions[0].error_code))
        .collect();
    assert_eq!(
        answers,
        vec![
            (in_id, 0),
            (unknown_id, ResponseError::UnknownTopicId.code())
        ]
    );
    assert_eq!(end_v5(&mut c, "v2", pid, 1, false).await, (0, pid, 2));
    wait_for_state(&mut c, "v2", "CompleteAbort").await;
    let (hw, lso, values) = read_committed(&mut c, "out").await;
    assert_eq!((hw, lso, values.len()), (6, 6, 3));
    assert_eq!(committed_offset(&mut c, "readers", "in").await, 11);
    // An abort with nothing open still ends with a new epoch; a commit is refused.
    assert_eq!(
        end_v5(&mut c, "v2", pid, 2, true).await,
        (ResponseError::InvalidTxnState.code(), -1, -1)
    );
    assert_eq!(end_v5(&mut c, "v2", pid, 2, false).await, (0, pid, 3));
    wait_for_state(&mut c, "v2", "CompleteAbort").await;
    assert_eq!(
        end_v5(&mut c, "v2", pid, 1, true).await.0,
        ResponseError::ProducerFenced.code()
    );

    // A leader verifying (v5) a partition the transaction lacks: TRANSACTION_ABORTABLE.
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 3, 0, &["y"])).await,
        0
    );
    let verify = |version: i16| {
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn_id("v2"))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(3)
                .with_verify_only(true)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name("in"))
                    .with_partitions(vec![0])]),
        ]);
        (request, version)
    };
    for (version, expected) in [
        (4, ResponseError::InvalidTxnState),
        (5, ResponseError::TransactionAbortable),
    ] {
        let (request, version) = verify(version);
        let r = c.send(&request, version).await.unwrap();
        assert_eq!(
            r.results_by_transaction[0].topic_results[0].results_by_partition[0]
                .partition_error_code,
            expected.code()
        );
    }
    assert_eq!(end_v5(&mut c, "v2", pid, 3, true).await, (0, pid, 4));
    wait_for_state(&mut c, "v2", "CompleteCommit").await;
    assert_eq!(read_committed(&mut c, "out").await.2.len(), 4);

    // After a restart the coordinator knows the epoch it handed out.
    drop(c);
    server.shutdown().await.unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    assert_eq!(
        describe(&mut c, "v2").await,
        ("CompleteCommit".to_string(), 4, 0)
    );
    assert_eq!(end_v5(&mut c, "v2", pid, 3, true).await, (0, pid, 4));
    assert_eq!(
        produce_v2(&mut c, "v2", "out", txn_batch(pid, 4, 0, &["z"])).await,
        0
    );
    assert_eq!(end_v5(&mut c, "v2", pid, 4, true).await, (0, pid, 5));
    wait_for_state(&mut c, "v2", "CompleteCommit").await;
    assert_eq!(read_committed(&mut c, "out").await.2.len(), 5);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_older_producer_writes_only_to_partitions_its_transaction_holds() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    create_topic(&mut c, "vt", 1, &[]).await;
    init(&mut c, "v1", 60_000).await;
    assert_eq!(find_coordinator(&mut c, "v1").await, 0);
    let (code, pid, epoch) = init(&mut c, "v1", 60_000).await;
    assert_eq!(code, 0);
    let end_offset = async |c: &mut KafkaConnection| read_committed(c, "vt").await.0;

    // No AddPartitionsToTxn first: the leader asks the coordinator and refuses, with the
    // error each version knows (Kafka's: TRANSACTION_ABORTABLE from v11).
    let not_added = Some("Partition was not added to the transaction".to_string());
    let batch = |seq| txn_batch(pid, epoch, seq, &["x"]);
    assert_eq!(
        produce_as(&mut c, "v1", "vt", batch(0), 11).await,
        (ResponseError::TransactionAbortable.code(), None)
    );
    assert_eq!(
        produce_as(&mut c, "v1", "vt", batch(0), 10).await,
        (ResponseError::InvalidTxnState.code(), not_added.clone())
    );
    assert_eq!(end_offset(&mut c).await, 0, "nothing was appended");

    // Added: the first batch is verified and appended, the next needs no verification.
    assert_eq!(add_partition(&mut c, "v1", pid, epoch, "vt", 0).await, 0);
    assert_eq!(
        produce_as(&mut c, "v1", "vt", batch(0), 11).await,
        (0, None)
    );
    assert_eq!(produce_as(&mut c, "v1", "vt", batch(1), 9).await, (0, None));
    assert_eq!(end(&mut c, "v1", pid, epoch, false).await, 0);
    wait_for_state(&mut c, "v1", "CompleteAbort").await;
    // The transaction is over: a late batch of it would open one nobody ends.
    assert_eq!(
        produce_as(&mut c, "v1", "vt", batch(2), 10).await,
        (ResponseError::InvalidTxnState.code(), not_added)
    );
    let (end_before, lso_before, _) = read_committed(&mut c, "vt").await;
    assert_eq!(lso_before, end_before, "no transaction is open");

    // A stale epoch is the coordinator's answer, as the producer knows it.
    assert_eq!(
        produce_as(&mut c, "v1", "vt", txn_batch(pid, epoch + 1, 0, &["x"]), 11)
            .await
            .0,
        ResponseError::InvalidProducerEpoch.code()
    );

    // Turned off (a dynamic broker config, as in Kafka), the leader appends without asking.
    let off = incremental_alter(
        &mut c,
        4,
        "",
        &[(
            "transaction.partition.verification.enable",
            0,
            Some("false"),
        )],
    )
    .await;
    assert_eq!(off.0, 0);
    wait_until("verification off", async || {
        match produce_as(&mut c, "v1", "vt", batch(2), 11).await {
            (0, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // What verification prevents: the late batch opened a transaction that no marker will
    // end, and read_committed consumers stop before it.
    let (end_after, lso_after, _) = read_committed(&mut c, "vt").await;
    assert_eq!((end_after, lso_after), (end_before + 1, end_before));
}
