//! storage-bench: append and sequential read throughput of the partition log, beside the raw
//! sequential write and read bandwidth of the same disk in the same run.
//!
//! Fairness rules: both sides write the same bytes with plain `write` calls into the page
//! cache and pay one fsync at the end (the log's default flush policy leaves flushing to the
//! OS, like Kafka). Cold reads drop the files from the page cache first (fsync +
//! `posix_fadvise(DONTNEED)`), so both read from the device; warm reads run right after, with
//! the data cached, and measure the software path.
//!
//! Usage: `storage-bench [--mib N] [--reps R] [--dir PATH]` (default 1024 MiB per case, 3 runs
//! with raw and log interleaved, medians reported, a temp dir).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::BytesMut;
use tern_protocol::record_batch::BatchIter;
use tern_storage::record::{build_batch, BatchSpec, KeyValue};
use tern_storage::{Log, LogConfig};

const RECORD_BYTES: usize = 1024;
const READ_BYTES: usize = 1 << 20;

/// Drops a file's pages from the page cache (after making them clean).
#[allow(unsafe_code)]
fn drop_cache(path: &Path) -> std::io::Result<()> {
    let f = File::open(path)?;
    f.sync_all()?;
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open for the call.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

fn drop_cache_dir(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let only_logs = std::env::var("BENCH_DROP_ONLY_LOG").is_ok();
        if p.is_file() && (!only_logs || p.extension().is_some_and(|e| e == "log")) {
            drop_cache(&p)?;
        }
    }
    Ok(())
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / secs
}

struct Row {
    batch: String,
    raw_write: f64,
    append: f64,
    raw_read_cold: f64,
    read_cold: f64,
    raw_read_warm: f64,
    read_warm: f64,
}

fn raw_read(path: &Path) -> std::io::Result<(u64, f64)> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; READ_BYTES];
    let t = Instant::now();
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok((total, t.elapsed().as_secs_f64()))
}

fn log_read(log: &Log) -> Result<(u64, f64), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let mut offset = log.log_start_offset();
    let mut total = 0u64;
    while offset < log.log_end_offset() {
        let r = log.read(offset, READ_BYTES, None, true)?;
        let last = BatchIter::new(&r.records).last().ok_or("empty read")??;
        offset = last.0.next_offset();
        total += r.records.len() as u64;
    }
    Ok((total, t.elapsed().as_secs_f64()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One case, `reps` times with raw and log runs interleaved; each figure is the median.
fn run_case(
    dir: &Path,
    batch_bytes: usize,
    total_bytes: u64,
    reps: usize,
) -> Result<Row, Box<dyn std::error::Error>> {
    let value = vec![0x5au8; RECORD_BYTES];
    let n = (batch_bytes / RECORD_BYTES).max(1);
    let recs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(&value[..]))).collect();
    let template = build_batch(
        &BatchSpec {
            base_timestamp: 1_700_000_000_000,
            ..BatchSpec::default()
        },
        &recs,
    );
    let batches = (total_bytes / template.len() as u64).max(1) as usize;
    let bytes = (batches * template.len()) as u64;
    let mut m: [Vec<f64>; 6] = Default::default();
    for rep in 0..reps {
        // The same request buffers feed both writers, as the network layer would hand them over.
        let pool: Vec<BytesMut> = (0..batches)
            .map(|_| BytesMut::from(&template[..]))
            .collect();

        // Raw write: plain write(2) of the same bytes, one fsync at the end.
        let raw_path = dir.join(format!("raw-{batch_bytes}.dat"));
        let t = Instant::now();
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&raw_path)?;
            for b in &pool {
                f.write_all(b)?;
            }
            f.sync_all()?;
        }
        m[0].push(mbps(bytes, t.elapsed().as_secs_f64()));

        // Log append with the default config (flushing left to the OS), one flush at the end.
        let log_dir = dir.join(format!("bench-{batch_bytes}-{rep}"));
        // A "1 MiB" batch of 1 KiB records is a little over the default max.message.bytes.
        let config = LogConfig {
            max_message_bytes: 2 << 20,
            ..LogConfig::default()
        };
        let log = Log::open(&log_dir, config)?;
        let t = Instant::now();
        for b in pool {
            log.append_as_leader(b, 0)?;
        }
        log.flush()?;
        m[1].push(mbps(bytes, t.elapsed().as_secs_f64()));

        drop_cache(&raw_path)?;
        drop_cache_dir(&log_dir)?;
        // Alternate which side reads first, so neither always gets the device (or the
        // hypervisor's cache) in the same state.
        let ((n1, s1), (n2, s2)) = if rep % 2 == 0 {
            let raw = raw_read(&raw_path)?;
            (raw, log_read(&log)?)
        } else {
            let log_side = log_read(&log)?;
            (raw_read(&raw_path)?, log_side)
        };
        if n1 != bytes || n2 != bytes {
            return Err(format!("read {n1} and {n2} bytes, wrote {bytes}").into());
        }
        m[2].push(mbps(bytes, s1));
        m[3].push(mbps(bytes, s2));
        let (_, s3) = raw_read(&raw_path)?;
        let (_, s4) = log_read(&log)?;
        m[4].push(mbps(bytes, s3));
        m[5].push(mbps(bytes, s4));
        if std::env::var("BENCH_KEEP").is_ok() {
            continue;
        }
        log.delete()?;
        std::fs::remove_file(&raw_path)?;
    }
    let [a, b, c, d, e, f] = m;
    Ok(Row {
        batch: if batch_bytes >= 1 << 20 {
            format!("{} MiB", batch_bytes >> 20)
        } else {
            format!("{} KiB", batch_bytes >> 10)
        },
        raw_write: median(a),
        append: median(b),
        raw_read_cold: median(c),
        read_cold: median(d),
        raw_read_warm: median(e),
        read_warm: median(f),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut mib = 1024u64;
    let mut dir: Option<PathBuf> = None;
    let mut reps = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mib" => mib = args.next().ok_or("--mib needs a value")?.parse()?,
            "--reps" => reps = args.next().ok_or("--reps needs a value")?.parse()?,
            "--dir" => dir = Some(PathBuf::from(args.next().ok_or("--dir needs a value")?)),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("tern-storage-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir)?;
    let total = mib << 20;
    println!(
        "storage-bench: {mib} MiB per case, 1 KiB records, median of {reps} runs, dir {}",
        dir.display()
    );
    println!(
        "{:<8} {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6} | {:>10} {:>10} {:>6}",
        "batch",
        "raw write",
        "append",
        "ratio",
        "raw rd cold",
        "read cold",
        "ratio",
        "raw rd warm",
        "read warm",
        "ratio"
    );
    for batch in [16 << 10, 1 << 20] {
        let r = run_case(&dir, batch, total, reps.max(1))?;
        println!(
            "{:<8} {:>10.0} {:>10.0} {:>5.0}% | {:>11.0} {:>10.0} {:>5.0}% | {:>11.0} {:>10.0} {:>5.0}%",
            r.batch,
            r.raw_write,
            r.append,
            100.0 * r.append / r.raw_write,
            r.raw_read_cold,
            r.read_cold,
            100.0 * r.read_cold / r.raw_read_cold,
            r.raw_read_warm,
            r.read_warm,
            100.0 * r.read_warm / r.raw_read_warm,
        );
    }
    println!(
        "(MB/s = MiB/s; writes include one final fsync; cold reads after fsync + fadvise DONTNEED)"
    );
    if std::env::var("BENCH_KEEP").is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
