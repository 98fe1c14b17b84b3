//! The offline path and recovery under injected I/O faults: a failed write, fsync, read, rename
//! or compaction takes that log (and only that log) offline, a full disk (a short write, then
//! ENOSPC) stops its writes but not its reads, and reopening it keeps every batch acknowledged
//! before the fault, byte for byte.

use std::path::Path;

use bytes::BytesMut;

use crate::fault::{inject, FaultAction, FaultGuard, FaultOp, FaultPlan};
use crate::record::{build_batch, BatchSpec, KeyValue};
use crate::{Log, LogConfig, StorageError};

fn batch(key: &str, value: &str) -> BytesMut {
    let recs: Vec<KeyValue<'_>> = vec![(Some(key.as_bytes()), Some(value.as_bytes()))];
    BytesMut::from(&build_batch(&BatchSpec::default(), &recs)[..])
}

fn fail_every(dir: &Path, op: FaultOp, action: FaultAction) -> FaultGuard {
    inject(FaultPlan {
        action,
        ..fail_after(dir, op, 0)
    })
}

/// Fails every `op` under `dir` after the first `skip` of them.
fn fail_after(dir: &Path, op: FaultOp, skip: u64) -> FaultPlan {
    FaultPlan {
        under: dir.to_path_buf(),
        op,
        skip,
        times: u64::MAX,
        action: FaultAction::Fail,
    }
}

/// Every batch of the log, read segment by segment, as raw bytes.
fn all_bytes(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let r = log.read(next, 1 << 20, None, true).unwrap();
        let mut last = None;
        for item in tern_protocol::record_batch::BatchIter::new(&r.records) {
            last = Some(item.unwrap().0.last_offset());
        }
        out.extend_from_slice(&r.records);
        next = last.map_or(log.log_end_offset(), |l| l + 1);
    }
    out
}

/// Appends `n` acknowledged batches and returns their bytes as read back.
fn acknowledged(log: &Log, n: usize) -> Vec<u8> {
    for i in 0..n {
        log.append_as_leader(batch(&format!("k{i}"), &format!("v{i}")), 0)
            .unwrap();
    }
    all_bytes(log)
}

fn assert_writes_refused(log: &Log) {
    assert!(log.is_offline());
    // An I/O error, not a close: the broker reports the replica failed.
    assert!(log.has_failed());
    assert!(matches!(
        log.append_as_leader(batch("late", "late"), 0),
        Err(StorageError::LogOffline(_))
    ));
}

fn assert_offline(log: &Log) {
    assert_writes_refused(log);
    assert!(log.is_unreadable());
    assert!(matches!(
        log.read(0, 1 << 20, None, true),
        Err(StorageError::LogOffline(_))
    ));
}

/// Reopens the log as after a crash and checks it holds exactly `before` and takes appends.
fn reopen_keeps(dir: &Path, config: LogConfig, before: &[u8], next_offset: i64) -> Log {
    let log = Log::open(dir, config).unwrap();
    assert_eq!(log.log_end_offset(), next_offset);
    assert!(all_bytes(&log) == before, "acknowledged bytes changed");
    let a = log.append_as_leader(batch("after", "after"), 1).unwrap();
    assert_eq!(a.first_offset, next_offset);
    log
}

#[test]
fn a_failed_append_takes_the_log_offline_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let before = acknowledged(&log, 10);
    let guard = fail_every(dir.path(), FaultOp::Write, FaultAction::Fail);
    let err = log.append_as_leader(batch("x", "y"), 0).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert_eq!(guard.hits(), 1);
    drop(guard);
    assert_offline(&log);
    drop(log);
    reopen_keeps(dir.path(), LogConfig::default(), &before, 10);
}

#[test]
fn a_full_disk_stops_writes_but_not_reads_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let before = acknowledged(&log, 10);
    let guard = fail_every(
        dir.path(),
        FaultOp::Write,
        FaultAction::ShortWrite { bytes: 30 },
    );
    let err = log.append_as_leader(batch("x", "y"), 0).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    drop(guard);
    assert_writes_refused(&log);
    // The half-written batch was cut back: consumers drain exactly what was acknowledged.
    assert!(!log.is_unreadable());
    assert!(all_bytes(&log) == before);
    drop(log);
    reopen_keeps(dir.path(), LogConfig::default(), &before, 10);
}

#[test]
fn a_failed_fsync_takes_the_log_offline_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let before = acknowledged(&log, 5);
    let guard = fail_every(dir.path(), FaultOp::Sync, FaultAction::Fail);
    assert!(matches!(log.flush(), Err(StorageError::Io { .. })));
    drop(guard);
    assert_offline(&log);
    drop(log);
    reopen_keeps(dir.path(), LogConfig::default(), &before, 5);
}

#[test]
fn a_failed_read_takes_only_that_log_offline() {
    let (bad_dir, good_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bad = Log::open(bad_dir.path(), LogConfig::default()).unwrap();
    let good = Log::open(good_dir.path(), LogConfig::default()).unwrap();
    let before = acknowledged(&bad, 4);
    acknowledged(&good, 4);
    let guard = fail_every(bad_dir.path(), FaultOp::Read, FaultAction::Fail);
    assert!(matches!(
        bad.read(0, 1 << 20, None, true),
        Err(StorageError::Io { .. })
    ));
    assert_offline(&bad);
    // The other log keeps serving reads and writes while the fault is still armed.
    assert_eq!(
        good.append_as_leader(batch("g", "g"), 0)
            .unwrap()
            .first_offset,
        4
    );
    assert_eq!(good.read(0, 1 << 20, None, true).unwrap().first_offset, 0);
    drop(guard);
    drop(bad);
    reopen_keeps(bad_dir.path(), LogConfig::default(), &before, 4);
}

#[test]
fn a_failed_checkpoint_at_close_recovers_as_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let before = acknowledged(&log, 6);
    let guard = fail_every(dir.path(), FaultOp::Rename, FaultAction::Fail);
    assert!(log.close().is_err());
    drop(guard);
    reopen_keeps(dir.path(), LogConfig::default(), &before, 6);
}

fn compacted() -> LogConfig {
    LogConfig::compacted_for_tests(300)
}

/// A compacted log holding ten keys overwritten five times (plenty for the cleaner to drop),
/// and its bytes.
fn overwritten_keys(dir: &Path) -> (Log, Vec<u8>) {
    let log = Log::open(dir, compacted()).unwrap();
    for round in 0..5 {
        for k in 0..10 {
            log.append_as_leader(batch(&format!("k{k}"), &format!("v{round}")), 0)
                .unwrap();
        }
    }
    assert!(log.num_segments() > 2);
    let before = all_bytes(&log);
    (log, before)
}

/// Compacts with `fault` armed: the pass fails with an I/O error, and the log is offline.
fn compact_fails(log: &Log, fault: FaultPlan, what: &str) {
    let guard = inject(fault);
    assert!(
        matches!(log.compact(i64::MAX), Err(StorageError::Io { .. })),
        "{what}"
    );
    assert!(guard.hits() >= 1, "{what}");
    drop(guard);
    assert_offline(log);
}

/// Reopens a log whose compaction failed. Segments cleaned before the fault may be gone (their
/// keys all live on later); what is left is a subsequence of the batches `before`, every key's
/// latest value stays, and no cleaner file is left behind.
fn reopen_after_failed_compaction(dir: &Path, before: &[u8], what: &str) {
    let log = Log::open(dir, compacted()).unwrap();
    assert_eq!(log.log_end_offset(), 50, "{what}");
    let after = all_bytes(&log);
    let (before, after) = (batches(before), batches(&after));
    let mut rest = before.iter();
    for b in &after {
        assert!(rest.any(|x| x == b), "{what}: a batch changed or moved");
    }
    assert_eq!(&after[after.len() - 10..], &before[40..], "{what}");
    assert!(std::fs::read_dir(dir).unwrap().all(|e| {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        !name.ends_with(".swap") && !name.ends_with(".cleaned")
    }));
}

#[test]
fn a_failed_compaction_takes_the_log_offline_and_keeps_its_records() {
    for op in [FaultOp::Write, FaultOp::Rename] {
        let dir = tempfile::tempdir().unwrap();
        let (log, before) = overwritten_keys(dir.path());
        let what = format!("{op:?}");
        compact_fails(&log, fail_after(dir.path(), op, 0), &what);
        drop(log);
        reopen_after_failed_compaction(dir.path(), &before, &what);
    }
}

#[test]
fn an_io_error_inside_the_cleaners_swap_takes_the_log_offline_and_refuses_writes() {
    // Both with the writer lock held: the fsync of the directory after `.cleaned` became
    // `.swap` (the commit point), and the second rename of the first swap (midway through
    // deleting a segment that cleaned to nothing, or `.swap` over `.log`).
    for (op, skip) in [(FaultOp::Sync, 1), (FaultOp::Rename, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let (log, before) = overwritten_keys(dir.path());
        let what = format!("{op:?} after {skip}");
        compact_fails(&log, fail_after(dir.path(), op, skip), &what);
        drop(log);
        if op == FaultOp::Sync {
            // The failure came after the commit point: the reopen finishes the swap.
            let swaps = std::fs::read_dir(dir.path()).unwrap().filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".log.swap")
            });
            assert_eq!(swaps.count(), 1, "{what}");
        }
        reopen_after_failed_compaction(dir.path(), &before, &what);
    }
}

fn batches(bytes: &[u8]) -> Vec<Vec<u8>> {
    tern_protocol::record_batch::BatchIter::new(bytes)
        .map(|b| b.unwrap().1.to_vec())
        .collect()
}

/// A compacted log where producer 7 aborted a transaction (keys a0, a1) between plain records,
/// then committed one (c0), and a first pass removed the aborted records but kept the abort
/// marker (within the pass that met its batches).
fn aborted_and_cleaned_once(dir: &Path) -> Log {
    use crate::record::build_control_batch;
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..compacted()
    };
    let log = Log::open(dir, config).unwrap();
    let txn = |seq: i32| BatchSpec::transactional(7, 0, seq);
    let append = |b: Vec<u8>| {
        log.append_as_leader(BytesMut::from(&b[..]), 0).unwrap();
    };
    for k in 0..4 {
        log.append_as_leader(batch(&format!("k{k}"), "v"), 0)
            .unwrap();
    }
    append(build_batch(&txn(0), &[(Some(b"a0"), Some(b"x"))]).to_vec());
    append(build_batch(&txn(1), &[(Some(b"a1"), Some(b"x"))]).to_vec());
    append(build_control_batch(&txn(-1), false));
    append(build_batch(&txn(2), &[(Some(b"c0"), Some(b"v"))]).to_vec());
    append(build_control_batch(&txn(-1), true));
    for k in 4..8 {
        log.append_as_leader(batch(&format!("k{k}"), "v"), 0)
            .unwrap();
    }
    log.roll().unwrap();
    assert_eq!(log.aborted_transactions(0, 100).len(), 1);
    let stats = log.compact(i64::MAX).unwrap();
    assert_eq!(
        (stats.aborted_records_removed, stats.markers_removed),
        (2, 0)
    );
    assert_eq!(log.aborted_transactions(0, 100).len(), 1);
    for k in 8..12 {
        log.append_as_leader(batch(&format!("k{k}"), "v"), 0)
            .unwrap();
    }
    log.roll().unwrap();
    log
}

/// What a read_committed consumer sees, keys in offset order, after checking that every
/// aborted transaction the index lists still has its abort marker (a consumer that meets an
/// entry without its marker would skip the producer's later transactions).
fn read_committed_keys(log: &Log) -> Vec<String> {
    let bytes = all_bytes(log);
    let aborted = log.aborted_transactions(0, log.log_end_offset());
    let mut markers = Vec::new();
    let mut keys = Vec::new();
    for item in tern_protocol::record_batch::BatchIter::new(&bytes) {
        let (h, b) = item.unwrap();
        if h.is_control() {
            markers.push(h.base_offset);
            continue;
        }
        let hidden = h.is_transactional()
            && aborted.iter().any(|t| {
                t.producer_id == h.producer_id
                    && (t.first_offset..=t.last_offset).contains(&h.base_offset)
            });
        if hidden {
            continue;
        }
        let body = &b[tern_protocol::record_batch::RECORD_BATCH_OVERHEAD..];
        for r in crate::record::parse_records(body, h.records_count as usize).unwrap() {
            keys.push(String::from_utf8(r.key.unwrap().to_vec()).unwrap());
        }
    }
    for t in &aborted {
        assert!(markers.contains(&t.last_offset), "{t:?} lost its marker");
    }
    keys
}

#[test]
fn a_crash_while_a_marker_and_its_index_entry_go_leaves_both_or_neither() {
    let expected: Vec<String> = (0..4)
        .map(|k| format!("k{k}"))
        .chain(["c0".to_string()])
        .chain((4..12).map(|k| format!("k{k}")))
        .collect();
    let mut failed = 0;
    for (op, skip) in (0..8)
        .map(|s| (FaultOp::Rename, s))
        .chain((0..4).map(|s| (FaultOp::Sync, s)))
    {
        let dir = tempfile::tempdir().unwrap();
        let log = aborted_and_cleaned_once(dir.path());
        assert_eq!(read_committed_keys(&log), expected);
        let guard = inject(fail_after(dir.path(), op, skip));
        let result = log.compact(i64::MAX);
        let hit = guard.hits() > 0;
        drop(guard);
        drop(log);
        if result.is_ok() {
            assert!(!hit, "{op:?} after {skip}");
            continue;
        }
        failed += 1;
        let log = Log::open(dir.path(), compacted()).unwrap();
        assert_eq!(read_committed_keys(&log), expected, "{op:?} after {skip}");
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            !name.ends_with(".swap") && !name.ends_with(".cleaned")
        }));
        // The cleaner finishes the job after the restart.
        log.update_config(LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..compacted()
        });
        log.append_as_leader(batch("k12", "v"), 0).unwrap();
        log.roll().unwrap();
        log.compact(i64::MAX).unwrap();
        assert_eq!(
            log.aborted_transactions(0, 100),
            vec![],
            "{op:?} after {skip}"
        );
        let mut all = expected.clone();
        all.push("k12".into());
        assert_eq!(read_committed_keys(&log), all, "{op:?} after {skip}");
    }
    assert!(failed >= 6, "the faults hit the pass: {failed}");
}
