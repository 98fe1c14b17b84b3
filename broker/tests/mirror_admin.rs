//! Mirror administration details: secrets in mirror configs, coordinator state RPCs, and
//! producer ids after failover.

mod support;

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    bump_leader_epochs_request, create_cluster_mirror_request, read_mirror_states_request,
    start_mirror_topics_request, stop_mirror_topics_request, write_mirror_states_request,
    BumpLeaderEpochsRequest, BumpLeaderEpochsResponse, CreateClusterMirrorRequest,
    DescribeClusterMirrorsRequest, DescribeConfigsRequest, InitProducerIdRequest,
    ListClusterMirrorsRequest, ReadMirrorStatesRequest, ReadMirrorStatesResponse,
    StartMirrorTopicsRequest, StopMirrorTopicsRequest, WriteMirrorStatesRequest,
};
use kafka_protocol::protocol::StrBytes;
use support::{create_topic, idempotent_batch, produce, TestServer};
use tern_protocol::client::KafkaConnection;

/// A test's string as a request field.
fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// StartMirrorTopics of one topic (partitions as on the source); it must be accepted.
async fn start_topic(conn: &mut KafkaConnection, mirror: &str, topic: &str) {
    let req = StartMirrorTopicsRequest::default()
        .with_mirror_name(sb(mirror))
        .with_topics(vec![start_mirror_topics_request::TopicData::default()
            .with_topic_name(sb(topic))
            .with_num_partitions(-1)]);
    let r = conn.send(&req, 0).await.unwrap();
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
}

/// Waits until the first mirror's first topic has mirrored `partition` up to `offset`.
async fn wait_destination_offset(conn: &mut KafkaConnection, partition: i32, offset: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let d = conn
            .send(&DescribeClusterMirrorsRequest::default(), 0)
            .await
            .unwrap();
        let p = d.mirrors[0].topics[0]
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)
            .map(|p| p.destination_offset);
        if p == Some(offset) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "partition {partition} not mirrored up to {offset}: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_mirror(conn: &mut KafkaConnection, name: &str, configs: &[(&str, &str)]) -> i16 {
    let configs = configs.iter().map(|(k, v)| {
        create_cluster_mirror_request::Config::default()
            .with_name(sb(k))
            .with_value(Some(sb(v)))
    });
    let req = CreateClusterMirrorRequest::default()
        .with_mirror_name(sb(name))
        .with_configs(configs.collect());
    conn.send(&req, 0).await.unwrap().error_code
}

async fn describe_partition_states(conn: &mut KafkaConnection, mirror: &str) -> Vec<String> {
    let req = DescribeClusterMirrorsRequest::default().with_mirror_names(vec![sb(mirror)]);
    let r = conn.send(&req, 0).await.unwrap();
    r.mirrors
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter().map(|p| p.state_value.to_string()))
        .collect()
}

/// DescribeConfigs of a cluster mirror (config resource type 64).
async fn describe_mirror_configs(
    conn: &mut KafkaConnection,
    mirror: &'static str,
) -> kafka_protocol::messages::DescribeConfigsResponse {
    conn.send(
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(64)
            .with_resource_name(StrBytes::from_static_str(mirror))
            .with_configuration_keys(None)]),
        4,
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_config_secrets_are_never_returned() {
    let dest = TestServer::start().await;
    let mut conn = dest.connect().await;
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";";
    assert_eq!(
        create_mirror(
            &mut conn,
            "secret",
            &[
                ("bootstrap.servers", "127.0.0.1:1"),
                ("sasl.jaas.config", jaas),
                // An inline PEM key: a secret too (ssl.*.password settings are refused).
                ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----hunter3"),
            ],
        )
        .await,
        0
    );
    let r = describe_mirror_configs(&mut conn, "secret").await;
    let configs = &r.results[0].configs;
    let get = |k: &str| configs.iter().find(|c| c.name.as_str() == k).unwrap();
    assert_eq!(
        get("bootstrap.servers")
            .value
            .as_ref()
            .map(|v| v.to_string()),
        Some("127.0.0.1:1".to_string())
    );
    for secret in ["sasl.jaas.config", "ssl.keystore.key"] {
        assert!(get(secret).is_sensitive, "{secret}");
        assert_eq!(get(secret).value, None, "{secret}");
    }
    // Nothing in any mirror response carries the secret either.
    let list = ListClusterMirrorsRequest::default().with_include_topic_names(true);
    let listed = format!("{:?}", conn.send(&list, 0).await.unwrap());
    let describe = DescribeClusterMirrorsRequest::default();
    let described = format!("{:?}", conn.send(&describe, 0).await.unwrap());
    for text in [listed, described] {
        assert!(!text.contains("hunter"), "{text}");
    }
    // An unknown mirror is UNKNOWN_CLUSTER_MIRROR in DescribeConfigs.
    let r = describe_mirror_configs(&mut conn, "nope").await;
    assert_eq!(r.results[0].error_code, 137);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_after_failover_do_not_collide_with_mirrored_ones() {
    let source = TestServer::start().await;
    let dest = TestServer::start().await;
    let mut src = source.connect().await;
    create_topic(&mut src, "pids", 1, &[]).await;
    // A source producer with a large id (a busy source cluster hands out big ones).
    let mirrored_pid = 5_000_000;
    let r = produce(&mut src, "pids", 0, idempotent_batch(3, mirrored_pid, 0, 0)).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);

    let mut dst = dest.connect().await;
    let bootstrap = source.addr().to_string();
    assert_eq!(
        create_mirror(
            &mut dst,
            "dr",
            &[
                ("bootstrap.servers", &bootstrap),
                ("mirror.fetch.wait.max.ms", "100")
            ]
        )
        .await,
        0
    );
    start_topic(&mut dst, "dr", "pids").await;
    wait_destination_offset(&mut dst, 0, 3).await;
    // Before failover an InitProducerId may hand out a low id; after it, ids are above the
    // mirrored producer's.
    let _ = dst
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            4,
        )
        .await
        .unwrap();
    let stop = StopMirrorTopicsRequest::default()
        .with_mirror_name(sb("dr"))
        .with_topics(vec![
            stop_mirror_topics_request::TopicData::default().with_topic_name(sb("pids"))
        ]);
    let r = dst.send(&stop, 0).await.unwrap();
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(
        describe_partition_states(&mut dst, "dr").await,
        vec!["STOPPED"]
    );
    for _ in 0..3 {
        let r = dst
            .send(
                &InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(60_000),
                4,
            )
            .await
            .unwrap();
        assert_eq!(r.error_code, 0);
        assert!(
            r.producer_id.0 > mirrored_pid,
            "producer id {} collides with the mirrored range (<= {mirrored_pid})",
            r.producer_id.0
        );
    }
}

async fn read(conn: &mut KafkaConnection) -> ReadMirrorStatesResponse {
    let topic = |name: &str, partitions: &[i32]| {
        let partitions = partitions
            .iter()
            .map(|&p| read_mirror_states_request::PartitionData::default().with_partition_index(p));
        read_mirror_states_request::TopicData::default()
            .with_name(sb(name))
            .with_partitions(partitions.collect())
    };
    let req = ReadMirrorStatesRequest::default()
        .with_mirror_name(sb("m"))
        .with_topics(vec![topic("plain", &[0, 1]), topic("missing", &[0])]);
    conn.send(&req, 0).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_state_rpcs_read_and_write_partition_states() {
    let dest = TestServer::start().await;
    let mut conn = dest.connect().await;
    create_topic(&mut conn, "plain", 2, &[]).await;
    assert_eq!(
        create_mirror(&mut conn, "m", &[("bootstrap.servers", "127.0.0.1:1")]).await,
        0
    );
    let r = read(&mut conn).await;
    assert_eq!(r.topics[0].partitions[0].state, -1, "no state yet: UNKNOWN");
    assert_eq!(r.topics[1].partitions[0].error_code, 3);
    // A remote broker records PREPARING then MIRRORING for partition 1; an invalid jump is refused.
    let write_with = |state: i8, last_mirrored_offset: i64| {
        WriteMirrorStatesRequest::default()
            .with_mirror_name(sb("m"))
            .with_topics(vec![write_mirror_states_request::TopicData::default()
                .with_name(sb("plain"))
                .with_partitions(vec![
                    write_mirror_states_request::PartitionData::default()
                        .with_partition_index(1)
                        .with_state(state)
                        .with_last_mirrored_offset(last_mirrored_offset),
                ])])
    };
    let write = |state: i8| write_with(state, -1);
    for (state, ok) in [(6i8, false), (0, true), (2, true)] {
        let w = conn.send(&write(state), 0).await.unwrap();
        let code = w.topics[0].partitions[0].error_code;
        assert_eq!(code == 0, ok, "state {state}: {w:?}");
    }
    let r = read(&mut conn).await;
    assert_eq!(r.topics[0].partitions[1].state, 2);
    assert_eq!(r.topics[0].partitions[1].previous_state, 0);
    assert_eq!(r.topics[0].partitions[1].last_mirrored_offset, -1);
    assert_eq!(r.topics[0].partitions[0].state, -1);
    // STOPPING, then STOPPED with the last mirrored offset (Tern's tagged field), read back.
    for (state, lmo) in [(5i8, -1i64), (6, 42)] {
        let w = conn.send(&write_with(state, lmo), 0).await.unwrap();
        assert_eq!(w.topics[0].partitions[0].error_code, 0, "{w:?}");
    }
    let r = read(&mut conn).await;
    assert_eq!(r.topics[0].partitions[1].state, 6);
    assert_eq!(r.topics[0].partitions[1].last_mirrored_offset, 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_matching_the_include_pattern_are_discovered_and_mirrored() {
    let source = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dest = support::start_in(
        dir.path(),
        &[("mirror.metadata.refresh.interval.ms", "300")],
    )
    .await;
    let mut src = source.connect().await;
    let mut dst = KafkaConnection::connect(dest.local_addrs[0], "test")
        .await
        .unwrap();
    let bootstrap = source.addr().to_string();
    assert_eq!(
        create_mirror(
            &mut dst,
            "auto",
            &[
                ("bootstrap.servers", &bootstrap),
                ("mirror.topics.include", "auto-.*"),
                ("mirror.fetch.wait.max.ms", "100"),
            ],
        )
        .await,
        0
    );
    // Created on the source after the mirror: found by the periodic sync, no StartMirrorTopics.
    create_topic(&mut src, "auto-1", 2, &[]).await;
    create_topic(&mut src, "manual-1", 1, &[]).await;
    let r = produce(&mut src, "auto-1", 1, support::batch(3)).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let d = dst
            .send(&DescribeClusterMirrorsRequest::default(), 0)
            .await
            .unwrap();
        let topics: Vec<_> = d.mirrors[0].topics.iter().collect();
        let done = topics.len() == 1
            && topics[0].topic_name.as_str() == "auto-1"
            && topics[0].partitions.len() == 2
            && topics[0]
                .partitions
                .iter()
                .any(|p| p.partition_index == 1 && p.destination_offset == 3);
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "auto-1 not discovered and mirrored: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The topic that does not match stays unmirrored.
    let list = ListClusterMirrorsRequest::default().with_include_topic_names(true);
    let l = dst.send(&list, 0).await.unwrap();
    assert_eq!(l.mirrors[0].topic_names, vec![sb("auto-1")]);
}

/// Metadata v12 of one topic on `conn`: its id and each partition's leader epoch.
async fn leader_epochs(conn: &mut KafkaConnection, topic: &str) -> (uuid::Uuid, Vec<i32>) {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let resp = conn.send(&req, 12).await.unwrap();
    let t = &resp.topics[0];
    let mut partitions: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_epoch))
        .collect();
    partitions.sort();
    (t.topic_id, partitions.into_iter().map(|(_, e)| e).collect())
}

async fn bump(
    conn: &mut KafkaConnection,
    topic_id: uuid::Uuid,
    partitions: &[(i32, i32)],
) -> BumpLeaderEpochsResponse {
    let partitions = partitions
        .iter()
        .map(|&(partition_index, min_leader_epoch)| {
            bump_leader_epochs_request::PartitionData::default()
                .with_partition_index(partition_index)
                .with_min_leader_epoch(min_leader_epoch)
        });
    let req = BumpLeaderEpochsRequest::default().with_topics(vec![
        bump_leader_epochs_request::TopicData::default()
            .with_topic_id(topic_id)
            .with_partitions(partitions.collect()),
    ]);
    conn.send(&req, 0).await.unwrap()
}

/// The per-partition error codes of a BumpLeaderEpochs answer with one topic.
fn bump_codes(r: &BumpLeaderEpochsResponse) -> Vec<(i32, i16)> {
    assert_eq!(r.error_code, 0, "{r:?}");
    r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bump_leader_epochs_raises_mirror_partitions_and_refuses_stale_or_foreign_input() {
    let source = TestServer::start().await;
    let dest = TestServer::start().await;
    let mut src = source.connect().await;
    create_topic(&mut src, "bumped", 2, &[]).await;
    let mut dst = dest.connect().await;
    create_topic(&mut dst, "plain", 1, &[]).await;
    let bootstrap = source.addr().to_string();
    assert_eq!(
        create_mirror(&mut dst, "dr", &[("bootstrap.servers", &bootstrap)]).await,
        0
    );
    start_topic(&mut dst, "dr", "bumped").await;
    let (id, before) = leader_epochs(&mut dst, "bumped").await;
    assert_eq!(
        before.len(),
        2,
        "the mirror topic exists on the destination"
    );
    let (plain_id, plain_before) = leader_epochs(&mut dst, "plain").await;

    // Raised to at least the minimum; the other partition keeps its epoch.
    let target = before[0] + 5;
    let r = bump(&mut dst, id, &[(0, target)]).await;
    assert_eq!(r.topics[0].topic_name.as_str(), "bumped");
    assert_eq!(bump_codes(&r), vec![(0, 0)]);
    let (_, after) = leader_epochs(&mut dst, "bumped").await;
    assert_eq!(after, vec![target, before[1]]);

    // A stale minimum is fenced and changes nothing; the current epoch again is a no-op;
    // an unknown partition is named as such.
    let r = bump(&mut dst, id, &[(0, target - 2), (0, target), (9, target)]).await;
    assert_eq!(bump_codes(&r), vec![(0, 74), (0, 0), (9, 3)]);
    let (_, after) = leader_epochs(&mut dst, "bumped").await;
    assert_eq!(after, vec![target, before[1]], "nothing changed");

    // An unknown topic id, and a topic that is not mirrored: refused, nothing changed.
    let r = bump(&mut dst, uuid::Uuid::from_bytes([7; 16]), &[(0, 100)]).await;
    assert_eq!(r.topics[0].topic_name.as_str(), "");
    assert_eq!(bump_codes(&r), vec![(0, 100)], "UNKNOWN_TOPIC_ID");
    let r = bump(&mut dst, plain_id, &[(0, plain_before[0] + 3)]).await;
    assert_eq!(bump_codes(&r), vec![(0, 42)], "INVALID_REQUEST");
    assert_eq!(leader_epochs(&mut dst, "plain").await.1, plain_before);

    // The mirror goes on under the raised epoch: new source records arrive.
    let r = produce(&mut src, "bumped", 0, support::batch(4)).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    wait_destination_offset(&mut dst, 0, 4).await;
    assert_eq!(leader_epochs(&mut dst, "bumped").await.1[0], target);
}

/// StartMirrorTopics with `include` patterns: (top-level error code and message, started topics).
async fn start_patterns(
    conn: &mut KafkaConnection,
    include: &[&str],
    exclude: &[&str],
) -> (i16, Option<String>, Vec<String>) {
    let req = StartMirrorTopicsRequest::default()
        .with_mirror_name(sb("m"))
        .with_include_patterns(include.iter().map(|p| sb(p)).collect())
        .with_exclude_patterns(exclude.iter().map(|p| sb(p)).collect());
    let r = conn.send(&req, 0).await.unwrap();
    let mut started: Vec<String> = r
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| t.name.to_string())
        .collect();
    started.sort();
    (
        r.error_code,
        r.error_message.map(|m| m.to_string()),
        started,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_travel_whole_and_invalid_ones_are_refused_by_name() {
    let source = TestServer::start().await;
    let dest = TestServer::start().await;
    let mut src = source.connect().await;
    let mut dst = dest.connect().await;
    for t in ["orders-12", "orders-1234", "orders-7x"] {
        create_topic(&mut src, t, 1, &[]).await;
    }
    let bootstrap = source.addr().to_string();
    assert_eq!(
        create_mirror(&mut dst, "m", &[("bootstrap.servers", &bootstrap)]).await,
        0
    );
    const INVALID_REQUEST: i16 = 42;
    // An invalid pattern, include or exclude, is refused with its name and starts nothing.
    for (include, exclude) in [(&["orders-[0-9"][..], &[][..]), (&[".*"], &["(x"])] {
        let (code, message, started) = start_patterns(&mut dst, include, exclude).await;
        assert_eq!(code, INVALID_REQUEST);
        let bad = include.iter().chain(exclude).last().unwrap();
        assert!(
            message.as_deref().unwrap_or("").contains(bad),
            "{message:?}"
        );
        assert!(started.is_empty());
    }
    // The comma of a counted repetition stays in its pattern.
    let (code, _, started) = start_patterns(&mut dst, &["orders-[0-9]{1,3}"], &[]).await;
    assert_eq!(code, 0);
    assert_eq!(started, vec!["orders-12".to_string()]);
    let stop = StopMirrorTopicsRequest::default()
        .with_mirror_name(sb("m"))
        .with_patterns(vec![sb("orders-(")]);
    let r = dst.send(&stop, 0).await.unwrap();
    assert_eq!(r.error_code, INVALID_REQUEST, "{r:?}");
}
