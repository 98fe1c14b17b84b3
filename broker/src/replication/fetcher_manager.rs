//! The replica fetcher manager: which fetcher task follows which partition. Partitions are
//! spread over `num.replica.fetchers` tasks per leader broker by a hash of the partition, as in
//! Kafka; a task with no partitions left stops. The count is a dynamic broker config: a new one
//! moves each partition whose task changes, as Kafka's `resizeThreadPool` does.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use super::replica_fetcher::{FetcherContext, ReplicaFetcher};
use crate::replica_manager::Partition;
use tern_replication::TopicPartition;

/// Every replica fetcher of this broker.
pub struct ReplicaFetcherManager {
    context: Arc<FetcherContext>,
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    state: Mutex<Fetchers>,
}

struct Fetchers {
    /// Running fetchers by (leader, index).
    tasks: HashMap<(i32, usize), Arc<ReplicaFetcher>>,
    /// Which fetcher each followed partition is in.
    assigned: HashMap<TopicPartition, (i32, usize)>,
    shut_down: bool,
    /// `num.replica.fetchers` in force.
    per_leader: usize,
}

impl ReplicaFetcherManager {
    /// A manager whose fetchers share `context`; tasks run on the current tokio runtime.
    pub fn new(context: FetcherContext) -> Self {
        ReplicaFetcherManager {
            runtime: Mutex::new(tokio::runtime::Handle::try_current().ok()),
            state: Mutex::new(Fetchers {
                tasks: HashMap::new(),
                assigned: HashMap::new(),
                shut_down: false,
                per_leader: context.config.num_fetchers.max(1),
            }),
            context: Arc::new(context),
        }
    }

    /// Follows `tp` from `leader` in `leader_epoch` (moving it from another fetcher if its
    /// leader changed).
    pub fn add_partition(
        &self,
        tp: TopicPartition,
        leader: i32,
        leader_epoch: i32,
        partition: Arc<Partition>,
    ) {
        let mut st = self.state.lock();
        if st.shut_down {
            return;
        }
        let key = (leader, fetcher_index(&tp, st.per_leader));
        if let Some(old) = st.assigned.get(&tp).copied() {
            if old != key {
                Self::take_out(&mut st, &tp, old);
            }
        }
        self.follow_in(&mut st, key, tp, leader_epoch, partition);
    }

    /// Spreads the followed partitions over `count` fetchers per leader from now on: each
    /// partition whose fetcher changes moves there, carrying its leader epoch (its fetch
    /// position is its log end, so it resumes where it was).
    pub fn resize(&self, count: usize) {
        let count = count.max(1);
        let mut st = self.state.lock();
        if st.shut_down || st.per_leader == count {
            return;
        }
        tracing::info!(
            from = st.per_leader,
            to = count,
            "resizing the replica fetchers"
        );
        st.per_leader = count;
        let moving: Vec<(TopicPartition, (i32, usize))> = st
            .assigned
            .iter()
            .filter(|(tp, (_, index))| fetcher_index(tp, count) != *index)
            .map(|(tp, key)| (tp.clone(), *key))
            .collect();
        for (tp, old) in moving {
            let taken = st.tasks.get(&old).and_then(|f| f.core.lock().take(&tp));
            Self::take_out(&mut st, &tp, old);
            if let Some((leader_epoch, partition)) = taken {
                let key = (old.0, fetcher_index(&tp, count));
                self.follow_in(&mut st, key, tp, leader_epoch, partition);
            }
        }
    }

    /// The broker's replication throttles.
    pub fn quotas(&self) -> &Arc<super::quota::ReplicationQuotas> {
        &self.context.quotas
    }

    /// `leader.replication.throttled.rate` (`leader`) or the follower's, as server.properties
    /// sets it.
    pub fn configured_throttle_rate(&self, leader: bool) -> i64 {
        if leader {
            self.context.config.leader_throttled_rate
        } else {
            self.context.config.follower_throttled_rate
        }
    }

    /// `num.replica.fetchers` as server.properties sets it.
    pub fn configured(&self) -> usize {
        self.context.config.num_fetchers
    }

    /// The fetchers running now, per leader broker.
    pub fn fetchers_per_leader(&self) -> HashMap<i32, usize> {
        let mut out = HashMap::new();
        for (leader, _) in self.state.lock().tasks.keys() {
            *out.entry(*leader).or_default() += 1;
        }
        out
    }

    /// Adds `tp` to the fetcher `key`, starting it if it is not running.
    fn follow_in(
        &self,
        st: &mut Fetchers,
        key: (i32, usize),
        tp: TopicPartition,
        leader_epoch: i32,
        partition: Arc<Partition>,
    ) {
        let leader = key.0;
        let fetcher = match st.tasks.get(&key) {
            Some(f) => f.clone(),
            None => {
                let Some(runtime) = self.runtime() else {
                    tracing::error!(topic = %tp.0, partition = tp.1, "no async runtime to run a replica fetcher on");
                    return;
                };
                let f = ReplicaFetcher::new(leader, self.context.config.fetch_backoff_ms as i64);
                runtime.spawn(f.clone().run(self.context.clone()));
                st.tasks.insert(key, f.clone());
                f
            }
        };
        fetcher.core.lock().add(tp.clone(), leader_epoch, partition);
        fetcher.wake();
        st.assigned.insert(tp, key);
    }

    /// Stops following `tp` (this broker leads it now, or no longer hosts it).
    pub fn remove_partition(&self, tp: &TopicPartition) {
        let mut st = self.state.lock();
        if let Some(key) = st.assigned.get(tp).copied() {
            Self::take_out(&mut st, tp, key);
        }
    }

    /// Stops every fetcher (broker shutdown).
    pub fn shutdown(&self) {
        let mut st = self.state.lock();
        st.shut_down = true;
        for f in st.tasks.values() {
            f.stop();
        }
        st.tasks.clear();
        st.assigned.clear();
    }

    /// The partitions followed, with their leader (for tests and introspection).
    pub fn followed(&self) -> HashMap<TopicPartition, i32> {
        self.state
            .lock()
            .assigned
            .iter()
            .map(|(tp, (leader, _))| (tp.clone(), *leader))
            .collect()
    }

    fn take_out(st: &mut Fetchers, tp: &TopicPartition, key: (i32, usize)) {
        st.assigned.remove(tp);
        if let Some(f) = st.tasks.get(&key) {
            let empty = {
                let mut core = f.core.lock();
                core.remove(tp);
                core.is_empty()
            };
            if empty {
                f.stop();
                st.tasks.remove(&key);
            }
        }
    }

    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        let mut rt = self.runtime.lock();
        if rt.is_none() {
            *rt = tokio::runtime::Handle::try_current().ok();
        }
        rt.clone()
    }
}

/// The fetcher (of `count` per leader) that follows `tp`.
fn fetcher_index(tp: &TopicPartition, count: usize) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tp.hash(&mut h);
    (h.finish() % count.max(1) as u64) as usize
}
