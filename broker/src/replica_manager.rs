//! The ReplicaManager: the partitions this broker hosts, their logs, leadership, ISR and high
//! watermarks, kept in step with the metadata image; followers are handed to the replica
//! fetchers, leaders track their followers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tern_controller::{MetadataImage, PartitionInfo};
use tern_storage::{Log, LogConfig, LogManager};
use tokio::sync::watch;
use uuid::Uuid;

use crate::group_coordinator::now_ms;
use crate::replication::fetcher_manager::ReplicaFetcherManager;

/// The dynamic broker config of how many fetchers follow each leader.
const NUM_FETCHERS: &str = "num.replica.fetchers";
/// The dynamic broker config of the leader's replication throttle.
pub(crate) const LEADER_RATE: &str = "leader.replication.throttled.rate";
/// The dynamic broker config of the follower's replication throttle.
pub(crate) const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
use crate::replication::partition_state::{Assignment, PartitionState, RoleChange};
use crate::replication::quota;
use tern_controller::topic_configs::{THROTTLED_REPLICAS_FOLLOWER, THROTTLED_REPLICAS_LEADER};

/// One hosted partition: its log and what this broker knows of its leadership.
pub struct Partition {
    /// Topic name.
    pub topic: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub index: i32,
    /// The local log.
    pub log: Arc<Log>,
    leader_epoch: AtomicI64,
    is_leader: std::sync::atomic::AtomicBool,
    high_watermark: AtomicI64,
    /// Bumped whenever the high watermark moves (or leadership changes); delayed fetches and
    /// acks=all produces wait on it.
    hw_changed: watch::Sender<i64>,
    /// Bumped whenever the log end moves; followers' delayed fetches wait on it.
    leo_changed: watch::Sender<i64>,
    /// Leadership, ISR and followers' progress.
    state: Mutex<PartitionState>,
    /// Which replication throttles name this replica: [`THROTTLED_AS_LEADER`],
    /// [`THROTTLED_AS_FOLLOWER`].
    throttled: std::sync::atomic::AtomicU8,
}

/// The topic's `leader.replication.throttled.replicas` names this broker's replica.
const THROTTLED_AS_LEADER: u8 = 1;
/// The topic's `follower.replication.throttled.replicas` names this broker's replica.
const THROTTLED_AS_FOLLOWER: u8 = 2;

impl Partition {
    /// Whether bytes this leader sends to out-of-sync followers count against its throttle.
    pub fn throttled_as_leader(&self) -> bool {
        self.throttled.load(Ordering::Relaxed) & THROTTLED_AS_LEADER != 0
    }

    /// Whether bytes this follower fetches count against its throttle (while it is out of
    /// sync).
    pub fn throttled_as_follower(&self) -> bool {
        self.throttled.load(Ordering::Relaxed) & THROTTLED_AS_FOLLOWER != 0
    }

    /// Whether `replica` is in the ISR.
    pub fn in_sync(&self, replica: i32) -> bool {
        self.state.lock().assignment.isr.contains(&replica)
    }

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

    /// Records were appended here (as leader or follower): wakes followers' fetches and, on
    /// the leader, moves the high watermark as far as the ISR allows.
    pub fn on_local_append(&self) {
        self.leo_changed.send_replace(self.log.log_end_offset());
        self.maybe_advance_high_watermark();
    }

    /// On the leader: the high watermark becomes the smallest log end offset in the ISR.
    pub fn maybe_advance_high_watermark(&self) {
        let hw = self.state.lock().high_watermark(self.log.log_end_offset());
        if let Some(hw) = hw {
            self.advance_high_watermark(hw);
        }
    }

    /// A receiver woken when the log end offset moves.
    pub fn watch_log_end(&self) -> watch::Receiver<i64> {
        self.leo_changed.subscribe()
    }

    /// A follower fetched at `fetch_offset`: its progress counts for the high watermark and
    /// the ISR. False if `replica` is not a follower of this leader.
    pub fn follower_fetched(&self, replica: i32, fetch_offset: i64) -> bool {
        let leo = self.log.log_end_offset();
        let known = self
            .state
            .lock()
            .follower_fetched(replica, fetch_offset, leo, now_ms());
        if known {
            self.maybe_advance_high_watermark();
        }
        known
    }

    /// On a follower: the leader's high watermark, bounded by what this log has.
    pub fn follower_high_watermark(&self, leader_high_watermark: i64) {
        self.advance_high_watermark(leader_high_watermark.min(self.log.log_end_offset()));
    }

    /// Truncates the log (a follower diverged from its leader) and keeps the high watermark
    /// within it.
    pub fn truncate_to(&self, offset: i64) -> Result<(), tern_storage::StorageError> {
        self.log.truncate_to(offset)?;
        let leo = self.log.log_end_offset();
        if self.high_watermark() > leo {
            self.reset_high_watermark(leo);
        }
        self.leo_changed.send_replace(leo);
        Ok(())
    }

    /// The partition's assignment as last applied (replicas, ISR, leader, epochs).
    pub fn assignment(&self) -> Assignment {
        self.state.lock().assignment.clone()
    }

    /// Runs `f` on the replication state (the ISR updater's view).
    pub fn with_state<T>(&self, f: impl FnOnce(&mut PartitionState) -> T) -> T {
        f(&mut self.state.lock())
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
    fetchers: Arc<ReplicaFetcherManager>,
    leadership_listeners: RwLock<Vec<LeadershipListener>>,
    /// High watermarks read from the checkpoint at start, taken by partitions as they open.
    checkpointed: Mutex<HashMap<(String, i32), i64>>,
}

/// Called with a partition and whether this broker now leads it.
pub(crate) type LeadershipListener = Box<dyn Fn(&Arc<Partition>, bool) + Send + Sync>;

/// Topic configs merged over the broker's defaults, as a LogConfig.
pub(crate) fn log_config_for(
    defaults: &LogConfig,
    topic_configs: &BTreeMap<String, String>,
) -> LogConfig {
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
    /// A manager over `logs` for broker `node_id`; followers fetch through `fetchers`.
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        default_log_config: LogConfig,
        fetchers: Arc<ReplicaFetcherManager>,
    ) -> Self {
        ReplicaManager {
            node_id,
            logs,
            default_log_config,
            partitions: RwLock::new(HashMap::new()),
            apply_lock: parking_lot::Mutex::new(0),
            fetchers,
            leadership_listeners: RwLock::new(Vec::new()),
            checkpointed: Mutex::new(HashMap::new()),
        }
    }

    /// High watermarks to start partitions from (the checkpoint read at start).
    pub fn set_checkpointed_high_watermarks(&self, hws: HashMap<(String, i32), i64>) {
        *self.checkpointed.lock() = hws;
    }

    /// Every hosted partition.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().values().cloned().collect()
    }

    /// Calls `f(partition, is_leader)` whenever this broker starts or stops leading a
    /// partition (the group coordinator loads and unloads groups this way).
    pub fn on_leadership_change(&self, f: LeadershipListener) {
        self.leadership_listeners.write().push(f);
    }

    /// Takes one partition's assignment from the image: leads it, or follows its leader
    /// through the replica fetchers.
    fn apply_assignment(&self, partition: &Arc<Partition>, p: &PartitionInfo) {
        let assignment = Assignment {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            offline: p.offline.clone(),
        };
        let leader = p.leader == self.node_id;
        let tp = (partition.topic.clone(), partition.index);
        if leader {
            // First stop following (this waits out an append in progress), then lead: the
            // leader epoch starts at a log end no follower append moves afterwards.
            self.fetchers.remove_partition(&tp);
        }
        let leo = partition.log.log_end_offset();
        let change = partition.state.lock().apply(assignment, leo, now_ms());
        partition
            .leader_epoch
            .store(p.leader_epoch as i64, Ordering::Release);
        let was_leader = partition.is_leader.swap(leader, Ordering::AcqRel);
        match change {
            // A replica an I/O error took offline fetches nothing until a restart.
            RoleChange::BecameFollower(l) if l >= 0 && !partition.log.is_offline() => self
                .fetchers
                .add_partition(tp, l, p.leader_epoch, partition.clone()),
            RoleChange::BecameFollower(_) => self.fetchers.remove_partition(&tp),
            RoleChange::BecameLeader | RoleChange::None => {}
        }
        if leader {
            partition.maybe_advance_high_watermark();
        }
        if change != RoleChange::None {
            // Waiting acks=all produces and fetches look again at who leads.
            partition
                .hw_changed
                .send_replace(partition.high_watermark());
        }
        if was_leader != leader {
            for f in self.leadership_listeners.read().iter() {
                f(partition, leader);
            }
        }
    }

    /// The hosted partition, if any.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// The broker's replication throttles.
    pub fn quotas(&self) -> &Arc<quota::ReplicationQuotas> {
        self.fetchers.quotas()
    }

    /// A replication throttle rate in force: this broker's dynamic value, else the cluster-wide
    /// one, else server.properties; `u64::MAX` for none (Kafka's default, Long.MAX_VALUE).
    fn throttle_rate(&self, image: &MetadataImage, key: &str) -> u64 {
        let configured = self.fetchers.configured_throttle_rate(key == LEADER_RATE);
        let rate = crate::config::dynamic::dynamic_values(image, self.node_id, key)
            .into_iter()
            .find_map(|(v, _)| v.trim().parse::<i64>().ok())
            .unwrap_or(configured);
        if rate == i64::MAX {
            u64::MAX
        } else {
            rate.max(0) as u64
        }
    }

    /// Brings hosted partitions in line with a new metadata image: creates logs for new
    /// replicas, takes or gives up leadership, deletes logs of removed topics.
    pub fn apply_image(&self, image: &MetadataImage) {
        let mut applied = self.apply_lock.lock();
        if image.offset < *applied {
            return;
        }
        *applied = image.offset;
        // Broker defaults set dynamically apply to every partition from this image on.
        let mut defaults = self.default_log_config.clone();
        for (key, value) in crate::config::dynamic::dynamic_topic_defaults(image, self.node_id) {
            if let Err(e) = defaults.set(key, &value) {
                tracing::warn!(config = key, value = %value, error = %e, "ignoring dynamic broker default");
            }
        }
        let fetchers = crate::config::dynamic::dynamic_values(image, self.node_id, NUM_FETCHERS)
            .into_iter()
            .find_map(|(v, _)| v.trim().parse::<usize>().ok())
            .unwrap_or_else(|| self.fetchers.configured());
        self.fetchers.resize(fetchers);
        let quotas = self.fetchers.quotas();
        quotas
            .leader
            .set_rate(self.throttle_rate(image, LEADER_RATE));
        quotas
            .follower
            .set_rate(self.throttle_rate(image, FOLLOWER_RATE));
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
                        part.log.update_config(log_config_for(&defaults, &configs));
                        part
                    }
                    None => match self.create_partition(topic, index, p, &defaults, &configs) {
                        Ok(part) => part,
                        Err(e) => {
                            tracing::error!(topic = %topic.name, partition = index, error = %e, "cannot open partition log");
                            continue;
                        }
                    },
                };
                self.apply_assignment(&partition, p);
                let names = |key: &str| {
                    quota::names_replica(configs.get(key).map(String::as_str), index, self.node_id)
                };
                let as_leader = u8::from(names(THROTTLED_REPLICAS_LEADER)) * THROTTLED_AS_LEADER;
                let as_follower =
                    u8::from(names(THROTTLED_REPLICAS_FOLLOWER)) * THROTTLED_AS_FOLLOWER;
                let throttled = as_leader | as_follower;
                partition.throttled.store(throttled, Ordering::Relaxed);
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
            self.fetchers.remove_partition(&key);
            self.partitions.write().remove(&key);
            if let Err(e) = self.logs.delete_log(&key.0, key.1) {
                tracing::error!(topic = %key.0, partition = key.1, error = %e, "cannot delete partition log");
            }
        }
    }

    fn create_partition(
        &self,
        topic: &tern_controller::TopicImage,
        index: i32,
        p: &PartitionInfo,
        defaults: &LogConfig,
        configs: &BTreeMap<String, String>,
    ) -> Result<Arc<Partition>, tern_storage::StorageError> {
        let config = log_config_for(defaults, configs);
        let log = self.logs.get_or_create(&topic.name, index, config)?;
        let leo = log.log_end_offset();
        // Alone in the ISR, everything here is committed; otherwise what the checkpoint says
        // was (within the log), until the leader hears from its ISR (or, as a follower, from
        // its leader).
        let checkpointed = self
            .checkpointed
            .lock()
            .remove(&(topic.name.clone(), index));
        let hw = if p.isr == [self.node_id] {
            leo
        } else {
            checkpointed.unwrap_or(0).clamp(log.log_start_offset(), leo)
        };
        let (hw_changed, _) = watch::channel(hw);
        let (leo_changed, _) = watch::channel(leo);
        let partition = Arc::new(Partition {
            topic: topic.name.clone(),
            topic_id: topic.id,
            index,
            log,
            leader_epoch: AtomicI64::new(0),
            is_leader: std::sync::atomic::AtomicBool::new(false),
            high_watermark: AtomicI64::new(hw),
            hw_changed,
            leo_changed,
            state: Mutex::new(PartitionState::new(self.node_id)),
            throttled: std::sync::atomic::AtomicU8::new(0),
        });
        self.partitions
            .write()
            .insert((topic.name.clone(), index), partition.clone());
        Ok(partition)
    }
}
