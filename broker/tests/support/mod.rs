//! Starts an in-process tern on a free loopback port with a temporary data dir.

#![allow(dead_code, unreachable_pub)]

pub mod txn;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tern_broker::{Broker, BrokerConfig, Server};
use tern_protocol::client::KafkaConnection;
use tern_protocol::record_batch::Compression;
use tern_protocol::records::RecordBatchBuilder;

/// A running server and the temp dir holding its data.
pub struct TestServer {
    pub server: Server,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let server = start_in(dir.path(), &[]).await;
        TestServer { server, dir }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.local_addrs[0]
    }

    pub async fn connect(&self) -> KafkaConnection {
        KafkaConnection::connect(self.addr(), "test").await.unwrap()
    }
}

pub async fn start_in(dir: &std::path::Path, extra: &[(&str, &str)]) -> Server {
    let mut props = BTreeMap::new();
    props.insert(
        "listeners".to_string(),
        "PLAINTEXT://127.0.0.1:0".to_string(),
    );
    props.insert("log.dirs".to_string(), dir.display().to_string());
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
    let config = BrokerConfig::from_properties(props).unwrap();
    let broker = tokio::task::spawn_blocking(move || Broker::start(config))
        .await
        .unwrap()
        .unwrap();
    Server::start(broker).await.unwrap()
}

pub fn name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

/// A protocol string.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub async fn create_topic(
    conn: &mut KafkaConnection,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> CreateTopicsResponse {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    let t = CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        );
    conn.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![t])
            .with_timeout_ms(5000),
        7,
    )
    .await
    .unwrap()
}

/// A batch of `n` records "v0".."v{n-1}".
pub fn batch(n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for i in 0..n {
        b.push(
            1_000 + i as i64,
            Some(b"k"),
            Some(format!("v{i}").as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

/// An idempotent producer's batch.
pub fn idempotent_batch(n: usize, producer_id: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None).producer(producer_id, epoch, seq);
    for i in 0..n {
        b.push(1_000 + i as i64, None, Some(b"x"), &[]).unwrap();
    }
    b.build().unwrap()
}

pub async fn produce(
    conn: &mut KafkaConnection,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> ProduceResponse {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    conn.send(&req, 9).await.unwrap()
}

// ---------------------------------------------------------------------------------------------
// Waiting on a condition instead of sleeping.

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `check` every 100 ms until it returns `Ok`; after [`WAIT`] panics, naming `what` and
/// the last error `check` gave.
pub async fn wait_until<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    poll_until(WAIT, Duration::from_millis(100), what, check).await
}

/// [`wait_until`] with its own deadline and polling interval.
pub async fn poll_until<T>(
    within: Duration,
    every: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {within:?} waiting for {what}: {last}")
            }
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

/// The opposite of a wait, for showing that something does *not* happen: checks `check` every
/// 100 ms for the whole `window` (the last time at its end) and panics the first time it fails.
pub async fn holds_for(
    window: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Result<(), String>,
) {
    let started = Instant::now();
    loop {
        if let Err(e) = check().await {
            panic!(
                "{what} held for only {:?} of {window:?}: {e}",
                started.elapsed()
            );
        }
        let left = window.saturating_sub(started.elapsed());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    }
}

/// The id of `topic`, from Metadata.
pub async fn topic_id(c: &mut KafkaConnection, topic: &str) -> uuid::Uuid {
    let md = c
        .send(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
            12,
        )
        .await
        .unwrap();
    md.topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .unwrap()
        .topic_id
}

/// IncrementalAlterConfigs on group `group` with `pairs` set; the resource's error code.
pub async fn set_group_configs(
    c: &mut KafkaConnection,
    group: &str,
    pairs: &[(&str, &str)],
) -> i16 {
    let ops: Vec<(&str, i8, Option<&str>)> = pairs.iter().map(|(k, v)| (*k, 0, Some(*v))).collect();
    incremental_alter(c, 32, group, &ops).await.0
}

/// One IncrementalAlterConfigs (v1) on the resource `resource_type` `name`, with (key,
/// operation, value) changes; the resource's (error code, error message).
pub async fn incremental_alter(
    c: &mut KafkaConnection,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let req =
        kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(str_bytes(name))
                .with_configs(
                    ops.iter()
                        .map(|(k, op, v)| {
                            AlterableConfig::default()
                                .with_name(str_bytes(k))
                                .with_config_operation(*op)
                                .with_value(v.map(str_bytes))
                        })
                        .collect(),
                ),
        ]);
    let r = c.send(&req, 1).await.unwrap();
    let res = &r.responses[0];
    (
        res.error_code,
        res.error_message.as_ref().map(|m| m.to_string()),
    )
}
