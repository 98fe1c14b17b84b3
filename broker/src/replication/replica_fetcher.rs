//! A replica fetcher: one task per (leader broker, fetcher index) that sends follower Fetch
//! requests (v12, this broker's id as the replica id, many partitions each) to the leader and
//! carries out what the [`FetcherCore`] makes of each response: appends through the log's
//! follower path (batches as bytes, never decompressed), truncations by leader epoch, and
//! log resets when the fetch offset falls outside the leader's log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tern_controller::Controller;
use tern_protocol::client::KafkaConnection;
use tokio::sync::Notify;

use crate::config::ReplicationConfig;
use crate::group_coordinator::now_ms;
use crate::replica_manager::Partition;
use tern_replication::{FetchTarget, FetchedPartition, FetcherCore, LocalLog, Outcome};

const FETCH_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 5;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
/// Longest wait for a connection to the leader.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a response beyond the fetch's own max wait.
const RESPONSE_GRACE: Duration = Duration::from_secs(30);

/// A partition's log as the fetcher core reads it.
pub(crate) struct PartitionLog<'a>(pub &'a Partition);

impl LocalLog for PartitionLog<'_> {
    fn log_end_offset(&self) -> i64 {
        self.0.log.log_end_offset()
    }
    fn latest_epoch(&self) -> Option<i32> {
        self.0.log.latest_epoch()
    }
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.0.log.end_offset_for_epoch(epoch)
    }
    fn high_watermark(&self) -> i64 {
        self.0.high_watermark()
    }
}

/// What every fetcher of this broker shares.
pub struct FetcherContext {
    /// This broker (the replica id of its fetches).
    pub node_id: i32,
    /// `replica.*` settings.
    pub config: ReplicationConfig,
    /// Where leaders' endpoints are looked up.
    pub controller: Arc<Controller>,
    /// The listener fetches go to (`inter.broker.listener.name`).
    pub listener: String,
    /// Replication throttles (the follower's is applied here).
    pub quotas: Arc<super::quota::ReplicationQuotas>,
}

/// One fetcher task's shared side.
pub(crate) struct ReplicaFetcher {
    /// The leader broker fetched from.
    pub leader: i32,
    /// Its partitions.
    pub core: Mutex<FetcherCore<Arc<Partition>>>,
    changed: Notify,
    stopped: AtomicBool,
}

impl ReplicaFetcher {
    /// A fetcher of `leader`'s partitions (none yet).
    pub(crate) fn new(leader: i32, backoff_ms: i64) -> Arc<Self> {
        Arc::new(ReplicaFetcher {
            leader,
            core: Mutex::new(FetcherCore::new(backoff_ms)),
            changed: Notify::new(),
            stopped: AtomicBool::new(false),
        })
    }

    /// Wakes the task: its partitions changed.
    pub(crate) fn wake(&self) {
        self.changed.notify_one();
    }

    /// Stops the task at its next step.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The task: fetch, apply, repeat until stopped.
    pub(crate) async fn run(self: Arc<Self>, ctx: Arc<FetcherContext>) {
        let mut conn: Option<KafkaConnection> = None;
        let backoff = Duration::from_millis(ctx.config.fetch_backoff_ms);
        while !self.is_stopped() {
            let now = now_ms();
            let (targets, wakeup) = {
                let core = self.core.lock();
                (
                    core.targets(now, |p| {
                        (p.log.log_end_offset(), p.log.latest_epoch().unwrap_or(-1))
                    }),
                    core.next_wakeup_ms(now),
                )
            };
            // A replica an I/O error took offline fetches nothing until a restart brings it
            // back: it must not look caught up and rejoin the ISR (Kafka stops fetching for a
            // failed log dir).
            let targets: Vec<_> = unthrottled(&ctx, targets, now)
                .into_iter()
                .filter(|(_, p)| !p.log.is_offline())
                .collect();
            if targets.is_empty() {
                let wait = wakeup.map_or(Duration::from_secs(1), |t| {
                    Duration::from_millis((t - now).max(1) as u64)
                });
                let _ = tokio::time::timeout(wait, self.changed.notified()).await;
                continue;
            }
            if conn.is_none() {
                match self.connect(&ctx).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::debug!(leader = self.leader, error = %e, "cannot reach the partition leader");
                        self.core.lock().delay_all(now_ms());
                        let _ = tokio::time::timeout(backoff, self.changed.notified()).await;
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            match self.fetch_once(c, &ctx, targets).await {
                Ok(resets) => {
                    if !resets.is_empty() {
                        if let Err(e) = self.reset_offsets(c, &ctx, resets).await {
                            tracing::warn!(leader = self.leader, error = %e, "cannot look up the leader's offsets");
                            conn = None;
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(leader = self.leader, error = %e, "replica fetch failed");
                    conn = None;
                    self.core.lock().delay_all(now_ms());
                }
            }
        }
    }

    async fn connect(&self, ctx: &FetcherContext) -> Result<KafkaConnection, String> {
        let image = ctx.controller.image();
        let broker = image
            .brokers
            .get(&self.leader)
            .ok_or_else(|| format!("broker {} is not registered", self.leader))?;
        let (host, port) = broker.endpoint(&ctx.listener);
        let client_id = format!("tern-replica-fetcher-{}", ctx.node_id);
        tokio::time::timeout(
            CONNECT_TIMEOUT,
            KafkaConnection::connect((host, port), &client_id),
        )
        .await
        .map_err(|_| format!("connecting to {host}:{port} timed out"))?
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))
    }

    /// One Fetch round trip; returns the partitions whose offsets must be looked up.
    async fn fetch_once(
        self: &Arc<Self>,
        conn: &mut KafkaConnection,
        ctx: &FetcherContext,
        targets: Vec<(FetchTarget, Arc<Partition>)>,
    ) -> Result<Vec<(FetchTarget, Arc<Partition>)>, String> {
        let request = build_request(ctx, &targets);
        let wait = Duration::from_millis(ctx.config.fetch_wait_max_ms.max(0) as u64);
        let response =
            tokio::time::timeout(wait + RESPONSE_GRACE, conn.send(&request, FETCH_VERSION))
                .await
                .map_err(|_| "the leader did not answer in time".to_string())?
                .map_err(|e| e.to_string())?;
        if response.error_code != 0 {
            return Err(format!("fetch error code {}", response.error_code));
        }
        let mut by_partition: HashMap<(String, i32), FetchedPartition> = HashMap::new();
        for topic in response.responses {
            let name = topic.topic.0.to_string();
            for p in topic.partitions {
                let diverging = (p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0)
                    .then_some((p.diverging_epoch.epoch, p.diverging_epoch.end_offset));
                by_partition.insert(
                    (name.clone(), p.partition_index),
                    FetchedPartition {
                        error_code: p.error_code,
                        high_watermark: p.high_watermark,
                        diverging,
                        records: p.records.unwrap_or_default(),
                    },
                );
            }
        }
        if ctx.quotas.follower.is_limited() {
            // Every replica the throttle names counts, in sync or not, as in Kafka.
            let throttled: usize = targets
                .iter()
                .filter(|(_, p)| p.throttled_as_follower())
                .filter_map(|(t, _)| by_partition.get(&t.tp))
                .map(|d| d.records.len())
                .sum();
            ctx.quotas.follower.record(throttled as u64, now_ms());
        }
        let this = self.clone();
        // Appends and truncations touch the disk: off the async workers.
        tokio::task::spawn_blocking(move || this.apply(targets, by_partition))
            .await
            .map_err(|e| format!("applying fetched data: {e}"))
    }

    async fn reset_offsets(
        &self,
        conn: &mut KafkaConnection,
        ctx: &FetcherContext,
        resets: Vec<(FetchTarget, Arc<Partition>)>,
    ) -> Result<(), String> {
        let earliest = self.list_offsets(conn, ctx, &resets, EARLIEST).await?;
        let latest = self.list_offsets(conn, ctx, &resets, LATEST).await?;
        for (target, partition) in resets {
            let (Some(&start), Some(&end)) = (earliest.get(&target.tp), latest.get(&target.tp))
            else {
                self.core.lock().delay(&target.tp, now_ms());
                continue;
            };
            let partition2 = partition.clone();
            let result = tokio::task::spawn_blocking(move || {
                let leo = partition2.log.log_end_offset();
                if leo < start {
                    // The leader deleted what we lack (retention, DeleteRecords): start over
                    // at its log start.
                    partition2.log.truncate_fully_and_start_at(start)?;
                    partition2.reset_high_watermark(start);
                    Ok(Some(start))
                } else if leo > end {
                    partition2.truncate_to(end).map(|()| Some(end))
                } else {
                    Ok(None)
                }
            })
            .await
            .map_err(|e| e.to_string())?;
            match result {
                Ok(Some(offset)) => tracing::info!(
                    topic = %target.tp.0, partition = target.tp.1, offset,
                    "follower log reset to the leader's range"
                ),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(topic = %target.tp.0, partition = target.tp.1, error = %e, "cannot reset follower log");
                    self.core.lock().delay(&target.tp, now_ms());
                }
            }
        }
        Ok(())
    }

    async fn list_offsets(
        &self,
        conn: &mut KafkaConnection,
        ctx: &FetcherContext,
        targets: &[(FetchTarget, Arc<Partition>)],
        timestamp: i64,
    ) -> Result<HashMap<(String, i32), i64>, String> {
        let mut topics: Vec<ListOffsetsTopic> = Vec::new();
        for (t, _) in targets {
            let partition = ListOffsetsPartition::default()
                .with_partition_index(t.tp.1)
                .with_current_leader_epoch(t.current_leader_epoch)
                .with_timestamp(timestamp);
            match topics.iter_mut().find(|x| x.name.0.as_str() == t.tp.0) {
                Some(topic) => topic.partitions.push(partition),
                None => topics.push(
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.tp.0.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(ctx.node_id))
            .with_topics(topics);
        let response =
            tokio::time::timeout(RESPONSE_GRACE, conn.send(&request, LIST_OFFSETS_VERSION))
                .await
                .map_err(|_| "ListOffsets timed out".to_string())?
                .map_err(|e| e.to_string())?;
        let mut out = HashMap::new();
        for topic in response.topics {
            for p in topic.partitions {
                if p.error_code == 0 && p.offset >= 0 {
                    out.insert((topic.name.0.to_string(), p.partition_index), p.offset);
                }
            }
        }
        Ok(out)
    }
}

impl ReplicaFetcher {
    /// Applies a response partition by partition; returns those needing an offset lookup.
    fn apply(
        &self,
        targets: Vec<(FetchTarget, Arc<Partition>)>,
        mut data: HashMap<(String, i32), FetchedPartition>,
    ) -> Vec<(FetchTarget, Arc<Partition>)> {
        let mut resets = Vec::new();
        for (target, partition) in targets {
            let Some(d) = data.remove(&target.tp) else {
                continue;
            };
            let now = now_ms();
            // The core stays locked through the append or truncation: the manager takes a
            // partition out (it became leader here) only between two of them, so a follower
            // append never lands in a log this broker already leads.
            let mut core = self.core.lock();
            let outcome = core.on_response(&target, &d, &PartitionLog(&partition), now);
            let result = match outcome {
                None => Ok(()),
                Some(Outcome::Append {
                    records,
                    leader_high_watermark,
                }) => append(&partition, &target, records, leader_high_watermark),
                Some(Outcome::HighWatermark(hw)) => {
                    partition.follower_high_watermark(hw);
                    Ok(())
                }
                Some(Outcome::Truncate(offset)) => {
                    tracing::info!(
                        topic = %target.tp.0, partition = target.tp.1, offset,
                        leo = partition.log.log_end_offset(), leader = self.leader,
                        "follower log diverged from the leader's; truncating"
                    );
                    partition.truncate_to(offset).map_err(|e| e.to_string())
                }
                Some(Outcome::ResetOffsets) => {
                    resets.push((target.clone(), partition.clone()));
                    Ok(())
                }
                Some(Outcome::Backoff(code)) => {
                    tracing::debug!(topic = %target.tp.0, partition = target.tp.1, code, leader = self.leader, "leader refused the fetch; backing off");
                    Ok(())
                }
            };
            if let Err(e) = result {
                tracing::warn!(topic = %target.tp.0, partition = target.tp.1, error = %e, "follower append failed");
                core.delay(&target.tp, now);
            }
        }
        resets
    }
}

/// Appends fetched batches through the log's follower path, keeping the leader's offsets and
/// epochs; then takes the leader's high watermark.
fn append(
    partition: &Partition,
    target: &FetchTarget,
    records: bytes::Bytes,
    leader_high_watermark: i64,
) -> Result<(), String> {
    let (whole, _) = tern_replication::whole_batches_from(&records, target.fetch_offset);
    if !whole.is_empty() {
        partition
            .log
            .append_replicated(whole, None)
            .map_err(|e| e.to_string())?;
        partition.on_local_append();
    }
    partition.follower_high_watermark(leader_high_watermark);
    Ok(())
}

/// Whether the follower throttle may hold this replica back: the topic's follower throttle
/// names it, a rate is set, and it is out of sync (not in the ISR).
fn held_back_by_throttle(ctx: &FetcherContext, partition: &Partition) -> bool {
    partition.throttled_as_follower()
        && ctx.quotas.follower.is_limited()
        && !partition.in_sync(ctx.node_id)
}

/// The targets to fetch now: throttled replicas wait while the follower throttle's rate is
/// exceeded, as Kafka leaves them out of its fetch requests.
fn unthrottled(
    ctx: &FetcherContext,
    targets: Vec<(FetchTarget, Arc<Partition>)>,
    now_ms: i64,
) -> Vec<(FetchTarget, Arc<Partition>)> {
    if !ctx.quotas.follower.is_exceeded(now_ms) {
        return targets;
    }
    targets
        .into_iter()
        .filter(|(_, p)| !held_back_by_throttle(ctx, p))
        .collect()
}

/// The Fetch request for `targets`, grouped by topic.
fn build_request(ctx: &FetcherContext, targets: &[(FetchTarget, Arc<Partition>)]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (t, _) in targets {
        let partition = FetchPartition::default()
            .with_partition(t.tp.1)
            .with_current_leader_epoch(t.current_leader_epoch)
            .with_fetch_offset(t.fetch_offset)
            .with_last_fetched_epoch(t.last_fetched_epoch)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(ctx.config.fetch_max_bytes);
        match topics.iter_mut().find(|x| x.topic.0.as_str() == t.tp.0) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(t.tp.0.clone())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(ctx.node_id))
        .with_max_wait_ms(ctx.config.fetch_wait_max_ms)
        .with_min_bytes(ctx.config.fetch_min_bytes)
        .with_max_bytes(ctx.config.fetch_response_max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}
