//! Broker APIs over a real socket: bad input gets Kafka's error codes or a closed connection,
//! never a panic, never a partial append, never an effect on other connections.

mod support;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiVersionsRequest, ListOffsetsRequest, MetadataRequest};
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::ClientError;

async fn latest_offset(conn: &mut tern_protocol::client::KafkaConnection, topic: &str) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let resp = conn.send(&req, 7).await.unwrap();
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[tokio::test]
async fn api_versions_lists_produce_and_fetch() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let resp = c.send(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert_eq!(resp.error_code, 0);
    let keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
    assert!(keys.contains(&0) && keys.contains(&1) && keys.contains(&3));
}

#[tokio::test]
async fn api_versions_v5_checks_the_cluster_and_node_a_client_names() {
    let s = TestServer::start().await;
    let (cluster, node) = (
        s.server.broker.cluster_id.clone(),
        s.server.broker.config.node_id,
    );
    let mut c = s.connect().await;
    let ask = |cluster: Option<&str>, node: i32| {
        ApiVersionsRequest::default()
            .with_client_software_name(str_bytes("test"))
            .with_client_software_version(str_bytes("1"))
            .with_cluster_id(cluster.map(str_bytes))
            .with_node_id(node)
    };
    // As Kafka 4.4 answers each case (probed side by side): neither or both matching serve;
    // a mismatch asks the client to rebootstrap; one without the other is a bad request.
    let cases = [
        (None, -1, 0),
        (Some(cluster.as_str()), node, 0),
        (
            Some("another-cluster"),
            node,
            ResponseError::RebootstrapRequired.code(),
        ),
        (
            Some(cluster.as_str()),
            node + 1,
            ResponseError::RebootstrapRequired.code(),
        ),
        (
            Some(cluster.as_str()),
            -1,
            ResponseError::InvalidRequest.code(),
        ),
        (None, node, ResponseError::InvalidRequest.code()),
    ];
    for (cluster, node, code) in cases {
        let resp = c.send(&ask(cluster, node), 5).await.unwrap();
        assert_eq!(resp.error_code, code, "cluster {cluster:?} node {node}");
        assert_eq!(
            resp.api_keys.is_empty(),
            code != 0,
            "cluster {cluster:?} node {node}"
        );
    }
    // Before v5 the fields do not exist: nothing is checked.
    let resp = c.send(&ask(None, -1), 4).await.unwrap();
    assert_eq!((resp.error_code, resp.api_keys.is_empty()), (0, false));
}

#[tokio::test]
async fn unknown_api_versions_version_gets_v0_unsupported_reply() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    // ApiVersions v99, correlation id 7, no client id.
    let mut req = Vec::new();
    req.extend_from_slice(&18i16.to_be_bytes());
    req.extend_from_slice(&99i16.to_be_bytes());
    req.extend_from_slice(&7i32.to_be_bytes());
    req.extend_from_slice(&(-1i16).to_be_bytes());
    c.send_raw_frame(&req).await.unwrap();
    let frame = c.read_raw_frame().await.unwrap();
    assert_eq!(&frame[..4], &7i32.to_be_bytes());
    assert_eq!(&frame[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");
}

#[tokio::test]
async fn garbage_and_oversized_frames_close_only_their_connection() {
    let s = TestServer::start().await;
    let mut good = s.connect().await;
    for garbage in [
        vec![0xffu8; 3],
        vec![0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0xff],
        (0..200u8).collect::<Vec<_>>(),
        vec![0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff],
        // Metadata v4 declaring 2^31-1 topics: must not reserve memory for them.
        vec![
            0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0,
        ],
        // Metadata v9 (flexible) declaring 2^32-2 topics as a compact array.
        vec![
            0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0,
        ],
    ] {
        let mut bad = s.connect().await;
        bad.send_raw_frame(&garbage).await.unwrap();
        assert!(matches!(
            bad.read_raw_frame().await,
            Err(ClientError::Closed) | Err(ClientError::Frame(_))
        ));
    }
    // A declared size beyond socket.request.max.bytes.
    let mut stream = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, &i32::MAX.to_be_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
        .await
        .unwrap_or(0);
    assert_eq!(n, 0, "oversized frame closes the connection");
    // The first connection is unaffected.
    let resp = good
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    assert_eq!(resp.brokers.len(), 1);
}

#[tokio::test]
async fn corrupt_or_extra_batches_are_rejected_and_nothing_is_appended() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "t", 1, &[]).await;
    let good = batch(3);
    let mut bad = good.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    let resp = produce(&mut c, "t", 0, bad.clone().into()).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::CorruptMessage.code());
    // Two batches for one partition: Produce v3+ takes exactly one (Kafka's INVALID_RECORD),
    // so neither is appended.
    let mut both = good.to_vec();
    both.extend_from_slice(&good);
    let resp = produce(&mut c, "t", 0, both.into()).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(latest_offset(&mut c, "t").await, 0);
    let resp = produce(&mut c, "t", 0, good).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(latest_offset(&mut c, "t").await, 3);
}

#[tokio::test]
async fn idempotent_duplicates_are_acknowledged_once_and_gaps_rejected() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "idem", 1, &[]).await;
    let first = produce(&mut c, "idem", 0, idempotent_batch(5, 42, 0, 0)).await;
    assert_eq!(first.responses[0].partition_responses[0].base_offset, 0);
    let dup = produce(&mut c, "idem", 0, idempotent_batch(5, 42, 0, 0)).await;
    let p = &dup.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    assert_eq!(latest_offset(&mut c, "idem").await, 5);
    let gap = produce(&mut c, "idem", 0, idempotent_batch(1, 42, 0, 9)).await;
    assert_eq!(
        gap.responses[0].partition_responses[0].error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(latest_offset(&mut c, "idem").await, 5);
}

#[tokio::test]
async fn create_topic_errors_match_kafka() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let code = |r: kafka_protocol::messages::CreateTopicsResponse| r.topics[0].error_code;
    assert_eq!(code(create_topic(&mut c, "ok", 2, &[]).await), 0);
    assert_eq!(
        code(create_topic(&mut c, "ok", 2, &[]).await),
        ResponseError::TopicAlreadyExists.code()
    );
    assert_eq!(
        code(create_topic(&mut c, "bad name!", 1, &[]).await),
        ResponseError::InvalidTopicException.code()
    );
    assert_eq!(
        code(create_topic(&mut c, "zero", 0, &[]).await),
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(
        code(create_topic(&mut c, "cfg", 1, &[("retention.ms", "soon")]).await),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        code(create_topic(&mut c, "cfg2", 1, &[("no.such.config", "1")]).await),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(code(create_topic(&mut c, "a.b", 1, &[]).await), 0);
    assert_eq!(
        code(create_topic(&mut c, "a_b", 1, &[]).await),
        ResponseError::InvalidTopicException.code(),
        "names differing only in '.' and '_' collide"
    );
    let meta = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    let names: Vec<String> = meta
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .filter(|n| !n.starts_with("__"))
        .collect();
    assert_eq!(names, vec!["a.b".to_string(), "ok".to_string()]);
}

#[tokio::test]
async fn topics_and_records_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = start_in(dir.path(), &[]).await;
        let mut c = tern_protocol::client::KafkaConnection::connect(server.local_addrs[0], "t")
            .await
            .unwrap();
        create_topic(&mut c, "keep", 1, &[("retention.ms", "3600000")]).await;
        produce(&mut c, "keep", 0, batch(4)).await;
        server.shutdown().await.unwrap();
    }
    let server = start_in(dir.path(), &[]).await;
    let mut c = tern_protocol::client::KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    assert_eq!(latest_offset(&mut c, "keep").await, 4);
    let resp = produce(&mut c, "keep", 0, batch(1)).await;
    assert_eq!(resp.responses[0].partition_responses[0].base_offset, 4);
    server.shutdown().await.unwrap();
}

async fn fetch_first_batch(
    conn: &mut tern_protocol::client::KafkaConnection,
    topic: &str,
) -> bytes::Bytes {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let req = kafka_protocol::messages::FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let resp = conn.send(&req, 12).await.unwrap();
    resp.responses[0].partitions[0].records.clone().unwrap()
}

#[tokio::test]
async fn topic_compression_type_recompresses_and_compacted_topics_need_keys() {
    use tern_protocol::record_batch::{validate_batch, Compression};
    use tern_protocol::records::{decode_records, RecordBatchBuilder};
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "gz", 1, &[("compression.type", "gzip")]).await;
    let resp = produce(&mut c, "gz", 0, batch(5)).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let stored = fetch_first_batch(&mut c, "gz").await;
    let header = validate_batch(&stored).unwrap();
    assert_eq!(header.compression().unwrap(), Compression::Gzip);
    let (_, records) = decode_records(&stored, 1 << 20).unwrap();
    let values: Vec<_> = records.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(
        values,
        (0..5)
            .map(|i| format!("v{i}").into_bytes())
            .collect::<Vec<_>>()
    );

    create_topic(&mut c, "compacted", 1, &[("cleanup.policy", "compact")]).await;
    let mut b = RecordBatchBuilder::new(Compression::Snappy);
    b.push(1, Some(b"k"), Some(b"v"), &[]).unwrap();
    b.push(2, None, Some(b"no key"), &[]).unwrap();
    let resp = produce(&mut c, "compacted", 0, b.build().unwrap()).await;
    let refused = &resp.responses[0].partition_responses[0];
    assert_eq!(refused.error_code, ResponseError::InvalidRecord.code());
    // KIP-467: the record at fault, by its index, with Kafka's message.
    let errors: Vec<(i32, String)> = refused
        .record_errors
        .iter()
        .map(|e| {
            (
                e.batch_index,
                e.batch_index_error_message
                    .as_deref()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        vec![(
            1,
            "Compacted topic cannot accept message without key in topic partition compacted-0."
                .to_string()
        )]
    );
    assert!(refused
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("due to 1 record errors")));
    assert_eq!(latest_offset(&mut c, "compacted").await, 0);
    let resp = produce(&mut c, "compacted", 0, batch(2)).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

#[tokio::test]
async fn describe_topic_partitions_paginates_with_a_cursor() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::DescribeTopicPartitionsRequest;
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "dtp-a", 3, &[]).await;
    create_topic(&mut c, "dtp-b", 2, &[]).await;
    let topics = vec![
        TopicRequest::default().with_name(name("dtp-b")),
        TopicRequest::default().with_name(name("dtp-a")),
        TopicRequest::default().with_name(name("missing")),
    ];
    let mut req = DescribeTopicPartitionsRequest::default()
        .with_topics(topics)
        .with_response_partition_limit(2);
    let mut seen = Vec::new();
    let mut unknown = 0;
    for _ in 0..10 {
        let resp = c.send(&req, 0).await.unwrap();
        for t in &resp.topics {
            if t.error_code != 0 {
                assert_eq!(t.error_code, ResponseError::UnknownTopicOrPartition.code());
                unknown += 1;
                continue;
            }
            let n = t.name.as_ref().unwrap().0.to_string();
            seen.extend(t.partitions.iter().map(|p| (n.clone(), p.partition_index)));
        }
        match resp.next_cursor {
            Some(cur) => {
                req.cursor = Some(
                    Cursor::default()
                        .with_topic_name(cur.topic_name)
                        .with_partition_index(cur.partition_index),
                )
            }
            None => break,
        }
    }
    let expected: Vec<(String, i32)> = [
        ("dtp-a", 0),
        ("dtp-a", 1),
        ("dtp-a", 2),
        ("dtp-b", 0),
        ("dtp-b", 1),
    ]
    .iter()
    .map(|(t, p)| (t.to_string(), *p))
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(unknown, 1);
}

#[tokio::test]
async fn acks_all_below_min_insync_replicas_is_refused_and_appends_nothing() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let created = create_topic(&mut c, "needs-two", 1, &[("min.insync.replicas", "2")]).await;
    assert_eq!(created.topics[0].error_code, 0);
    let resp = produce(&mut c, "needs-two", 0, batch(3)).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(
        p.error_code,
        ResponseError::NotEnoughReplicas.code(),
        "one in-sync replica cannot satisfy min.insync.replicas=2"
    );
    assert_eq!(
        latest_offset(&mut c, "needs-two").await,
        0,
        "nothing appended"
    );
    // acks=1 does not promise min.insync.replicas copies: Kafka accepts it.
    let mut req = kafka_protocol::messages::ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000);
    req.topic_data = vec![
        kafka_protocol::messages::produce_request::TopicProduceData::default()
            .with_name(name("needs-two"))
            .with_partition_data(vec![
                kafka_protocol::messages::produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(3))),
            ]),
    ];
    let resp = c.send(&req, 9).await.unwrap();
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(latest_offset(&mut c, "needs-two").await, 3);
    // With min.insync.replicas=1 (the default), acks=all succeeds on one replica.
    let created = create_topic(&mut c, "needs-one", 1, &[]).await;
    assert_eq!(created.topics[0].error_code, 0);
    let resp = produce(&mut c, "needs-one", 0, batch(2)).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

#[tokio::test]
async fn offset_commit_to_an_unknown_topic_or_partition_is_refused_per_partition() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest};
    use kafka_protocol::protocol::StrBytes;
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "oc", 1, &[]).await;
    let partition = |i: i32| {
        OffsetCommitRequestPartition::default()
            .with_partition_index(i)
            .with_committed_offset(7)
    };
    let group = GroupId(StrBytes::from_static_str("oc-group"));
    let req = OffsetCommitRequest::default()
        .with_group_id(group.clone())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(name("oc"))
                .with_partitions(vec![partition(0), partition(5)]),
            OffsetCommitRequestTopic::default()
                .with_name(name("no-such-topic"))
                .with_partitions(vec![partition(0)]),
        ]);
    let resp = c.send(&req, 8).await.unwrap();
    let codes: Vec<Vec<i16>> = resp
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| p.error_code).collect())
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(codes, vec![vec![0, unknown], vec![unknown]]);
    // The known partition was committed; nothing was stored for the others.
    let fetch = OffsetFetchRequest::default()
        .with_group_id(group)
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(name("oc"))
                .with_partition_indexes(vec![0, 5]),
            OffsetFetchRequestTopic::default()
                .with_name(name("no-such-topic"))
                .with_partition_indexes(vec![0]),
        ]));
    let r = c.send(&fetch, 7).await.unwrap();
    let committed: Vec<Vec<i64>> = r
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| p.committed_offset).collect())
        .collect();
    assert_eq!(committed, vec![vec![7, -1], vec![-1]]);
}

#[tokio::test]
async fn describe_configs_of_a_broker_lists_its_settings_with_sources_and_withholds_secrets() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(
        dir.path(),
        &[
            ("num.partitions", "3"),
            ("log.cleaner.threads", "2"),
            ("log.cleaner.io.buffer.size", "4096"), // ignored by Tern: not listed
            ("listener.name.x.plain.sasl.jaas.config", "secret"), // a secret: withheld
        ],
    )
    .await;
    let mut c = tern_protocol::client::KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(kafka_protocol::protocol::StrBytes::from_static_str("1"))
            .with_configuration_keys(None)]);
    let r = c.send(&req, 4).await.unwrap();
    assert_eq!(r.results[0].error_code, 0);
    let configs = &r.results[0].configs;
    let get = |n: &str| configs.iter().find(|e| e.name.as_str() == n);
    let partitions = get("num.partitions").expect("num.partitions");
    assert_eq!(partitions.value.as_deref(), Some("3"));
    assert_eq!(partitions.config_source, 4, "STATIC_BROKER_CONFIG");
    assert!(partitions.read_only);
    let sources: Vec<i8> = partitions.synonyms.iter().map(|s| s.source).collect();
    assert_eq!(sources, vec![4, 5], "static, then the default");
    let retention = get("log.retention.hours").expect("a default is listed too");
    assert_eq!(retention.value.as_deref(), Some("168"));
    assert_eq!(retention.config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(retention.config_type, 3, "INT");
    let max_bytes = get("message.max.bytes").unwrap();
    assert!(!max_bytes.read_only, "Kafka changes it without a restart");
    let key = get("ssl.keystore.key").expect("catalog secret");
    assert!(key.is_sensitive && key.value.is_none());
    let jaas = get("listener.name.x.plain.sasl.jaas.config").expect("set secret listed");
    assert!(jaas.is_sensitive && jaas.value.is_none());
    assert!(jaas.synonyms.iter().all(|s| s.value.is_none()));
    let cleaners = get("log.cleaner.threads").expect("log.cleaner.threads");
    assert_eq!(cleaners.value.as_deref(), Some("2"));
    assert!(
        !cleaners.read_only,
        "Kafka resizes the cleaner without a restart"
    );
    assert!(
        get("log.cleaner.io.buffer.size").is_none(),
        "ignored settings are not listed"
    );
    assert!(configs.len() > 80, "{} configs", configs.len());
}

#[tokio::test]
async fn timestamps_beyond_message_timestamp_after_max_ms_are_refused_per_record() {
    use tern_protocol::record_batch::Compression;
    use tern_protocol::records::RecordBatchBuilder;
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "clock", 1, &[]).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut b = RecordBatchBuilder::new(Compression::Zstd);
    b.push(now, Some(b"k"), Some(b"on time"), &[]).unwrap();
    b.push(
        now + 2 * 3_600_000,
        Some(b"k"),
        Some(b"two hours ahead"),
        &[],
    )
    .unwrap();
    let resp = produce(&mut c, "clock", 0, b.build().unwrap()).await;
    let refused = &resp.responses[0].partition_responses[0];
    assert_eq!(refused.error_code, ResponseError::InvalidTimestamp.code());
    let indexes: Vec<i32> = refused
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indexes, vec![1], "Kafka's default: at most one hour ahead");
    assert_eq!(latest_offset(&mut c, "clock").await, 0, "nothing appended");
    // A topic that allows a day ahead takes the same batch.
    create_topic(
        &mut c,
        "lenient",
        1,
        &[("message.timestamp.after.max.ms", "86400000")],
    )
    .await;
    let mut b = RecordBatchBuilder::new(Compression::Zstd);
    b.push(now + 2 * 3_600_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    let resp = produce(&mut c, "lenient", 0, b.build().unwrap()).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

/// Fetches `partitions` of `topic` from offset 0, each with `partition_max_bytes`.
async fn fetch_records(
    conn: &mut tern_protocol::client::KafkaConnection,
    topic: &str,
    partitions: &[i32],
    partition_max_bytes: i32,
    version: i16,
) -> Vec<bytes::Bytes> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let mut t = FetchTopic::default().with_partitions(
        partitions
            .iter()
            .map(|&p| {
                FetchPartition::default()
                    .with_partition(p)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(partition_max_bytes)
            })
            .collect(),
    );
    if version >= 13 {
        let meta = conn
            .send(
                &MetadataRequest::default().with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(name(topic))),
                ])),
                12,
            )
            .await
            .unwrap();
        t = t.with_topic_id(meta.topics[0].topic_id);
    } else {
        t = t.with_topic(name(topic));
    }
    let req = kafka_protocol::messages::FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(i32::MAX)
        .with_session_epoch(-1)
        .with_topics(vec![t]);
    let resp = conn.send(&req, version).await.unwrap();
    assert_eq!(resp.error_code, 0);
    resp.responses[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            p.records.clone().unwrap_or_default()
        })
        .collect()
}

#[tokio::test]
async fn fetch_sends_the_stored_bytes_at_every_record_framing() {
    use tern_protocol::record_batch::BatchIter;
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "zc", 3, &[]).await;
    // Batches of growing size on three partitions, so records cross the varint length steps.
    for p in 0..3 {
        for n in [1, 10, 100, 400] {
            let resp = produce(&mut c, "zc", p, batch(n + p as usize)).await;
            assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        }
    }
    // Fetch v4 (int32 lengths), v12 (varint lengths) and v13+ (topic ids) agree.
    let whole = fetch_records(&mut c, "zc", &[0, 1, 2], 1 << 20, 12).await;
    for version in [4, 11, 13, 16, 18] {
        assert_eq!(
            fetch_records(&mut c, "zc", &[0, 1, 2], 1 << 20, version).await,
            whole,
            "v{version}"
        );
    }
    for (p, records) in whole.iter().enumerate() {
        let batches: Vec<(i64, i32)> = BatchIter::new(records)
            .map(|b| b.map(|(h, _)| (h.base_offset, h.records_count)).unwrap())
            .collect();
        let p = p as i32;
        let q = p as i64;
        assert_eq!(
            batches,
            vec![
                (0, 1 + p),
                (1 + q, 10 + p),
                (11 + 2 * q, 100 + p),
                (111 + 3 * q, 400 + p)
            ]
        );
        // One partition alone: the same bytes.
        assert_eq!(
            &fetch_records(&mut c, "zc", &[p], 1 << 20, 12).await[0],
            records
        );
    }
    // A byte limit inside a batch: exactly that many bytes, a prefix of the whole (the
    // partial batch at the end is the client's to drop, as with Kafka).
    let cut = whole[0].len() as i32 - 10;
    let limited = fetch_records(&mut c, "zc", &[0], cut, 12).await;
    assert_eq!(limited[0].len(), cut as usize);
    assert_eq!(limited[0][..], whole[0][..cut as usize]);
    assert_eq!(BatchIter::new(&limited[0]).filter(Result::is_ok).count(), 3);
    // A limit below the first batch still returns that batch whole (the first partition).
    let first = fetch_records(&mut c, "zc", &[2], 1, 12).await;
    let first_len = BatchIter::new(&whole[2]).next().unwrap().unwrap().1.len();
    assert_eq!(first[0][..], whole[2][..first_len]);
}
