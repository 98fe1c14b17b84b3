//! [`LogManager`]: the partition logs under one or more log directories, and the background
//! thread that rolls, flushes and applies retention to them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::RwLock;

use crate::config::LogConfig;
use crate::error::{IoContext, Result, StorageError};
use crate::log::Log;
use crate::segment::now_ms;

/// Suffix of a partition directory that is being deleted.
pub(crate) const DELETE_DIR_SUFFIX: &str = "-delete";

/// Parses a partition directory name `<topic>-<partition>`.
pub(crate) fn parse_dir_name(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok()?;
    if partition < 0 || !valid_topic(topic) {
        return None;
    }
    Some((topic.to_string(), partition))
}

/// Kafka's legal topic names: 1..=249 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
pub(crate) fn valid_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Many partition logs spread over log directories.
#[derive(Debug)]
pub struct LogManager {
    log_dirs: Vec<PathBuf>,
    default_config: LogConfig,
    logs: RwLock<HashMap<(String, i32), Arc<Log>>>,
    /// Threads that open logs at start and close them at shutdown.
    threads: usize,
}

/// Kafka 4's `num.recovery.threads.per.data.dir` default.
const DEFAULT_THREADS_PER_DIR: usize = 2;

/// Runs `f` on every item with up to `threads` threads; results in no particular order. Opening
/// and closing ten thousand logs is mostly waiting on fsync, which overlaps well.
fn map_parallel<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    let queue = parking_lot::Mutex::new(items.into_iter());
    let results = parking_lot::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(item) = queue.lock().next() else {
                    return;
                };
                let r = f(item);
                results.lock().push(r);
            });
        }
    });
    results.into_inner()
}

/// Stops the background thread when told to (or when dropped).
#[derive(Debug)]
pub struct BackgroundHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundHandle {
    /// Stops the background thread and waits for it.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for BackgroundHandle {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

impl LogManager {
    /// Opens every `<topic>-<partition>` log under `log_dirs`; finishes interrupted deletions.
    pub fn open(log_dirs: &[PathBuf], default_config: LogConfig) -> Result<LogManager> {
        Self::open_with_threads(log_dirs, default_config, DEFAULT_THREADS_PER_DIR)
    }

    /// As [`LogManager::open`], with `threads_per_dir` threads per log dir opening the logs
    /// (and closing them at shutdown).
    pub fn open_with_threads(
        log_dirs: &[PathBuf],
        default_config: LogConfig,
        threads_per_dir: usize,
    ) -> Result<LogManager> {
        let threads = threads_per_dir.max(1) * log_dirs.len().max(1);
        let mut found = Vec::new();
        for dir in log_dirs {
            std::fs::create_dir_all(dir).ctx(dir)?;
            for entry in std::fs::read_dir(dir).ctx(dir)? {
                let path = entry.ctx(dir)?.path();
                if !path.is_dir() {
                    continue;
                }
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_string();
                if name.ends_with(DELETE_DIR_SUFFIX) {
                    std::fs::remove_dir_all(&path).ctx(&path)?;
                    continue;
                }
                let Some(key) = parse_dir_name(&name) else {
                    continue;
                };
                found.push((key, path));
            }
        }
        let opened = map_parallel(found, threads, |(key, path)| {
            Log::open(&path, default_config.clone()).map(|log| (key, Arc::new(log)))
        });
        let logs = opened.into_iter().collect::<Result<HashMap<_, _>>>()?;
        Ok(LogManager {
            log_dirs: log_dirs.to_vec(),
            default_config,
            logs: RwLock::new(logs),
            threads,
        })
    }

    /// The broker-wide default topic config.
    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    /// The log of a partition, if present.
    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Log>> {
        self.logs
            .read()
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    /// The log of a partition, created with `config` if missing (in the least loaded log dir).
    /// An existing log takes `config` too: logs loaded at startup only have the defaults.
    pub fn get_or_create(
        &self,
        topic: &str,
        partition: i32,
        config: LogConfig,
    ) -> Result<Arc<Log>> {
        if let Some(log) = self.get(topic, partition) {
            if log.config() != config {
                log.update_config(config);
            }
            return Ok(log);
        }
        if !valid_topic(topic) || partition < 0 {
            return Err(StorageError::InvalidName(format!("{topic}-{partition}")));
        }
        let mut logs = self.logs.write();
        if let Some(log) = logs.get(&(topic.to_string(), partition)) {
            return Ok(log.clone());
        }
        let dir = self.pick_dir(&logs)?;
        let log = Arc::new(Log::open(
            &dir.join(format!("{topic}-{partition}")),
            config,
        )?);
        crate::checkpoint::fsync_dir(&dir)?;
        logs.insert((topic.to_string(), partition), log.clone());
        Ok(log)
    }

    fn pick_dir(&self, logs: &HashMap<(String, i32), Arc<Log>>) -> Result<PathBuf> {
        let mut best: Option<(usize, &PathBuf)> = None;
        for d in &self.log_dirs {
            let n = logs
                .values()
                .filter(|l| l.dir().parent() == Some(d.as_path()))
                .count();
            if best.is_none_or(|(b, _)| n < b) {
                best = Some((n, d));
            }
        }
        best.map(|(_, d)| d.clone())
            .ok_or_else(|| StorageError::InvalidName("no log.dirs configured".into()))
    }

    /// Deletes a partition's log: renames the directory to `<name>.<uuid>-delete`, then removes it.
    pub fn delete_log(&self, topic: &str, partition: i32) -> Result<()> {
        let Some(log) = self.logs.write().remove(&(topic.to_string(), partition)) else {
            return Ok(());
        };
        log.mark_offline();
        let dir = log.dir().to_path_buf();
        let parent = dir.parent().unwrap_or(Path::new("."));
        let doomed = parent.join(format!(
            "{topic}-{partition}.{}{DELETE_DIR_SUFFIX}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::rename(&dir, &doomed).ctx(&dir)?;
        crate::checkpoint::fsync_dir(parent)?;
        std::fs::remove_dir_all(&doomed).ctx(&doomed)
    }

    /// Every log with its (topic, partition).
    pub fn all_logs(&self) -> Vec<((String, i32), Arc<Log>)> {
        self.logs
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// One pass of background maintenance over every log at `now_ms` (compaction is the
    /// [`crate::LogCleaner`]'s).
    pub fn run_maintenance(&self, now_ms: i64) {
        for ((topic, partition), log) in self.all_logs() {
            let result = (|| -> Result<()> {
                log.maybe_roll_by_time(now_ms)?;
                log.maybe_flush_by_time(now_ms)?;
                log.enforce_retention(now_ms)?;
                Ok(())
            })();
            if let Err(e) = result {
                tracing::warn!(%topic, partition, error = %e, "log maintenance failed");
            }
        }
    }

    /// Starts the background thread (segment.ms rolls, flush.ms, retention),
    /// running every `check_interval_ms`.
    pub fn start_background_tasks(self: &Arc<Self>, check_interval_ms: u64) -> BackgroundHandle {
        let (tx, rx) = mpsc::channel::<()>();
        let me = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("tern-log-maintenance".into())
            .spawn(move || loop {
                match rx.recv_timeout(Duration::from_millis(check_interval_ms.max(1))) {
                    Err(RecvTimeoutError::Timeout) => me.run_maintenance(now_ms()),
                    _ => return,
                }
            });
        match thread {
            Ok(t) => BackgroundHandle {
                stop: Some(tx),
                thread: Some(t),
            },
            Err(e) => {
                tracing::error!(error = %e, "cannot start the log maintenance thread");
                BackgroundHandle {
                    stop: None,
                    thread: None,
                }
            }
        }
    }

    /// Closes every log cleanly (flush, checkpoints, clean shutdown marker).
    pub fn shutdown(&self) -> Result<()> {
        let closed = map_parallel(self.all_logs(), self.threads, |(_, log)| log.close_ref());
        closed.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, BatchSpec};
    use bytes::BytesMut;

    fn batch() -> BytesMut {
        BytesMut::from(&build_batch(&BatchSpec::default(), &[(None, Some(b"v"))])[..])
    }

    #[test]
    fn names_parse_like_kafka() {
        assert_eq!(parse_dir_name("my-topic-3"), Some(("my-topic".into(), 3)));
        assert_eq!(parse_dir_name("topic"), None);
        assert_eq!(parse_dir_name("t-x"), None);
        assert_eq!(parse_dir_name("bad/t-1"), None);
    }

    #[test]
    fn create_reopen_delete() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let dirs = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        let m = LogManager::open(&dirs, LogConfig::default()).unwrap();
        for p in 0..4 {
            let log = m.get_or_create("orders", p, LogConfig::default()).unwrap();
            log.append_as_leader(batch(), 0).unwrap();
        }
        assert!(m
            .get_or_create("bad/name", 0, LogConfig::default())
            .is_err());
        // Spread over both directories.
        assert_eq!(std::fs::read_dir(a.path()).unwrap().count(), 2);
        m.shutdown().unwrap();
        drop(m);
        std::fs::create_dir(a.path().join("old-0.abc-delete")).unwrap();
        let m = LogManager::open(&dirs, LogConfig::default()).unwrap();
        assert!(!a.path().join("old-0.abc-delete").exists());
        assert_eq!(m.all_logs().len(), 4);
        assert_eq!(m.get("orders", 2).unwrap().log_end_offset(), 1);
        let custom = LogConfig {
            retention_ms: -1,
            ..LogConfig::default()
        };
        let log = m.get_or_create("orders", 2, custom.clone()).unwrap();
        assert_eq!(log.config(), custom);
        m.delete_log("orders", 2).unwrap();
        assert!(m.get("orders", 2).is_none());
        let m = LogManager::open(&dirs, LogConfig::default()).unwrap();
        assert_eq!(m.all_logs().len(), 3);
    }

    #[test]
    fn background_thread_applies_retention_and_stops() {
        let a = tempfile::tempdir().unwrap();
        let m =
            Arc::new(LogManager::open(&[a.path().to_path_buf()], LogConfig::default()).unwrap());
        let config = LogConfig {
            segment_bytes: 200,
            retention_ms: 0,
            ..LogConfig::default()
        };
        let log = m.get_or_create("t", 0, config).unwrap();
        for _ in 0..10 {
            log.append_as_leader(batch(), 0).unwrap();
        }
        assert!(log.num_segments() > 2);
        let h = m.start_background_tasks(10);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while log.num_segments() > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        h.stop();
        assert_eq!(log.num_segments(), 1);
        assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    }
}
