//! Unit tests of [`crate::Log`] against hand-checked outcomes.

use bytes::BytesMut;
use tern_protocol::record_batch::{validate_batch, BatchIter, TimestampType};

use crate::record::{build_batch, build_control_batch, BatchSpec, KeyValue};
use crate::{Log, LogConfig, StorageError};

fn batch(n: usize, ts: i64) -> BytesMut {
    let value = [b'x'; 100];
    let recs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(&value[..]))).collect();
    BytesMut::from(
        &build_batch(
            &BatchSpec {
                base_timestamp: ts,
                ..BatchSpec::default()
            },
            &recs,
        )[..],
    )
}

fn spec_batch(spec: BatchSpec, n: usize) -> BytesMut {
    let recs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(&b"v"[..]))).collect();
    BytesMut::from(&build_batch(&spec, &recs)[..])
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

fn offsets(records: &[u8]) -> Vec<(i64, i64)> {
    BatchIter::new(records)
        .map(|r| r.map(|(h, _)| (h.base_offset, h.last_offset())).unwrap())
        .collect()
}

#[test]
fn leader_append_assigns_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let a = log.append_as_leader(batch(3, 10), 5).unwrap();
    assert_eq!((a.first_offset, a.last_offset, a.record_count), (0, 2, 3));
    let b = log.append_as_leader(batch(2, 20), 5).unwrap();
    assert_eq!((b.first_offset, b.last_offset), (3, 4));
    assert_eq!(b.max_timestamp, 21);
    assert_eq!(log.log_end_offset(), 5);
    let r = log.read(0, 1 << 20, None, true).unwrap();
    assert_eq!(offsets(&r.records), vec![(0, 2), (3, 4)]);
    // An offset inside a batch returns the whole batch.
    let r = log.read(4, 1 << 20, None, true).unwrap();
    assert_eq!(offsets(&r.records), vec![(3, 4)]);
    assert_eq!(r.first_offset, 3);
    for (h, bytes) in BatchIter::new(&r.records).map(Result::unwrap) {
        assert_eq!(h.partition_leader_epoch, 5);
        validate_batch(bytes).unwrap();
    }
    assert!(log.read(5, 100, None, true).unwrap().records.is_empty());
    assert!(matches!(
        log.read(6, 100, None, true),
        Err(StorageError::OffsetOutOfRange { offset: 6, .. })
    ));
    assert_eq!(log.latest_epoch(), Some(5));
}

#[test]
fn read_limits_bytes_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let one = batch(2, 0).len();
    for _ in 0..4 {
        log.append_as_leader(batch(2, 0), 0).unwrap();
    }
    assert_eq!(
        offsets(&log.read(0, one * 2 + 10, None, false).unwrap().records).len(),
        2
    );
    assert!(log
        .read(0, one - 1, None, false)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        offsets(&log.read(0, one - 1, None, true).unwrap().records),
        vec![(0, 1)]
    );
    // max_offset is exclusive and applies to a batch's last offset.
    assert_eq!(
        offsets(&log.read(0, 1 << 20, Some(5), true).unwrap().records),
        vec![(0, 1), (2, 3)]
    );
    assert!(log
        .read(2, 1 << 20, Some(3), true)
        .unwrap()
        .records
        .is_empty());
}

#[test]
fn a_bad_batch_rejects_the_whole_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut req = batch(2, 0);
    let mut bad = batch(1, 0);
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    req.extend_from_slice(&bad);
    assert!(matches!(
        log.append_as_leader(req, 0),
        Err(StorageError::InvalidBatch(_))
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
    let mut trunc = batch(2, 0);
    trunc.truncate(trunc.len() - 3);
    assert!(log.append_as_leader(trunc, 0).is_err());
    assert!(matches!(
        log.append_as_leader(BytesMut::new(), 0),
        Err(StorageError::EmptyAppend)
    ));
    let big = LogConfig {
        max_message_bytes: 50,
        ..LogConfig::default()
    };
    log.update_config(big);
    assert!(matches!(
        log.append_as_leader(batch(1, 0), 0),
        Err(StorageError::RecordTooLarge { .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn replicated_append_keeps_offsets_and_allows_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut req = spec_batch(
        BatchSpec {
            base_offset: 10,
            leader_epoch: 3,
            ..BatchSpec::default()
        },
        2,
    );
    req.extend_from_slice(&spec_batch(
        BatchSpec {
            base_offset: 20,
            leader_epoch: 4,
            ..BatchSpec::default()
        },
        1,
    ));
    let info = log.append_replicated(req.freeze(), None).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (10, 20));
    assert_eq!(log.log_end_offset(), 21);
    assert_eq!(log.epoch_entries(), vec![(3, 10), (4, 20)]);
    assert_eq!(log.end_offset_for_epoch(3), Some((3, 20)));
    // Gap: offset 15 lies in no batch; the read moves on to the next batch.
    assert_eq!(
        offsets(&log.read(15, 1 << 20, None, true).unwrap().records),
        vec![(20, 20)]
    );
    let below = spec_batch(
        BatchSpec {
            base_offset: 20,
            ..BatchSpec::default()
        },
        1,
    );
    assert!(matches!(
        log.append_replicated(below.freeze(), None),
        Err(StorageError::InvalidOffsets { .. })
    ));
    let info = log
        .append_replicated(
            spec_batch(
                BatchSpec {
                    base_offset: 30,
                    leader_epoch: 1,
                    ..BatchSpec::default()
                },
                1,
            )
            .freeze(),
            Some(9),
        )
        .unwrap();
    assert_eq!(info.first_offset, 30);
    let r = log.read(30, 1 << 20, None, true).unwrap();
    let (h, _) = BatchIter::new(&r.records).next().unwrap().unwrap();
    assert_eq!(h.partition_leader_epoch, 9);
    assert_eq!(log.latest_epoch(), Some(9));
}

fn slice_bytes(log: &Log, offset: i64, max: usize, upper: Option<i64>, one: bool) -> Vec<u8> {
    log.read_slice(offset, max, upper, one)
        .unwrap()
        .map(|s| s.to_bytes().unwrap().to_vec())
        .unwrap_or_default()
}

#[test]
fn read_slice_bounds_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let one = batch(2, 0).len();
    for _ in 0..4 {
        log.append_as_leader(batch(2, 0), 0).unwrap();
    }
    let all = log.read(0, 1 << 20, None, true).unwrap().records;
    assert_eq!(all.len(), one * 4);
    // Unbounded: the same bytes a whole-batch read gives.
    assert_eq!(slice_bytes(&log, 0, 1 << 20, None, true), all.to_vec());
    // An offset inside a batch starts at that batch.
    assert_eq!(
        slice_bytes(&log, 3, 1 << 20, None, true),
        all[one..].to_vec()
    );
    // A byte limit may cut a batch: the range ends there, as Kafka's does.
    assert_eq!(
        slice_bytes(&log, 0, one * 2 + 10, None, false),
        all[..one * 2 + 10].to_vec()
    );
    // A first batch larger than the limit: nothing, or that batch whole with min_one_batch.
    assert!(log.read_slice(0, one - 1, None, false).unwrap().is_none());
    assert_eq!(
        slice_bytes(&log, 0, one - 1, None, true),
        all[..one].to_vec()
    );
    // The upper bound (high watermark) ends the range before the batch that reaches it,
    // whatever the byte limit.
    assert_eq!(
        slice_bytes(&log, 0, 1 << 20, Some(4), true),
        all[..one * 2].to_vec()
    );
    assert_eq!(
        slice_bytes(&log, 2, 1 << 20, Some(5), true),
        all[one..one * 2].to_vec()
    );
    assert!(log.read_slice(2, 1 << 20, Some(3), true).unwrap().is_none());
    assert!(log.read_slice(8, 1 << 20, None, true).unwrap().is_none());
    assert!(matches!(
        log.read_slice(9, 100, None, true),
        Err(StorageError::OffsetOutOfRange { offset: 9, .. })
    ));
}

#[test]
fn a_slice_outlives_its_deleted_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch(2, i), 0).unwrap();
    }
    let slice = log.read_slice(0, 1 << 20, None, true).unwrap().unwrap();
    let before = slice.to_bytes().unwrap();
    assert_eq!(offsets(&before)[0], (0, 1));
    log.delete_records_before(log.log_end_offset() - 2).unwrap();
    assert!(
        log.segment_base_offsets()[0] > 0,
        "the first segment is gone"
    );
    // The slice holds the file open: its bytes are still what the read saw.
    assert_eq!(slice.to_bytes().unwrap(), before);
}

#[test]
fn rolls_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch(2, i), 0).unwrap();
    }
    assert!(log.num_segments() > 3, "{}", log.num_segments());
    let mut next = 0;
    let mut seen = 0;
    while next < log.log_end_offset() {
        let r = log.read(next, 300, None, true).unwrap();
        let o = offsets(&r.records);
        assert_eq!(o[0].0, next);
        next = o.last().unwrap().1 + 1;
        seen += o.len();
    }
    assert_eq!(seen, 30);
    for i in 0..60 {
        let r = log.read(i, 1, None, true).unwrap();
        assert_eq!(offsets(&r.records), vec![(i / 2 * 2, i / 2 * 2 + 1)]);
    }
}

#[test]
fn truncate_to_drops_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..20 {
        log.append_as_leader(batch(2, i), i as i32).unwrap();
    }
    let segs = log.num_segments();
    log.truncate_to(11).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    assert!(log.num_segments() < segs);
    assert_eq!(log.latest_epoch(), Some(4));
    let info = log.append_as_leader(batch(1, 0), 7).unwrap();
    assert_eq!(info.first_offset, 10);
    assert_eq!(
        offsets(&log.read(8, 1 << 20, None, true).unwrap().records),
        vec![(8, 9), (10, 10)]
    );
    log.truncate_to(0).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.num_segments(), 1);
    assert_eq!(log.latest_epoch(), None);
}

#[test]
fn truncate_fully_and_delete_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..20 {
        log.append_as_leader(batch(2, i), 0).unwrap();
    }
    let segs = log.num_segments();
    assert_eq!(log.delete_records_before(15).unwrap(), 15);
    assert_eq!(log.log_start_offset(), 15);
    assert!(log.num_segments() < segs);
    assert!(matches!(
        log.read(13, 100, None, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        offsets(&log.read(15, 1, None, true).unwrap().records),
        vec![(14, 15)]
    );
    assert!(log.delete_records_before(41).is_err());
    log.close().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.log_start_offset(), 15);
    assert_eq!(log.log_end_offset(), 40);
    log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.num_segments()
        ),
        (100, 100, 1)
    );
    assert_eq!(
        log.append_as_leader(batch(1, 0), 0).unwrap().first_offset,
        100
    );
    drop(log);
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 101));
}

#[test]
fn delete_records_up_to_log_end_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append_as_leader(batch(3, 0), 0).unwrap();
    assert_eq!(log.delete_records_before(3).unwrap(), 3);
    assert_eq!(log.num_segments(), 1);
    assert_eq!(log.size_bytes(), 0);
    assert!(log.read(3, 100, None, true).unwrap().records.is_empty());
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
}

#[test]
fn reopen_after_clean_close_and_after_crash() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), small_segments()).unwrap();
        for i in 0..25 {
            log.append_as_leader(batch(3, 1000 + i), (i / 10) as i32)
                .unwrap();
        }
        let before = log.read(0, 1 << 20, None, true).unwrap().records;
        let segs = log.num_segments();
        if clean {
            log.close().unwrap();
        } else {
            drop(log);
        }
        let log = Log::open(dir.path(), small_segments()).unwrap();
        assert_eq!(log.log_end_offset(), 75);
        assert_eq!(log.num_segments(), segs);
        assert_eq!(log.read(0, 1 << 20, None, true).unwrap().records, before);
        assert_eq!(log.epoch_entries(), vec![(0, 0), (1, 30), (2, 60)]);
        assert_eq!(
            log.append_as_leader(batch(1, 0), 3).unwrap().first_offset,
            75
        );
        for i in 0..75 {
            assert_eq!(
                offsets(&log.read(i, 1, None, true).unwrap().records)[0].0,
                i / 3 * 3
            );
        }
    }
}

#[test]
fn idempotent_producer_dedup_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let p = |seq, n| {
        spec_batch(
            BatchSpec {
                producer_id: 42,
                producer_epoch: 1,
                base_sequence: seq,
                ..BatchSpec::default()
            },
            n,
        )
    };
    assert_eq!(log.append_as_leader(p(0, 3), 0).unwrap().first_offset, 0);
    assert_eq!(log.append_as_leader(p(3, 2), 0).unwrap().first_offset, 3);
    let dup = log.append_as_leader(p(0, 3), 0).unwrap();
    assert!(dup.duplicate);
    assert_eq!((dup.first_offset, dup.last_offset), (0, 2));
    assert_eq!(log.log_end_offset(), 5);
    assert!(matches!(
        log.append_as_leader(p(9, 1), 0),
        Err(StorageError::OutOfOrderSequence { expected: 5, .. })
    ));
    let stale = spec_batch(
        BatchSpec {
            producer_id: 42,
            producer_epoch: 0,
            base_sequence: 5,
            ..BatchSpec::default()
        },
        1,
    );
    assert!(matches!(
        log.append_as_leader(stale, 0),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    let entry = log.producer_state(42).unwrap();
    assert_eq!(
        (
            entry.producer_epoch,
            entry.last_sequence(),
            entry.last_offset()
        ),
        (1, 4, 4)
    );
    // Unknown producers may start anywhere (Kafka 2.5+).
    let fresh = spec_batch(
        BatchSpec {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 17,
            ..BatchSpec::default()
        },
        1,
    );
    assert!(!log.append_as_leader(fresh, 0).unwrap().duplicate);
    for clean in [false, true] {
        let log2 = if clean {
            log_reopen_clean(dir.path())
        } else {
            Log::open(dir.path(), LogConfig::default()).unwrap()
        };
        assert!(log2.append_as_leader(p(3, 2), 0).unwrap().duplicate);
        assert_eq!(log2.producer_state(42).unwrap().last_sequence(), 4);
        log2.close().unwrap();
    }
    drop(log);
}

fn log_reopen_clean(dir: &std::path::Path) -> Log {
    Log::open(dir, LogConfig::default())
        .unwrap()
        .close()
        .unwrap();
    Log::open(dir, LogConfig::default()).unwrap()
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let info = log.append_as_leader(batch(2, 5), 0).unwrap();
    assert!(info.log_append_time > 1_600_000_000_000);
    let r = log.read(0, 1 << 20, None, true).unwrap();
    let h = validate_batch(&r.records).unwrap();
    assert_eq!(h.max_timestamp, info.log_append_time);
    assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
}

#[test]
fn timestamp_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..20 {
        log.append_as_leader(batch(2, 1000 + i * 10), 0).unwrap();
    }
    // Batch i holds timestamps 1000+10i and 1001+10i at offsets 2i and 2i+1.
    let t = log.fetch_offset_by_timestamp(1051).unwrap().unwrap();
    assert_eq!((t.timestamp, t.offset), (1051, 11));
    let t = log.fetch_offset_by_timestamp(1052).unwrap().unwrap();
    assert_eq!((t.timestamp, t.offset), (1060, 12));
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap().unwrap().offset, 0);
    assert!(log.fetch_offset_by_timestamp(5000).unwrap().is_none());
    let m = log.max_timestamp_and_offset().unwrap().unwrap();
    assert_eq!((m.timestamp, m.offset), (1191, 39));
}

#[test]
fn aborted_transactions_and_last_stable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let txn = |pid, seq| spec_batch(BatchSpec::transactional(pid, 0, seq), 2);
    let marker = |pid, commit| {
        BytesMut::from(
            &build_control_batch(
                &BatchSpec {
                    producer_id: pid,
                    producer_epoch: 0,
                    ..BatchSpec::default()
                },
                commit,
            )[..],
        )
    };
    log.append_as_leader(batch(1, 0), 0).unwrap(); // 0
    log.append_as_leader(txn(1, 0), 0).unwrap(); // 1-2
    log.append_as_leader(txn(2, 0), 0).unwrap(); // 3-4
    assert_eq!(log.last_stable_offset(100), 1);
    log.append_as_leader(marker(1, false), 0).unwrap(); // 5 abort
    assert_eq!(log.last_stable_offset(100), 3);
    log.append_as_leader(marker(2, true), 0).unwrap(); // 6 commit
    assert_eq!(log.last_stable_offset(100), 100);
    let aborted = log.aborted_transactions(0, 10);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (1, 1, 5)
    );
    assert!(log.aborted_transactions(6, 10).is_empty());
    drop(log);
    // Recovery rebuilds the transaction index.
    std::fs::remove_file(dir.path().join("00000000000000000000.txnindex")).unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.aborted_transactions(0, 10).len(), 1);
    log.append_as_leader(txn(3, 0), 0).unwrap();
    assert_eq!(log.last_stable_offset(100), 7);
}

#[test]
fn a_marker_from_an_older_coordinator_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let spec = BatchSpec::transactional(1, 0, -1);
    let marker = |coordinator_epoch: i32| {
        let key = [0u8, 0, 0, 1];
        let mut value = vec![0u8, 0];
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        let spec = BatchSpec {
            control: true,
            ..spec
        };
        BytesMut::from(&build_batch(&spec, &[(Some(&key[..]), Some(&value[..]))])[..])
    };
    log.append_as_leader(spec_batch(spec, 2), 0).unwrap();
    log.append_as_leader(marker(3), 0).unwrap();
    assert_eq!(log.producer_state(1).unwrap().coordinator_epoch, 3);
    log.append_as_leader(spec_batch(spec, 2), 0).unwrap();
    let end = log.log_end_offset();
    assert!(matches!(
        log.append_as_leader(marker(2), 0),
        Err(StorageError::CoordinatorFenced {
            producer_id: 1,
            current: 3,
            found: 2
        })
    ));
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.last_stable_offset(100), 3);
    log.append_as_leader(marker(4), 0).unwrap();
    assert_eq!(log.last_stable_offset(100), 100);
    assert_eq!(log.producer_state(1).unwrap().coordinator_epoch, 4);
}

#[test]
fn a_transaction_version_2_marker_must_raise_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let data = |epoch: i16, seq: i32| BatchSpec::transactional(1, epoch, seq);
    let marker = |epoch: i16| {
        let key = [0u8, 0, 0, 1];
        let value = [0u8, 0, 0, 0, 0, 0];
        let spec = BatchSpec {
            control: true,
            base_sequence: -1,
            ..data(epoch, -1)
        };
        BytesMut::from(&build_batch(&spec, &[(Some(&key[..]), Some(&value[..]))])[..])
    };
    log.append_as_leader(spec_batch(data(5, 0), 2), 0).unwrap();
    // The transaction's own epoch: refused, the transaction stays open.
    assert!(matches!(
        log.append_marker_as_leader(marker(5), 0, true),
        Err(StorageError::InvalidProducerEpoch {
            producer_id: 1,
            current: 5,
            found: 5
        })
    ));
    assert_eq!(log.last_stable_offset(100), 0);
    // Under version 1 the same marker is the transaction's end; under version 2 the next epoch.
    log.append_marker_as_leader(marker(6), 0, true).unwrap();
    assert_eq!(log.last_stable_offset(100), 100);
    assert_eq!(log.producer_state(1).unwrap().producer_epoch, 6);
    // A coordinator repeating the marker (no transaction open) is answered again.
    log.append_marker_as_leader(marker(6), 0, true).unwrap();
    // The data of the fenced epoch is refused; the next transaction starts at sequence 0.
    assert!(matches!(
        log.append_as_leader(spec_batch(data(5, 2), 1), 0),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    log.append_as_leader(spec_batch(data(6, 0), 3), 0).unwrap();
    assert_eq!(log.last_stable_offset(100), 4);
    // With a transaction open at epoch 6, a repeated marker at 6 is a stale one.
    assert!(log.append_marker_as_leader(marker(6), 0, true).is_err());
    log.append_marker_as_leader(marker(6), 0, false).unwrap();
    assert_eq!(log.last_stable_offset(100), 100);
}

#[test]
fn retention_by_size_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch(2, 1000 + i), 0).unwrap();
    }
    let segs = log.num_segments();
    assert_eq!(log.enforce_retention(2000).unwrap(), 0);
    let mut c = small_segments();
    c.retention_bytes = 2500;
    log.update_config(c.clone());
    let deleted = log.enforce_retention(2000).unwrap();
    assert!(deleted > 0);
    // Kafka deletes a segment only if what remains is still >= retention.bytes.
    assert!(
        log.size_bytes() >= 2500 && log.size_bytes() < 2500 + 1000,
        "{}",
        log.size_bytes()
    );
    assert_eq!(log.num_segments(), segs - deleted);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    c.retention_bytes = -1;
    c.retention_ms = 10;
    log.update_config(c.clone());
    let deleted = log.enforce_retention(1_000_000).unwrap();
    assert!(deleted > 0);
    assert_eq!(log.num_segments(), 1, "active segment is never deleted");
    c.cleanup_policy.delete = false;
    c.cleanup_policy.compact = true;
    log.update_config(c);
    log.roll().unwrap();
    assert_eq!(log.enforce_retention(1_000_000).unwrap(), 0);
}

#[test]
fn flush_advances_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 4,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    log.append_as_leader(batch(2, 0), 0).unwrap();
    assert_eq!(log.recovery_point(), 0);
    log.append_as_leader(batch(2, 0), 0).unwrap();
    assert_eq!(log.recovery_point(), 4);
    log.append_as_leader(batch(1, 0), 0).unwrap();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 5);
}

#[test]
fn writes_after_close_or_delete_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let log = Log::open(&path, LogConfig::default()).unwrap();
    log.append_as_leader(batch(1, 0), 0).unwrap();
    log.delete().unwrap();
    assert!(!path.exists());
}

#[test]
fn log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
    assert_send_sync::<crate::LogManager>();
}

#[test]
fn full_indexes_force_a_roll_but_never_fail_an_append() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_index_bytes: 24,
        index_interval_bytes: 0,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    // One request with many batches overflows a 3-entry index without failing.
    let mut req = BytesMut::new();
    for _ in 0..10 {
        req.extend_from_slice(&batch(1, 0));
    }
    log.append_as_leader(req, 0).unwrap();
    log.append_as_leader(batch(1, 0), 0).unwrap();
    assert_eq!(log.num_segments(), 2);
    for o in 0..11 {
        assert_eq!(
            offsets(&log.read(o, 1, None, true).unwrap().records),
            vec![(o, o)]
        );
    }
}

#[test]
fn concurrent_readers_see_only_whole_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(Log::open(dir.path(), small_segments()).unwrap());
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            for i in 0..300 {
                log.append_as_leader(batch(1 + i % 3, i as i64), 0).unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() || reads == 0 {
        let leo = log.log_end_offset();
        let start = leo / 2;
        let r = log.read(start, 1 << 20, None, true).unwrap();
        let mut next = r.first_offset;
        for b in BatchIter::new(&r.records) {
            let (h, bytes) = b.unwrap();
            validate_batch(bytes).unwrap();
            assert_eq!(h.base_offset, next);
            next = h.next_offset();
        }
        // Nothing past what was published when the read began... or since.
        assert!(next <= log.log_end_offset());
        assert!(r.records.is_empty() || r.first_offset <= start);
        reads += 1;
    }
    writer.join().unwrap();
    assert_eq!(log.log_end_offset(), 600);
}

#[test]
fn recovery_from_the_middle_of_an_epoch_keeps_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    for i in 0..30 {
        log.append_as_leader(batch(2, i), (i / 10) as i32 + 1)
            .unwrap();
    }
    log.flush().unwrap();
    let expected = log.epoch_entries();
    assert_eq!(expected, vec![(1, 0), (2, 20), (3, 40)]);
    drop(log);
    // Recover from an offset inside epoch 2 (as after a crash with that recovery point).
    std::fs::write(
        dir.path().join("recovery-point-offset-checkpoint"),
        "0\n1\n30\n",
    )
    .unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.epoch_entries(), expected);
    drop(log);
    // And with the checkpoint unreadable, the cache is rebuilt from the batches.
    std::fs::write(dir.path().join("leader-epoch-checkpoint"), "garbage").unwrap();
    let log = Log::open(dir.path(), small_segments()).unwrap();
    assert_eq!(log.epoch_entries(), expected);
}

#[test]
fn a_verified_batch_is_refused_once_a_marker_of_its_producer_lands_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let txn = |seq: i32| BatchSpec::transactional(9, 0, seq);
    // Verified, then the coordinator aborts (its marker lands here first): the late batch
    // would open a transaction nobody ends, so it is refused.
    let guard = log.start_transaction_verification(9, 0, false).unwrap();
    let abort = build_control_batch(&txn(-1), false);
    log.append_marker_as_leader(BytesMut::from(&abort[..]), 0, false)
        .unwrap();
    let late = log.append_verified(spec_batch(txn(0), 1), 0, Some(guard));
    assert!(
        matches!(late, Err(StorageError::InvalidTxnState { producer_id: 9 })),
        "{late:?}"
    );
    assert_eq!(log.log_end_offset(), 1);
    assert!(!log.in_transaction(9, 0));

    // A fresh verification holds: the batch opens the transaction, after which no further
    // verification is needed and the used guard no longer matters.
    let guard = log.start_transaction_verification(9, 0, false).unwrap();
    log.append_verified(spec_batch(txn(0), 1), 0, Some(guard))
        .unwrap();
    assert!(log.in_transaction(9, 0));
    assert_eq!(log.start_transaction_verification(9, 0, false), None);
    log.append_verified(spec_batch(txn(1), 1), 0, Some(guard))
        .unwrap();
    // Two requests of one producer share the verification under way.
    let commit = build_control_batch(&txn(-1), true);
    log.append_marker_as_leader(BytesMut::from(&commit[..]), 0, false)
        .unwrap();
    let first = log.start_transaction_verification(9, 0, false).unwrap();
    let second = log.start_transaction_verification(9, 0, false).unwrap();
    assert_eq!(first, second);
    // A batch appended as part of a transaction already open (the SENTINEL) is refused once
    // that transaction has ended.
    let sentinel = Some(crate::VerificationGuard::SENTINEL);
    assert!(matches!(
        log.append_verified(spec_batch(txn(2), 1), 0, sentinel),
        Err(StorageError::InvalidTxnState { .. })
    ));
    log.append_verified(spec_batch(txn(2), 1), 0, Some(second))
        .unwrap();
    log.append_verified(spec_batch(txn(3), 1), 0, sentinel)
        .unwrap();
    // Appends that went through no verification are not checked.
    let abort = build_control_batch(&txn(-1), false);
    log.append_marker_as_leader(BytesMut::from(&abort[..]), 0, false)
        .unwrap();
    log.append_as_leader(spec_batch(txn(4), 1), 0).unwrap();
}

#[test]
fn a_version_2_marker_of_the_verified_epoch_leaves_the_verification_be() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let at = |epoch: i16, seq: i32| BatchSpec::transactional(9, epoch, seq);
    log.append_as_leader(spec_batch(at(0, 0), 1), 0).unwrap();
    // The next transaction (epoch 1) is being verified when the previous one's commit marker,
    // which carries epoch 1, lands: the verification still holds.
    let guard = log.start_transaction_verification(9, 1, true).unwrap();
    let commit = build_control_batch(&at(1, -1), true);
    log.append_marker_as_leader(BytesMut::from(&commit[..]), 0, true)
        .unwrap();
    log.append_verified(spec_batch(at(1, 0), 1), 0, Some(guard))
        .unwrap();
    // An abort that bumps past the verified epoch voids it.
    let abort = build_control_batch(&at(2, -1), false);
    log.append_marker_as_leader(BytesMut::from(&abort[..]), 0, true)
        .unwrap();
    let guard = log.start_transaction_verification(9, 2, true).unwrap();
    let abort = build_control_batch(&at(3, -1), false);
    log.append_marker_as_leader(BytesMut::from(&abort[..]), 0, true)
        .unwrap();
    assert!(matches!(
        log.append_verified(spec_batch(at(2, 0), 1), 0, Some(guard)),
        Err(StorageError::InvalidTxnState { .. }) | Err(StorageError::InvalidProducerEpoch { .. })
    ));
}
