//! Crash test: a child process appends and flushes in a loop and is killed with SIGKILL at
//! random moments. Every reopen must yield a valid prefix holding everything that was flushed.
//!
//! The child is this test binary re-executed with `TERN_CRASH_DIR` set, running the ignored
//! test `crash_child_process`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use tern_protocol::record_batch::{validate_batch, BatchIter, RECORD_BATCH_OVERHEAD};
use tern_storage::record::{build_batch, parse_records, BatchSpec, KeyValue};
use tern_storage::{Log, LogConfig};

const ENV_DIR: &str = "TERN_CRASH_DIR";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 * 1024,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// The value every record at `offset` carries, so a reader can tell torn or misplaced data.
fn value_for(offset: i64) -> Vec<u8> {
    let len = 20 + (offset % 200) as usize;
    (0..len)
        .map(|i| (offset as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect()
}

#[test]
#[ignore = "helper: runs only as the child of sigkill_at_random_moments"]
fn crash_child_process() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let log = Log::open(Path::new(&dir), config()).unwrap();
    let mut n = 0u64;
    loop {
        let base = log.log_end_offset();
        let count = 1 + (n % 7) as usize;
        let values: Vec<Vec<u8>> = (0..count).map(|i| value_for(base + i as i64)).collect();
        let recs: Vec<KeyValue<'_>> = values.iter().map(|v| (None, Some(&v[..]))).collect();
        let b = build_batch(
            &BatchSpec {
                base_timestamp: base,
                ..BatchSpec::default()
            },
            &recs,
        );
        log.append_as_leader(BytesMut::from(&b[..]), (n / 50) as i32)
            .unwrap();
        n += 1;
        if n % 10 == 9 {
            log.flush().unwrap();
            println!("F {}", log.log_end_offset());
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn verify(dir: &Path, flushed: i64) -> i64 {
    let log = Log::open(dir, config()).unwrap();
    let leo = log.log_end_offset();
    assert!(
        leo >= flushed,
        "flushed up to {flushed} but the log ends at {leo}"
    );
    let mut next = 0;
    while next < leo {
        let r = log.read(next, 64 * 1024, None, true).unwrap();
        assert!(
            !r.records.is_empty(),
            "no batch at {next} below the log end {leo}"
        );
        for item in BatchIter::new(&r.records) {
            let (h, bytes) = item.unwrap();
            validate_batch(bytes).unwrap();
            assert_eq!(h.base_offset, next, "offsets must be contiguous");
            let recs =
                parse_records(&bytes[RECORD_BATCH_OVERHEAD..], h.records_count as usize).unwrap();
            for rec in recs {
                let offset = h.base_offset + rec.offset_delta as i64;
                assert_eq!(
                    rec.value.unwrap(),
                    &value_for(offset)[..],
                    "wrong data at offset {offset}"
                );
            }
            next = h.next_offset();
        }
    }
    assert_eq!(log.latest_epoch().is_some(), leo > 0);
    drop(log);
    leo
}

#[test]
fn sigkill_at_random_moments() {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut flushed = 0i64;
    let mut total_leo = 0;
    let started = Instant::now();
    for round in 0..20 {
        let mut child = Command::new(&exe)
            .args([
                "crash_child_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(30 + rng.next() % 200));
        child.kill().unwrap(); // SIGKILL on Unix
        let mut out = String::new();
        if let Some(mut s) = child.stdout.take() {
            s.read_to_string(&mut out).unwrap();
        }
        child.wait().unwrap();
        for line in out.lines() {
            if let Some(v) = line.strip_prefix("F ") {
                flushed = flushed.max(v.trim().parse().unwrap());
            }
        }
        total_leo = verify(dir.path(), flushed);
        println!("round {round}: flushed {flushed}, recovered {total_leo}");
    }
    assert!(
        total_leo > 0,
        "the child never appended anything (seed {seed})"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
}
