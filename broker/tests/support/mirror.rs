//! Helpers for the mirroring tests: restartable in-process servers, the mirror RPCs, whole-log
//! reads for byte comparisons, a byte-counting TCP proxy, and [`Cluster`], the steps a mirroring
//! story is told in.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_cluster_mirrors_response::{
    DescribedMirror, MirrorPartition,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    create_cluster_mirror_request, last_mirrored_offsets_request, pause_mirror_topics_request,
    resume_mirror_topics_request, start_mirror_topics_request, stop_mirror_topics_request,
    CreateClusterMirrorRequest, CreateClusterMirrorResponse, DeleteClusterMirrorRequest,
    DeleteClusterMirrorResponse, DescribeClusterMirrorsRequest, LastMirroredOffsetsRequest,
    LastMirroredOffsetsResponse, ListClusterMirrorsRequest, ListClusterMirrorsResponse,
    PauseMirrorTopicsRequest, PauseMirrorTopicsResponse, ResumeMirrorTopicsRequest,
    ResumeMirrorTopicsResponse, StartMirrorTopicsRequest, StartMirrorTopicsResponse,
    StopMirrorTopicsRequest, StopMirrorTopicsResponse,
};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, DescribeConfigsRequest, FetchRequest, GroupId,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use tern_broker::Server;
use tern_protocol::client::KafkaConnection;
use tern_protocol::record_batch::{Compression, RecordBatchHeader};
use tern_protocol::records::RecordBatchBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{create_topic, name, produce, start_in, wait_until};

/// Logs to stderr when RUST_LOG is set (`RUST_LOG=tern_mirror=debug cargo test ...`).
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// A server that can be stopped and started again on the same data dir.
pub struct Node {
    pub server: Option<Server>,
    pub dir: tempfile::TempDir,
    pub overrides: Vec<(String, String)>,
    pub addr: SocketAddr,
}

impl Node {
    pub async fn start(overrides: &[(&str, &str)]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let overrides: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let server = start_with(dir.path(), &overrides).await;
        let addr = server.local_addrs[0];
        Node {
            server: Some(server),
            dir,
            overrides,
            addr,
        }
    }

    /// `host:port` for a mirror's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    pub async fn connect(&self) -> KafkaConnection {
        KafkaConnection::connect(self.addr, "mirror-test")
            .await
            .unwrap()
    }

    /// Server::shutdown: stops accepting, finishes requests, closes the logs.
    pub async fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await.unwrap();
        }
    }

    /// Starts again on the same dir; `same_port` binds the port it had.
    pub async fn restart(&mut self, same_port: bool) {
        self.stop().await;
        let mut overrides = self.overrides.clone();
        if same_port {
            overrides.retain(|(k, _)| k != "listeners");
            overrides.push((
                "listeners".into(),
                format!("PLAINTEXT://127.0.0.1:{}", self.addr.port()),
            ));
        }
        let server = start_with(self.dir.path(), &overrides).await;
        self.addr = server.local_addrs[0];
        self.server = Some(server);
    }
}

async fn start_with(dir: &std::path::Path, overrides: &[(String, String)]) -> Server {
    let pairs: Vec<(&str, &str)> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    start_in(dir, &pairs).await
}

// ---------------------------------------------------------------------------------------------
// The mirror RPCs.

/// A test's string as a request field.
fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub async fn create_mirror(
    conn: &mut KafkaConnection,
    mirror: &str,
    configs: &[(&str, Option<&str>)],
) -> CreateClusterMirrorResponse {
    let configs = configs.iter().map(|(k, v)| {
        create_cluster_mirror_request::Config::default()
            .with_name(sb(k))
            .with_value(v.map(sb))
    });
    let req = CreateClusterMirrorRequest::default()
        .with_mirror_name(sb(mirror))
        .with_configs(configs.collect());
    conn.send(&req, 0).await.unwrap()
}

/// CreateClusterMirror with `bootstrap.servers` and a short fetch wait; asserts success.
pub async fn create_mirror_to(conn: &mut KafkaConnection, mirror: &str, bootstrap: &str) {
    let r = create_mirror(
        conn,
        mirror,
        &[
            ("bootstrap.servers", Some(bootstrap)),
            ("mirror.fetch.wait.max.ms", Some("200")),
            ("mirror.fetch.backoff.ms", Some("100")),
            ("request.timeout.ms", Some("5000")),
            ("mirror.socket.timeout.ms", Some("5000")),
        ],
    )
    .await;
    assert_eq!(r.error_code, 0, "create mirror {mirror}: {r:?}");
}

pub async fn start_topics(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[&str],
) -> StartMirrorTopicsResponse {
    let topics = topics.iter().map(|t| {
        start_mirror_topics_request::TopicData::default()
            .with_topic_name(sb(t))
            .with_num_partitions(-1)
    });
    let req = StartMirrorTopicsRequest::default()
        .with_mirror_name(sb(mirror))
        .with_topics(topics.collect());
    conn.send(&req, 0).await.unwrap()
}

/// Sends a request of the mirror's `topics` by name (stop, pause, resume: one generated type
/// each) and returns its response.
macro_rules! by_name {
    ($conn:expr, $request:ident, $module:ident, $mirror:expr, $topics:expr) => {{
        let topics = $topics.iter();
        let topics = topics.map(|t| $module::TopicData::default().with_topic_name(sb(t)));
        let req = $request::default()
            .with_mirror_name(sb($mirror))
            .with_topics(topics.collect());
        $conn.send(&req, 0).await.unwrap()
    }};
}

pub async fn stop_topics(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[&str],
) -> StopMirrorTopicsResponse {
    by_name!(
        conn,
        StopMirrorTopicsRequest,
        stop_mirror_topics_request,
        mirror,
        topics
    )
}

pub async fn pause_topics(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[&str],
) -> PauseMirrorTopicsResponse {
    by_name!(
        conn,
        PauseMirrorTopicsRequest,
        pause_mirror_topics_request,
        mirror,
        topics
    )
}

pub async fn resume_topics(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[&str],
) -> ResumeMirrorTopicsResponse {
    by_name!(
        conn,
        ResumeMirrorTopicsRequest,
        resume_mirror_topics_request,
        mirror,
        topics
    )
}

pub async fn list_mirrors(conn: &mut KafkaConnection) -> ListClusterMirrorsResponse {
    let req = ListClusterMirrorsRequest::default().with_include_topic_names(true);
    conn.send(&req, 0).await.unwrap()
}

pub async fn describe(conn: &mut KafkaConnection, mirror: &str) -> DescribedMirror {
    let req = DescribeClusterMirrorsRequest::default().with_mirror_names(vec![sb(mirror)]);
    let mut r = conn.send(&req, 0).await.unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.mirrors.len(), 1, "{r:?}");
    r.mirrors.remove(0)
}

/// The described partitions of `topic`, by index (empty if the topic is not in the mirror).
pub async fn partition_details(
    conn: &mut KafkaConnection,
    mirror: &str,
    topic: &str,
) -> Vec<MirrorPartition> {
    let m = describe(conn, mirror).await;
    let mut parts: Vec<MirrorPartition> = m
        .topics
        .into_iter()
        .filter(|t| t.topic_name.as_str() == topic)
        .flat_map(|t| t.partitions)
        .collect();
    parts.sort_by_key(|p| p.partition_index);
    parts
}

pub async fn delete_mirror(
    conn: &mut KafkaConnection,
    mirror: &str,
) -> DeleteClusterMirrorResponse {
    let req = DeleteClusterMirrorRequest::default().with_mirror_name(sb(mirror));
    conn.send(&req, 0).await.unwrap()
}

pub async fn last_mirrored_offsets(
    conn: &mut KafkaConnection,
    mirror: &str,
    topic: &str,
    partitions: &[i32],
) -> LastMirroredOffsetsResponse {
    let partitions = partitions
        .iter()
        .map(|&p| last_mirrored_offsets_request::PartitionData::default().with_partition_index(p));
    let topic = last_mirrored_offsets_request::TopicData::default()
        .with_name(sb(topic))
        .with_partitions(partitions.collect());
    let req = LastMirroredOffsetsRequest::default()
        .with_mirror_name(sb(mirror))
        .with_topics(vec![topic]);
    conn.send(&req, 0).await.unwrap()
}

/// The per-topic mirror responses (start, stop, pause, resume): distinct generated types with
/// the same fields, read alike by `assert_topic_codes`.
pub trait TopicResults: std::fmt::Debug {
    /// The top-level error code.
    fn top_error(&self) -> i16;
    /// Each topic's name and error code.
    fn topic_codes(&self) -> Vec<(String, i16)>;
}

macro_rules! topic_results {
    ($($response:ident),*) => {$(
        impl TopicResults for $response {
            fn top_error(&self) -> i16 {
                self.error_code
            }
            fn topic_codes(&self) -> Vec<(String, i16)> {
                self.topics.iter().map(|t| (t.name.to_string(), t.error_code)).collect()
            }
        }
    )*};
}

topic_results!(
    StartMirrorTopicsResponse,
    StopMirrorTopicsResponse,
    PauseMirrorTopicsResponse,
    ResumeMirrorTopicsResponse
);

/// Asserts that every topic result of a mirror response has `code` (and no top-level error).
pub fn assert_topic_codes(r: &impl TopicResults, code: i16, what: &str) {
    assert_eq!(r.top_error(), 0, "{what}: top-level error: {r:?}");
    let topics = r.topic_codes();
    assert!(!topics.is_empty(), "{what}: no topic results: {r:?}");
    for (name, error_code) in topics {
        assert_eq!(error_code, code, "{what}: topic {name}: {r:?}");
    }
}

/// Waits until every partition of `topic` is MIRRORING with lag 0 and a destination end
/// equal to `source_ends` (by partition index). Returns the details.
pub async fn wait_mirrored(
    conn: &mut KafkaConnection,
    mirror: &str,
    topic: &str,
    source_ends: &[i64],
) -> Vec<MirrorPartition> {
    let what = format!("{topic} to be mirrored by {mirror} up to {source_ends:?}");
    wait_until(&what, async || {
        let parts = partition_details(conn, mirror, topic).await;
        let ok = parts.len() == source_ends.len()
            && parts.iter().all(|p| {
                p.state_value.as_str() == "MIRRORING"
                    && p.lag == 0
                    && p.source_offset == source_ends[p.partition_index as usize]
                    && p.destination_offset == source_ends[p.partition_index as usize]
            });
        if ok {
            Ok(parts)
        } else {
            Err(format!("{parts:?}"))
        }
    })
    .await
}

/// Waits until every partition of `topic` has `state`.
pub async fn wait_state(
    conn: &mut KafkaConnection,
    mirror: &str,
    topic: &str,
    partitions: usize,
    state: &str,
) -> Vec<MirrorPartition> {
    let what = format!("{partitions} partitions of {topic} to be {state} in {mirror}");
    wait_until(&what, async || {
        let parts = partition_details(conn, mirror, topic).await;
        if parts.len() == partitions && parts.iter().all(|p| p.state_value.as_str() == state) {
            Ok(parts)
        } else {
            Err(format!("{parts:?}"))
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Kafka APIs.

/// ListOffsets: -1 latest (high watermark), -2 earliest.
pub async fn list_offset(
    conn: &mut KafkaConnection,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let resp = conn.send(&req, 7).await.unwrap();
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets {topic}-{partition}: {resp:?}");
    p.offset
}

pub async fn end_offsets(conn: &mut KafkaConnection, topic: &str, partitions: i32) -> Vec<i64> {
    let mut out = Vec::new();
    for p in 0..partitions {
        out.push(list_offset(conn, topic, p, -1).await);
    }
    out
}

/// Metadata v12 of one topic: (error code, topic id, partition count).
pub async fn topic_metadata(conn: &mut KafkaConnection, topic: &str) -> (i16, uuid::Uuid, usize) {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(false);
    let resp = conn.send(&req, 12).await.unwrap();
    let t = &resp.topics[0];
    (t.error_code, t.topic_id, t.partitions.len())
}

/// DescribeConfigs of a topic: name -> (value, config source).
pub async fn topic_configs(
    conn: &mut KafkaConnection,
    topic: &str,
) -> BTreeMap<String, (Option<String>, i8)> {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(None)]);
    let resp = conn.send(&req, 4).await.unwrap();
    let r = &resp.results[0];
    assert_eq!(r.error_code, 0, "DescribeConfigs {topic}: {r:?}");
    r.configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                (c.value.as_ref().map(|v| v.to_string()), c.config_source),
            )
        })
        .collect()
}

/// The configs set on the topic itself (source TOPIC_CONFIG).
pub async fn explicit_topic_configs(
    conn: &mut KafkaConnection,
    topic: &str,
) -> BTreeMap<String, String> {
    topic_configs(conn, topic)
        .await
        .into_iter()
        .filter(|(_, (_, source))| *source == 1)
        .map(|(k, (v, _))| (k, v.unwrap_or_default()))
        .collect()
}

pub async fn delete_records(
    conn: &mut KafkaConnection,
    topic: &str,
    partition: i32,
    offset: i64,
) -> (i16, i64) {
    let req = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])])
        .with_timeout_ms(5000);
    let resp = conn.send(&req, 2).await.unwrap();
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// Produce (acks=all): (error code, base offset).
pub async fn produce_batch(
    conn: &mut KafkaConnection,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> (i16, i64) {
    let resp = produce(conn, topic, partition, records).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Produces and asserts success; returns the base offset.
pub async fn produce_ok(
    conn: &mut KafkaConnection,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> i64 {
    let (code, base) = produce_batch(conn, topic, partition, records).await;
    assert_eq!(code, 0, "produce to {topic}-{partition}");
    base
}

/// One partition's log as read through Fetch: its start offset, high watermark, and every
/// batch (base offset, bytes) from the start to the high watermark.
#[derive(Debug, Clone)]
pub struct PartitionLog {
    pub log_start: i64,
    pub high_watermark: i64,
    pub batches: Vec<(i64, Bytes)>,
}

impl PartitionLog {
    /// The batches with the partition leader epoch (bytes 12..16) zeroed.
    /// (base offset, batch bytes), the partition leader epoch included: a mirror keeps the
    /// source's batches byte for byte.
    pub fn batch_bytes(&self) -> Vec<(i64, Vec<u8>)> {
        self.batches.iter().map(|(o, b)| (*o, b.to_vec())).collect()
    }

    pub fn total_bytes(&self) -> usize {
        self.batches.iter().map(|(_, b)| b.len()).sum()
    }
}

/// Reads a whole partition with Fetch v12 (read_uncommitted), from the log start.
pub async fn fetch_log(conn: &mut KafkaConnection, topic: &str, partition: i32) -> PartitionLog {
    let log_start = list_offset(conn, topic, partition, -2).await;
    let mut offset = log_start;
    let mut batches = Vec::new();
    let mut high_watermark;
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(
            rounds < 10_000,
            "fetch_log {topic}-{partition} does not advance"
        );
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(8 << 20)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(4 << 20)])]);
        let resp = conn.send(&req, 12).await.unwrap();
        assert_eq!(resp.error_code, 0, "fetch {topic}-{partition}");
        let p = &resp.responses[0].partitions[0];
        assert_eq!(
            p.error_code, 0,
            "fetch {topic}-{partition} at {offset}: {p:?}"
        );
        high_watermark = p.high_watermark;
        let records = p.records.clone().unwrap_or_default();
        let mut pos = 0;
        let mut progressed = false;
        while pos < records.len() {
            let Ok(h) = RecordBatchHeader::parse(&records[pos..]) else {
                break;
            };
            if h.size() > records.len() - pos {
                break;
            }
            let bytes = records.slice(pos..pos + h.size());
            pos += h.size();
            if h.last_offset() < offset {
                continue;
            }
            batches.push((h.base_offset, bytes));
            offset = h.next_offset();
            progressed = true;
        }
        if offset >= high_watermark {
            break;
        }
        assert!(
            progressed,
            "fetch {topic}-{partition} at {offset} returned nothing below the high watermark {high_watermark}"
        );
    }
    PartitionLog {
        log_start,
        high_watermark,
        batches,
    }
}

/// Asserts two partitions hold the same batches at the same offsets, byte for byte except the
/// partition leader epoch; returns the source's log.
pub async fn assert_same_log(
    source: &mut KafkaConnection,
    destination: &mut KafkaConnection,
    topic: &str,
    partition: i32,
) -> PartitionLog {
    let s = fetch_log(source, topic, partition).await;
    let d = fetch_log(destination, topic, partition).await;
    assert_eq!(
        s.high_watermark, d.high_watermark,
        "{topic}-{partition}: high watermarks differ"
    );
    let (sn, dn) = (s.batch_bytes(), d.batch_bytes());
    assert_eq!(
        sn.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        dn.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        "{topic}-{partition}: batch offsets differ"
    );
    for ((o, a), (_, b)) in sn.iter().zip(dn.iter()) {
        assert!(
            a == b,
            "{topic}-{partition}: batch at offset {o} differs ({} vs {} bytes)",
            a.len(),
            b.len()
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Batches.

/// A batch of `n` records with compression `c`; `producer` makes it idempotent.
pub fn make_batch(c: Compression, n: usize, producer: Option<(i64, i16, i32)>, tag: &str) -> Bytes {
    let mut b = RecordBatchBuilder::new(c);
    if let Some((pid, epoch, seq)) = producer {
        b = b.producer(pid, epoch, seq);
    }
    for i in 0..n {
        let value = format!("{tag}-{i}-{}", "payload ".repeat(i % 7 + 1));
        let key = format!("key-{}", i % 5);
        b.push(
            1_700_000_000_000 + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

/// An uncompressed batch of `n` records of `size` pseudo-random bytes each.
pub fn big_batch(n: usize, size: usize, seed: u64) -> Bytes {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut b = RecordBatchBuilder::new(Compression::None);
    for i in 0..n {
        let value: Vec<u8> = (0..size)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) as u8
            })
            .collect();
        b.push(1_700_000_000_000 + i as i64, None, Some(&value), &[])
            .unwrap();
    }
    b.build().unwrap()
}

// ---------------------------------------------------------------------------------------------
// A byte-counting TCP proxy.

/// Forwards every connection to a target and counts the bytes in each direction.
pub struct Proxy {
    pub port: u16,
    /// Bytes from the clients to the target.
    pub upstream: Arc<AtomicU64>,
    /// Bytes from the target back to the clients.
    pub downstream: Arc<AtomicU64>,
    /// The api key of every request frame sent through, in order.
    keys: Arc<std::sync::Mutex<Vec<i16>>>,
    /// When set, the next request with this api key closes its connection instead.
    drop_next: Arc<std::sync::Mutex<Option<i16>>>,
    listener: Option<TcpListener>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    /// Binds a loopback port; call [`Proxy::forward_to`] once the target is known.
    pub async fn bind() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Proxy {
            port: listener.local_addr().unwrap().port(),
            upstream: Arc::new(AtomicU64::new(0)),
            downstream: Arc::new(AtomicU64::new(0)),
            keys: Arc::new(std::sync::Mutex::new(Vec::new())),
            drop_next: Arc::new(std::sync::Mutex::new(None)),
            listener: Some(listener),
            task: None,
        }
    }

    pub fn forward_to(&mut self, target: SocketAddr) {
        let listener = self.listener.take().expect("forward_to once");
        let (up, down) = (self.upstream.clone(), self.downstream.clone());
        let keys = self.keys.clone();
        let drop_next = self.drop_next.clone();
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let (up, down) = (up.clone(), down.clone());
                let filter = Some((keys.clone(), drop_next.clone()));
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pump(cr, sw, up, filter), pump(sr, cw, down, None));
                });
            }
        }));
    }

    /// Closes the connection that carries the next request with `api_key` (a fault).
    pub fn drop_next_request(&self, api_key: i16) {
        *self.drop_next.lock().unwrap() = Some(api_key);
    }

    /// Whether the armed fault has fired.
    pub fn fault_fired(&self) -> bool {
        self.drop_next.lock().unwrap().is_none()
    }

    /// The api keys of the requests seen so far.
    pub fn request_keys(&self) -> Vec<i16> {
        self.keys.lock().unwrap().clone()
    }

    /// `host:port` of the proxy, for a mirror's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn total(&self) -> u64 {
        self.upstream.load(Ordering::SeqCst) + self.downstream.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The request api keys seen, and the api key whose next request closes its connection.
type RequestFilter = (
    Arc<std::sync::Mutex<Vec<i16>>>,
    Arc<std::sync::Mutex<Option<i16>>>,
);

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counter: Arc<AtomicU64>,
    filter: Option<RequestFilter>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // Request framing: int32 size, then int16 api key.
    let mut pending: Vec<u8> = Vec::new();
    let mut skip = 0usize;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        counter.fetch_add(n as u64, Ordering::SeqCst);
        let mut fault = false;
        if let Some((keys, drop_next)) = &filter {
            let mut data = &buf[..n];
            let skipped = skip.min(data.len());
            skip -= skipped;
            data = &data[skipped..];
            pending.extend_from_slice(data);
            while pending.len() >= 6 {
                let size = i32::from_be_bytes(pending[0..4].try_into().unwrap()).max(0) as usize;
                let key = i16::from_be_bytes(pending[4..6].try_into().unwrap());
                keys.lock().unwrap().push(key);
                let mut armed = drop_next.lock().unwrap();
                if *armed == Some(key) {
                    *armed = None;
                    fault = true;
                }
                if pending.len() >= 4 + size {
                    pending.drain(..4 + size);
                } else {
                    skip = 4 + size - pending.len();
                    pending.clear();
                }
            }
        }
        if fault {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Consumer-group offsets.

/// A standalone OffsetCommit (no member, generation -1) of one partition; its error code.
pub async fn commit_offset(
    conn: &mut KafkaConnection,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])]);
    let r = conn.send(&request, 8).await.unwrap();
    r.topics[0].partitions[0].error_code
}

/// The group's committed offset of one partition (-1 if none).
pub async fn committed_offset(
    conn: &mut KafkaConnection,
    group: &str,
    topic: &str,
    partition: i32,
) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![partition])]));
    let r = conn.send(&request, 7).await.unwrap();
    r.topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.committed_offset)
        .unwrap_or(-1)
}

/// Sets share group `group`'s start offset of one partition (AlterShareGroupOffsets); the
/// group-level and the partition's error codes.
pub async fn alter_share_offset(
    conn: &mut KafkaConnection,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> (i16, i16) {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    let request = kafka_protocol::messages::AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(name(topic))
            .with_partitions(vec![
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(partition)
                    .with_start_offset(offset),
            ])]);
    let r = conn.send(&request, 0).await.unwrap();
    let partition_code = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.error_code);
    (r.error_code, partition_code)
}

/// Share group `group`'s start offsets, (topic, partition) to (offset, leader epoch), from
/// DescribeShareGroupOffsets of every partition it has; empty for no such share group.
pub async fn share_offsets(
    conn: &mut KafkaConnection,
    group: &str,
) -> BTreeMap<(String, i32), (i64, i32)> {
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    let request = kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default()
        .with_groups(vec![DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(None)]);
    let r = conn.send(&request, 1).await.unwrap();
    let g = &r.groups[0];
    assert_eq!(g.error_code, 0, "{g:?}");
    g.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!(p.error_code, 0, "{p:?}");
                (
                    (t.topic_name.to_string(), p.partition_index),
                    (p.start_offset, p.leader_epoch),
                )
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The steps a mirroring story is told in.

/// TopicWriteProtectedByMirror: a produce to a mirror topic.
pub const READ_ONLY_TOPIC: i16 = 134;

/// One broker playing a cluster of a mirroring story (a source, a destination, or both in
/// turn), with a connection to it. The steps assert that they succeed; a step whose outcome
/// is what a test is about is better sent with the plain RPC helpers on [`Cluster::conn`].
pub struct Cluster {
    pub node: Node,
    conn: Option<KafkaConnection>,
}

impl Cluster {
    /// Starts a broker with these config overrides (and tracing, when RUST_LOG asks for it).
    pub async fn start(overrides: &[(&str, &str)]) -> Cluster {
        init_tracing();
        let node = Node::start(overrides).await;
        let conn = Some(node.connect().await);
        Cluster { node, conn }
    }

    /// Starts a broker that advertises a byte-counting proxy in front of it as its address, so
    /// a mirror bootstrapped from the proxy sends everything through it. The cluster's own
    /// connection goes to the broker directly.
    pub async fn start_behind_proxy(overrides: &[(&str, &str)]) -> (Cluster, Proxy) {
        let mut proxy = Proxy::bind().await;
        let advertised = format!("PLAINTEXT://127.0.0.1:{}", proxy.port);
        let mut overrides = overrides.to_vec();
        overrides.push(("advertised.listeners", advertised.as_str()));
        let cluster = Cluster::start(&overrides).await;
        proxy.forward_to(cluster.node.addr);
        (cluster, proxy)
    }

    /// The cluster's connection.
    pub fn conn(&mut self) -> &mut KafkaConnection {
        self.conn.as_mut().expect("the cluster is stopped")
    }

    /// Another connection.
    pub async fn connect(&self) -> KafkaConnection {
        self.node.connect().await
    }

    /// `host:port` for a mirror's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.node.bootstrap()
    }

    /// Closes the connection and shuts the broker down.
    pub async fn stop(&mut self) {
        self.conn = None;
        self.node.stop().await;
    }

    /// Starts again on the same data dir (`same_port`: the port it had) and reconnects.
    pub async fn restart(&mut self, same_port: bool) {
        self.conn = None;
        self.node.restart(same_port).await;
        self.conn = Some(self.node.connect().await);
    }

    // -- Topics and records.

    /// Creates a topic; asserts it was created.
    pub async fn create_topic(&mut self, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        let r = create_topic(self.conn(), topic, partitions, configs).await;
        assert_eq!(r.topics[0].error_code, 0, "create topic {topic}: {r:?}");
    }

    /// Produces one batch (acks=all) and asserts success; returns its base offset.
    pub async fn produce(&mut self, topic: &str, partition: i32, records: Bytes) -> i64 {
        produce_ok(self.conn(), topic, partition, records).await
    }

    /// Asserts a one-record produce is refused with READ_ONLY_TOPIC.
    pub async fn assert_read_only(&mut self, topic: &str, partition: i32, why: &str) {
        let batch = make_batch(Compression::None, 1, None, "x");
        let (code, _) = produce_batch(self.conn(), topic, partition, batch).await;
        assert_eq!(code, READ_ONLY_TOPIC, "{topic}-{partition}: {why}");
    }

    /// The topic's partition count, from Metadata; asserts the topic exists.
    pub async fn partition_count(&mut self, topic: &str) -> i32 {
        let (code, _, n) = topic_metadata(self.conn(), topic).await;
        assert_eq!(code, 0, "metadata of {topic}");
        n as i32
    }

    /// The high watermark of every partition of the topic.
    pub async fn end_offsets(&mut self, topic: &str) -> Vec<i64> {
        let n = self.partition_count(topic).await;
        end_offsets(self.conn(), topic, n).await
    }

    /// Shows the topic does not move: its end offsets stay `ends` for the whole `window`.
    pub async fn assert_end_offsets_stay(
        &mut self,
        topic: &str,
        ends: &[i64],
        window: Duration,
        what: &str,
    ) {
        crate::support::holds_for(window, what, async || {
            let now = self.end_offsets(topic).await;
            if now == ends {
                Ok(())
            } else {
                Err(format!(
                    "{topic}'s end offsets moved from {ends:?} to {now:?}"
                ))
            }
        })
        .await
    }

    /// The whole log of one partition, read with Fetch.
    pub async fn log(&mut self, topic: &str, partition: i32) -> PartitionLog {
        fetch_log(self.conn(), topic, partition).await
    }

    /// The configs set on the topic itself.
    pub async fn configs(&mut self, topic: &str) -> BTreeMap<String, String> {
        explicit_topic_configs(self.conn(), topic).await
    }

    // -- Mirroring, as seen from the destination.

    /// CreateClusterMirror from `source` (short fetch waits); asserts success.
    pub async fn mirror_from(&mut self, mirror: &str, source: &Cluster) {
        self.mirror_from_address(mirror, &source.bootstrap()).await;
    }

    /// CreateClusterMirror from the given `bootstrap.servers`; asserts success.
    pub async fn mirror_from_address(&mut self, mirror: &str, bootstrap: &str) {
        create_mirror_to(self.conn(), mirror, bootstrap).await;
    }

    /// StartMirrorTopics; asserts every topic started.
    pub async fn start_mirror_topics(&mut self, mirror: &str, topics: &[&str]) {
        let r = start_topics(self.conn(), mirror, topics).await;
        assert_topic_codes(&r, 0, &format!("start {topics:?} in {mirror}"));
    }

    /// PauseMirrorTopics; asserts every topic paused.
    pub async fn pause_mirror_topics(&mut self, mirror: &str, topics: &[&str]) {
        let r = pause_topics(self.conn(), mirror, topics).await;
        assert_topic_codes(&r, 0, &format!("pause {topics:?} in {mirror}"));
    }

    /// ResumeMirrorTopics; asserts every topic resumed.
    pub async fn resume_mirror_topics(&mut self, mirror: &str, topics: &[&str]) {
        let r = resume_topics(self.conn(), mirror, topics).await;
        assert_topic_codes(&r, 0, &format!("resume {topics:?} in {mirror}"));
    }

    /// StopMirrorTopics (a failover); asserts every topic stopped.
    pub async fn stop_mirror_topics(&mut self, mirror: &str, topics: &[&str]) {
        let r = stop_topics(self.conn(), mirror, topics).await;
        assert_topic_codes(&r, 0, &format!("stop {topics:?} in {mirror}"));
    }

    /// The mirror's partitions of `topic`, by index.
    pub async fn mirror_partitions(&mut self, mirror: &str, topic: &str) -> Vec<MirrorPartition> {
        partition_details(self.conn(), mirror, topic).await
    }

    /// Waits until every partition of the (local) topic has `state` in the mirror.
    pub async fn wait_state(
        &mut self,
        mirror: &str,
        topic: &str,
        state: &str,
    ) -> Vec<MirrorPartition> {
        let n = self.partition_count(topic).await as usize;
        wait_state(self.conn(), mirror, topic, n, state).await
    }

    /// Reads the source's end offsets of `topic` and waits until the mirror holds exactly that
    /// much of every partition, MIRRORING with no lag. Returns those end offsets.
    pub async fn wait_caught_up(
        &mut self,
        source: &mut Cluster,
        mirror: &str,
        topic: &str,
    ) -> Vec<i64> {
        let ends = source.end_offsets(topic).await;
        wait_mirrored(self.conn(), mirror, topic, &ends).await;
        ends
    }

    /// Creates a mirror from `source`, starts `topic` in it and waits until it has caught up
    /// with the source; returns the source's end offsets.
    pub async fn mirror_topic_from(
        &mut self,
        source: &mut Cluster,
        mirror: &str,
        topic: &str,
    ) -> Vec<i64> {
        self.mirror_from(mirror, source).await;
        self.start_mirror_topics(mirror, &[topic]).await;
        self.wait_caught_up(source, mirror, topic).await
    }

    /// Asserts every partition of `topic` here holds the source's batches at the same offsets,
    /// byte for byte; returns the source's logs, by partition.
    pub async fn assert_same_logs_as(
        &mut self,
        source: &mut Cluster,
        topic: &str,
    ) -> Vec<PartitionLog> {
        let mut logs = Vec::new();
        for p in 0..source.partition_count(topic).await {
            logs.push(assert_same_log(source.conn(), self.conn(), topic, p).await);
        }
        logs
    }
}
