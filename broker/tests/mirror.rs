//! Cluster mirroring between two in-process Tern servers over loopback: byte-for-byte copies
//! with every codec, read-only mirror topics, pause/resume/stop, failback moving only the delta,
//! bad input, restarts, source retention and unreachable sources.

#[path = "support/mirror.rs"]
mod mirror_support;
mod support;

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::InitProducerIdRequest;
use kafka_protocol::protocol::StrBytes;
use mirror_support::*;
use support::create_topic;
use tern_protocol::record_batch::{Compression, RecordBatchHeader};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

const READ_ONLY_TOPIC: i16 = 134;
const CLUSTER_MIRROR_ALREADY_EXISTS: i16 = 136;
const UNKNOWN_CLUSTER_MIRROR: i16 = 137;
const TOPIC_ALREADY_IN_CLUSTER_MIRROR: i16 = 138;
const TOPIC_NOT_IN_CLUSTER_MIRROR: i16 = 139;
const MIRROR_TOPIC_ALREADY_PAUSED: i16 = 140;
const MIRROR_TOPIC_NOT_PAUSED: i16 = 141;
const CLUSTER_MIRROR_NOT_EMPTY: i16 = 143;
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
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    let configs = [
        ("retention.ms", "3600000"),
        ("segment.bytes", "16384"),
        ("max.message.bytes", "2000000"),
        ("retention.bytes", "500000000"),
        // In mirror.topic.properties.exclude by default: not copied.
        ("min.insync.replicas", "1"),
    ];
    let r = create_topic(&mut s, "orders", 3, &configs).await;
    assert_eq!(r.topics[0].error_code, 0);
    let mut seqs = produce_codec_mix(&mut s, "orders", 3, 7000).await;
    for p in 0..3 {
        // Several 16 KiB segments.
        for i in 0..4 {
            produce_ok(&mut s, "orders", p, big_batch(20, 400, (p * 10 + i) as u64)).await;
        }
    }
    let source_ends = end_offsets(&mut s, "orders", 3).await;
    // The source really holds what the test means to mirror.
    for p in 0..3 {
        let log = fetch_log(&mut s, "orders", p).await;
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

    create_mirror_to(&mut d, "m1", &src.bootstrap()).await;
    let r = start_topics(&mut d, "m1", &["orders"]).await;
    assert_topic_codes(&r, 0, "start orders");
    wait_mirrored(&mut d, "m1", "orders", &source_ends).await;
    for p in 0..3 {
        let log = assert_same_log(&mut s, &mut d, "orders", p).await;
        assert_eq!(log.high_watermark, source_ends[p as usize]);
    }

    // Same topic id and partition count.
    let (se, sid, sn) = topic_metadata(&mut s, "orders").await;
    let (de, did, dn) = topic_metadata(&mut d, "orders").await;
    assert_eq!((se, de), (0, 0));
    assert!(!sid.is_nil());
    assert_eq!(did, sid, "the destination topic keeps the source topic id");
    assert_eq!((sn, dn), (3, 3));

    // The source's non-default configs, not the excluded ones, and mirror.name.
    let sc = explicit_topic_configs(&mut s, "orders").await;
    let dc = explicit_topic_configs(&mut d, "orders").await;
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

    let listed = list_mirrors(&mut d).await;
    assert_eq!(listed.mirrors.len(), 1);
    let m = &listed.mirrors[0];
    assert_eq!(m.mirror_name, "m1");
    assert_eq!(m.source_bootstrap, src.bootstrap());
    assert_eq!(m.topic_count, 1);
    assert_eq!(m.topic_names, vec!["orders".to_string()]);
    assert!(!m.source_cluster_id.is_empty());

    // New data keeps flowing, again byte for byte.
    for p in 0..3 {
        for (i, c) in CODECS.iter().enumerate() {
            let seq = seqs[p as usize];
            produce_ok(
                &mut s,
                "orders",
                p,
                make_batch(*c, 4, Some((7000 + p as i64, 0, seq)), &format!("late-{i}")),
            )
            .await;
            seqs[p as usize] += 4;
        }
    }
    let source_ends = end_offsets(&mut s, "orders", 3).await;
    wait_mirrored(&mut d, "m1", "orders", &source_ends).await;
    for p in 0..3 {
        assert_same_log(&mut s, &mut d, "orders", p).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_pause_resume_and_stop() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "t", 2, &[]).await;
    let pid = 900_000;
    let mut seq = [0i32; 2];
    for p in 0..2 {
        for codec in &CODECS[..3] {
            produce_ok(
                &mut s,
                "t",
                p,
                make_batch(*codec, 5, Some((pid + p as i64, 0, seq[p as usize])), "a"),
            )
            .await;
            seq[p as usize] += 5;
        }
    }
    let ends = end_offsets(&mut s, "t", 2).await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["t"]).await, 0, "start");
    wait_mirrored(&mut d, "m", "t", &ends).await;

    // Read-only: 134 and nothing appended.
    for p in 0..2 {
        let (code, _) =
            produce_batch(&mut d, "t", p, make_batch(Compression::None, 2, None, "x")).await;
        assert_eq!(code, READ_ONLY_TOPIC);
    }
    assert_eq!(end_offsets(&mut d, "t", 2).await, ends);

    // Pause: PAUSED, nothing more mirrored, still read-only.
    assert_topic_codes(&pause_topics(&mut d, "m", &["t"]).await, 0, "pause");
    wait_state(&mut d, "m", "t", 2, "PAUSED").await;
    for p in 0..2 {
        produce_ok(
            &mut s,
            "t",
            p,
            make_batch(Compression::Lz4, 3, None, "paused"),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        end_offsets(&mut d, "t", 2).await,
        ends,
        "paused topic moved"
    );
    let parts = partition_details(&mut d, "m", "t").await;
    assert!(parts.iter().all(|p| p.state_value == "PAUSED"), "{parts:?}");
    let (code, _) =
        produce_batch(&mut d, "t", 0, make_batch(Compression::None, 1, None, "x")).await;
    assert_eq!(code, READ_ONLY_TOPIC, "a paused topic is read-only");

    // Resume: mirrored again.
    assert_topic_codes(&resume_topics(&mut d, "m", &["t"]).await, 0, "resume");
    let ends = end_offsets(&mut s, "t", 2).await;
    wait_mirrored(&mut d, "m", "t", &ends).await;
    for p in 0..2 {
        assert_same_log(&mut s, &mut d, "t", p).await;
    }

    // Stop: answered once every partition is STOPPED; writable from the end it had.
    let before_stop = end_offsets(&mut d, "t", 2).await;
    assert_eq!(before_stop, ends);
    assert_topic_codes(&stop_topics(&mut d, "m", &["t"]).await, 0, "stop");
    let parts = partition_details(&mut d, "m", "t").await;
    assert_eq!(parts.len(), 2);
    assert!(
        parts.iter().all(|p| p.state_value == "STOPPED"),
        "StopMirrorTopics answered before STOPPED: {parts:?}"
    );
    let cfg = explicit_topic_configs(&mut d, "t").await;
    assert_eq!(
        cfg.get("mirror.name").map(String::as_str),
        Some("m.stopped"),
        "a complete failover is recorded in mirror.name"
    );
    for p in 0..2 {
        let base = produce_ok(
            &mut d,
            "t",
            p,
            make_batch(Compression::Zstd, 2, None, "mine"),
        )
        .await;
        assert_eq!(base, before_stop[p as usize], "partition {p}");
    }
    // Producer ids handed out here stay above the mirrored ones.
    let r = d
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
    produce_ok(
        &mut d,
        "t",
        0,
        make_batch(Compression::None, 2, Some((new_pid, 0, 0)), "idem-mine"),
    )
    .await;

    // Source data after the stop is not mirrored.
    let dst_ends = end_offsets(&mut d, "t", 2).await;
    for p in 0..2 {
        produce_ok(
            &mut s,
            "t",
            p,
            make_batch(Compression::Gzip, 9, None, "after"),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(end_offsets(&mut d, "t", 2).await, dst_ends);
    let log = fetch_log(&mut d, "t", 1).await;
    let (last_base, _) = log.batches.last().unwrap();
    assert_eq!(
        *last_base, before_stop[1],
        "the last batch is the local one"
    );
    let parts = partition_details(&mut d, "m", "t").await;
    assert!(
        parts.iter().all(|p| p.state_value == "STOPPED"),
        "{parts:?}"
    );
}

/// Failover to B, then failback: A mirrors from B, truncating its divergent tail to B's last
/// mirrored offset and fetching only what B took after the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_fetches_only_the_delta_and_drops_the_old_sources_divergence() {
    init_tracing();
    let a = Node::start(&[]).await;
    let mut proxy = Proxy::bind().await;
    let advertised = format!("PLAINTEXT://127.0.0.1:{}", proxy.port);
    let b = Node::start(&[("advertised.listeners", advertised.as_str())]).await;
    proxy.forward_to(b.addr);
    let mut ca = a.connect().await;
    let mut cb = b.connect().await;

    create_topic(&mut ca, "dr", 2, &[("segment.bytes", "262144")]).await;
    for p in 0..2 {
        for i in 0..40 {
            produce_ok(&mut ca, "dr", p, big_batch(10, 4000, (p * 100 + i) as u64)).await;
        }
    }
    let failover_point = end_offsets(&mut ca, "dr", 2).await;
    create_mirror_to(&mut cb, "a-to-b", &a.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut cb, "a-to-b", &["dr"]).await,
        0,
        "start on B",
    );
    wait_mirrored(&mut cb, "a-to-b", "dr", &failover_point).await;

    // Failover.
    assert_topic_codes(
        &stop_topics(&mut cb, "a-to-b", &["dr"]).await,
        0,
        "stop on B",
    );
    let lmo = last_mirrored_offsets(&mut cb, "any", "dr", &[0, 1]).await;
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
            produce_ok(
                &mut cb,
                "dr",
                p,
                make_batch(*c, 6, None, &format!("on-b-{i}")),
            )
            .await;
        }
        for i in 0..12 {
            produce_ok(
                &mut ca,
                "dr",
                p,
                make_batch(Compression::None, 9, None, &format!("lost-on-a-{i}")),
            )
            .await;
        }
    }
    let b_ends = end_offsets(&mut cb, "dr", 2).await;
    let a_ends = end_offsets(&mut ca, "dr", 2).await;
    assert!(
        a_ends[0] > b_ends[0],
        "A's divergent tail is longer than B's delta"
    );

    // Failback: A mirrors from B (through the proxy, B's advertised address).
    let (_, a_id, _) = topic_metadata(&mut ca, "dr").await;
    let (_, b_id, _) = topic_metadata(&mut cb, "dr").await;
    assert_eq!(a_id, b_id);
    let before = proxy.total();
    let keys_before = proxy.request_keys().len();
    create_mirror_to(&mut ca, "b-to-a", &format!("127.0.0.1:{}", proxy.port)).await;
    assert_topic_codes(
        &start_topics(&mut ca, "b-to-a", &["dr"]).await,
        0,
        "start on A",
    );
    wait_mirrored(&mut ca, "b-to-a", "dr", &b_ends).await;
    let proxied = proxy.total() - before;
    let keys: Vec<i16> = proxy.request_keys()[keys_before..].to_vec();
    assert!(
        keys.contains(&97),
        "A did not ask B for LastMirroredOffsets: {keys:?}"
    );

    let mut full = 0usize;
    let mut delta = 0usize;
    for p in 0..2 {
        let log = assert_same_log(&mut cb, &mut ca, "dr", p).await;
        full += log.total_bytes();
        delta += log
            .batches
            .iter()
            .filter(|(o, _)| *o >= failover_point[p as usize])
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
    let (code, _) = produce_batch(
        &mut ca,
        "dr",
        0,
        make_batch(Compression::None, 1, None, "x"),
    )
    .await;
    assert_eq!(code, READ_ONLY_TOPIC);
    for p in 0..2 {
        produce_ok(
            &mut cb,
            "dr",
            p,
            make_batch(Compression::Snappy, 4, None, "more-on-b"),
        )
        .await;
    }
    let b_ends = end_offsets(&mut cb, "dr", 2).await;
    wait_mirrored(&mut ca, "b-to-a", "dr", &b_ends).await;
    for p in 0..2 {
        assert_same_log(&mut cb, &mut ca, "dr", p).await;
    }
}

/// Failback started on A while B still mirrors the topic from A (never stopped there): B answers
/// LastMirroredOffsets with MIRROR_TOPIC_NOT_STOPPED. That is a refusal, not "truncate to 0":
/// A must not throw its log away and refetch it, and neither side may lose data.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_refused_while_the_other_side_still_mirrors() {
    init_tracing();
    let a = Node::start(&[]).await;
    let mut proxy = Proxy::bind().await;
    let advertised = format!("PLAINTEXT://127.0.0.1:{}", proxy.port);
    let b = Node::start(&[("advertised.listeners", advertised.as_str())]).await;
    proxy.forward_to(b.addr);
    let mut ca = a.connect().await;
    let mut cb = b.connect().await;
    create_topic(&mut ca, "loop", 1, &[]).await;
    for i in 0..30 {
        produce_ok(&mut ca, "loop", 0, big_batch(10, 4000, i)).await;
    }
    let end = end_offsets(&mut ca, "loop", 1).await;
    create_mirror_to(&mut cb, "a-to-b", &a.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut cb, "a-to-b", &["loop"]).await,
        0,
        "start on B",
    );
    wait_mirrored(&mut cb, "a-to-b", "loop", &end).await;
    let original = fetch_log(&mut ca, "loop", 0).await;
    let lmo = last_mirrored_offsets(&mut cb, "b-to-a", "loop", &[0]).await;
    assert_eq!(lmo.topics[0].partitions[0].error_code, 146, "{lmo:?}");

    let before = proxy.total();
    create_mirror_to(&mut ca, "b-to-a", &format!("127.0.0.1:{}", proxy.port)).await;
    let r = start_topics(&mut ca, "b-to-a", &["loop"]).await;
    eprintln!("failback start while B mirrors: {r:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let proxied = proxy.total() - before;
    let parts = partition_details(&mut ca, "b-to-a", "loop").await;
    eprintln!(
        "A: {parts:?}; proxied {proxied} bytes of a {} byte log",
        original.total_bytes()
    );

    for (side, conn) in [("A", &mut ca), ("B", &mut cb)] {
        let now = fetch_log(conn, "loop", 0).await;
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
    assert!(
        (proxied as usize) < 128 * 1024,
        "A truncated and refetched its log from B ({proxied} bytes) although B answered MIRROR_TOPIC_NOT_STOPPED"
    );
    let refused = r.error_code != 0 || r.topics.iter().any(|t| t.error_code != 0);
    assert!(
        refused
            || parts.iter().all(|p| p.state_value == "FAILED"
                && p.error_message.as_deref().is_some_and(|m| !m.is_empty())),
        "A mirrors from a cluster that still mirrors from A: {r:?} {parts:?}"
    );
}

/// Failback where A's first LastMirroredOffsets request to B fails (the connection drops): the
/// partition goes FAILED and is retried; the retry must still align A's log with B's last
/// mirrored offset before fetching, or A keeps its divergent tail under B's offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failback_retried_after_a_failed_last_mirrored_offsets_request_still_truncates() {
    init_tracing();
    let a = Node::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "100"),
        ("mirror.failed.retry.max.backoff.ms", "500"),
    ])
    .await;
    let mut proxy = Proxy::bind().await;
    let advertised = format!("PLAINTEXT://127.0.0.1:{}", proxy.port);
    let b = Node::start(&[("advertised.listeners", advertised.as_str())]).await;
    proxy.forward_to(b.addr);
    let mut ca = a.connect().await;
    let mut cb = b.connect().await;
    create_topic(&mut ca, "fb", 1, &[]).await;
    for i in 0..10 {
        produce_ok(
            &mut ca,
            "fb",
            0,
            make_batch(CODECS[i % 5], 4, None, &format!("a{i}")),
        )
        .await;
    }
    let failover_point = end_offsets(&mut ca, "fb", 1).await;
    create_mirror_to(&mut cb, "a-to-b", &a.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut cb, "a-to-b", &["fb"]).await,
        0,
        "start on B",
    );
    wait_mirrored(&mut cb, "a-to-b", "fb", &failover_point).await;
    assert_topic_codes(
        &stop_topics(&mut cb, "a-to-b", &["fb"]).await,
        0,
        "stop on B",
    );
    for i in 0..3 {
        produce_ok(
            &mut cb,
            "fb",
            0,
            make_batch(Compression::Gzip, 5, None, &format!("b{i}")),
        )
        .await;
    }
    for i in 0..6 {
        produce_ok(
            &mut ca,
            "fb",
            0,
            make_batch(Compression::None, 5, None, &format!("lost{i}")),
        )
        .await;
    }
    let b_end = end_offsets(&mut cb, "fb", 1).await;

    proxy.drop_next_request(97);
    create_mirror_to(&mut ca, "b-to-a", &format!("127.0.0.1:{}", proxy.port)).await;
    assert_topic_codes(
        &start_topics(&mut ca, "b-to-a", &["fb"]).await,
        0,
        "start on A",
    );
    let deadline = Instant::now() + WAIT;
    while !proxy.fault_fired() {
        assert!(
            Instant::now() < deadline,
            "A never asked B for LastMirroredOffsets"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_mirrored(&mut ca, "b-to-a", "fb", &b_end).await;
    let keys = proxy.request_keys();
    eprintln!(
        "LastMirroredOffsets requests: {}",
        keys.iter().filter(|k| **k == 97).count()
    );
    assert_same_log(&mut cb, &mut ca, "fb", 0).await;
}

/// B stopped a topic under one mirror, then mirrors it again under another: its old STOPPED
/// state must not answer LastMirroredOffsets (the topic is being mirrored: 146).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn last_mirrored_offsets_ignores_the_stopped_state_of_an_earlier_mirror() {
    init_tracing();
    let a = Node::start(&[]).await;
    let b = Node::start(&[]).await;
    let mut ca = a.connect().await;
    let mut cb = b.connect().await;
    let n = 8;
    create_topic(&mut ca, "multi", n, &[]).await;
    for p in 0..n {
        produce_ok(
            &mut ca,
            "multi",
            p,
            make_batch(Compression::None, 2, None, "x"),
        )
        .await;
    }
    let ends = end_offsets(&mut ca, "multi", n).await;
    create_mirror_to(&mut cb, "m1", &a.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut cb, "m1", &["multi"]).await,
        0,
        "start m1",
    );
    wait_mirrored(&mut cb, "m1", "multi", &ends).await;
    assert_topic_codes(&stop_topics(&mut cb, "m1", &["multi"]).await, 0, "stop m1");
    create_mirror_to(&mut cb, "m2", &a.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut cb, "m2", &["multi"]).await,
        0,
        "start m2",
    );
    wait_mirrored(&mut cb, "m2", "multi", &ends).await;

    let partitions: Vec<i32> = (0..n).collect();
    let r = last_mirrored_offsets(&mut cb, "any", "multi", &partitions).await;
    let codes: Vec<(i32, i16, i64)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.last_mirrored_offset))
        .collect();
    assert!(
        codes.iter().all(|(_, code, _)| *code == 146),
        "the topic is mirrored again (m2), yet LastMirroredOffsets answers: {codes:?}"
    );
    assert_topic_codes(&stop_topics(&mut cb, "m2", &["multi"]).await, 0, "stop m2");
    let r = last_mirrored_offsets(&mut cb, "any", "multi", &partitions).await;
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
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "grow", 1, &[("retention.ms", "3600000")]).await;
    produce_ok(
        &mut s,
        "grow",
        0,
        make_batch(Compression::Snappy, 3, None, "g"),
    )
    .await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["grow"]).await, 0, "start");
    wait_mirrored(&mut d, "m", "grow", &[3]).await;

    let r = s
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
    let r = s
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
        produce_ok(
            &mut s,
            "grow",
            p,
            make_batch(Compression::Lz4, 2, None, "after"),
        )
        .await;
    }
    let ends = end_offsets(&mut s, "grow", 3).await;
    let deadline = Instant::now() + WAIT;
    while topic_metadata(&mut d, "grow").await.2 != 3 {
        assert!(
            Instant::now() < deadline,
            "the destination did not grow to 3 partitions"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_mirrored(&mut d, "m", "grow", &ends).await;
    for p in 0..3 {
        assert_same_log(&mut s, &mut d, "grow", p).await;
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let cfg = explicit_topic_configs(&mut d, "grow").await;
        if cfg.get("retention.ms").map(String::as_str) == Some("7200000")
            && cfg.get("max.message.bytes").map(String::as_str) == Some("500000")
        {
            assert_eq!(cfg.get("mirror.name").map(String::as_str), Some("m"));
            break;
        }
        assert!(Instant::now() < deadline, "configs not synced: {cfg:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_mirror_rejects_bad_input_and_creates_nothing() {
    init_tracing();
    let dst = Node::start(&[]).await;
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
        listed.mirrors[0].source_bootstrap, "127.0.0.1:9",
        "the first create stands"
    );

    assert_eq!(
        delete_mirror(&mut d, "nope").await.error_code,
        UNKNOWN_CLUSTER_MIRROR
    );
    let r = d
        .send_mirror(
            &tern_protocol::mirror::MirrorRequest::DescribeClusterMirrors(
                tern_protocol::mirror::DescribeClusterMirrorsRequest {
                    mirror_names: vec!["nope".into()],
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();
    match r {
        tern_protocol::mirror::MirrorResponse::DescribeClusterMirrors(r) => {
            assert_eq!(r.mirrors.len(), 1);
            assert_eq!(r.mirrors[0].error_code, UNKNOWN_CLUSTER_MIRROR);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(delete_mirror(&mut d, "m").await.error_code, 0);
    assert!(list_mirrors(&mut d).await.mirrors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topic_operations_report_mirror_errors() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "t1", 2, &[]).await;
    create_topic(&mut s, "t2", 1, &[]).await;
    produce_ok(&mut s, "t1", 0, make_batch(Compression::None, 3, None, "s")).await;
    produce_ok(&mut s, "t2", 0, make_batch(Compression::None, 3, None, "s")).await;
    // A local normal topic with the source topic's name but its own id.
    create_topic(&mut d, "t2", 1, &[("retention.ms", "123456")]).await;
    produce_ok(
        &mut d,
        "t2",
        0,
        make_batch(Compression::None, 1, None, "local"),
    )
    .await;
    let (_, local_t2_id, _) = topic_metadata(&mut d, "t2").await;

    let r = start_topics(&mut d, "nope", &["t1"]).await;
    assert_eq!(r.error_code, UNKNOWN_CLUSTER_MIRROR, "{r:?}");
    assert!(r.error_message.is_some());

    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
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
        produce_ok(
            &mut d,
            "t2",
            0,
            make_batch(Compression::None, 1, None, "local")
        )
        .await,
        1,
        "the local topic is untouched and writable"
    );

    assert_topic_codes(&start_topics(&mut d, "m", &["t1"]).await, 0, "start t1");
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
    assert_topic_codes(&pause_topics(&mut d, "m", &["t1"]).await, 0, "pause");
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
    assert_topic_codes(&resume_topics(&mut d, "m", &["t1"]).await, 0, "resume");
    assert_topic_codes(
        &resume_topics(&mut d, "m", &["t1"]).await,
        MIRROR_TOPIC_NOT_PAUSED,
        "resume twice",
    );
    let ends = end_offsets(&mut s, "t1", 2).await;
    wait_mirrored(&mut d, "m", "t1", &ends).await;
    assert_eq!(
        delete_mirror(&mut d, "m").await.error_code,
        CLUSTER_MIRROR_NOT_EMPTY
    );
    assert_topic_codes(&stop_topics(&mut d, "m", &["t1"]).await, 0, "stop");
    assert_eq!(delete_mirror(&mut d, "m").await.error_code, 0);
    assert!(list_mirrors(&mut d).await.mirrors.is_empty());
    // The stopped topic outlives its mirror, writable.
    assert_eq!(
        produce_ok(
            &mut d,
            "t1",
            0,
            make_batch(Compression::None, 1, None, "mine")
        )
        .await,
        ends[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_cannot_set_mirror_name() {
    use kafka_protocol::messages::alter_configs_request as ac;
    use kafka_protocol::messages::incremental_alter_configs_request as iac;
    use kafka_protocol::messages::{AlterConfigsRequest, IncrementalAlterConfigsRequest};
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;

    let r = create_topic(&mut d, "sneaky", 1, &[("mirror.name", "m")]).await;
    assert_eq!(r.topics[0].error_code, INVALID_CONFIG);
    let (code, _, _) = topic_metadata(&mut d, "sneaky").await;
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION, "not created");

    create_topic(&mut s, "mirrored", 1, &[]).await;
    produce_ok(
        &mut s,
        "mirrored",
        0,
        make_batch(Compression::None, 2, None, "s"),
    )
    .await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["mirrored"]).await, 0, "start");
    create_topic(&mut d, "plain", 1, &[]).await;

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
    let (code, _) = produce_batch(
        &mut d,
        "mirrored",
        0,
        make_batch(Compression::None, 1, None, "x"),
    )
    .await;
    assert_eq!(code, READ_ONLY_TOPIC);
    produce_ok(
        &mut d,
        "plain",
        0,
        make_batch(Compression::None, 1, None, "x"),
    )
    .await;
}

/// StartMirrorTopics and StopMirrorTopics of one topic at once, from two connections, several
/// times: every round ends with the topic either mirroring or stopped, describe and produce agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_start_and_stop_end_consistent() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "c", 2, &[]).await;
    for p in 0..2 {
        for i in 0..3 {
            produce_ok(&mut s, "c", p, make_batch(CODECS[i + 1], 4, None, "c")).await;
        }
    }
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
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
        let deadline = Instant::now() + WAIT;
        let state = loop {
            let cfg = explicit_topic_configs(&mut d, "c").await;
            let parts = partition_details(&mut d, "m", "c").await;
            let want = match cfg.get("mirror.name").map(String::as_str) {
                Some("m") => Some("MIRRORING"),
                Some("m.stopped") => Some("STOPPED"),
                _ => None,
            };
            if let Some(want) = want {
                if parts.len() == 2 && parts.iter().all(|p| p.state_value == want) {
                    break want;
                }
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no consistent state: {cfg:?} {parts:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        outcomes.insert(state);
        // Read-only exactly when not stopped.
        let before = end_offsets(&mut d, "c", 2).await;
        let (code, base) =
            produce_batch(&mut d, "c", 1, make_batch(Compression::None, 1, None, "r")).await;
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
    let cfg = explicit_topic_configs(&mut d, "c").await;
    if cfg.get("mirror.name").map(String::as_str) != Some("m") {
        assert_topic_codes(&start_topics(&mut d, "m", &["c"]).await, 0, "final start");
    }
    let ends = end_offsets(&mut s, "c", 2).await;
    wait_mirrored(&mut d, "m", "c", &ends).await;
    for p in 0..2 {
        assert_same_log(&mut s, &mut d, "c", p).await;
    }
}

/// Synced group offsets stay within what is mirrored: a group that committed far ahead of a
/// paused (lagging) mirror gets the destination's end, follows the mirror as it catches up,
/// and after a failover its committed offset is the topic's end, not past it (so a consumer
/// with auto.offset.reset=earliest resumes there, not at 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn synced_group_offsets_never_pass_the_mirrored_end() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "g", 1, &[]).await;
    produce_ok(&mut s, "g", 0, make_batch(Compression::None, 10, None, "a")).await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["g"]).await, 0, "start");
    wait_mirrored(&mut d, "m", "g", &[10]).await;

    let dst_committed = |want: i64| {
        let addr = dst.addr;
        move || async move {
            let mut c = tern_protocol::client::KafkaConnection::connect(addr, "t")
                .await
                .unwrap();
            match committed_offset(&mut c, "app", "g", 0).await {
                got if got == want => Ok(()),
                got => Err(format!("committed offset {got}, want {want}")),
            }
        }
    };
    // The mirror lags (paused) while the group commits far ahead on the source.
    assert_topic_codes(&pause_topics(&mut d, "m", &["g"]).await, 0, "pause");
    wait_state(&mut d, "m", "g", 1, "PAUSED").await;
    produce_ok(&mut s, "g", 0, make_batch(Compression::None, 50, None, "b")).await;
    assert_eq!(commit_offset(&mut s, "app", "g", 0, 55).await, 0);
    wait_for(
        WAIT,
        "the synced offset clamped to the mirrored end",
        dst_committed(10),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        committed_offset(&mut d, "app", "g", 0).await,
        10,
        "stays within the mirror"
    );

    // The mirror catches up: the offset follows, up to the source's commit.
    assert_topic_codes(&resume_topics(&mut d, "m", &["g"]).await, 0, "resume");
    wait_mirrored(&mut d, "m", "g", &[60]).await;
    wait_for(WAIT, "the source's commit synced", dst_committed(55)).await;

    // Lagging again, then a failover: the committed offset is the topic's end.
    assert_topic_codes(&pause_topics(&mut d, "m", &["g"]).await, 0, "pause again");
    wait_state(&mut d, "m", "g", 1, "PAUSED").await;
    produce_ok(&mut s, "g", 0, make_batch(Compression::None, 40, None, "c")).await;
    assert_eq!(commit_offset(&mut s, "app", "g", 0, 90).await, 0);
    wait_for(
        WAIT,
        "the offset clamped at the paused end",
        dst_committed(60),
    )
    .await;
    assert_topic_codes(&stop_topics(&mut d, "m", &["g"]).await, 0, "stop");
    assert_eq!(end_offsets(&mut d, "g", 1).await, vec![60]);
    assert_eq!(committed_offset(&mut d, "app", "g", 0).await, 60);
}

/// One mirror's source hangs (it accepts connections and never answers): every mirror has its
/// own task, so another mirror on the same broker starts, mirrors and fails over meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_source_holds_up_no_other_mirror() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[("mirror.metadata.refresh.interval.ms", "300")]).await;
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = hole.local_addr().unwrap().to_string();
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = hole.accept().await {
            held.push(conn);
        }
    });
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    // The hung mirror discovers topics, so its task asks the silent source on every pass.
    let r = create_mirror(
        &mut d,
        "hung",
        &[
            ("bootstrap.servers", Some(hole_addr.as_str())),
            ("mirror.topics.include", Some(".*")),
            ("request.timeout.ms", Some("300000")),
        ],
    )
    .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    tokio::time::sleep(Duration::from_millis(1000)).await;

    create_topic(&mut s, "f", 2, &[]).await;
    for p in 0..2 {
        produce_ok(&mut s, "f", p, make_batch(Compression::Lz4, 7, None, "f")).await;
    }
    let ends = end_offsets(&mut s, "f", 2).await;
    create_mirror_to(&mut d, "fast", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "fast", &["f"]).await, 0, "start");
    wait_mirrored(&mut d, "fast", "f", &ends).await;
    for p in 0..2 {
        assert_same_log(&mut s, &mut d, "f", p).await;
    }
    assert_topic_codes(&stop_topics(&mut d, "fast", &["f"]).await, 0, "stop");
    produce_ok(
        &mut d,
        "f",
        0,
        make_batch(Compression::None, 1, None, "after"),
    )
    .await;
}

/// The destination shuts down mid-mirroring and restarts on its dir: states come back from
/// `__mirror_state`, mirroring resumes without gap or duplicate, a stopped topic stays writable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destination_restart_resumes_mirroring_and_keeps_stopped_topics_writable() {
    init_tracing();
    let src = Node::start(&[]).await;
    let mut dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "r", 2, &[("segment.bytes", "32768")]).await;
    create_topic(&mut s, "st", 1, &[]).await;
    for p in 0..2 {
        produce_codec_mix(&mut s, "r", 2, 100 + p as i64 * 10).await;
    }
    produce_ok(
        &mut s,
        "st",
        0,
        make_batch(Compression::Snappy, 5, None, "st"),
    )
    .await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["r", "st"]).await, 0, "start");
    let st_end = end_offsets(&mut s, "st", 1).await;
    wait_mirrored(&mut d, "m", "st", &st_end).await;
    assert_topic_codes(&stop_topics(&mut d, "m", &["st"]).await, 0, "stop st");
    let st_base = produce_ok(
        &mut d,
        "st",
        0,
        make_batch(Compression::None, 2, None, "mine"),
    )
    .await;
    assert_eq!(st_base, st_end[0]);

    // A producer keeps writing to the source while the destination goes down and comes back.
    let producing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let producing = producing.clone();
        let mut conn = src.connect().await;
        tokio::spawn(async move {
            let mut i = 0u64;
            while producing.load(std::sync::atomic::Ordering::SeqCst) {
                let c = CODECS[(i % 5) as usize];
                produce_ok(
                    &mut conn,
                    "r",
                    (i % 2) as i32,
                    make_batch(c, 1 + (i % 4) as usize, None, &format!("w{i}")),
                )
                .await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            i
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mid = end_offsets(&mut d, "r", 2).await;
    assert!(
        mid.iter().all(|o| *o > 0),
        "mirroring before the restart: {mid:?}"
    );
    drop(d);
    dst.stop().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    dst.restart(false).await;
    let mut d = dst.connect().await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    producing.store(false, std::sync::atomic::Ordering::SeqCst);
    let written = writer.await.unwrap();
    assert!(written > 20, "the writer wrote {written} batches");

    let ends = end_offsets(&mut s, "r", 2).await;
    wait_mirrored(&mut d, "m", "r", &ends).await;
    for p in 0..2 {
        assert_same_log(&mut s, &mut d, "r", p).await;
    }
    let (code, _) =
        produce_batch(&mut d, "r", 0, make_batch(Compression::None, 1, None, "x")).await;
    assert_eq!(code, READ_ONLY_TOPIC, "still read-only after the restart");

    // The stopped topic: STOPPED, writable, its last mirrored offset kept.
    let parts = partition_details(&mut d, "m", "st").await;
    assert!(
        parts.len() == 1 && parts[0].state_value == "STOPPED",
        "{parts:?}"
    );
    let base = produce_ok(
        &mut d,
        "st",
        0,
        make_batch(Compression::None, 1, None, "after"),
    )
    .await;
    assert_eq!(base, st_end[0] + 2);
    let lmo = last_mirrored_offsets(&mut d, "x", "st", &[0]).await;
    assert_eq!(lmo.topics[0].partitions[0].error_code, 0, "{lmo:?}");
    assert_eq!(lmo.topics[0].partitions[0].last_mirrored_offset, st_end[0]);
}

/// DeleteRecords on the source, before and after the mirror starts: the destination's log
/// start follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destination_log_start_follows_source_delete_records() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "ret", 1, &[("segment.bytes", "4096")]).await;
    for i in 0..10 {
        produce_ok(
            &mut s,
            "ret",
            0,
            make_batch(CODECS[i % 5], 3, None, &format!("r{i}")),
        )
        .await;
    }
    // Inside the batch 6..=8.
    let (code, low) = delete_records(&mut s, "ret", 0, 7).await;
    assert_eq!((code, low), (0, 7));
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["ret"]).await, 0, "start");
    wait_mirrored(&mut d, "m", "ret", &[30]).await;
    assert_eq!(list_offset(&mut d, "ret", 0, -2).await, 7);
    let log = assert_same_log(&mut s, &mut d, "ret", 0).await;
    assert_eq!(
        log.batches[0].0, 6,
        "the batch holding the log start is kept whole"
    );

    let (code, low) = delete_records(&mut s, "ret", 0, 20).await;
    assert_eq!((code, low), (0, 20));
    let deadline = Instant::now() + WAIT;
    while list_offset(&mut d, "ret", 0, -2).await != 20 {
        assert!(
            Instant::now() < deadline,
            "destination log start did not follow to 20"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_same_log(&mut s, &mut d, "ret", 0).await;

    for i in 0..4 {
        produce_ok(
            &mut s,
            "ret",
            0,
            make_batch(Compression::Lz4, 2, None, &format!("n{i}")),
        )
        .await;
    }
    // Everything.
    let (code, low) = delete_records(&mut s, "ret", 0, -1).await;
    assert_eq!((code, low), (0, 38));
    let deadline = Instant::now() + WAIT;
    while list_offset(&mut d, "ret", 0, -2).await != 38 {
        assert!(
            Instant::now() < deadline,
            "destination log start did not follow to 38"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(list_offset(&mut d, "ret", 0, -1).await, 38);
    produce_ok(
        &mut s,
        "ret",
        0,
        make_batch(Compression::Zstd, 2, None, "last"),
    )
    .await;
    wait_mirrored(&mut d, "m", "ret", &[40]).await;
    assert_same_log(&mut s, &mut d, "ret", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreachable_source_fails_start_quickly() {
    init_tracing();
    let dst = Node::start(&[]).await;
    let mut d = dst.connect().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    create_mirror_to(&mut d, "dead", &format!("127.0.0.1:{port}")).await;
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        start_topics(&mut d, "dead", &["x"]),
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
    let (code, _, _) = topic_metadata(&mut d, "x").await;
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(list_mirrors(&mut d).await.mirrors[0].topic_count, 0);
}

/// The source dies while mirroring: partitions go FAILED with retry attempts and an error, and
/// stay read-only; a failover (stop) works with the source down; the source comes back on the
/// same port and the partitions still mirrored resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn source_death_fails_partitions_then_failover_and_recovery() {
    init_tracing();
    let mut src = Node::start(&[]).await;
    let dst = Node::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "100"),
        ("mirror.failed.retry.max.backoff.ms", "500"),
    ])
    .await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "live", 2, &[]).await;
    create_topic(&mut s, "live2", 1, &[]).await;
    for p in 0..2 {
        produce_ok(
            &mut s,
            "live",
            p,
            make_batch(Compression::Gzip, 5, None, "a"),
        )
        .await;
    }
    produce_ok(
        &mut s,
        "live2",
        0,
        make_batch(Compression::Lz4, 7, None, "a"),
    )
    .await;
    let ends = end_offsets(&mut s, "live", 2).await;
    let ends2 = end_offsets(&mut s, "live2", 1).await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(
        &start_topics(&mut d, "m", &["live", "live2"]).await,
        0,
        "start",
    );
    wait_mirrored(&mut d, "m", "live", &ends).await;
    wait_mirrored(&mut d, "m", "live2", &ends2).await;

    drop(s);
    src.stop().await;
    for (topic, n) in [("live", 2), ("live2", 1)] {
        let parts = wait_state(&mut d, "m", topic, n, "FAILED").await;
        for p in &parts {
            assert!(p.retry_attempt > 0, "{p:?}");
            assert!(
                p.error_message.as_deref().is_some_and(|m| !m.is_empty()),
                "{p:?}"
            );
        }
    }
    let (code, _) = produce_batch(
        &mut d,
        "live",
        0,
        make_batch(Compression::None, 1, None, "x"),
    )
    .await;
    assert_eq!(
        code, READ_ONLY_TOPIC,
        "a failed mirror topic stays read-only"
    );

    // Failover with the source down.
    let started = Instant::now();
    assert_topic_codes(&stop_topics(&mut d, "m", &["live2"]).await, 0, "stop live2");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stop took {:?}",
        started.elapsed()
    );
    let parts = partition_details(&mut d, "m", "live2").await;
    assert!(
        parts.iter().all(|p| p.state_value == "STOPPED"),
        "{parts:?}"
    );
    let base = produce_ok(
        &mut d,
        "live2",
        0,
        make_batch(Compression::None, 2, None, "mine"),
    )
    .await;
    assert_eq!(base, ends2[0]);

    // The source comes back on the same dir and port.
    src.restart(true).await;
    let mut s = src.connect().await;
    for p in 0..2 {
        produce_ok(
            &mut s,
            "live",
            p,
            make_batch(Compression::Zstd, 3, None, "b"),
        )
        .await;
    }
    produce_ok(
        &mut s,
        "live2",
        0,
        make_batch(Compression::Zstd, 3, None, "b"),
    )
    .await;
    let ends = end_offsets(&mut s, "live", 2).await;
    wait_mirrored(&mut d, "m", "live", &ends).await;
    for p in 0..2 {
        assert_same_log(&mut s, &mut d, "live", p).await;
    }
    let parts = partition_details(&mut d, "m", "live").await;
    assert!(parts.iter().all(|p| p.retry_attempt == 0), "{parts:?}");
    // The failed-over topic is left alone.
    assert_eq!(end_offsets(&mut d, "live2", 1).await, vec![ends2[0] + 2]);
    let parts = partition_details(&mut d, "m", "live2").await;
    assert!(
        parts.iter().all(|p| p.state_value == "STOPPED"),
        "{parts:?}"
    );
}

/// A FAILED partition retries with exponential backoff; each failed retry counts one more
/// attempt (what describe's retry_attempt and `mirror.failed.retry.max.attempts` are about).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_partition_retry_attempts_grow() {
    init_tracing();
    let mut src = Node::start(&[]).await;
    let dst = Node::start(&[
        ("mirror.failed.retry.initial.backoff.ms", "1000"),
        ("mirror.failed.retry.max.backoff.ms", "4000"),
        ("mirror.failed.retry.max.attempts", "3"),
    ])
    .await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "f", 1, &[]).await;
    produce_ok(&mut s, "f", 0, make_batch(Compression::None, 2, None, "a")).await;
    create_mirror_to(&mut d, "m", &src.bootstrap()).await;
    assert_topic_codes(&start_topics(&mut d, "m", &["f"]).await, 0, "start");
    wait_mirrored(&mut d, "m", "f", &[2]).await;
    drop(s);
    src.stop().await;
    // 3 attempts at 0.5-1, 1-2 and 2-4 s: well within 60 s, after which the partition stays
    // FAILED and is no longer retried (retry_attempt -1). The backoffs are long enough that a
    // loaded machine's describe round trips (seconds, when CI builds beside the tests) still
    // see the last attempt.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = BTreeSet::new();
    let mut last = Vec::new();
    while Instant::now() < deadline {
        last = partition_details(&mut d, "m", "f").await;
        seen.extend(
            last.iter()
                .map(|p| (p.state_value.clone(), p.retry_attempt)),
        );
        if last
            .iter()
            .all(|p| p.state_value == "FAILED" && p.retry_attempt == -1)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("states seen: {seen:?}");
    assert!(
        last.iter()
            .all(|p| p.state_value == "FAILED" && p.retry_attempt == -1),
        "after 60 s of retries every 1-4 s with max.attempts=3 the partition is {last:?}; \
         (state, retry_attempt) seen: {seen:?}"
    );
    assert!(seen.contains(&("FAILED".to_string(), 3)), "{seen:?}");
}

/// `mirror.fetch.rate.max.bytes` holds an initial copy to its rate: 3 MB at 1 MB/s (with one
/// second's allowance up front) cannot be mirrored in less than about two seconds, and every
/// byte still arrives. A negative rate is refused when the mirror is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_byte_rate_limit_holds_an_initial_copy_to_its_rate() {
    init_tracing();
    let src = Node::start(&[]).await;
    let dst = Node::start(&[]).await;
    let mut s = src.connect().await;
    let mut d = dst.connect().await;
    create_topic(&mut s, "bulk", 1, &[]).await;
    for i in 0..30 {
        produce_ok(&mut s, "bulk", 0, big_batch(100, 1000, i)).await;
    }
    let r = create_mirror(
        &mut d,
        "bad",
        &[
            ("bootstrap.servers", Some(src.bootstrap().as_str())),
            ("mirror.fetch.rate.max.bytes", Some("-5")),
        ],
    )
    .await;
    assert_ne!(r.error_code, 0, "a negative rate must be refused: {r:?}");
    let r = create_mirror(
        &mut d,
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
    assert_topic_codes(&start_topics(&mut d, "slow", &["bulk"]).await, 0, "start");
    wait_mirrored(&mut d, "slow", "bulk", &[3000]).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "3 MB mirrored in {took:?} under a 1 MB/s limit"
    );
    assert_same_log(&mut s, &mut d, "bulk", 0).await;
}
