//! Consumer groups of the KIP-848 protocol on the wire: ConsumerGroupHeartbeat moves partitions
//! between members only after their owner revokes them, commits need the member's current
//! epoch (and are taken while it revokes), ConsumerGroupDescribe, ListGroups and DescribeGroups
//! show the group as Kafka does, and bad heartbeats get Kafka's error codes.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, JoinGroupRequest,
    ListGroupsRequest, OffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::KafkaConnection;

const GROUP: &str = "g848";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name("orders")]))
        .with_topic_partitions(Some(vec![]))
}

fn beat(
    member: &str,
    epoch: i32,
    topic: uuid::Uuid,
    owned: &BTreeSet<i32>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic_id(topic)
            .with_partitions(owned.iter().copied().collect())]))
}

async fn send(
    c: &mut KafkaConnection,
    req: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    c.send(req, 1).await.unwrap()
}

/// The partitions of the answer's assignment, by topic id (None: no assignment sent).
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<BTreeMap<uuid::Uuid, BTreeSet<i32>>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
            .collect()
    })
}

async fn commit(c: &mut KafkaConnection, member: &str, epoch: i32, offset: i64) -> i16 {
    commit_v(c, member, epoch, offset, 9).await
}

async fn commit_v(
    c: &mut KafkaConnection,
    member: &str,
    epoch: i32,
    offset: i64,
    version: i16,
) -> i16 {
    let r = c
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(member))
                .with_generation_id_or_member_epoch(epoch)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name("orders"))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)])]),
            version,
        )
        .await
        .unwrap();
    r.topics[0].partitions[0].error_code
}

/// The first member's join, once the group's coordinator is up.
async fn join_first(c: &mut KafkaConnection, member: &str) -> ConsumerGroupHeartbeatResponse {
    let _ = c
        .send(&FindCoordinatorRequest::default().with_key(s(GROUP)), 3)
        .await
        .unwrap();
    wait_until("the group coordinator", async || {
        let r = send(c, &join(member)).await;
        match r.error_code {
            0 => Ok(r),
            e => Err(format!("error {e}")),
        }
    })
    .await
}

#[tokio::test]
async fn partitions_move_after_revocation_and_the_group_shows_as_kafkas() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    assert_eq!(
        create_topic(&mut c, "orders", 4, &[]).await.topics[0].error_code,
        0
    );
    let topic_id = topic_id(&mut c, "orders").await;
    let first = join_first(&mut c, "m1").await;
    let all: BTreeSet<i32> = (0..4).collect();
    assert_eq!(first.member_epoch, 1);
    assert_eq!(assigned(&first).unwrap()[&topic_id], all);

    // m2 joins at epoch 2 but gets nothing while m1 still owns every partition.
    let r = send(&mut c, &join("m2")).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(assigned(&r).unwrap().values().flatten().count(), 0);
    // m1 is told to keep two and stays at epoch 1 until it lets the others go.
    let r = send(&mut c, &beat("m1", 1, topic_id, &all)).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    let kept = assigned(&r).unwrap()[&topic_id].clone();
    assert_eq!(kept.len(), 2);
    // While it revokes, m1 commits at its epoch (as a revoke callback does); a stale epoch is
    // refused.
    assert_eq!(commit(&mut c, "m1", 1, 42).await, 0);
    assert_eq!(
        commit(&mut c, "m1", 0, 43).await,
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        commit_v(&mut c, "m1", 1, 43, 8).await,
        ResponseError::UnsupportedVersion.code(),
        "consumer-protocol members commit with v9 or later"
    );
    assert_eq!(
        commit(&mut c, "", -1, 44).await,
        ResponseError::UnknownMemberId.code(),
        "a non-empty consumer group takes no commits from outside"
    );
    let r = send(&mut c, &beat("m2", 2, topic_id, &BTreeSet::new())).await;
    assert_eq!(r.assignment, None, "nothing released yet");
    let r = send(&mut c, &beat("m1", 1, topic_id, &kept)).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    let r = send(&mut c, &beat("m2", 2, topic_id, &BTreeSet::new())).await;
    let moved = assigned(&r).unwrap()[&topic_id].clone();
    assert_eq!(moved, all.difference(&kept).copied().collect());

    // ConsumerGroupDescribe, ListGroups and DescribeGroups.
    let d = c
        .send(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
            1,
        )
        .await
        .unwrap();
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(
        (
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch,
            g.assignor_name.as_str()
        ),
        ("Stable", 2, 2, "uniform")
    );
    let members: BTreeMap<&str, Vec<i32>> = g
        .members
        .iter()
        .map(|m| {
            let tp = &m.assignment.topic_partitions[0];
            assert_eq!(tp.topic_name.0.as_str(), "orders");
            assert_eq!(m.member_type, 1);
            (m.member_id.as_str(), tp.partitions.clone())
        })
        .collect();
    assert_eq!(members["m1"], kept.iter().copied().collect::<Vec<_>>());
    assert_eq!(members["m2"], moved.iter().copied().collect::<Vec<_>>());
    let l = c.send(&ListGroupsRequest::default(), 5).await.unwrap();
    let listed = l
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == GROUP)
        .unwrap();
    assert_eq!(
        (
            listed.group_type.as_str(),
            listed.group_state.as_str(),
            listed.protocol_type.as_str()
        ),
        ("consumer", "Stable", "consumer")
    );
    let l = c
        .send(
            &ListGroupsRequest::default().with_types_filter(vec![s("classic")]),
            5,
        )
        .await
        .unwrap();
    assert!(l.groups.iter().all(|g| g.group_id.0.as_str() != GROUP));
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP))]);
    let dg = c.send(&describe, 6).await.unwrap();
    assert_eq!(
        dg.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(
        dg.groups[0].error_message.as_deref(),
        Some(format!("Group {GROUP} is not a classic group.").as_str())
    );
    // Before v6, Kafka shows such a group as Dead without an error.
    let dg = c.send(&describe, 5).await.unwrap();
    assert_eq!(
        (dg.groups[0].error_code, dg.groups[0].group_state.as_str()),
        (0, "Dead")
    );

    // A classic member of another embedded protocol cannot join it (one of the consumer
    // protocol could: see group_migration); it cannot be deleted while it has members.
    let j = c
        .send(
            &JoinGroupRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(s("connect"))
                .with_protocols(vec![
                    JoinGroupRequestProtocol::default().with_name(s("range"))
                ]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(
        j.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    let del = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(GROUP))]),
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        del.results[0].error_code,
        ResponseError::NonEmptyGroup.code()
    );

    // m2 leaves: m1 gets everything; then m1 leaves and the group can go.
    let r = send(&mut c, &beat("m2", -1, topic_id, &moved)).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    let r = send(&mut c, &beat("m1", 2, topic_id, &kept)).await;
    assert_eq!(r.member_epoch, 3);
    assert_eq!(assigned(&r).unwrap()[&topic_id], all);
    let r = send(&mut c, &beat("m1", -1, topic_id, &all)).await;
    assert_eq!(r.error_code, 0);
    let del = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(GROUP))]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(del.results[0].error_code, 0);
    assert_eq!(del.results[0].error_message, None);
    // v3 carries an error message; Kafka 4.4 leaves it null, for a missing group too.
    let del = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(GROUP))]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        (
            del.results[0].error_code,
            del.results[0].error_message.as_ref()
        ),
        (ResponseError::GroupIdNotFound.code(), None)
    );
}

#[tokio::test]
async fn a_group_config_sets_the_heartbeat_interval() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    create_topic(&mut c, "orders", 1, &[]).await;
    let first = join_first(&mut c, "m1").await;
    assert_eq!(first.heartbeat_interval_ms, 5_000, "the broker's default");
    assert_eq!(
        set_group_configs(&mut c, GROUP, &[("consumer.heartbeat.interval.ms", "7000")]).await,
        0
    );
    // Kafka's bounds: 5000 to 15000.
    assert_eq!(
        set_group_configs(&mut c, GROUP, &[("consumer.heartbeat.interval.ms", "1000")]).await,
        ResponseError::InvalidConfig.code()
    );
    let topic = topic_id(&mut c, "orders").await;
    let owned = assigned(&first)
        .unwrap_or_default()
        .remove(&topic)
        .unwrap_or_default();
    let r = send(&mut c, &beat("m1", first.member_epoch, topic, &owned)).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.heartbeat_interval_ms, 7_000, "the group's config");
}

#[tokio::test]
async fn bad_heartbeats_get_kafkas_errors() {
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    create_topic(&mut c, "orders", 2, &[]).await;
    let first = join_first(&mut c, "m1").await;
    let none = BTreeSet::new();
    let id = uuid::Uuid::nil();
    let code =
        |r: ConsumerGroupHeartbeatResponse| (r.error_code, r.error_message.map(|m| m.to_string()));

    let (e, msg) = code(send(&mut c, &join("m2").with_server_assignor(Some(s("sticky")))).await);
    assert_eq!(e, ResponseError::UnsupportedAssignor.code());
    assert!(msg.unwrap().contains("sticky"));
    let (e, _) = code(send(&mut c, &beat("m1", first.member_epoch + 5, id, &none)).await);
    assert_eq!(e, ResponseError::FencedMemberEpoch.code());
    let (e, _) = code(send(&mut c, &beat("m1", -3, id, &none)).await);
    assert_eq!(e, ResponseError::InvalidRequest.code());
    let (e, _) = code(send(&mut c, &beat("nobody", 1, id, &none)).await);
    assert_eq!(e, ResponseError::UnknownMemberId.code());
    let (e, msg) = code(send(&mut c, &join("m3").with_subscribed_topic_names(None)).await);
    assert_eq!(e, ResponseError::InvalidRequest.code());
    assert!(msg.unwrap().contains("must be set in first request"));
    let (e, _) = code(send(&mut c, &join("").with_member_id(s(""))).await);
    assert_eq!(
        e,
        ResponseError::InvalidRequest.code(),
        "v1 members name themselves"
    );
}

#[tokio::test]
async fn offsets_by_topic_id_at_v10() {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::OffsetFetchRequest;
    let server = TestServer::start().await;
    let mut c = server.connect().await;
    create_topic(&mut c, "orders", 2, &[]).await;
    let id = topic_id(&mut c, "orders").await;
    let _ = c
        .send(&FindCoordinatorRequest::default().with_key(s(GROUP)), 3)
        .await
        .unwrap();
    let stranger = uuid::Uuid::from_u128(7);
    let commit = |topic: uuid::Uuid| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(17)])])
    };
    let r = wait_until("the group coordinator", async || {
        let r = c.send(&commit(id), 10).await.unwrap();
        match r.topics[0].partitions[0].error_code {
            0 => Ok(r),
            e => Err(format!("error {e}")),
        }
    })
    .await;
    assert_eq!(r.topics[0].topic_id, id);
    let r = c.send(&commit(stranger), 10).await.unwrap();
    assert_eq!(
        (r.topics[0].topic_id, r.topics[0].partitions[0].error_code),
        (stranger, ResponseError::UnknownTopicId.code())
    );
    let fetch = |topics: Option<Vec<OffsetFetchRequestTopics>>| {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(topics)])
    };
    let asked = vec![
        OffsetFetchRequestTopics::default()
            .with_topic_id(id)
            .with_partition_indexes(vec![0, 1]),
        OffsetFetchRequestTopics::default()
            .with_topic_id(stranger)
            .with_partition_indexes(vec![0]),
    ];
    let r = c.send(&fetch(Some(asked)), 10).await.unwrap();
    let got: Vec<(uuid::Uuid, i32, i64, i16)> = r.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic_id,
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )
            })
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (id, 0, -1, 0),
            (id, 1, 17, 0),
            (stranger, 0, -1, ResponseError::UnknownTopicId.code())
        ]
    );
    // All of the group's offsets, by id; v9 still answers by name.
    let r = c.send(&fetch(None), 10).await.unwrap();
    assert_eq!(r.groups[0].topics.len(), 1);
    assert_eq!(r.groups[0].topics[0].topic_id, id);
    let r = c.send(&fetch(None), 9).await.unwrap();
    assert_eq!(r.groups[0].topics[0].name.0.as_str(), "orders");
}

/// ConsumerGroupDescribe's view of the group: (state, group epoch, assignment epoch) and per
/// member (epoch, assignment, target).
async fn described(c: &mut KafkaConnection) -> (String, i32, i32, Vec<String>) {
    let d = c
        .send(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
            1,
        )
        .await
        .unwrap();
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    let mut members: Vec<String> = g
        .members
        .iter()
        .map(|m| {
            let parts =
                |a: &kafka_protocol::messages::consumer_group_describe_response::Assignment| {
                    a.topic_partitions
                        .iter()
                        .map(|t| format!("{}{:?}", t.topic_name.0, t.partitions))
                        .collect::<Vec<_>>()
                };
            format!(
                "{} epoch {} owns {:?} target {:?} client {}",
                m.member_id,
                m.member_epoch,
                parts(&m.assignment),
                parts(&m.target_assignment),
                m.client_id
            )
        })
        .collect();
    members.sort();
    (
        g.group_state.to_string(),
        g.group_epoch,
        g.assignment_epoch,
        members,
    )
}

/// A broker on the data in `dir`, and a connection that has asked for the group's coordinator.
async fn started_in(dir: &std::path::Path) -> (tern_broker::Server, KafkaConnection) {
    let server = start_in(dir, &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    let _ = c
        .send(&FindCoordinatorRequest::default().with_key(s(GROUP)), 3)
        .await
        .unwrap();
    (server, c)
}

#[tokio::test]
async fn the_membership_survives_a_restart_mid_revocation() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c) = started_in(dir.path()).await;
    create_topic(&mut c, "orders", 4, &[]).await;
    let topic_id = topic_id(&mut c, "orders").await;
    let all: BTreeSet<i32> = (0..4).collect();
    assert_eq!(join_first(&mut c, "m1").await.member_epoch, 1);
    let r = send(&mut c, &join("m2")).await;
    assert_eq!(r.member_epoch, 2);
    // m1 is told to give two partitions up, and restarts... the broker does, before it does.
    let r = send(&mut c, &beat("m1", 1, topic_id, &all)).await;
    let kept = assigned(&r).unwrap()[&topic_id].clone();
    assert_eq!((r.member_epoch, kept.len()), (1, 2));
    let before = described(&mut c).await;
    assert_eq!(before.0, "Reconciling");
    drop(c);
    server.shutdown().await.unwrap();

    let (server, mut c) = started_in(dir.path()).await;
    let after = wait_until("the group is loaded", async || {
        let d = c
            .send(
                &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
                1,
            )
            .await
            .map_err(|e| e.to_string())?;
        match d.groups[0].error_code {
            0 => Ok(()),
            e => Err(format!("error {e}")),
        }
    })
    .await;
    let () = after;
    assert_eq!(
        described(&mut c).await,
        before,
        "the same group after the restart"
    );
    // The members carry on at their epochs: m1 finishes revoking, m2 gets what it let go.
    let r = send(&mut c, &beat("m1", 1, topic_id, &kept)).await;
    assert_eq!(
        (r.error_code, r.member_epoch),
        (0, 2),
        "m1 is known at epoch 1"
    );
    let r = send(&mut c, &beat("m2", 2, topic_id, &BTreeSet::new())).await;
    assert_eq!(r.error_code, 0);
    let moved = assigned(&r).unwrap()[&topic_id].clone();
    assert_eq!(moved, all.difference(&kept).copied().collect());
    // A commit at the epoch m1 had before the restart is still fenced as Kafka fences it.
    assert_eq!(
        commit(&mut c, "m1", 0, 7).await,
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(commit(&mut c, "m1", 2, 7).await, 0);
    let end = described(&mut c).await;
    assert_eq!((end.0.as_str(), end.1, end.2), ("Stable", 2, 2));
    server.shutdown().await.unwrap();

    // Once every member leaves and the group is deleted, a restart brings nothing back.
    let (server, mut c) = started_in(dir.path()).await;
    wait_until("m1 and m2 leave", async || {
        let a = send(&mut c, &beat("m1", -1, topic_id, &BTreeSet::new())).await;
        let b = send(&mut c, &beat("m2", -1, topic_id, &BTreeSet::new())).await;
        match (a.error_code, b.error_code) {
            (0, 0) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let r = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(GROUP))]),
            2,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, 0);
    server.shutdown().await.unwrap();
    let (server, mut c) = started_in(dir.path()).await;
    let d = c
        .send(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
            1,
        )
        .await
        .unwrap();
    assert_eq!(
        d.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    server.shutdown().await.unwrap();
}
