//! Corruption tests: flipped bytes, truncations and garbage in every kind of file give a clean
//! recovery or a clear error on open, never a panic, and a recovered log serves only valid
//! batches from its recovered part.

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use tern_protocol::record_batch::BatchIter;
use tern_storage::record::{build_batch, build_control_batch, BatchSpec, KeyValue};
use tern_storage::{Log, LogConfig};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

/// A log with several segments, idempotent and transactional data, several epochs.
fn build(dir: &Path, clean: bool) {
    let log = Log::open(dir, config()).unwrap();
    for i in 0..40i64 {
        let v = vec![b'a' + (i % 26) as u8; 50 + (i as usize * 7) % 90];
        let recs: Vec<KeyValue<'_>> = vec![(Some(b"k"), Some(&v[..])); 1 + (i as usize % 3)];
        let spec = BatchSpec {
            base_timestamp: 1000 + i,
            producer_id: if i % 2 == 0 { 5 } else { 6 },
            producer_epoch: 0,
            base_sequence: if i % 2 == 0 {
                log.producer_state(5).map_or(0, |e| e.last_sequence() + 1)
            } else {
                -1
            },
            transactional: i % 2 == 1,
            ..BatchSpec::default()
        };
        log.append_as_leader(
            BytesMut::from(&build_batch(&spec, &recs)[..]),
            (i / 10) as i32,
        )
        .unwrap();
        if i % 5 == 4 {
            let m = build_control_batch(
                &BatchSpec {
                    producer_id: 6,
                    producer_epoch: 0,
                    ..BatchSpec::default()
                },
                i % 10 == 4,
            );
            log.append_as_leader(BytesMut::from(&m[..]), (i / 10) as i32)
                .unwrap();
        }
    }
    assert!(log.num_segments() >= 3);
    if clean {
        log.close().unwrap();
    } else {
        log.flush().unwrap();
        drop(log);
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip(u64),
    Truncate(u64),
    Garbage,
    Empty,
}

fn damage(path: &Path, d: Damage) {
    let mut bytes = std::fs::read(path).unwrap();
    match d {
        Damage::Flip(seed) => {
            if bytes.is_empty() {
                return;
            }
            let at = (seed as usize * 7919) % bytes.len();
            bytes[at] ^= 1 << (seed % 8);
        }
        Damage::Truncate(seed) => {
            let len = bytes.len() as u64;
            bytes.truncate(if len == 0 {
                0
            } else {
                (seed * 104_729 % len) as usize
            });
        }
        Damage::Garbage => {
            bytes = (0..bytes.len().max(13))
                .map(|i| (i * 37 + 11) as u8)
                .collect()
        }
        Damage::Empty => bytes.clear(),
    }
    std::fs::write(path, bytes).unwrap();
}

/// Opens the damaged log; if it opens, everything it serves must parse, offsets must grow,
/// and it must take appends.
fn check(dir: &Path, what: &str) {
    let log = match Log::open(dir, config()) {
        Ok(log) => log,
        Err(e) => {
            // A clear error is acceptable; it must say something.
            assert!(!e.to_string().is_empty(), "{what}");
            return;
        }
    };
    let mut next = log.log_start_offset();
    let leo = log.log_end_offset();
    let mut guard = 0;
    while next < leo && guard < 10_000 {
        guard += 1;
        let r = match log.read(next, 4096, None, true) {
            Ok(r) => r,
            Err(_) => break,
        };
        if r.records.is_empty() {
            break;
        }
        let mut advanced = false;
        for item in BatchIter::new(&r.records) {
            let Ok((h, _)) = item else { break };
            assert!(h.next_offset() > next, "{what}: offsets must grow");
            next = h.next_offset();
            advanced = true;
        }
        if !advanced {
            break;
        }
    }
    for o in [log.log_start_offset(), leo / 2, leo.saturating_sub(1)] {
        let _ = log.read(o, 100, None, false);
        let _ = log.fetch_offset_by_timestamp(1000 + o);
    }
    let _ = log.aborted_transactions(0, leo);
    let b = build_batch(&BatchSpec::default(), &[(None, Some(b"after"))]);
    let info = log.append_as_leader(BytesMut::from(&b[..]), 10).unwrap();
    assert_eq!(info.first_offset, leo, "{what}");
    log.close().unwrap();
    // And it reopens cleanly with the appended batch.
    let log = Log::open(dir, config()).unwrap();
    assert_eq!(log.log_end_offset(), leo + 1, "{what}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in files(from) {
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
}

#[test]
fn damaged_files_recover_or_fail_clearly() {
    let mut cases = 0;
    for clean in [false, true] {
        let pristine = tempfile::tempdir().unwrap();
        build(pristine.path(), clean);
        let names: Vec<PathBuf> = files(pristine.path());
        for name in &names {
            for (k, d) in [
                Damage::Flip(3),
                Damage::Flip(101),
                Damage::Truncate(7),
                Damage::Garbage,
                Damage::Empty,
            ]
            .into_iter()
            .enumerate()
            {
                let work = tempfile::tempdir().unwrap();
                copy_dir(pristine.path(), work.path());
                let target = work.path().join(name.file_name().unwrap());
                damage(&target, d);
                let what = format!("{} {:?} clean={clean} case={k}", name.display(), d);
                check(work.path(), &what);
                cases += 1;
            }
        }
    }
    assert!(cases > 40, "{cases}");
}

#[test]
fn torn_tail_of_active_segment_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), false);
    let log = Log::open(dir.path(), config()).unwrap();
    let leo = log.log_end_offset();
    let last_seg = *log.segment_base_offsets().last().unwrap();
    drop(log);
    let path = dir.path().join(format!("{last_seg:020}.log"));
    let len = std::fs::metadata(&path).unwrap().len();
    // Cut the last batch in half and append junk, as a crash mid-write would.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 20).unwrap();
    drop(f);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0xab; 37]);
    std::fs::write(&path, &bytes).unwrap();
    // Force recovery of this segment even though it was flushed.
    std::fs::remove_file(dir.path().join("recovery-point-offset-checkpoint")).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.log_end_offset() < leo);
    assert!(log.log_end_offset() > last_seg);
    let r = log.read(last_seg, 1 << 20, None, true).unwrap();
    let last = BatchIter::new(&r.records)
        .map(|b| b.unwrap().0)
        .last()
        .unwrap();
    assert_eq!(last.next_offset(), log.log_end_offset());
}

#[test]
fn flipped_payload_byte_in_unflushed_segment_cuts_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), false);
    let log = Log::open(dir.path(), config()).unwrap();
    let bases = log.segment_base_offsets();
    drop(log);
    let mid = bases[1];
    let path = dir.path().join(format!("{mid:020}.log"));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    std::fs::write(
        dir.path().join("recovery-point-offset-checkpoint"),
        "0\n1\n0\n",
    )
    .unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    // Everything from the corrupt batch on is gone, later segments included.
    assert!(log.log_end_offset() > mid);
    assert_eq!(*log.segment_base_offsets().last().unwrap(), mid);
    let r = log.read(mid, 1 << 20, None, true).unwrap();
    for b in BatchIter::new(&r.records) {
        tern_protocol::record_batch::validate_batch(b.unwrap().1).unwrap();
    }
}
