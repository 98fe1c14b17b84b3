//! Share consumers (KIP-932) on the wire: ShareGroupHeartbeat assigns partitions, ShareFetch
//! hands each record to one member at a time with its delivery count, acknowledgements settle
//! or release records, closing a share session gives its records back, the start offset moves
//! past settled records and survives a restart, and bad input gets Kafka's error codes.

mod support;

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition as ShareFetchPartition, FetchTopic as ShareFetchTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DescribeConfigsRequest, DescribeShareGroupOffsetsRequest,
    FetchRequest, FindCoordinatorRequest, GroupId, ListConfigResourcesRequest,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::KafkaConnection;

const GROUP: &str = "queue";
const TOPIC: &str = "jobs";

/// ConfigResource type of a group.
const GROUP_RESOURCE: i8 = 32;

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;

fn code(e: ResponseError) -> i16 {
    e.code()
}

async fn heartbeat(
    c: &mut KafkaConnection,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatResponse {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(str_bytes(GROUP)))
        .with_member_id(str_bytes(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topics.map(|ts| ts.iter().map(|t| name(t)).collect()));
    c.send(&req, 1).await.unwrap()
}

/// A ShareFetch of partition 0 with `acks` (first, last, type) piggybacked.
async fn share_fetch(
    c: &mut KafkaConnection,
    id: uuid::Uuid,
    member: &str,
    epoch: i32,
    acks: &[(i64, i64, i8)],
) -> ShareFetchResponse {
    let batches = acks
        .iter()
        .map(|&(first, last, t)| {
            AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(str_bytes(GROUP))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(200)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![ShareFetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![ShareFetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])]);
    c.send(&req, 1).await.unwrap()
}

async fn acknowledge(
    c: &mut KafkaConnection,
    id: uuid::Uuid,
    member: &str,
    epoch: i32,
    batches: Vec<(i64, i64, Vec<i8>)>,
) -> ShareAcknowledgeResponse {
    let batches = batches
        .into_iter()
        .map(|(first, last, types)| {
            AckBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(types)
        })
        .collect();
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(str_bytes(GROUP))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])]);
    c.send(&req, 1).await.unwrap()
}

/// (first, last, delivery count) of each acquired range of partition 0.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.partition_index == 0)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

fn ack_error(r: &ShareFetchResponse) -> i16 {
    r.responses[0].partitions[0].acknowledge_error_code
}

fn records(r: &ShareFetchResponse) -> bytes::Bytes {
    r.responses[0].partitions[0].records.clone().unwrap()
}

async fn start_offset(c: &mut KafkaConnection) -> i64 {
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(str_bytes(GROUP)))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(name(TOPIC))
                .with_partitions(vec![0])])),
    ]);
    let r = c.send(&req, 1).await.unwrap();
    r.groups[0].topics[0].partitions[0].start_offset
}

async fn alter_start(c: &mut KafkaConnection, offset: i64) -> i16 {
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(str_bytes(GROUP)))
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(name(TOPIC))
            .with_partitions(vec![
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(0)
                    .with_start_offset(offset),
            ])]);
    c.send(&req, 0).await.unwrap().error_code
}

/// A topic with ten records, and the group's start offset at 0; the topic's id.
async fn ten_records_from_the_start(
    c: &mut KafkaConnection,
    addr: std::net::SocketAddr,
) -> uuid::Uuid {
    create_topic(c, TOPIC, 1, &[]).await;
    assert_eq!(
        produce(c, TOPIC, 0, batch(10)).await.responses[0].partition_responses[0].error_code,
        0
    );
    let _ = c
        .send(
            &FindCoordinatorRequest::default().with_key(str_bytes(GROUP)),
            3,
        )
        .await;
    let mut conn = KafkaConnection::connect(addr, "t").await.unwrap();
    wait_until("the group's coordinator", async || {
        match alter_start(&mut conn, 0).await {
            0 => Ok(()),
            e => Err(format!("alter: {e}")),
        }
    })
    .await;
    topic_id(c, TOPIC).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_go_to_one_member_at_a_time_until_settled() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    let id = ten_records_from_the_start(&mut c, server.addr()).await;

    // Membership: m1 joins and gets the partition.
    let r = heartbeat(&mut c, "m1", 0, Some(&[TOPIC])).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let epoch = r.member_epoch;
    assert!(epoch >= 1);
    let a = r.assignment.expect("an assignment on joining");
    assert_eq!(a.topic_partitions[0].topic_id, id);
    assert_eq!(a.topic_partitions[0].partitions, vec![0]);
    // Start offsets cannot be altered while the group has members.
    assert_eq!(
        alter_start(&mut c, 0).await,
        code(ResponseError::NonEmptyGroup)
    );

    // m1 acquires all ten records, the bytes a Fetch reads.
    let r = share_fetch(&mut c, id, "m1", 0, &[]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    let fetched = c
        .send(
            &FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]),
            13,
        )
        .await
        .unwrap();
    assert_eq!(
        records(&r),
        fetched.responses[0].partitions[0].records.clone().unwrap()
    );

    // m2 gets nothing of them while m1 holds them.
    let r = share_fetch(&mut c, id, "m2", 0, &[]).await;
    assert!(acquired(&r).is_empty(), "{r:?}");

    // m1 accepts 0-4; m2 cannot settle what m1 holds.
    let r = acknowledge(&mut c, id, "m1", 1, vec![(0, 4, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(start_offset(&mut c).await, 5);
    let r = acknowledge(&mut c, id, "m2", 1, vec![(5, 9, vec![ACCEPT])]).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::InvalidRecordState)
    );

    // m1 releases 5-9 with its next fetch, and gets them again, delivered a second time.
    let r = share_fetch(&mut c, id, "m1", 2, &[(5, 9, RELEASE)]).await;
    assert_eq!(ack_error(&r), 0, "{r:?}");
    assert_eq!(acquired(&r), vec![(5, 9, 2)]);

    // m1 closes its session without settling them: m2 gets them, a third time.
    let r = acknowledge(&mut c, id, "m1", -1, vec![]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = share_fetch(&mut c, id, "m2", 2, &[]).await;
    assert_eq!(acquired(&r), vec![(5, 9, 3)]);

    // m2 accepts them as it closes: everything is settled.
    let r = share_fetch(&mut c, id, "m2", -1, &[(5, 9, ACCEPT)]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(ack_error(&r), 0);
    assert!(acquired(&r).is_empty(), "a closing fetch acquires nothing");
    assert_eq!(start_offset(&mut c).await, 10);

    // m1 leaves; the group is empty and its offsets can be altered again.
    let r = heartbeat(&mut c, "m1", epoch, None).await;
    assert_eq!(r.error_code, 0);
    let r = heartbeat(&mut c, "m1", -1, None).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    assert_eq!(alter_start(&mut c, 3).await, 0);
    // The share-partition starts again from the altered offset.
    let r = share_fetch(&mut c, id, "m3", 0, &[]).await;
    assert_eq!(acquired(&r), vec![(3, 9, 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_share_requests_get_kafkas_errors() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    let id = ten_records_from_the_start(&mut c, server.addr()).await;

    // Heartbeats: no member id, a join without topics, an epoch below -1.
    let r = heartbeat(&mut c, "", 0, Some(&[TOPIC])).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    let r = heartbeat(&mut c, "m1", 0, None).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    let r = heartbeat(&mut c, "m1", -2, Some(&[TOPIC])).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    // An unknown member, and a stale epoch.
    let r = heartbeat(&mut c, "nobody", 3, None).await;
    assert_eq!(r.error_code, code(ResponseError::UnknownMemberId));
    let joined = heartbeat(&mut c, "m1", 0, Some(&[TOPIC])).await;
    let r = heartbeat(&mut c, "m1", joined.member_epoch + 5, None).await;
    assert_eq!(r.error_code, code(ResponseError::FencedMemberEpoch));

    // Sessions: none yet, acknowledgements on an opening fetch, a wrong epoch.
    let r = share_fetch(&mut c, id, "m1", 4, &[]).await;
    assert_eq!(r.error_code, code(ResponseError::ShareSessionNotFound));
    let r = share_fetch(&mut c, id, "m1", 0, &[(0, 0, ACCEPT)]).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    let r = share_fetch(&mut c, id, "m1", 0, &[]).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    let r = share_fetch(&mut c, id, "m1", 5, &[]).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidShareSessionEpoch));
    let r = acknowledge(&mut c, id, "m1", 0, vec![]).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidShareSessionEpoch));

    // Acknowledgement batches Kafka refuses: an unknown type, types not fitting the range,
    // overlapping batches. Nothing is settled by them.
    let bad: [Vec<(i64, i64, Vec<i8>)>; 3] = [
        vec![(0, 1, vec![9])],
        vec![(0, 2, vec![ACCEPT, ACCEPT])],
        vec![(0, 4, vec![ACCEPT]), (3, 5, vec![ACCEPT])],
    ];
    let mut epoch = 1;
    for batches in bad {
        let r = acknowledge(&mut c, id, "m1", epoch, batches.clone()).await;
        epoch += 1;
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            code(ResponseError::InvalidRequest),
            "{batches:?}"
        );
    }
    assert_eq!(start_offset(&mut c).await, 0);
    // Acknowledging past what was acquired settles nothing either.
    let r = acknowledge(&mut c, id, "m1", epoch, vec![(0, 12, vec![ACCEPT])]).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::InvalidRecordState)
    );
    assert_eq!(start_offset(&mut c).await, 0);

    // A topic id nobody knows.
    let r = share_fetch(&mut c, uuid::Uuid::from_u128(7), "m9", 0, &[]).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::UnknownTopicId)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_offset_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let addr = server.local_addrs[0];
    let mut c = KafkaConnection::connect(addr, "t").await.unwrap();
    let id = ten_records_from_the_start(&mut c, addr).await;
    let r = share_fetch(&mut c, id, "m1", 0, &[]).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    let r = acknowledge(&mut c, id, "m1", 1, vec![(0, 6, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    drop(c);
    server.shutdown().await.unwrap();

    let listener = format!("PLAINTEXT://127.0.0.1:{}", addr.port());
    let server = start_in(dir.path(), &[("listeners", &listener)]).await;
    let mut c = KafkaConnection::connect(addr, "t").await.unwrap();
    produce(&mut c, TOPIC, 0, batch(5)).await;
    // Records 7-9 were in flight: delivered again, from the stored start offset on.
    let r = wait_until("the group's coordinator", async || {
        let r = share_fetch(&mut c, id, "m2", 0, &[]).await;
        match acquired(&r) {
            a if a.is_empty() => Err(format!("{r:?}")),
            a => Ok(a),
        }
    })
    .await;
    assert_eq!(r, vec![(7, 14, 1)]);
    assert_eq!(start_offset(&mut c).await, 7);
    server.shutdown().await.unwrap();
}

/// DescribeConfigs of GROUP `GROUP`: name -> (value, source, synonym names).
async fn group_configs(
    c: &mut KafkaConnection,
) -> BTreeMap<String, (Option<String>, i8, Vec<String>)> {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(GROUP_RESOURCE)
            .with_resource_name(str_bytes(GROUP))]);
    let r = c.send(&req, 4).await.unwrap();
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    r.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                (
                    e.value.as_ref().map(|v| v.to_string()),
                    e.config_source,
                    e.synonyms.iter().map(|s| s.name.to_string()).collect(),
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_set_where_share_partitions_start_and_what_they_deliver() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    create_topic(&mut c, TOPIC, 1, &[]).await;
    assert_eq!(
        produce(&mut c, TOPIC, 0, batch(10)).await.responses[0].partition_responses[0].error_code,
        0
    );

    // Bad group configs get Kafka's errors and change nothing.
    let invalid_config = code(ResponseError::InvalidConfig);
    assert_eq!(
        set_group_configs(&mut c, GROUP, &[("nope", "1")]).await,
        invalid_config
    );
    assert_eq!(
        set_group_configs(&mut c, GROUP, &[("share.delivery.count.limit", "1")]).await,
        invalid_config
    );
    assert_eq!(
        set_group_configs(&mut c, GROUP, &[("share.auto.offset.reset", "none")]).await,
        invalid_config
    );
    assert_eq!(
        set_group_configs(&mut c, "", &[("share.auto.offset.reset", "earliest")]).await,
        code(ResponseError::InvalidRequest)
    );
    let before = group_configs(&mut c).await;
    assert_eq!(
        before["share.auto.offset.reset"],
        (
            Some("latest".into()),
            5,
            vec!["share.auto.offset.reset".into()]
        )
    );
    assert_eq!(
        before["share.delivery.count.limit"],
        (
            Some("5".into()),
            5,
            vec!["group.share.delivery.count.limit".into()]
        )
    );

    // The group starts at the log start, with 15 s locks, and reads committed records only.
    assert_eq!(
        set_group_configs(
            &mut c,
            GROUP,
            &[
                ("share.auto.offset.reset", "earliest"),
                ("share.record.lock.duration.ms", "15000"),
                ("share.isolation.level", "read_committed"),
            ]
        )
        .await,
        0
    );
    let after = group_configs(&mut c).await;
    assert_eq!(
        after["share.auto.offset.reset"],
        (
            Some("earliest".into()),
            8,
            vec![
                "share.auto.offset.reset".into(),
                "share.auto.offset.reset".into()
            ]
        )
    );
    assert_eq!(
        after["share.record.lock.duration.ms"].0.as_deref(),
        Some("15000")
    );
    let listed = c
        .send(
            &ListConfigResourcesRequest::default().with_resource_types(vec![GROUP_RESOURCE]),
            1,
        )
        .await
        .unwrap();
    let names: Vec<String> = listed
        .config_resources
        .iter()
        .map(|r| r.resource_name.to_string())
        .collect();
    assert_eq!(names, vec![GROUP.to_string()]);

    // An aborted transaction (offsets 10-12 and its marker 13) and a committed one (14-15,
    // marker 16) after the ten plain records.
    use support::txn::{add_partition, end, find_coordinator, init, txn_batch};
    wait_until(
        "the transaction coordinator",
        async || match find_coordinator(&mut c, "tx").await {
            0 => Ok(()),
            e => Err(format!("find coordinator: {e}")),
        },
    )
    .await;
    let (e, pid, epoch) = init(&mut c, "tx", 60_000).await;
    assert_eq!(e, 0);
    assert_eq!(add_partition(&mut c, "tx", pid, epoch, TOPIC, 3).await, 0);
    let r = produce(
        &mut c,
        TOPIC,
        0,
        txn_batch(pid, epoch, 0, &["a1", "a2", "a3"]),
    )
    .await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(end(&mut c, "tx", pid, epoch, false).await, 0);
    // The abort's markers are written after EndTxn answers: until then the coordinator answers
    // CONCURRENT_TRANSACTIONS, and a producer retries (as Kafka's does).
    let added = wait_until("the abort's markers", async || {
        match add_partition(&mut c, "tx", pid, epoch, TOPIC, 3).await {
            51 => Err("CONCURRENT_TRANSACTIONS".to_string()),
            code => Ok(code),
        }
    })
    .await;
    assert_eq!(added, 0);
    let r = produce(&mut c, TOPIC, 0, txn_batch(pid, epoch, 3, &["c1", "c2"])).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(end(&mut c, "tx", pid, epoch, true).await, 0);

    let id = topic_id(&mut c, TOPIC).await;
    wait_until("the share group's coordinator", async || {
        match heartbeat(&mut c, "m1", 0, Some(&[TOPIC])).await.error_code {
            0 => Ok(()),
            e => Err(format!("heartbeat: {e}")),
        }
    })
    .await;
    let mut got = Vec::new();
    let mut epoch = 0;
    wait_until("every committed record", async || {
        let r = share_fetch(&mut c, id, "m1", epoch, &[]).await;
        if r.error_code != 0 {
            return Err(format!("share fetch: {r:?}"));
        }
        assert_eq!(r.acquisition_lock_timeout_ms, 15_000);
        epoch += 1;
        got.extend(acquired(&r));
        let offsets: usize = got.iter().map(|(f, l, _)| (l - f + 1) as usize).sum();
        if offsets >= 12 {
            Ok(())
        } else {
            Err(format!("acquired {got:?}"))
        }
    })
    .await;
    // Earliest: from offset 0. The aborted records and both markers are never delivered.
    assert_eq!(got, vec![(0, 9, 1), (14, 15, 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_session_ends_with_the_connection_that_opened_it() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    let id = ten_records_from_the_start(&mut c, server.addr()).await;
    assert_eq!(
        heartbeat(&mut c, "m1", 0, Some(&[TOPIC])).await.error_code,
        0
    );

    // m1 opens its session on a connection of its own and acquires everything.
    let mut first = server.connect().await;
    let r = share_fetch(&mut first, id, "m1", 0, &[]).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    // Acknowledging on another connection keeps the session.
    let r = acknowledge(&mut c, id, "m1", 1, vec![(0, 0, vec![ACCEPT])]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    drop(first);

    // The session is gone with its connection (a wrong epoch no longer finds it)...
    wait_until("the session closed", async || {
        let r = acknowledge(&mut c, id, "m1", 99, vec![]).await;
        match r.error_code {
            e if e == code(ResponseError::ShareSessionNotFound) => Ok(()),
            e => Err(format!("acknowledge: {e}")),
        }
    })
    .await;
    // ...and the unsettled records are back, delivered a second time.
    let mut got = Vec::new();
    wait_until("the records given back", async || {
        got = acquired(&share_fetch(&mut c, id, "m1", 0, &[]).await);
        if got.is_empty() {
            Err("nothing acquired".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    assert_eq!(got, vec![(1, 9, 2)]);
}

const RENEW: i8 = 4;

/// A ShareFetch v2 of partition 0: `(mode, max_records)`, `renew` (IsRenewAck, which allows
/// only acknowledgements: no wait, no bytes, no records) and `acks` piggybacked.
async fn share_fetch_v2(
    c: &mut KafkaConnection,
    (id, member, epoch): (uuid::Uuid, &str, i32),
    (mode, max_records): (i8, i32),
    renew: bool,
    acks: &[(i64, i64, i8)],
) -> ShareFetchResponse {
    let batches = acks
        .iter()
        .map(|&(first, last, t)| {
            AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let fetching = i32::from(!renew);
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(str_bytes(GROUP))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(200 * fetching)
        .with_min_bytes(fetching)
        .with_max_bytes((1 << 20) * fetching)
        .with_max_records(max_records)
        .with_batch_size(max_records)
        .with_share_acquire_mode(mode)
        .with_is_renew_ack(renew)
        .with_topics(vec![ShareFetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![ShareFetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])]);
    c.send(&req, 2).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_2_limits_records_exactly_and_renews_locks() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    let id = ten_records_from_the_start(&mut c, server.addr()).await;
    assert_eq!(
        heartbeat(&mut c, "m1", 0, Some(&[TOPIC])).await.error_code,
        0
    );

    // Record-limit mode stops inside the one batch of ten; batch-optimized mode takes it to
    // its end.
    let r = share_fetch_v2(&mut c, (id, "m1", 0), (1, 3), false, &[]).await;
    assert_eq!((r.error_code, acquired(&r)), (0, vec![(0, 2, 1)]), "{r:?}");
    let r = share_fetch_v2(&mut c, (id, "m1", 1), (1, 4), false, &[]).await;
    assert_eq!(acquired(&r), vec![(3, 6, 1)]);
    let r = share_fetch_v2(&mut c, (id, "m1", 2), (0, 1), false, &[]).await;
    assert_eq!(acquired(&r), vec![(7, 9, 1)]);
    // An acquire mode Kafka does not have.
    let r = share_fetch_v2(&mut c, (id, "m1", 3), (7, 1), false, &[]).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));

    // A renewing fetch must not ask for records or wait.
    let mut bad = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(str_bytes(GROUP))))
        .with_member_id(Some(str_bytes("m1")))
        .with_share_session_epoch(3)
        .with_max_wait_ms(500)
        .with_max_bytes(0)
        .with_is_renew_ack(true);
    let r = c.send(&bad, 2).await.unwrap();
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    assert_eq!(
        r.error_message.as_deref(),
        Some("maxWaitMs must be set to 0, if isRenewAck is true."),
    );
    // ... and, that refused, the session did not move on: epoch 3 is still the next.
    bad.max_wait_ms = 0;
    let r = c.send(&bad, 2).await.unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");

    // Renewing 0-2 answers at once, acquiring nothing; the lock's length comes back.
    let r = share_fetch_v2(&mut c, (id, "m1", 4), (0, 0), true, &[(0, 2, RENEW)]).await;
    assert_eq!((r.error_code, ack_error(&r)), (0, 0), "{r:?}");
    assert!(acquired(&r).is_empty());
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    // RENEW without IsRenewAck, or before v2, is a bad request; another member's records
    // cannot be renewed.
    let r = share_fetch_v2(&mut c, (id, "m1", 5), (0, 0), false, &[(3, 6, RENEW)]).await;
    assert_eq!(ack_error(&r), code(ResponseError::InvalidRequest));
    let r = acknowledge(&mut c, id, "m1", 6, vec![(3, 6, vec![RENEW])]).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::InvalidRequest)
    );
    let renew_ack = |member: &str, epoch: i32, first: i64, last: i64| {
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(str_bytes(GROUP))))
            .with_member_id(Some(str_bytes(member)))
            .with_share_session_epoch(epoch)
            .with_is_renew_ack(true)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![AckBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(vec![RENEW])])])])
    };
    let r = c.send(&renew_ack("m1", 7, 3, 6), 2).await.unwrap();
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    assert!(acquired(&share_fetch(&mut c, id, "m2", 0, &[]).await).is_empty());
    let r = c.send(&renew_ack("m2", 1, 3, 6), 2).await.unwrap();
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::InvalidRecordState)
    );
    // Renewed records are still m1's to settle.
    let r = acknowledge(&mut c, id, "m1", 8, vec![(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(start_offset(&mut c).await, 10);

    // The group config share.renew.acknowledge.enable=false turns renewals away.
    assert_eq!(
        set_group_configs(
            &mut c,
            GROUP,
            &[("share.renew.acknowledge.enable", "maybe")]
        )
        .await,
        code(ResponseError::InvalidConfig)
    );
    assert_eq!(
        set_group_configs(
            &mut c,
            GROUP,
            &[("share.renew.acknowledge.enable", "false")]
        )
        .await,
        0
    );
    produce(&mut c, TOPIC, 0, batch(2)).await;
    // A fetch for no records (a record-limit consumer's to the brokers it is not reading
    // from) takes none, as Kafka answers it.
    let r = share_fetch_v2(&mut c, (id, "m1", 9), (1, 0), false, &[]).await;
    assert_eq!((r.error_code, acquired(&r)), (0, vec![]), "{r:?}");
    let r = share_fetch_v2(&mut c, (id, "m1", 10), (0, 10), false, &[]).await;
    assert_eq!(acquired(&r), vec![(10, 11, 1)]);
    let r = c.send(&renew_ack("m1", 11, 10, 11), 2).await.unwrap();
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        code(ResponseError::InvalidRecordState)
    );
    let configs = group_configs(&mut c).await;
    assert_eq!(
        configs["share.renew.acknowledge.enable"].0.as_deref(),
        Some("false")
    );
}

/// ReadShareGroupStateSummary of partition 0 of `id`: (error, state epoch, start offset).
async fn read_state(c: &mut KafkaConnection, group: &str, id: uuid::Uuid) -> (i16, i32, i64) {
    use kafka_protocol::messages::read_share_group_state_summary_request::{
        PartitionData, ReadStateSummaryData,
    };
    let req = kafka_protocol::messages::ReadShareGroupStateSummaryRequest::default()
        .with_group_id(str_bytes(group))
        .with_topics(vec![ReadStateSummaryData::default()
            .with_topic_id(id)
            .with_partitions(vec![PartitionData::default().with_partition(0)])]);
    let r = c.send(&req, 1).await.unwrap();
    let p = &r.results[0].partitions[0];
    (p.error_code, p.state_epoch, p.start_offset)
}

/// WriteShareGroupState of partition 0 of `id` from a leader at `leader_epoch`: the error code.
async fn write_state(
    c: &mut KafkaConnection,
    id: uuid::Uuid,
    (state_epoch, leader_epoch): (i32, i32),
    start: i64,
) -> i16 {
    use kafka_protocol::messages::write_share_group_state_request::{
        PartitionData, WriteStateData,
    };
    let req = kafka_protocol::messages::WriteShareGroupStateRequest::default()
        .with_group_id(str_bytes(GROUP))
        .with_topics(vec![WriteStateData::default()
            .with_topic_id(id)
            .with_partitions(vec![PartitionData::default()
                .with_partition(0)
                .with_state_epoch(state_epoch)
                .with_leader_epoch(leader_epoch)
                .with_start_offset(start)])]);
    let r = c.send(&req, 1).await.unwrap();
    r.results[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_brokers_read_and_write_start_offsets_at_the_coordinator() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    let id = ten_records_from_the_start(&mut c, server.addr()).await;
    // The admin's reset stored start offset 0 under some state epoch.
    let (error, epoch, start) = read_state(&mut c, GROUP, id).await;
    assert_eq!((error, start), (0, 0));
    // A leader started from another state epoch is fenced; the stored offset stays.
    assert_eq!(
        write_state(&mut c, id, (epoch + 1, 0), 4).await,
        code(ResponseError::FencedStateEpoch)
    );
    assert_eq!(read_state(&mut c, GROUP, id).await, (0, epoch, 0));
    assert_eq!(write_state(&mut c, id, (epoch, 0), 4).await, 0);
    assert_eq!(read_state(&mut c, GROUP, id).await, (0, epoch, 4));
    assert_eq!(start_offset(&mut c).await, 4);
    // A newer leader wrote: the one before it is fenced.
    assert_eq!(write_state(&mut c, id, (epoch, 3), 6).await, 0);
    assert_eq!(
        write_state(&mut c, id, (epoch, 2), 7).await,
        code(ResponseError::FencedLeaderEpoch)
    );
    assert_eq!(read_state(&mut c, GROUP, id).await, (0, epoch, 6));
    // Nothing stored, an unknown topic, no group id.
    assert_eq!(read_state(&mut c, "other", id).await, (0, -1, -1));
    assert_eq!(
        write_state(&mut c, uuid::Uuid::from_u128(9), (epoch, 0), 4).await,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(
        read_state(&mut c, "", id).await.0,
        code(ResponseError::InvalidGroupId)
    );
}
