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
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition as ShareFetchPartition, FetchTopic as ShareFetchTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, MetadataRequest, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::KafkaConnection;

const GROUP: &str = "queue";
const TOPIC: &str = "jobs";

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;

fn code(e: ResponseError) -> i16 {
    e.code()
}

async fn topic_id(c: &mut KafkaConnection) -> uuid::Uuid {
    let md = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    md.topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))
        .unwrap()
        .topic_id
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
    topic_id(c).await
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
