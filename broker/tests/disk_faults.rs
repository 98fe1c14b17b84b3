//! I/O errors injected under one partition's directory (storage's fault layer): that partition
//! answers KAFKA_STORAGE_ERROR to produce and fetch, the others keep serving, and after a
//! restart it holds every acknowledged batch, byte for byte, and takes writes again.

#[path = "support/mirror.rs"]
mod mirror_support;
mod support;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use mirror_support::*;
use support::{batch, create_topic, name};
use tern_protocol::client::KafkaConnection;
use tern_storage::fault::{inject, FaultAction, FaultOp, FaultPlan};

const KAFKA_STORAGE_ERROR: i16 = 56;

/// The error code of one Fetch of `topic`-0 from offset 0.
async fn fetch_code(conn: &mut KafkaConnection, topic: &str) -> i16 {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
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
    resp.responses[0].partitions[0].error_code
}

/// Produces `n` batches and returns them as the broker acknowledged them.
async fn acknowledged(conn: &mut KafkaConnection, topic: &str, n: usize) -> Vec<Bytes> {
    for i in 0..n {
        assert_eq!(
            produce_ok(conn, topic, 0, batch(i + 1)).await,
            (i * (i + 1) / 2) as i64
        );
    }
    fetch_log(conn, topic).await
}

async fn fetch_log(conn: &mut KafkaConnection, topic: &str) -> Vec<Bytes> {
    mirror_support::fetch_log(conn, topic, 0)
        .await
        .batches
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

#[tokio::test]
async fn an_io_error_takes_one_partition_offline_and_a_restart_loses_nothing_acknowledged() {
    for op in [FaultOp::Write, FaultOp::Read, FaultOp::Sync] {
        let mut node = Node::start(&[("log.flush.interval.messages", "1")]).await;
        let mut conn = node.connect().await;
        for t in ["bad", "good"] {
            let r = create_topic(&mut conn, t, 1, &[]).await;
            assert_eq!(r.topics[0].error_code, 0);
        }
        let before = acknowledged(&mut conn, "bad", 5).await;
        acknowledged(&mut conn, "good", 3).await;

        let fault = inject(FaultPlan {
            under: node.dir.path().join("bad-0"),
            op,
            skip: 0,
            times: u64::MAX,
            action: FaultAction::Fail,
        });
        // The first operation that hits the fault fails; from then on the partition is
        // offline for both directions, whatever the operation was.
        let (code, _) = produce_batch(&mut conn, "bad", 0, batch(1)).await;
        let fetched = fetch_code(&mut conn, "bad").await;
        assert!(
            code == KAFKA_STORAGE_ERROR || fetched == KAFKA_STORAGE_ERROR,
            "{op:?}: produce {code}, fetch {fetched}"
        );
        assert_eq!(
            produce_batch(&mut conn, "bad", 0, batch(1)).await.0,
            KAFKA_STORAGE_ERROR,
            "{op:?}"
        );
        assert_eq!(fetch_code(&mut conn, "bad").await, KAFKA_STORAGE_ERROR);
        assert!(fault.hits() >= 1, "{op:?}");
        // The other partition keeps serving, with the fault still armed.
        assert_eq!(produce_ok(&mut conn, "good", 0, batch(2)).await, 6);
        assert_eq!(fetch_log(&mut conn, "good").await.len(), 4);
        drop(fault);
        // Still offline until the broker restarts, even with the disk healed.
        assert_eq!(fetch_code(&mut conn, "bad").await, KAFKA_STORAGE_ERROR);

        drop(conn);
        node.restart(true).await;
        let mut conn = node.connect().await;
        let after = fetch_log(&mut conn, "bad").await;
        // A write that failed may or may not have reached the file before failing; only
        // acknowledged batches are promised, and they come back unchanged.
        assert!(
            after.len() >= before.len() && after[..before.len()] == before[..],
            "{op:?}: acknowledged batches changed after the restart"
        );
        let next = produce_ok(&mut conn, "bad", 0, batch(1)).await;
        assert!(next >= 15, "{op:?}: offsets went back to {next}");
        node.stop().await;
    }
}
