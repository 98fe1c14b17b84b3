//! The ReplicaManager: the partitions this broker hosts, their logs, leadership and high
//! watermarks, kept in step with the metadata image.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use tern_controller::MetadataImage;
use tern_storage::{Log, LogConfig, LogManager};
use tokio::sync::watch;

/// One hosted partition: its log and what this broker knows of its leadership.
pub struct Partition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub index: i32,
    /// The local log.
    pub log: Arc<Log>,
    leader_epoch: AtomicI64,
    is_leader: std::sync::atomic::AtomicBool,
    high_watermark: AtomicI64,
    /// Bumped whenever the high watermark moves; delayed fetches wait on it.
    hw_changed: watch::Sender<i64>,
}

impl Partition {
    /// Current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire) as i32
    }

    /// Whether this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Acquire)
    }

    /// Offset below which records are committed.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Advances the high watermark (never backwards) and wakes waiting fetches.
    pub fn advance_high_watermark(&self, hw: i64) {
        let old = self.high_watermark.fetch_max(hw, Ordering::AcqRel);
        if hw > old {
            self.hw_changed.send_replace(hw);
        }
    }

    /// With this broker as the only in-sync replica, everything appended is committed.
    pub fn on_local_append(&self) {
        self.advance_high_watermark(self.log.log_end_offset());
    }

    /// A receiver woken when the high watermark moves.
    pub fn watch_high_watermark(&self) -> watch::Receiver<i64> {
        self.hw_changed.subscribe()
    }

    /// Resets the high watermark after a truncation or log-start move.
    pub fn reset_high_watermark(&self, hw: i64) {
        self.high_watermark.store(hw, Ordering::Release);
        self.hw_changed.send_replace(hw);
    }

    /// Offset below which read_committed consumers may read.
    pub fn last_stable_offset(&self) -> i64 {
        self.log.last_stable_offset(self.high_watermark())
    }
}

/// Every partition this broker hosts.
pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    default_log_config: LogConfig,
    partitions: RwLock<HashMap<(String, i32), Arc<Partition>>>,
    /// Serializes `apply_image` (request handlers and the metadata listener both call it) and
    /// holds the offset of the last applied image, so a stale image never undoes a newer one.
    apply_lock: parking_lot::Mutex<u64>,
}

/// Topic configs merged over the broker's defaults, as a LogConfig.
pub fn log_config_for(defaults: &LogConfig, topic_configs: &BTreeMap<String, String>) -> LogConfig {
    let mut config = defaults.clone();
    for (k, v) in topic_configs {
        // Values were validated by the controller; a key storage does not know is not its concern.
        if let Err(e) = config.set(k, v) {
            tracing::warn!(config = %k, value = %v, error = %e, "ignoring topic config");
        }
    }
    config
}

impl ReplicaManager {
    /// A manager over `logs` for broker `node_id`.
    pub fn new(node_id: i32, logs: Arc<LogManager>, default_log_config: LogConfig) -> Self {
        ReplicaManager {
            node_id,
            logs,
            default_log_config,
            partitions: RwLock::new(HashMap::new()),
            apply_lock: parking_lot::Mutex::new(0),
        }
    }

    /// The hosted partition, if any.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// Brings hosted partitions in line with a new metadata image: creates logs for new
    /// replicas, takes or gives up leadership, deletes logs of removed topics.
    pub fn apply_image(&self, image: &MetadataImage) {
        let mut applied = self.apply_lock.lock();
        if image.offset < *applied {
            return;
        }
        *applied = image.offset;
        let mut wanted: HashMap<(String, i32), (i32, bool)> = HashMap::new();
        for topic in image.topics.values() {
            let configs = image.topic_configs(&topic.name);
            for (&index, p) in &topic.partitions {
                if !p.replicas.contains(&self.node_id) {
                    continue;
                }
                let key = (topic.name.clone(), index);
                wanted.insert(key.clone(), (p.leader_epoch, p.leader == self.node_id));
                let existing = self.partition(&topic.name, index);
                let partition = match existing {
                    Some(part) => {
                        part.log
                            .update_config(log_config_for(&self.default_log_config, &configs));
                        part
                    }
                    None => match self.create_partition(&topic.name, index, &configs) {
                        Ok(part) => part,
                        Err(e) => {
                            tracing::error!(topic = %topic.name, partition = index, error = %e, "cannot open partition log");
                            continue;
                        }
                    },
                };
                partition
                    .leader_epoch
                    .store(p.leader_epoch as i64, Ordering::Release);
                let leader = p.leader == self.node_id;
                partition.is_leader.store(leader, Ordering::Release);
                if leader && p.isr == [self.node_id] {
                    partition.on_local_append();
                }
            }
        }
        // Logs on disk that the image no longer assigns here (deleted topics, also those
        // deleted while this broker was down).
        let gone: Vec<(String, i32)> = self
            .logs
            .all_logs()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !wanted.contains_key(k))
            .collect();
        for key in gone {
            self.partitions.write().remove(&key);
            if let Err(e) = self.logs.delete_log(&key.0, key.1) {
                tracing::error!(topic = %key.0, partition = key.1, error = %e, "cannot delete partition log");
            }
        }
    }

    fn create_partition(
        &self,
        topic: &str,
        index: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<Arc<Partition>, tern_storage::StorageError> {
        let config = log_config_for(&self.default_log_config, configs);
        let log = self.logs.get_or_create(topic, index, config)?;
        let hw = log.log_end_offset();
        let (hw_changed, _) = watch::channel(hw);
        let partition = Arc::new(Partition {
            topic: topic.to_string(),
            index,
            log,
            leader_epoch: AtomicI64::new(0),
            is_leader: std::sync::atomic::AtomicBool::new(false),
            high_watermark: AtomicI64::new(hw),
            hw_changed,
        });
        self.partitions
            .write()
            .insert((topic.to_string(), index), partition.clone());
        Ok(partition)
    }
}
