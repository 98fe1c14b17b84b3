//! Cluster mirroring between two in-process Tern servers over loopback: byte-for-byte copies
//! with every codec, read-only mirror topics, pause/resume/stop, failback moving only the delta,
//! bad input, restarts, source retention and unreachable sources.
//!
//! Each test tells its story with [`Cluster`] (support/mirror.rs): a source and a destination
//! broker, the mirror steps (each asserting it succeeded), waits on conditions with deadlines
//! (`wait_until`, `wait_caught_up`, `wait_state`) and, to show that something does *not*
//! happen, `holds_for` windows. The plain RPC helpers are used where an error code is the point.

#[path = "support/mirror.rs"]
mod mirror_support;
mod support;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::InitProducerIdRequest;
use kafka_protocol::protocol::StrBytes;
use mirror_support::*;
use support::{create_topic, holds_for, poll_until, wait_until};
use tern_protocol::record_batch::{Compression, RecordBatchHeader};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

const CLUSTER_MIRROR_ALREADY_EXISTS: i16 = 136;
const UNKNOWN_CLUSTER_MIRROR: i16 = 137;
const TOPIC_ALREADY_IN_CLUSTER_MIRROR: i16 = 138;
const TOPIC_NOT_IN_CLUSTER_MIRROR: i16 = 139;
const MIRROR_TOPIC_ALREADY_PAUSED: i16 = 140;
const MIRROR_TOPIC_NOT_PAUSED: i16 = 141;
const CLUSTER_MIRROR_NOT_EMPTY: i16 = 143;
const MIRROR_TOPIC_NOT_STOPPED: i16 = 146;
const LAST_MIRRORED_OFFSETS_KEY: i16 = 97;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;

/// Produces, on every partition, batches of each codec: one record, several records, and an
/// idempotent producer's batch; returns the next sequence per partition.
async fn produce_codec_mix(
    conn: &mut tern_protocol::client::KafkaConnection,
    topic: &str,
    partitions: i32,
    pid_base: i64,
) -> Vec<i32> {
    let mut seqs = Vec::new();
    for p in 0..partitions {
        let pid = pid_base + p as i64;
        let mut seq = 0;
        for (i, c) in CODECS.iter().enumerate() {
            let tag = format!("{topic}-{p}-{i}");
            produce_ok(
                conn,
                topic,
                p,
                make_batch(*c, 1, None, &format!("one-{tag}")),
            )
            .await;
            produce_ok(
                conn,
                topic,
                p,
                make_batch(*c, 7 + i, None, &format!("many-{tag}")),
            )
            .await;
            let n = 3 + i;
            produce_ok(
                conn,
                topic,
                p,
                make_batch(*c, n, Some((pid, 0, seq)), &format!("idem-{tag}")),
            )
            .await;
            seq += n as i32;
        }
        seqs.push(seq);
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mirrors_every_codec_byte_for_byte_with_topic_id_and_configs() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    let configs = [
        ("retention.ms", "3600000"),
        ("segment.bytes", "16384"),
        ("max.message.bytes", "2000000"),
        ("retention.bytes", "500000000"),
        // In mirror.topic.properties.exclude by default: not copied.
        ("min.insync.replicas", "1"),
    ];
    src.create_topic("orders", 3, &configs).await;
    let mut seqs = produce_codec_mix(src.conn(), "orders", 3, 7000).await;
    for p in 0..3 {
        // Several 16 KiB segments.
        for i in 0..4 {
            src.produce("orders", p, big_batch(20, 400, (p * 10 + i) as u64))
                .await;
        }
    }
    // The source really holds what the test means to mirror.
    for p in 0..3 {
        let log = src.log("orders", p).await;
        let headers: Vec<RecordBatchHeader> = log
            .batches
            .iter()
            .map(|(_, b)| RecordBatchHeader::parse(b).unwrap())
            .collect();
        let codecs: HashSet<i16> = headers
            .iter()
            .map(|h| h.compression().unwrap().id())
            .collect();
        assert_eq!(codecs.len(), 5, "partition {p} holds every codec");
        assert!(headers.iter().any(|h| h.has_producer_id()));
        assert!(headers.iter().any(|h| h.last_offset() > h.base_offset + 5));
    }

    let source_ends = dst.mirror_topic_from(&mut src, "m1", "orders").await;
    let logs = dst.assert_same_logs_as(&mut src, "orders").await;
    for (p, log) in logs.iter().enumerate() {
        assert_eq!(log.high_watermark, source_ends[p]);
    }

    // Same topic id and partition count.
    let (se, sid, sn) = topic_metadata(src.conn(), "orders").await;
    let (de, did, dn) = topic_metadata(dst.conn(), "orders").await;
    assert_eq!((se, de), (0, 0));
    assert!(!sid.is_nil());
    assert_eq!(did, sid, "the destination topic keeps the source topic id");
    assert_eq!((sn, dn), (3, 3));

    // The source's non-default configs, not the excluded ones, and mirror.name.
    let sc = src.configs("orders").await;
    let dc = dst.configs("orders").await;
    for k in [
        "retention.ms",
        "segment.bytes",
        "max.message.bytes",
        "retention.bytes",
    ] {
        assert!(sc.contains_key(k), "source config {k}: {sc:?}");
        assert_eq!(dc.get(k), sc.get(k), "config {k}: {dc:?}");
    }
    assert!(
        !dc.contains_key("min.insync.replicas"),
        "excluded config copied: {dc:?}"
    );
    assert_eq!(dc.get("mirror.name").map(String::as_str), Some("m1"));
    assert!(!sc.contains_key("mirror.name"));

    let listed = list_mirrors(dst.conn()).await;
    assert_eq!(listed.mirrors.len(), 1);
    let m = &listed.mirrors[0];
    assert_eq!(m.mirror_name.as_str(), "m1");
    assert_eq!(m.source_bootstrap.as_str(), src.bootstrap());
    assert_eq!(m.topic_count, 1);
    assert_eq!(m.topic_names, vec![StrBytes::from_static_str("orders")]);
    assert!(!m.source_cluster_id.is_empty());

    // New data keeps flowing, again byte for byte.
    for p in 0..3 {
        for (i, c) in CODECS.iter().enumerate() {
            let seq = seqs[p as usize];
            let producer = Some((7000 + p as i64, 0, seq));
            src.produce(
                "orders",
                p,
                make_batch(*c, 4, producer, &format!("late-{i}")),
            )
            .await;
            seqs[p as usize] += 4;
        }
    }
    dst.wait_caught_up(&mut src, "m1", "orders").await;
    dst.assert_same_logs_as(&mut src, "orders").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_pause_resume_and_stop() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("t", 2, &[]).await;
    let pid = 900_000;
    let mut seq = [0i32; 2];
    for p in 0..2 {
        for codec in &CODECS[..3] {
            let producer = Some((pid + p as i64, 0, seq[p as usize]));
            src.produce("t", p, make_batch(*codec, 5, producer, "a"))
                .await;
            seq[p as usize] += 5;
        }
    }
    let ends = dst.mirror_topic_from(&mut src, "m", "t").await;

    // Read-only: 134 and nothing appended.
    for p in 0..2 {
        dst.assert_read_only("t", p, "a mirror topic is read-only")
            .await;
    }
    assert_eq!(dst.end_offsets("t").await, ends);

    // Pause: PAUSED, nothing more mirrored, still read-only.
    dst.pause_mirror_topics("m", &["t"]).await;
    dst.wait_state("m", "t", "PAUSED").await;
    for p in 0..2 {
        src.produce("t", p, make_batch(Compression::Lz4, 3, None, "paused"))
            .await;
    }
    let window = Duration::from_millis(2500);
    dst.assert_end_offsets_stay("t", &ends, window, "a paused topic staying put")
        .await;
    let parts = dst.mirror_partitions("m", "t").await;
    assert!(
        parts.iter().all(|p| p.state_value.as_str() == "PAUSED"),
        "{parts:?}"
    );
    dst.assert_read_only("t", 0, "a paused topic is read-only")
        .await;

    // Resume: mirrored again.
    dst.resume_mirror_topics("m", &["t"]).await;
    let ends = dst.wait_caught_up(&mut src, "m", "t").await;
    dst.assert_same_logs_as(&mut src, "t").await;

    // Stop: answered once every partition is STOPPED; writable from the end it had.
    let before_stop = dst.end_offsets("t").await;
    assert_eq!(before_stop, ends);
    dst.stop_mirror_topics("m", &["t"]).await;
    let parts = dst.mirror_partitions("m", "t").await;
    assert_eq!(parts.len(), 2);
    assert!(
        parts.iter().all(|p| p.state_value.as_str() == "STOPPED"),
        "StopMirrorTopics answered before STOPPED: {parts:?}"
    );
    let cfg = dst.configs("t").await;
    assert_eq!(
        cfg.get("mirror.name").map(String::as_str),
        Some("m.stopped"),
        "a complete failover is recorded in mirror.name"
    );
    for p in 0..2 {
        let base = dst
            .produce("t", p, make_batch(Compression::Zstd, 2, None, "mine"))
            .await;
        assert_eq!(base, before_stop[p as usize], "partition {p}");
    }
    // Producer ids handed out here stay above the mirrored ones.
    let r = dst
        .conn()
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60000),
            4,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, 0);
    assert!(
        r.producer_id.0 > pid + 1,
        "new producer id {:?} collides with mirrored producer ids {pid}..={}",
        r.producer_id,
        pid + 1
    );
    let new_pid = r.producer_id.0;
    let producer = Some((new_pid, 0, 0));
    dst.produce(
        "t",
        0,
        make_batch(Compression::None, 2, producer, "idem-mine"),
    )
    .await;

    // Source data after the stop is not mirrored.
    let dst_ends = dst.end_offsets("t").await;
    for p in 0..2 {
        src.produce("t", p, make_batch(Compression::Gzip, 9, None, "after"))
            .await;
    }
    let window = Duration::from_millis(2500);
    dst.assert_end_offsets_stay("t", &dst_ends, window, "a stopped topic staying put")
        .await;
    let log = dst.log("t", 1).await;
    let (last_base, _) = log.batches.last().unwrap();
    assert_eq!(
        *last_base, before_stop[1],
        "the last batch is the local one"
    );
    let parts = dst.mirror_partitions("m", "t").await;
    assert!(
        parts.iter().all(|p| p.state_value.as_str() == "STOPPED"),
        "{parts:?}"
    );
}

/// Failover to B, then failback: A mirrors from B, truncating its divergent tail to B's last
/// mirrored offset and fetching only what B took after the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_fetches_only_the_delta_and_drops_the_old_sources_divergence() {
    let mut a = Cluster::start(&[]).await;
    let (mut b, proxy) = Cluster::start_behind_proxy(&[]).await;
    a.create_topic("dr", 2, &[("segment.bytes", "262144")])
        .await;
    for p in 0..2 {
        for i in 0..40 {
            a.produce("dr", p, big_batch(10, 4000, (p * 100 + i) as u64))
                .await;
        }
    }
    let failover_point = b.mirror_topic_from(&mut a, "a-to-b", "dr").await;

    // Failover.
    b.stop_mirror_topics("a-to-b", &["dr"]).await;
    let lmo = last_mirrored_offsets(b.conn(), "any", "dr", &[0, 1]).await;
    assert_eq!(lmo.error_code, 0);
    for p in &lmo.topics[0].partitions {
        assert_eq!(p.error_code, 0, "{lmo:?}");
        assert_eq!(
            p.last_mirrored_offset,
            failover_point[p.partition_index as usize]
        );
    }
    // B takes new writes (the delta); A, still up, takes writes B never sees.
    for p in 0..2 {
        for (i, c) in CODECS.iter().enumerate() {
            b.produce("dr", p, make_batch(*c, 6, None, &format!("on-b-{i}")))
                .await;
        }
        for i in 0..12 {
            let batch = make_batch(Compression::None, 9, None, &format!("lost-on-a-{i}"));
            a.produce("dr", p, batch).await;
        }
    }
    let b_ends = b.end_offsets("dr").await;
    let a_ends = a.end_offsets("dr").await;
    assert!(
        a_ends[0] > b_ends[0],
        "A's divergent tail is longer than B's delta"
    );

    // Failback: A mirrors from B (through the proxy, B's advertised address).
    let (_, a_id, _) = topic_metadata(a.conn(), "dr").await;
    let (_, b_id, _) = topic_metadata(b.conn(), "dr").await;
    assert_eq!(a_id, b_id);
    let before = proxy.total();
    let keys_before = proxy.request_keys().len();
    a.mirror_from_address("b-to-a", &proxy.bootstrap()).await;
    a.start_mirror_topics("b-to-a", &["dr"]).await;
    assert_eq!(a.wait_caught_up(&mut b, "b-to-a", "dr").await, b_ends);
    let proxied = proxy.total() - before;
    let keys: Vec<i16> = proxy.request_keys()[keys_before..].to_vec();
    assert!(
        keys.contains(&LAST_MIRRORED_OFFSETS_KEY),
        "A did not ask B for LastMirroredOffsets: {keys:?}"
    );

    let mut full = 0usize;
    let mut delta = 0usize;
    for (p, log) in a.assert_same_logs_as(&mut b, "dr").await.iter().enumerate() {
        full += log.total_bytes();
        delta += log
            .batches
            .iter()
            .filter(|(o, _)| *o >= failover_point[p])
            .map(|(_, b)| b.len())
            .sum::<usize>();
    }
    eprintln!("failback: full log {full} bytes, delta {delta} bytes, proxied {proxied} bytes");
    assert!(full > 3_000_000, "the full log is big: {full}");
    assert!(
        (proxied as usize) < delta + 128 * 1024,
        "failback moved {proxied} bytes for a delta of {delta} (full log {full})"
    );

    // A is now a read-only mirror of B, and B's new writes keep coming.
    a.assert_read_only("dr", 0, "A mirrors B after the failback")
        .await;
    for p in 0..2 {
        b.produce(
            "dr",
            p,
            make_batch(Compression::Snappy, 4, None, "more-on-b"),
        )
        .await;
    }
    a.wait_caught_up(&mut b, "b-to-a", "dr").await;
    a.assert_same_logs_as(&mut b, "dr").await;
}

/// Failback started on A while B still mirrors the topic from A (never stopped there): B answers
/// LastMirroredOffsets with MIRROR_TOPIC_NOT_STOPPED. That is a refusal, not "truncate to 0":
/// A must not throw its log away and refetch it, and neither side may lose data.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_refused_while_the_other_side_still_mirrors() {
    let mut a = Cluster::start(&[]).await;
    let (mut b, proxy) = Cluster::start_behind_proxy(&[]).await;
    a.create_topic("loop", 1, &[]).await;
    for i in 0..30 {
        a.produce("loop", 0, big_batch(10, 4000, i)).await;
    }
    let end = b.mirror_topic_from(&mut a, "a-to-b", "loop").await;
    let original = a.log("loop", 0).await;
    let lmo = last_mirrored_offsets(b.conn(), "b-to-a", "loop", &[0]).await;
    assert_eq!(
        lmo.topics[0].partitions[0].error_code, MIRROR_TOPIC_NOT_STOPPED,
        "{lmo:?}"
    );

    let before = proxy.total();
    a.mirror_from_address("b-to-a", &proxy.bootstrap()).await;
    let r = start_topics(a.conn(), "b-to-a", &["loop"]).await;
    eprintln!("failback start while B mirrors: {r:?}");
    // What must not happen has no event to wait for: A is given 3 s to truncate and refetch
    // its log from B, and must not (almost nothing crosses the proxy meanwhile).
    let refetching = async || match proxy.total() - before {
        proxied if proxied < 128 * 1024 => Ok(()),
        proxied => Err(format!(
            "A truncated and refetched its log from B ({proxied} bytes) although B answered \
             MIRROR_TOPIC_NOT_STOPPED"
        )),
    };
    holds_for(Duration::from_secs(3), "A not refetching", refetching).await;
    let proxied = proxy.total() - before;
    let parts = a.mirror_partitions("b-to-a", "loop").await;
    eprintln!(
        "A: {parts:?}; proxied {proxied} bytes of a {} byte log",
        original.total_bytes()
    );

    for (side, cluster) in [("A", &mut a), ("B", &mut b)] {
        let now = cluster.log("loop", 0).await;
        assert_eq!(now.log_start, 0, "{side} lost its log start");
        assert!(
            now.high_watermark >= end[0],
            "{side} lost data: {} < {}",
            now.high_watermark,
            end[0]
        );
        assert_eq!(
            now.batch_bytes()[..original.batches.len()],
            original.batch_bytes()[..],
            "{side}'s log changed"
        );
    }
    let refused = r.error_code != 0 || r.topics.iter().any(|t| t.error_code != 0);
    assert!(
        refused
            || parts.iter().all(|p| p.state_value.as_str() == "FAILED"
                && p.error_message.as_deref().is_some_and(|m| !m.is_empty())),
        "A mirrors from a cluster that still mirrors from A: {r:?} {parts:?}"
    );
}

/// Failback where A's first LastMirroredOffsets request to B fails (the connection drops): the
/// partition goes FAILED and is retried; the retry must still align A's log with B's last
/// mirrored offset before fetching, or A keeps its divergent tail under B's offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_retried_after_a_failed_last_mirrored_offsets_request_still_truncates() {
    let mut a = Cluster::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "100"),
        ("mirror.failed.retry.max.backoff.ms", "500"),
    ])
    .await;
    let (mut b, proxy) = Cluster::start_behind_proxy(&[]).await;
    a.create_topic("fb", 1, &[]).await;
    for i in 0..10 {
        a.produce(
            "fb",
            0,
            make_batch(CODECS[i % 5], 4, None, &format!("a{i}")),
        )
        .await;
    }
    b.mirror_topic_from(&mut a, "a-to-b", "fb").await;
    b.stop_mirror_topics("a-to-b", &["fb"]).await;
    for i in 0..3 {
        b.produce(
            "fb",
            0,
            make_batch(Compression::Gzip, 5, None, &format!("b{i}")),
        )
        .await;
    }
    for i in 0..6 {
        let batch = make_batch(Compression::None, 5, None, &format!("lost{i}"));
        a.produce("fb", 0, batch).await;
    }

    proxy.drop_next_request(LAST_MIRRORED_OFFSETS_KEY);
    a.mirror_from_address("b-to-a", &proxy.bootstrap()).await;
    a.start_mirror_topics("b-to-a", &["fb"]).await;
    wait_until("A to ask B for LastMirroredOffsets", async || {
        match proxy.fault_fired() {
            true => Ok(()),
            false => Err("the proxy has not dropped a LastMirroredOffsets request".into()),
        }
    })
    .await;
    a.wait_caught_up(&mut b, "b-to-a", "fb").await;
    let keys = proxy.request_keys();
    eprintln!(
        "LastMirroredOffsets requests: {}",
        keys.iter()
            .filter(|k| **k == LAST_MIRRORED_OFFSETS_KEY)
            .count()
    );
    a.assert_same_logs_as(&mut b, "fb").await;
}

/// B stopped a topic under one mirror, then mirrors it again under another: its old STOPPED
/// state must not answer LastMirroredOffsets (the topic is being mirrored: 146).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn last_mirrored_offsets_ignores_the_stopped_state_of_an_earlier_mirror() {
    let mut a = Cluster::start(&[]).await;
    let mut b = Cluster::start(&[]).await;
    let n = 8;
    a.create_topic("multi", n, &[]).await;
    for p in 0..n {
        a.produce("multi", p, make_batch(Compression::None, 2, None, "x"))
            .await;
    }
    let ends = b.mirror_topic_from(&mut a, "m1", "multi").await;
    b.stop_mirror_topics("m1", &["multi"]).await;
    assert_eq!(b.mirror_topic_from(&mut a, "m2", "multi").await, ends);

    let partitions: Vec<i32> = (0..n).collect();
    let r = last_mirrored_offsets(b.conn(), "any", "multi", &partitions).await;
    let codes: Vec<(i32, i16, i64)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.last_mirrored_offset))
        .collect();
    assert!(
        codes
            .iter()
            .all(|(_, code, _)| *code == MIRROR_TOPIC_NOT_STOPPED),
        "the topic is mirrored again (m2), yet LastMirroredOffsets answers: {codes:?}"
    );
    b.stop_mirror_topics("m2", &["multi"]).await;
    let r = last_mirrored_offsets(b.conn(), "any", "multi", &partitions).await;
    for p in &r.topics[0].partitions {
        assert_eq!(p.error_code, 0, "{r:?}");
        assert_eq!(
            p.last_mirrored_offset, ends[p.partition_index as usize],
            "{r:?}"
        );
    }
}

/// The metadata sync (every mirror.metadata.refresh.interval.ms) follows the source's partition
/// count and topic configs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn source_partition_and_config_changes_are_followed() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::incremental_alter_configs_request as iac;
    use kafka_protocol::messages::{CreatePartitionsRequest, IncrementalAlterConfigsRequest};
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    src.create_topic("grow", 1, &[("retention.ms", "3600000")])
        .await;
    src.produce("grow", 0, make_batch(Compression::Snappy, 3, None, "g"))
        .await;
    assert_eq!(dst.mirror_topic_from(&mut src, "m", "grow").await, [3]);

    let r = src
        .conn()
        .send(
            &CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(support::name("grow"))
                    .with_count(3)
                    .with_assignments(None)])
                .with_timeout_ms(5000),
            1,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    let r = src
        .conn()
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                iac::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("grow"))
                    .with_configs(vec![
                        iac::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_static_str("7200000"))),
                        iac::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("max.message.bytes"))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_static_str("500000"))),
                    ]),
            ]),
            1,
        )
        .await
        .unwrap();
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    for p in 0..3 {
        src.produce("grow", p, make_batch(Compression::Lz4, 2, None, "after"))
            .await;
    }
    wait_until(
        "the destination to grow to 3 partitions",
        async || match topic_metadata(dst.conn(), "grow").await.2 {
            3 => Ok(()),
            n => Err(format!("{n} partitions")),
        },
    )
    .await;
    dst.wait_caught_up(&mut src, "m", "grow").await;
    dst.assert_same_logs_as(&mut src, "grow").await;
    let cfg = wait_until("the source's new configs on the destination", async || {
        let cfg = dst.configs("grow").await;
        if cfg.get("retention.ms").map(String::as_str) == Some("7200000")
            && cfg.get("max.message.bytes").map(String::as_str) == Some("500000")
        {
            Ok(cfg)
        } else {
            Err(format!("configs not synced: {cfg:?}"))
        }
    })
    .await;
    assert_eq!(cfg.get("mirror.name").map(String::as_str), Some("m"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_mirror_rejects_bad_input_and_creates_nothing() {
    let dst = Cluster::start(&[]).await;
    let mut d = dst.connect().await;
    let ok = Some("127.0.0.1:9");
    type Configs<'a> = Vec<(&'a str, Option<&'a str>)>;
    let config_cases: Vec<(&str, Configs)> = vec![
        (
            "no bootstrap",
            vec![("mirror.fetch.max.bytes", Some("1000"))],
        ),
        ("empty", vec![]),
        (
            "unknown key",
            vec![("bootstrap.servers", ok), ("no.such.key", Some("x"))],
        ),
        ("null value", vec![("bootstrap.servers", None)]),
        (
            "null value of another key",
            vec![("bootstrap.servers", ok), ("mirror.fetch.max.bytes", None)],
        ),
        ("bad host:port", vec![("bootstrap.servers", Some("nohost"))]),
        (
            "bad number",
            vec![
                ("bootstrap.servers", ok),
                ("mirror.fetch.max.bytes", Some("-5")),
            ],
        ),
        (
            "bad regex",
            vec![
                ("bootstrap.servers", ok),
                ("mirror.topics.include", Some("(")),
            ],
        ),
        (
            "twice",
            vec![("bootstrap.servers", ok), ("bootstrap.servers", ok)],
        ),
    ];
    for (what, configs) in &config_cases {
        let r = create_mirror(&mut d, "m", configs).await;
        assert_eq!(r.error_code, INVALID_CONFIG, "{what}: {r:?}");
        assert!(r.error_message.is_some(), "{what}");
    }
    let long = "x".repeat(250);
    for bad in [
        "",
        ".",
        "..",
        "a b",
        "a/b",
        "m.removed",
        "m.paused",
        "m.stopped",
        "é",
        long.as_str(),
    ] {
        let r = create_mirror(&mut d, bad, &[("bootstrap.servers", ok)]).await;
        assert_eq!(r.error_code, INVALID_REQUEST, "mirror name {bad:?}: {r:?}");
    }
    assert!(
        list_mirrors(&mut d).await.mirrors.is_empty(),
        "nothing created"
    );

    let r = create_mirror(&mut d, "m", &[("bootstrap.servers", ok)]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = create_mirror(&mut d, "m", &[("bootstrap.servers", Some("127.0.0.1:10"))]).await;
    assert_eq!(r.error_code, CLUSTER_MIRROR_ALREADY_EXISTS);
    let listed = list_mirrors(&mut d).await;
    assert_eq!(listed.mirrors.len(), 1);
    assert_eq!(
        listed.mirrors[0].source_bootstrap.as_str(),
        "127.0.0.1:9",
        "the first create stands"
    );

    assert_eq!(
        delete_mirror(&mut d, "nope").await.error_code,
        UNKNOWN_CLUSTER_MIRROR
    );
    let describe_nope = kafka_protocol::messages::DescribeClusterMirrorsRequest::default()
        .with_mirror_names(vec![StrBytes::from_static_str("nope")]);
    let r = d.send(&describe_nope, 0).await.unwrap();
    assert_eq!(r.mirrors.len(), 1);
    assert_eq!(r.mirrors[0].error_code, UNKNOWN_CLUSTER_MIRROR);
    assert_eq!(delete_mirror(&mut d, "m").await.error_code, 0);
    assert!(list_mirrors(&mut d).await.mirrors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topic_operations_report_mirror_errors() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("t1", 2, &[]).await;
    src.create_topic("t2", 1, &[]).await;
    src.produce("t1", 0, make_batch(Compression::None, 3, None, "s"))
        .await;
    src.produce("t2", 0, make_batch(Compression::None, 3, None, "s"))
        .await;
    // A local normal topic with the source topic's name but its own id.
    dst.create_topic("t2", 1, &[("retention.ms", "123456")])
        .await;
    dst.produce("t2", 0, make_batch(Compression::None, 1, None, "local"))
        .await;
    let (_, local_t2_id, _) = topic_metadata(dst.conn(), "t2").await;
    let mut d = dst.connect().await;

    let r = start_topics(&mut d, "nope", &["t1"]).await;
    assert_eq!(r.error_code, UNKNOWN_CLUSTER_MIRROR, "{r:?}");
    assert!(r.error_message.is_some());

    dst.mirror_from("m", &src).await;
    let r = start_topics(&mut d, "m", &["missing"]).await;
    assert_topic_codes(&r, UNKNOWN_TOPIC_OR_PARTITION, "missing on the source");
    let (code, _, _) = topic_metadata(&mut d, "missing").await;
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION, "no local topic created");

    let r = start_topics(&mut d, "m", &["t2"]).await;
    assert_topic_codes(&r, TOPIC_ALREADY_EXISTS, "local topic with another id");
    let (_, id_after, _) = topic_metadata(&mut d, "t2").await;
    assert_eq!(id_after, local_t2_id);
    let cfg = explicit_topic_configs(&mut d, "t2").await;
    assert_eq!(cfg.get("retention.ms").map(String::as_str), Some("123456"));
    assert!(!cfg.contains_key("mirror.name"), "{cfg:?}");
    assert_eq!(
        dst.produce("t2", 0, make_batch(Compression::None, 1, None, "local"))
            .await,
        1,
        "the local topic is untouched and writable"
    );

    dst.start_mirror_topics("m", &["t1"]).await;
    assert_topic_codes(
        &start_topics(&mut d, "m", &["t1"]).await,
        TOPIC_ALREADY_IN_CLUSTER_MIRROR,
        "start twice",
    );
    assert_topic_codes(
        &stop_topics(&mut d, "m", &["t2"]).await,
        TOPIC_NOT_IN_CLUSTER_MIRROR,
        "stop a topic not in the mirror",
    );
    assert_topic_codes(
        &pause_topics(&mut d, "m", &["t2"]).await,
        TOPIC_NOT_IN_CLUSTER_MIRROR,
        "pause a topic not in the mirror",
    );
    assert_eq!(
        stop_topics(&mut d, "nope", &["t1"]).await.error_code,
        UNKNOWN_CLUSTER_MIRROR
    );
    assert_topic_codes(
        &resume_topics(&mut d, "m", &["t1"]).await,
        MIRROR_TOPIC_NOT_PAUSED,
        "resume not paused",
    );
    dst.pause_mirror_topics("m", &["t1"]).await;
    assert_topic_codes(
        &pause_topics(&mut d, "m", &["t1"]).await,
        MIRROR_TOPIC_ALREADY_PAUSED,
        "pause twice",
    );
    assert_eq!(
        delete_mirror(&mut d, "m").await.error_code,
        CLUSTER_MIRROR_NOT_EMPTY,
        "a paused topic keeps the mirror non-empty"
    );
    dst.resume_mirror_topics("m", &["t1"]).await;
    assert_topic_codes(
        &resume_topics(&mut d, "m", &["t1"]).await,
        MIRROR_TOPIC_NOT_PAUSED,
        "resume twice",
    );
    let ends = dst.wait_caught_up(&mut src, "m", "t1").await;
    assert_eq!(
        delete_mirror(&mut d, "m").await.error_code,
        CLUSTER_MIRROR_NOT_EMPTY
    );
    dst.stop_mirror_topics("m", &["t1"]).await;
    assert_eq!(delete_mirror(&mut d, "m").await.error_code, 0);
    assert!(list_mirrors(&mut d).await.mirrors.is_empty());
    // The stopped topic outlives its mirror, writable.
    assert_eq!(
        dst.produce("t1", 0, make_batch(Compression::None, 1, None, "mine"))
            .await,
        ends[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_cannot_set_mirror_name() {
    use kafka_protocol::messages::alter_configs_request as ac;
    use kafka_protocol::messages::incremental_alter_configs_request as iac;
    use kafka_protocol::messages::{AlterConfigsRequest, IncrementalAlterConfigsRequest};
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;

    let r = create_topic(dst.conn(), "sneaky", 1, &[("mirror.name", "m")]).await;
    assert_eq!(r.topics[0].error_code, INVALID_CONFIG);
    let (code, _, _) = topic_metadata(dst.conn(), "sneaky").await;
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION, "not created");

    src.create_topic("mirrored", 1, &[]).await;
    src.produce("mirrored", 0, make_batch(Compression::None, 2, None, "s"))
        .await;
    dst.mirror_from("m", &src).await;
    dst.start_mirror_topics("m", &["mirrored"]).await;
    dst.create_topic("plain", 1, &[]).await;
    let mut d = dst.connect().await;
    let legacy = |topic: &str, configs: Vec<(&str, &str)>| {
        AlterConfigsRequest::default().with_resources(vec![ac::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(
                configs
                    .into_iter()
                    .map(|(k, v)| {
                        ac::AlterableConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )])
    };
    let incremental = |topic: &str, key: &str, op: i8, value: Option<&str>| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            iac::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_string()))
                .with_configs(vec![iac::AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.to_string()))
                    .with_config_operation(op)
                    .with_value(value.map(|v| StrBytes::from_string(v.to_string())))]),
        ])
    };
    for topic in ["plain", "mirrored"] {
        let r = d
            .send(&legacy(topic, vec![("mirror.name", "m2")]), 1)
            .await
            .unwrap();
        assert_eq!(
            r.responses[0].error_code, INVALID_CONFIG,
            "AlterConfigs {topic}"
        );
        let r = d
            .send(&incremental(topic, "mirror.name", 0, Some("m2")), 1)
            .await
            .unwrap();
        assert_eq!(
            r.responses[0].error_code, INVALID_CONFIG,
            "IncrementalAlterConfigs {topic}"
        );
    }
    // Nor delete it from a mirrored topic (that would make it writable).
    let r = d
        .send(&incremental("mirrored", "mirror.name", 1, None), 1)
        .await
        .unwrap();
    assert_eq!(r.responses[0].error_code, INVALID_CONFIG);
    // A full replace of the other configs keeps the mirror association.
    let r = d
        .send(&legacy("mirrored", vec![("retention.ms", "7200000")]), 1)
        .await
        .unwrap();
    assert!(
        r.responses[0].error_code == 0 || r.responses[0].error_code == INVALID_CONFIG,
        "{r:?}"
    );
    let plain = explicit_topic_configs(&mut d, "plain").await;
    assert!(!plain.contains_key("mirror.name"), "{plain:?}");
    let mirrored = explicit_topic_configs(&mut d, "mirrored").await;
    assert_eq!(mirrored.get("mirror.name").map(String::as_str), Some("m"));
    dst.assert_read_only("mirrored", 0, "mirror.name stands")
        .await;
    dst.produce("plain", 0, make_batch(Compression::None, 1, None, "x"))
        .await;
}

/// StartMirrorTopics and StopMirrorTopics of one topic at once, from two connections, several
/// times: every round ends with the topic either mirroring or stopped, describe and produce agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_start_and_stop_end_consistent() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("c", 2, &[]).await;
    for p in 0..2 {
        for i in 0..3 {
            src.produce("c", p, make_batch(CODECS[i + 1], 4, None, "c"))
                .await;
        }
    }
    dst.mirror_from("m", &src).await;
    let mut outcomes = BTreeSet::new();
    for round in 0..6 {
        let mut c1 = dst.connect().await;
        let mut c2 = dst.connect().await;
        let started = Instant::now();
        let (start, stop) = if round % 2 == 0 {
            tokio::join!(
                start_topics(&mut c1, "m", &["c"]),
                stop_topics(&mut c2, "m", &["c"])
            )
        } else {
            let (stop, start) = tokio::join!(
                stop_topics(&mut c2, "m", &["c"]),
                start_topics(&mut c1, "m", &["c"])
            );
            (start, stop)
        };
        let took = started.elapsed();
        eprintln!("round {round}: start {start:?} stop {stop:?} in {took:?}");
        assert!(
            took < Duration::from_secs(35),
            "round {round} took {took:?}"
        );
        // Settle: every partition MIRRORING or STOPPED, as the topic's mirror.name asks.
        let what = format!("round {round} to settle in a consistent state");
        let state = wait_until(&what, async || {
            let cfg = dst.configs("c").await;
            let parts = dst.mirror_partitions("m", "c").await;
            let want = match cfg.get("mirror.name").map(String::as_str) {
                Some("m") => "MIRRORING",
                Some("m.stopped") => "STOPPED",
                _ => return Err(format!("{cfg:?} {parts:?}")),
            };
            if parts.len() == 2 && parts.iter().all(|p| p.state_value.as_str() == want) {
                Ok(want)
            } else {
                Err(format!("{cfg:?} {parts:?}"))
            }
        })
        .await;
        outcomes.insert(state);
        // Read-only exactly when not stopped.
        let before = dst.end_offsets("c").await;
        let batch = make_batch(Compression::None, 1, None, "r");
        let (code, base) = produce_batch(dst.conn(), "c", 1, batch).await;
        if state == "STOPPED" {
            assert_eq!(code, 0, "round {round}: a stopped topic refuses writes");
            assert_eq!(base, before[1]);
        } else {
            assert_eq!(
                code, READ_ONLY_TOPIC,
                "round {round}: a mirroring topic takes writes"
            );
        }
    }
    eprintln!("outcomes: {outcomes:?}");
    // Finally: mirror again and converge to the source byte for byte.
    let cfg = dst.configs("c").await;
    if cfg.get("mirror.name").map(String::as_str) != Some("m") {
        dst.start_mirror_topics("m", &["c"]).await;
    }
    dst.wait_caught_up(&mut src, "m", "c").await;
    dst.assert_same_logs_as(&mut src, "c").await;
}

/// Whether group `app`'s committed offset of `g`-0 is `want`.
async fn app_committed(cluster: &mut Cluster, want: i64) -> Result<(), String> {
    match committed_offset(cluster.conn(), "app", "g", 0).await {
        got if got == want => Ok(()),
        got => Err(format!("committed offset {got}, want {want}")),
    }
}

/// Synced group offsets stay within what is mirrored: a group that committed far ahead of a
/// paused (lagging) mirror gets the destination's end, follows the mirror as it catches up,
/// and after a failover its committed offset is the topic's end, not past it (so a consumer
/// with auto.offset.reset=earliest resumes there, not at 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn synced_group_offsets_never_pass_the_mirrored_end() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    src.create_topic("g", 1, &[]).await;
    src.produce("g", 0, make_batch(Compression::None, 10, None, "a"))
        .await;
    assert_eq!(dst.mirror_topic_from(&mut src, "m", "g").await, [10]);

    // The mirror lags (paused) while the group commits far ahead on the source.
    dst.pause_mirror_topics("m", &["g"]).await;
    dst.wait_state("m", "g", "PAUSED").await;
    src.produce("g", 0, make_batch(Compression::None, 50, None, "b"))
        .await;
    assert_eq!(commit_offset(src.conn(), "app", "g", 0, 55).await, 0);
    let what = "the synced offset clamped to the mirrored end";
    wait_until(what, async || app_committed(&mut dst, 10).await).await;
    // ...and it stays within the mirror through several syncs (every 300 ms).
    let what = "the synced offset staying within the mirror";
    holds_for(Duration::from_secs(1), what, async || {
        app_committed(&mut dst, 10).await
    })
    .await;

    // The mirror catches up: the offset follows, up to the source's commit.
    dst.resume_mirror_topics("m", &["g"]).await;
    assert_eq!(dst.wait_caught_up(&mut src, "m", "g").await, [60]);
    let what = "the source's commit synced";
    wait_until(what, async || app_committed(&mut dst, 55).await).await;

    // Lagging again, then a failover: the committed offset is the topic's end.
    dst.pause_mirror_topics("m", &["g"]).await;
    dst.wait_state("m", "g", "PAUSED").await;
    src.produce("g", 0, make_batch(Compression::None, 40, None, "c"))
        .await;
    assert_eq!(commit_offset(src.conn(), "app", "g", 0, 90).await, 0);
    let what = "the offset clamped at the paused end";
    wait_until(what, async || app_committed(&mut dst, 60).await).await;
    dst.stop_mirror_topics("m", &["g"]).await;
    assert_eq!(dst.end_offsets("g").await, vec![60]);
    assert_eq!(committed_offset(dst.conn(), "app", "g", 0).await, 60);
}

/// Share group `sg`'s start offset of `s`-0 on `cluster`, or None without one.
async fn share_start(cluster: &mut Cluster) -> Option<i64> {
    share_offsets(cluster.conn(), "sg")
        .await
        .get(&("s".to_string(), 0))
        .map(|(offset, _)| *offset)
}

/// Waits until share group `sg`'s start offset of `s`-0 on `cluster` is `want`.
async fn wait_share_start(cluster: &mut Cluster, want: i64, what: &str) {
    wait_until(what, async || match share_start(cluster).await {
        Some(got) if got == want => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
}

/// Share groups' start offsets (KIP-932) are synced as group offsets are: the destination
/// gets a share group with the source's start offsets, kept within what is mirrored, and
/// keeps it across a restart and a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_group_start_offsets_are_synced_within_the_mirror() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    src.create_topic("s", 1, &[]).await;
    src.produce("s", 0, make_batch(Compression::None, 10, None, "a"))
        .await;
    assert_eq!(
        alter_share_offset(src.conn(), "sg", "s", 0, 4).await,
        (0, 0)
    );
    assert_eq!(dst.mirror_topic_from(&mut src, "m", "s").await, [10]);
    wait_share_start(&mut dst, 4, "the share group's start offset synced").await;

    // Ahead of a paused mirror: clamped to the mirrored end, then followed as it catches up.
    dst.pause_mirror_topics("m", &["s"]).await;
    dst.wait_state("m", "s", "PAUSED").await;
    src.produce("s", 0, make_batch(Compression::None, 20, None, "b"))
        .await;
    assert_eq!(
        alter_share_offset(src.conn(), "sg", "s", 0, 25).await,
        (0, 0)
    );
    wait_share_start(&mut dst, 10, "the start offset clamped to the mirrored end").await;
    dst.resume_mirror_topics("m", &["s"]).await;
    assert_eq!(dst.wait_caught_up(&mut src, "m", "s").await, [30]);
    wait_share_start(
        &mut dst,
        25,
        "the source's start offset synced after catching up",
    )
    .await;

    // Failover, then a restart: the share group and its start offset stay.
    dst.stop_mirror_topics("m", &["s"]).await;
    dst.restart(true).await;
    assert_eq!(share_start(&mut dst).await, Some(25));
}

/// One mirror's source hangs (it accepts connections and never answers): every mirror has its
/// own task, so another mirror on the same broker starts, mirrors and fails over meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_source_holds_up_no_other_mirror() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicU64::new(0));
    let _hold = {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = hole.accept().await {
                held.push(conn);
                accepted.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // The hung mirror discovers topics, so its task asks the silent source on every pass.
    let r = create_mirror(
        dst.conn(),
        "hung",
        &[
            ("bootstrap.servers", Some(hole_addr.as_str())),
            ("mirror.topics.include", Some(".*")),
            ("request.timeout.ms", Some("300000")),
        ],
    )
    .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    wait_until(
        "the hung mirror to connect to its silent source",
        async || match accepted.load(Ordering::SeqCst) {
            0 => Err("no connection yet".into()),
            _ => Ok(()),
        },
    )
    .await;

    src.create_topic("f", 2, &[]).await;
    for p in 0..2 {
        src.produce("f", p, make_batch(Compression::Lz4, 7, None, "f"))
            .await;
    }
    dst.mirror_topic_from(&mut src, "fast", "f").await;
    dst.assert_same_logs_as(&mut src, "f").await;
    dst.stop_mirror_topics("fast", &["f"]).await;
    dst.produce("f", 0, make_batch(Compression::None, 1, None, "after"))
        .await;
}

/// The destination shuts down mid-mirroring and restarts on its dir: states come back from
/// `__mirror_state`, mirroring resumes without gap or duplicate, a stopped topic stays writable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destination_restart_resumes_mirroring_and_keeps_stopped_topics_writable() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("r", 2, &[("segment.bytes", "32768")])
        .await;
    src.create_topic("st", 1, &[]).await;
    for p in 0..2 {
        produce_codec_mix(src.conn(), "r", 2, 100 + p as i64 * 10).await;
    }
    src.produce("st", 0, make_batch(Compression::Snappy, 5, None, "st"))
        .await;
    dst.mirror_from("m", &src).await;
    dst.start_mirror_topics("m", &["r", "st"]).await;
    let st_end = dst.wait_caught_up(&mut src, "m", "st").await;
    dst.stop_mirror_topics("m", &["st"]).await;
    let st_base = dst
        .produce("st", 0, make_batch(Compression::None, 2, None, "mine"))
        .await;
    assert_eq!(st_base, st_end[0]);

    // A producer keeps writing to the source while the destination goes down and comes back.
    let producing = Arc::new(AtomicBool::new(true));
    let batches = Arc::new(AtomicU64::new(0));
    let writer = {
        let (producing, batches) = (producing.clone(), batches.clone());
        let mut conn = src.connect().await;
        tokio::spawn(async move {
            let mut i = 0u64;
            while producing.load(Ordering::SeqCst) {
                let c = CODECS[(i % 5) as usize];
                produce_ok(
                    &mut conn,
                    "r",
                    (i % 2) as i32,
                    make_batch(c, 1 + (i % 4) as usize, None, &format!("w{i}")),
                )
                .await;
                i += 1;
                batches.store(i, Ordering::SeqCst);
                // Pacing, not waiting: a steady stream rather than a flood.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            i
        })
    };
    let written_since = |from: u64, n: u64| {
        let batches = batches.clone();
        async move || match batches.load(Ordering::SeqCst) - from {
            written if written >= n => Ok(()),
            written => Err(format!("{written} batches written")),
        }
    };
    wait_until("mirroring of r before the restart", async || {
        let mid = dst.end_offsets("r").await;
        if mid.iter().all(|o| *o > 0) {
            Ok(())
        } else {
            Err(format!("destination end offsets {mid:?}"))
        }
    })
    .await;
    dst.stop().await;
    let at_stop = batches.load(Ordering::SeqCst);
    let what = "the source to take 20 batches while the destination is down";
    wait_until(what, written_since(at_stop, 20)).await;
    dst.restart(false).await;
    let at_restart = dst.end_offsets("r").await;
    wait_until(
        "mirroring to resume while the source is written",
        async || {
            let now = dst.end_offsets("r").await;
            if now.iter().zip(&at_restart).all(|(now, then)| now > then) {
                Ok(())
            } else {
                Err(format!(
                    "end offsets {now:?} since the restart's {at_restart:?}"
                ))
            }
        },
    )
    .await;
    producing.store(false, Ordering::SeqCst);
    let written = writer.await.unwrap();
    assert!(written > 20, "the writer wrote {written} batches");

    dst.wait_caught_up(&mut src, "m", "r").await;
    dst.assert_same_logs_as(&mut src, "r").await;
    dst.assert_read_only("r", 0, "still read-only after the restart")
        .await;

    // The stopped topic: STOPPED, writable, its last mirrored offset kept.
    let parts = dst.mirror_partitions("m", "st").await;
    assert!(
        parts.len() == 1 && parts[0].state_value.as_str() == "STOPPED",
        "{parts:?}"
    );
    let base = dst
        .produce("st", 0, make_batch(Compression::None, 1, None, "after"))
        .await;
    assert_eq!(base, st_end[0] + 2);
    let lmo = last_mirrored_offsets(dst.conn(), "x", "st", &[0]).await;
    assert_eq!(lmo.topics[0].partitions[0].error_code, 0, "{lmo:?}");
    assert_eq!(lmo.topics[0].partitions[0].last_mirrored_offset, st_end[0]);
}

/// Waits until the destination's log start of `topic`-0 is `want`.
async fn wait_log_start(dst: &mut Cluster, topic: &str, want: i64) {
    let what = format!("the destination's log start of {topic}-0 to follow to {want}");
    wait_until(&what, async || {
        match list_offset(dst.conn(), topic, 0, -2).await {
            start if start == want => Ok(()),
            start => Err(format!("log start {start}")),
        }
    })
    .await
}

/// DeleteRecords on the source, before and after the mirror starts: the destination's log
/// start follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destination_log_start_follows_source_delete_records() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("ret", 1, &[("segment.bytes", "4096")])
        .await;
    for i in 0..10 {
        src.produce(
            "ret",
            0,
            make_batch(CODECS[i % 5], 3, None, &format!("r{i}")),
        )
        .await;
    }
    // Inside the batch 6..=8.
    let (code, low) = delete_records(src.conn(), "ret", 0, 7).await;
    assert_eq!((code, low), (0, 7));
    assert_eq!(dst.mirror_topic_from(&mut src, "m", "ret").await, [30]);
    assert_eq!(list_offset(dst.conn(), "ret", 0, -2).await, 7);
    let logs = dst.assert_same_logs_as(&mut src, "ret").await;
    assert_eq!(
        logs[0].batches[0].0, 6,
        "the batch holding the log start is kept whole"
    );

    let (code, low) = delete_records(src.conn(), "ret", 0, 20).await;
    assert_eq!((code, low), (0, 20));
    wait_log_start(&mut dst, "ret", 20).await;
    dst.assert_same_logs_as(&mut src, "ret").await;

    for i in 0..4 {
        src.produce(
            "ret",
            0,
            make_batch(Compression::Lz4, 2, None, &format!("n{i}")),
        )
        .await;
    }
    // Everything.
    let (code, low) = delete_records(src.conn(), "ret", 0, -1).await;
    assert_eq!((code, low), (0, 38));
    wait_log_start(&mut dst, "ret", 38).await;
    assert_eq!(list_offset(dst.conn(), "ret", 0, -1).await, 38);
    src.produce("ret", 0, make_batch(Compression::Zstd, 2, None, "last"))
        .await;
    assert_eq!(dst.wait_caught_up(&mut src, "m", "ret").await, [40]);
    dst.assert_same_logs_as(&mut src, "ret").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreachable_source_fails_start_quickly() {
    let mut dst = Cluster::start(&[]).await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    dst.mirror_from_address("dead", &format!("127.0.0.1:{port}"))
        .await;
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        start_topics(dst.conn(), "dead", &["x"]),
    )
    .await
    .expect("StartMirrorTopics hangs on an unreachable source");
    eprintln!(
        "start on an unreachable source: {r:?} after {:?}",
        started.elapsed()
    );
    assert_ne!(r.error_code, 0, "{r:?}");
    assert!(
        r.error_message
            .as_deref()
            .is_some_and(|m| m.contains(&port.to_string())),
        "the message names the source: {r:?}"
    );
    let (code, _, _) = topic_metadata(dst.conn(), "x").await;
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(list_mirrors(dst.conn()).await.mirrors[0].topic_count, 0);
}

/// The source dies while mirroring: partitions go FAILED with retry attempts and an error, and
/// stay read-only; a failover (stop) works with the source down; the source comes back on the
/// same port and the partitions still mirrored resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn source_death_fails_partitions_then_failover_and_recovery() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "100"),
        ("mirror.failed.retry.max.backoff.ms", "500"),
    ])
    .await;
    src.create_topic("live", 2, &[]).await;
    src.create_topic("live2", 1, &[]).await;
    for p in 0..2 {
        src.produce("live", p, make_batch(Compression::Gzip, 5, None, "a"))
            .await;
    }
    src.produce("live2", 0, make_batch(Compression::Lz4, 7, None, "a"))
        .await;
    dst.mirror_from("m", &src).await;
    dst.start_mirror_topics("m", &["live", "live2"]).await;
    dst.wait_caught_up(&mut src, "m", "live").await;
    let ends2 = dst.wait_caught_up(&mut src, "m", "live2").await;

    src.stop().await;
    for topic in ["live", "live2"] {
        let parts = dst.wait_state("m", topic, "FAILED").await;
        for p in &parts {
            assert!(p.retry_attempt > 0, "{p:?}");
            assert!(
                p.error_message.as_deref().is_some_and(|m| !m.is_empty()),
                "{p:?}"
            );
        }
    }
    dst.assert_read_only("live", 0, "a failed mirror topic stays read-only")
        .await;

    // Failover with the source down.
    let started = Instant::now();
    dst.stop_mirror_topics("m", &["live2"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stop took {:?}",
        started.elapsed()
    );
    let parts = dst.mirror_partitions("m", "live2").await;
    assert!(
        parts.iter().all(|p| p.state_value.as_str() == "STOPPED"),
        "{parts:?}"
    );
    let base = dst
        .produce("live2", 0, make_batch(Compression::None, 2, None, "mine"))
        .await;
    assert_eq!(base, ends2[0]);

    // The source comes back on the same dir and port.
    src.restart(true).await;
    for p in 0..2 {
        src.produce("live", p, make_batch(Compression::Zstd, 3, None, "b"))
            .await;
    }
    src.produce("live2", 0, make_batch(Compression::Zstd, 3, None, "b"))
        .await;
    dst.wait_caught_up(&mut src, "m", "live").await;
    dst.assert_same_logs_as(&mut src, "live").await;
    let parts = dst.mirror_partitions("m", "live").await;
    assert!(parts.iter().all(|p| p.retry_attempt == 0), "{parts:?}");
    // The failed-over topic is left alone.
    assert_eq!(dst.end_offsets("live2").await, vec![ends2[0] + 2]);
    let parts = dst.mirror_partitions("m", "live2").await;
    assert!(
        parts.iter().all(|p| p.state_value.as_str() == "STOPPED"),
        "{parts:?}"
    );
}

/// A FAILED partition retries with exponential backoff; each failed retry counts one more
/// attempt (what describe's retry_attempt and `mirror.failed.retry.max.attempts` are about).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_partition_retry_attempts_grow() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "1000"),
        ("mirror.failed.retry.max.backoff.ms", "4000"),
        ("mirror.failed.retry.max.attempts", "3"),
    ])
    .await;
    src.create_topic("f", 1, &[]).await;
    src.produce("f", 0, make_batch(Compression::None, 2, None, "a"))
        .await;
    assert_eq!(dst.mirror_topic_from(&mut src, "m", "f").await, [2]);
    src.stop().await;
    // 3 attempts at 0.5-1, 1-2 and 2-4 s: well within 60 s, after which the partition stays
    // FAILED and is no longer retried (retry_attempt -1). The backoffs are long enough that a
    // loaded machine's describe round trips (seconds, when CI builds beside the tests) still
    // see the last attempt; describe is polled every 20 ms so as not to miss it.
    let mut seen = BTreeSet::new();
    let what = "the partition to stop retrying (FAILED, retry_attempt -1) with max.attempts=3";
    let every = Duration::from_millis(20);
    poll_until(Duration::from_secs(60), every, what, async || {
        let last = dst.mirror_partitions("m", "f").await;
        seen.extend(
            last.iter()
                .map(|p| (p.state_value.to_string(), p.retry_attempt)),
        );
        let given_up = !last.is_empty()
            && last
                .iter()
                .all(|p| p.state_value.as_str() == "FAILED" && p.retry_attempt == -1);
        if given_up {
            Ok(())
        } else {
            Err(format!(
                "the partition is {last:?}; (state, retry_attempt) seen: {seen:?}"
            ))
        }
    })
    .await;
    eprintln!("states seen: {seen:?}");
    assert!(seen.contains(&("FAILED".to_string(), 3)), "{seen:?}");
}

/// `mirror.fetch.rate.max.bytes` holds an initial copy to its rate: 3 MB at 1 MB/s (with one
/// second's allowance up front) cannot be mirrored in less than about two seconds, and every
/// byte still arrives. A negative rate is refused when the mirror is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_byte_rate_limit_holds_an_initial_copy_to_its_rate() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("bulk", 1, &[]).await;
    for i in 0..30 {
        src.produce("bulk", 0, big_batch(100, 1000, i)).await;
    }
    let r = create_mirror(
        dst.conn(),
        "bad",
        &[
            ("bootstrap.servers", Some(src.bootstrap().as_str())),
            ("mirror.fetch.rate.max.bytes", Some("-5")),
        ],
    )
    .await;
    assert_ne!(r.error_code, 0, "a negative rate must be refused: {r:?}");
    let r = create_mirror(
        dst.conn(),
        "slow",
        &[
            ("bootstrap.servers", Some(src.bootstrap().as_str())),
            ("mirror.fetch.wait.max.ms", Some("100")),
            ("mirror.fetch.rate.max.bytes", Some("1000000")),
        ],
    )
    .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let started = Instant::now();
    dst.start_mirror_topics("slow", &["bulk"]).await;
    wait_mirrored(dst.conn(), "slow", "bulk", &[3000]).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "3 MB mirrored in {took:?} under a 1 MB/s limit"
    );
    dst.assert_same_logs_as(&mut src, "bulk").await;
}

/// `mirror.fetch.connections` spreads a source broker's partitions over several fetchers, each
/// with its own connection; the copy is the same, byte for byte. Out of range is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_connections_per_source_broker_copy_the_same_bytes() {
    let mut src = Cluster::start(&[]).await;
    let mut dst = Cluster::start(&[]).await;
    src.create_topic("wide", 6, &[]).await;
    for i in 0..24 {
        src.produce("wide", i % 6, big_batch(20, 500, i as u64))
            .await;
    }
    let r = create_mirror(
        dst.conn(),
        "bad",
        &[
            ("bootstrap.servers", Some(src.bootstrap().as_str())),
            ("mirror.fetch.connections", Some("0")),
        ],
    )
    .await;
    assert_ne!(r.error_code, 0, "zero connections must be refused: {r:?}");
    let r = create_mirror(
        dst.conn(),
        "wide3",
        &[
            ("bootstrap.servers", Some(src.bootstrap().as_str())),
            ("mirror.fetch.connections", Some("3")),
        ],
    )
    .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    dst.start_mirror_topics("wide3", &["wide"]).await;
    wait_mirrored(dst.conn(), "wide3", "wide", &[80; 6]).await;
    dst.assert_same_logs_as(&mut src, "wide").await;
}
