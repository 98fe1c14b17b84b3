//! The log cleaner's threads: `log.cleaner.threads` threads that each take the compacted log
//! with the largest share of dirty bytes (at least its `min.cleanable.dirty.ratio`) and clean
//! it, or wait `log.cleaner.backoff.ms` when none needs it, as Kafka's cleaner threads do. They
//! share one I/O budget (`log.cleaner.io.max.bytes.per.second`) and split the dedupe buffer
//! (`log.cleaner.dedupe.buffer.size`). Every setting can change while they run.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::cleaner::PassLimits;
use crate::manager::LogManager;
use crate::segment::now_ms;

/// The log cleaner's settings (Kafka's `log.cleaner.*` names in the field docs).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.threads`.
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: the wait when no log needs cleaning.
    pub backoff_ms: u64,
    /// `log.cleaner.io.max.bytes.per.second`: read and written by all threads together.
    pub max_io_bytes_per_second: f64,
    /// `log.cleaner.dedupe.buffer.size`: shared by the threads.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor`: how full a thread's offset map may get.
    pub dedupe_buffer_load_factor: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            backoff_ms: 15_000,
            max_io_bytes_per_second: f64::MAX,
            dedupe_buffer_size: 128 << 20,
            dedupe_buffer_load_factor: 0.9,
        }
    }
}

/// Bytes an offset map entry takes in Kafka's map (a 16-byte key hash and an 8-byte offset):
/// the unit in which the dedupe buffer is counted.
const BYTES_PER_ENTRY: u64 = 24;

impl CleanerConfig {
    /// Keys one thread's offset map may hold, as Kafka sizes it.
    pub fn map_capacity(&self) -> usize {
        let per_thread =
            (self.dedupe_buffer_size / self.threads.max(1) as u64).min(i32::MAX as u64);
        ((per_thread / BYTES_PER_ENTRY) as f64 * self.dedupe_buffer_load_factor).max(1.0) as usize
    }
}

/// Kafka's Throttler: holds the bytes seen to a rate, checked every 300 ms.
#[derive(Debug)]
struct Throttler {
    period: Mutex<(Instant, u64)>,
}

/// How often the throttler compares the rate with the budget.
const CHECK_INTERVAL: Duration = Duration::from_millis(300);

/// The longest a throttled thread sleeps before it looks whether it should stop.
const SLEEP_STEP: Duration = Duration::from_millis(100);

impl Throttler {
    fn new() -> Throttler {
        Throttler {
            period: Mutex::new((Instant::now(), 0)),
        }
    }

    /// Counts `bytes`, sleeping when the period so far ran faster than `rate` bytes a second
    /// (in steps, ending early once `stopped`). The sleep holds the lock, so every thread
    /// waits out the excess together.
    fn observe(&self, bytes: u64, rate: f64, stopped: &dyn Fn() -> bool) {
        if rate.is_nan() || rate <= 0.0 || rate >= f64::MAX {
            return;
        }
        let mut period = self.period.lock();
        period.1 += bytes;
        let elapsed = period.0.elapsed();
        if elapsed < CHECK_INTERVAL {
            return;
        }
        let due = Duration::from_secs_f64((period.1 as f64 / rate).min(3600.0));
        let until = period.0 + due;
        while !stopped() {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(SLEEP_STEP));
        }
        *period = (Instant::now(), 0);
    }
}

/// State the cleaner threads share.
#[derive(Debug)]
struct Shared {
    logs: Weak<LogManager>,
    config: Mutex<CleanerConfig>,
    /// Logs a thread is cleaning now, so that no two threads take the same one.
    busy: Mutex<HashSet<(String, i32)>>,
    /// Logs a pass failed on (an unreadable batch, an I/O error): left alone until restart,
    /// so that they do not keep the others from being cleaned (Kafka's uncleanable
    /// partitions).
    uncleanable: Mutex<HashSet<(String, i32)>>,
    throttler: Throttler,
    /// Wakes waiting threads when the settings change or they are told to stop.
    wake: Condvar,
    wake_lock: Mutex<()>,
}

/// One cleaner thread and its stop flag.
#[derive(Debug)]
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The running log cleaner. Dropping it stops its threads.
#[derive(Debug)]
pub struct LogCleaner {
    shared: Arc<Shared>,
    workers: Mutex<Workers>,
}

/// The threads: those running, and those told to leave after their pass (joined at stop).
#[derive(Debug, Default)]
struct Workers {
    running: Vec<Worker>,
    retired: Vec<Worker>,
    /// Set by `stop`: no thread starts after it.
    stopped: bool,
}

impl LogCleaner {
    /// Starts `config.threads` cleaner threads over the logs of `logs`.
    pub fn start(logs: &Arc<LogManager>, config: CleanerConfig) -> LogCleaner {
        let cleaner = LogCleaner {
            shared: Arc::new(Shared {
                logs: Arc::downgrade(logs),
                config: Mutex::new(config.clone()),
                busy: Mutex::new(HashSet::new()),
                uncleanable: Mutex::new(HashSet::new()),
                throttler: Throttler::new(),
                wake: Condvar::new(),
                wake_lock: Mutex::new(()),
            }),
            workers: Mutex::new(Workers::default()),
        };
        cleaner.resize(config.threads);
        cleaner
    }

    /// The settings in force.
    pub fn config(&self) -> CleanerConfig {
        self.shared.config.lock().clone()
    }

    /// Takes new settings at once: threads are added or told to stop after their current
    /// pass, and waiting threads look again with the new backoff and limits.
    pub fn reconfigure(&self, config: CleanerConfig) {
        let threads = config.threads;
        let old = std::mem::replace(&mut *self.shared.config.lock(), config);
        if old.threads != threads {
            tracing::info!(
                from = old.threads,
                to = threads,
                "log cleaner threads resized"
            );
        }
        self.resize(threads);
        self.shared.wake_all();
    }

    /// How many cleaner threads run.
    pub fn threads(&self) -> usize {
        self.workers.lock().running.len()
    }

    fn resize(&self, threads: usize) {
        let mut guard = self.workers.lock();
        let workers = &mut *guard;
        if workers.stopped {
            return;
        }
        workers
            .retired
            .retain(|w| w.thread.as_ref().is_some_and(|t| !t.is_finished()));
        while workers.running.len() > threads {
            if let Some(w) = workers.running.pop() {
                // It leaves after its current pass; the busy set keeps a new thread off its log.
                w.stop.store(true, Ordering::Release);
                workers.retired.push(w);
            }
        }
        let workers = &mut workers.running;
        while workers.len() < threads {
            let stop = Arc::new(AtomicBool::new(false));
            let shared = Arc::clone(&self.shared);
            let flag = Arc::clone(&stop);
            let name = format!("tern-log-cleaner-{}", workers.len());
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || shared.run(&flag))
            {
                Ok(t) => workers.push(Worker {
                    stop,
                    thread: Some(t),
                }),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start a log cleaner thread");
                    return;
                }
            }
        }
    }

    /// Stops every thread and waits for them: a pass in progress ends at its next batch.
    pub fn stop(&self) {
        let mut workers = {
            let mut guard = self.workers.lock();
            guard.stopped = true;
            let mut all = std::mem::take(&mut guard.running);
            all.append(&mut guard.retired);
            all
        };
        for w in &workers {
            w.stop.store(true, Ordering::Release);
        }
        self.shared.wake_all();
        for w in &mut workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for LogCleaner {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    /// Wakes every waiting thread. Taking the lock orders this after a thread's look at its
    /// stop flag, so a wake is never missed between that look and its wait.
    fn wake_all(&self) {
        let _guard = self.wake_lock.lock();
        self.wake.notify_all();
    }

    fn run(&self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            if self.clean_filthiest(stop) {
                continue;
            }
            let backoff = Duration::from_millis(self.config.lock().backoff_ms);
            let mut guard = self.wake_lock.lock();
            if !stop.load(Ordering::Acquire) {
                self.wake.wait_for(&mut guard, backoff);
            }
        }
    }

    /// Cleans the log with the largest dirty ratio that reaches its minimum, if any; false
    /// when none needed it.
    fn clean_filthiest(&self, stop: &AtomicBool) -> bool {
        let Some(logs) = self.logs.upgrade() else {
            return false;
        };
        let now = now_ms();
        let chosen = {
            let mut busy = self.busy.lock();
            let uncleanable = self.uncleanable.lock();
            let filthiest = logs
                .all_logs()
                .into_iter()
                .filter(|(id, _)| !busy.contains(id) && !uncleanable.contains(id))
                .filter(|(_, log)| !log.is_offline())
                .filter_map(|(id, log)| log.cleanable_ratio(now).map(|r| (r, id, log)))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let Some((_, id, log)) = filthiest else {
                return false;
            };
            busy.insert(id.clone());
            (id, log)
        };
        let (id, log) = chosen;
        let config = self.config.lock().clone();
        let stopped = || stop.load(Ordering::Acquire);
        let throttle = |bytes: u64| {
            let rate = self.config.lock().max_io_bytes_per_second;
            self.throttler.observe(bytes, rate, &stopped);
        };
        let limits = PassLimits {
            map_capacity: config.map_capacity(),
            throttle: &throttle,
            stopped: &stopped,
        };
        let result = log.compact_within(now, &limits);
        self.busy.lock().remove(&id);
        match result {
            Ok(stats) => {
                if stats.segments_cleaned > 0 {
                    tracing::debug!(topic = %id.0, partition = id.1, ?stats, "log cleaned");
                }
                true
            }
            Err(e) => {
                tracing::warn!(topic = %id.0, partition = id.1, error = %e, "log cleaning failed: the cleaner leaves this log alone until restart");
                self.uncleanable.lock().insert(id);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, BatchSpec};
    use crate::LogConfig;
    use bytes::BytesMut;

    fn compacted() -> LogConfig {
        LogConfig::compacted_for_tests(300)
    }

    fn write_duplicates(log: &crate::Log, rounds: usize) {
        for round in 0..rounds {
            for k in 0..3 {
                let key = format!("k{k}");
                let value = format!("v{round}");
                let b = build_batch(
                    &BatchSpec::default(),
                    &[(Some(key.as_bytes()), Some(value.as_bytes()))],
                );
                log.append_as_leader(BytesMut::from(&b[..]), 0).unwrap();
            }
        }
        log.roll().unwrap();
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn threads_clean_compacted_logs_and_resize_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let logs =
            Arc::new(LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap());
        let a = logs.get_or_create("a", 0, compacted()).unwrap();
        let plain = logs
            .get_or_create("plain", 0, LogConfig::default())
            .unwrap();
        write_duplicates(&a, 10);
        write_duplicates(&plain, 10);
        let plain_segments = plain.num_segments();
        let cleaner = LogCleaner::start(
            &logs,
            CleanerConfig {
                backoff_ms: 20,
                ..CleanerConfig::default()
            },
        );
        assert_eq!(cleaner.threads(), 1);
        wait_for("log a is compacted", || {
            a.cleanable_ratio(now_ms()).is_none()
        });
        let mut keys = Vec::new();
        let mut next = a.log_start_offset();
        while next < a.log_end_offset() {
            let r = a.read(next, 1 << 20, None, true).unwrap();
            for item in tern_protocol::record_batch::BatchIter::new(&r.records) {
                let h = item.unwrap().0;
                keys.push(h.base_offset);
                next = h.next_offset();
            }
        }
        assert!(keys.contains(&29), "the latest of k2 stays: {keys:?}");
        assert!(!keys.contains(&0), "k0's first value is gone: {keys:?}");
        assert_eq!(plain.num_segments(), plain_segments, "not compacted");

        cleaner.reconfigure(CleanerConfig {
            threads: 2,
            backoff_ms: 20,
            ..CleanerConfig::default()
        });
        assert_eq!(cleaner.threads(), 2);
        let b = logs.get_or_create("b", 0, compacted()).unwrap();
        write_duplicates(&b, 10);
        wait_for("log b is compacted", || {
            b.cleanable_ratio(now_ms()).is_none()
        });
        cleaner.reconfigure(CleanerConfig {
            threads: 1,
            ..cleaner.config()
        });
        assert_eq!(cleaner.threads(), 1);
        cleaner.stop();
        assert_eq!(cleaner.threads(), 0);
    }

    #[test]
    fn stop_ends_a_throttled_pass_and_no_thread_starts_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let logs =
            Arc::new(LogManager::open(&[dir.path().to_path_buf()], LogConfig::default()).unwrap());
        // Two bytes a second: once the throttler's first period is over, a pass sleeps in it.
        let cleaner = LogCleaner::start(
            &logs,
            CleanerConfig {
                max_io_bytes_per_second: 2.0,
                backoff_ms: 20,
                ..CleanerConfig::default()
            },
        );
        std::thread::sleep(CHECK_INTERVAL + Duration::from_millis(100));
        let a = logs.get_or_create("a", 0, compacted()).unwrap();
        write_duplicates(&a, 10);
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        cleaner.stop();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "stop waited {:?}",
            start.elapsed()
        );
        assert!(
            a.cleanable_ratio(now_ms()).is_some(),
            "the pass ended unfinished"
        );
        cleaner.reconfigure(CleanerConfig::default());
        assert_eq!(cleaner.threads(), 0);
    }

    #[test]
    fn a_truncation_during_a_pass_keeps_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::Log::open(dir.path(), compacted()).unwrap();
        write_duplicates(&log, 10);
        let seen = log.truncations();
        log.truncate_to(5).unwrap();
        assert!(!log.advance_cleaner_checkpoint(20, seen).unwrap());
        assert_eq!(log.cleaner_checkpoint(), 0);
        assert!(log
            .advance_cleaner_checkpoint(5, log.truncations())
            .unwrap());
        assert_eq!(log.cleaner_checkpoint(), 5);
    }

    #[test]
    fn map_capacity_is_kafkas_share_of_the_dedupe_buffer() {
        let c = CleanerConfig::default();
        assert_eq!(c.map_capacity(), ((128u64 << 20) / 24) as usize * 9 / 10);
        let two = CleanerConfig {
            threads: 2,
            dedupe_buffer_size: 2 << 20,
            dedupe_buffer_load_factor: 0.5,
            ..c
        };
        assert_eq!(two.map_capacity(), (1 << 20) / 24 / 2);
    }

    #[test]
    fn the_throttler_holds_bytes_to_the_rate() {
        let t = Throttler::new();
        let start = Instant::now();
        std::thread::sleep(CHECK_INTERVAL);
        // 6,000 bytes at 10,000 a second take 0.6 s, the first 0.3 s of them already past.
        t.observe(6_000, 10_000.0, &|| false);
        assert!(start.elapsed() >= Duration::from_millis(600));
        let unlimited = Instant::now();
        t.observe(1 << 30, f64::MAX, &|| false);
        assert!(unlimited.elapsed() < Duration::from_secs(1));
    }
}
