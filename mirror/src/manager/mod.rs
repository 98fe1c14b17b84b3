//! The MirrorManager joins the spec's three components: it follows the metadata image, drives
//! every mirror partition this broker leads with its state machine (`crate::coordinator`),
//! carries the machines' actions out (states written at their coordinators, partitions handed
//! to the mirror fetchers by source leader: `crate::fetcher`), and on each mirror's metadata
//! coordinator runs the metadata sync (`crate::metadata`). Its own loop handles leadership,
//! stopping and pausing; each mirror's source work runs in a task of its own, so a slow source
//! holds up only its mirror. [`admin`] answers the mirror RPCs.

mod admin;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::write_mirror_states_request::PartitionData as WritePartition;
use parking_lot::Mutex;
use tern_controller::topic_configs::{
    MIRROR_NAME_CONFIG, MIRROR_PAUSED_SUFFIX, MIRROR_REMOVED_SUFFIX, MIRROR_STOPPED_SUFFIX,
};
use tern_controller::{ConfigResourceType, Controller, MetadataImage};
use tokio::sync::{mpsc, watch, Notify};
use uuid::Uuid;

use crate::config::BrokerMirrorConfig;
pub(crate) use crate::coordinator::DesiredState;
use crate::coordinator::{
    Action, LocalLog, Observed, Outcome, PartitionMachine, RemoteOffset, RetryPolicy,
};
use crate::coordinator::{CoordinationError, PartitionStates};
use crate::fetcher::runtime::{Fetchers, MirrorRuntime, SourceUnavailable};
use crate::fetcher::{FetcherEvent, MirrorFetcher, PartitionFetchState, TopicPartition};
use crate::host::{MirrorHost, RaiseEpochError};
use crate::peers::Peers;
use crate::state::{
    metadata_coordinator_partition, MirrorPartitionKey, MirrorPartitionState, PartitionStateRecord,
    MIRROR_STATE_TOPIC,
};
use crate::stats::{MirrorCounters, MirrorStats};

/// How often the manager re-examines its partitions without being woken.
const TICK: Duration = Duration::from_millis(500);
/// Source metadata older than this is refreshed before a partition is assigned.
const METADATA_MAX_AGE: Duration = Duration::from_secs(5);
/// Actions one partition may take in one pass (a step that keeps failing waits for the next).
const MAX_STEPS_PER_PASS: usize = 8;

/// Why a step of a partition's state machine failed: the reason its machine is given (and that
/// a FAILED partition is described with).
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// This broker no longer leads the mirror partition.
    #[error("{topic}-{partition} is no longer led here")]
    NotLed { topic: String, partition: i32 },
    /// The partition's coordinator did not record its new state.
    #[error("the mirror coordinator refused the state (error {code}): {0}", code = .0.code())]
    Persist(CoordinationError),
    /// Failback: truncating the local log to the last mirrored offset failed.
    #[error("truncating to {offset}: {error}")]
    Truncate {
        offset: i64,
        error: tern_storage::StorageError,
    },
    /// Failover: the partition's leader epoch could not be raised.
    #[error("raising the leader epoch for the failover: {0}")]
    RaiseEpoch(RaiseEpochError),
    /// Failback: the source could not be connected to.
    #[error("connecting to the source: {0}")]
    Connect(SourceUnavailable),
    /// Failback: the source did not answer LastMirroredOffsets.
    #[error("asking the source for last mirrored offsets: {0}")]
    LastMirroredOffsets(crate::source::SourceError),
    /// The source's metadata could not be read.
    #[error("{0}")]
    SourceMetadata(SourceUnavailable),
    /// The source topic has fewer partitions.
    #[error("partition {partition} missing on the source")]
    MissingOnSource { partition: i32 },
    /// The source partition has no leader to fetch from.
    #[error("source partition {topic}-{partition} has no leader")]
    NoSourceLeader { topic: String, partition: i32 },
}

impl StepError {
    fn not_led(tp: &TopicPartition) -> Self {
        StepError::NotLed {
            topic: tp.0.clone(),
            partition: tp.1,
        }
    }
}

impl From<StepError> for Outcome {
    fn from(e: StepError) -> Self {
        Outcome::Failed(e.to_string())
    }
}

/// Splits a `mirror.name` value into the mirror and what it asks for.
pub(crate) fn parse_mirror_name(value: &str) -> Option<(&str, DesiredState)> {
    if value.is_empty() {
        return None;
    }
    if let Some(m) = value.strip_suffix(MIRROR_STOPPED_SUFFIX) {
        return Some((m, DesiredState::Stopped));
    }
    if let Some(m) = value.strip_suffix(MIRROR_REMOVED_SUFFIX) {
        let m = m.strip_suffix(MIRROR_PAUSED_SUFFIX).unwrap_or(m);
        return Some((m, DesiredState::Stopped));
    }
    if let Some(m) = value.strip_suffix(MIRROR_PAUSED_SUFFIX) {
        return Some((m, DesiredState::Paused));
    }
    Some((value, DesiredState::Mirroring))
}

/// What the manager knows of a partition beyond its state machine.
#[derive(Debug, Clone, Default)]
pub(crate) struct PartitionStatus {
    /// Source high watermark from the last fetch, or None.
    pub source_high_watermark: Option<i64>,
    /// The newest record timestamp mirrored so far (batch max timestamps), or None.
    pub newest_mirrored_timestamp: Option<i64>,
    /// Taken from its fetcher by an error or a leader move, not yet handed back.
    pub retry_pending: bool,
}

/// How long an admin call waits for the coordinator to act on its change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A mirror's own task, which does its source work.
struct MirrorTask {
    /// The mirror's configs the task was started with.
    configs: BTreeMap<String, String>,
    /// Its fetchers, shared with the coordinator's loop.
    fetchers: Fetchers,
    /// Wakes it for a pass.
    wake: Arc<Notify>,
    /// Its completed passes.
    passes: watch::Receiver<u64>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl MirrorTask {
    /// A task that never ran (the stand-in while one is being stopped).
    fn placeholder() -> Self {
        MirrorTask {
            configs: BTreeMap::new(),
            fetchers: Fetchers::default(),
            wake: Arc::new(Notify::new()),
            passes: watch::channel(0).1,
            handle: None,
        }
    }

    /// Stops the task and its fetchers.
    fn stop(self) {
        if let Some(h) = self.handle {
            h.abort();
        }
        self.fetchers.shutdown();
    }
}

/// A mirror partition this broker leads, with its state machine.
struct Driven {
    topic: String,
    machine: PartitionMachine,
}

/// This broker's mirror coordinator, metadata manager and fetcher manager, joined: the
/// metadata image says what each mirror partition should do, the state machines decide, and
/// this carries their actions out.
pub struct MirrorManager {
    pub(crate) host: Arc<dyn MirrorHost>,
    pub(crate) controller: Arc<Controller>,
    pub(crate) config: BrokerMirrorConfig,
    /// Partition states at their coordinators (this broker's store or its peers).
    pub(crate) states: PartitionStates,
    /// The mirror partitions this broker leads (and so drives), with their state machines.
    driven: Mutex<HashMap<MirrorPartitionKey, Driven>>,
    pub(crate) peers: Arc<Peers>,
    pub(crate) status: Mutex<HashMap<MirrorPartitionKey, PartitionStatus>>,
    /// One task per mirror (its source work), by mirror name.
    tasks: Mutex<HashMap<String, MirrorTask>>,
    /// Held while a mirror task hands a partition to a fetcher and while the coordinator's
    /// loop takes a stopped or paused one away, so neither undoes the other.
    assign_guard: Mutex<()>,
    pub(crate) cluster_ids: Mutex<HashMap<String, String>>,
    /// Counters of each mirror's fetching.
    stats: Arc<MirrorStats>,
    events_tx: mpsc::UnboundedSender<FetcherEvent>,
    events_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<FetcherEvent>>,
    wake: Notify,
    /// Bumped after every reconcile pass; admin calls wait on it.
    passes: watch::Sender<u64>,
}

impl MirrorManager {
    /// A manager for the broker behind `host`; call [`MirrorManager::load`] then `run`.
    pub fn new(
        host: Arc<dyn MirrorHost>,
        controller: Arc<Controller>,
        config: BrokerMirrorConfig,
    ) -> Arc<Self> {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let peers = Arc::new(Peers::new(host.clone()));
        let states = PartitionStates::new(
            host.clone(),
            controller.clone(),
            config.state_topic_partitions,
            peers.clone(),
        );
        Arc::new(MirrorManager {
            peers,
            host,
            controller,
            config,
            states,
            driven: Mutex::new(HashMap::new()),
            status: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            assign_guard: Mutex::new(()),
            cluster_ids: Mutex::new(HashMap::new()),
            stats: Arc::default(),
            events_tx,
            events_rx: tokio::sync::Mutex::new(events_rx),
            wake: Notify::new(),
            passes: watch::channel(0).0,
        })
    }

    /// Loads the persisted partition states of the `__mirror_state` partitions led here.
    pub fn load(&self) {
        self.states.store().sync_leadership();
    }

    /// Whether produce to a topic with this `mirror.name` value must fail with
    /// READ_ONLY_TOPIC: mirrored and paused topics are, and a failing-over topic until every
    /// one of its partitions is STOPPED (the topic becomes writable whole, never in part).
    pub fn is_read_only(&self, mirror_name: Option<&str>) -> bool {
        let Some(value) = mirror_name else {
            return false;
        };
        match parse_mirror_name(value) {
            None => false,
            Some((_, DesiredState::Mirroring | DesiredState::Paused)) => true,
            Some((_, DesiredState::Stopped)) => !failover_complete(value),
        }
    }

    /// Runs the coordinator until `shutdown` fires.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut images = self.controller.subscribe();
        let mut events = self.events_rx.lock().await;
        loop {
            let mut batch = Vec::new();
            tokio::select! {
                _ = images.changed() => {}
                _ = self.wake.notified() => {}
                Some(event) = events.recv() => batch.push(event),
                _ = tokio::time::sleep(TICK) => {}
                _ = shutdown.changed() => break,
            }
            while let Ok(event) = events.try_recv() {
                batch.push(event);
            }
            for event in batch {
                self.on_event(event).await;
            }
            self.reconcile().await;
            self.passes.send_modify(|n| *n += 1);
        }
        for (_, task) in self.tasks.lock().drain() {
            task.stop();
        }
    }

    /// Wakes the coordinator, waits for one pass of its loop (mirror tasks exist and know of
    /// the change), then for `passes` passes of `mirror`'s task.
    async fn settle(&self, mirror: Option<&str>, passes: u64) {
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        let mut rx = self.passes.subscribe();
        let target = *rx.borrow_and_update() + 1;
        self.wake.notify_one();
        let _ = tokio::time::timeout_at(deadline, async {
            while *rx.borrow_and_update() < target {
                if rx.changed().await.is_err() {
                    return;
                }
                self.wake.notify_one();
            }
        })
        .await;
        let task = mirror.and_then(|m| {
            self.tasks
                .lock()
                .get(m)
                .map(|t| (t.passes.clone(), t.wake.clone()))
        });
        let Some((mut rx, wake)) = task else {
            return;
        };
        let target = *rx.borrow_and_update() + passes;
        wake.notify_one();
        let _ = tokio::time::timeout_at(deadline, async {
            while *rx.borrow_and_update() < target {
                if rx.changed().await.is_err() {
                    return;
                }
                wake.notify_one();
            }
        })
        .await;
    }

    async fn on_event(&self, event: FetcherEvent) {
        let (mirror, tp) = match &event {
            FetcherEvent::SourceHighWatermark { mirror, tp, .. }
            | FetcherEvent::NeedsLeader { mirror, tp, .. }
            | FetcherEvent::Failed { mirror, tp, .. } => (mirror.clone(), tp.clone()),
        };
        let Some(key) = self.key_of(&mirror, &tp) else {
            return;
        };
        let now = Instant::now();
        let mut driven = self.driven.lock();
        let machine = driven.get_mut(&key).map(|d| &mut d.machine);
        match event {
            FetcherEvent::SourceHighWatermark {
                high_watermark,
                newest_timestamp,
                ..
            } => {
                let mut status = self.status.lock();
                let st = status.entry(key.clone()).or_default();
                st.source_high_watermark = Some(high_watermark);
                if newest_timestamp.is_some() {
                    st.newest_mirrored_timestamp = newest_timestamp;
                }
                drop(status);
                if let Some(m) = machine {
                    m.on_fetch_succeeded();
                }
            }
            FetcherEvent::NeedsLeader { reason, .. } => {
                self.status
                    .lock()
                    .entry(key.clone())
                    .or_default()
                    .retry_pending = true;
                tracing::info!(%mirror, topic = %tp.0, partition = tp.1, %reason, "mirror partition needs its source leader again");
                if let Some(m) = machine {
                    m.on_needs_leader(now, reason);
                }
            }
            FetcherEvent::Failed { reason, .. } => {
                self.status
                    .lock()
                    .entry(key.clone())
                    .or_default()
                    .retry_pending = true;
                tracing::warn!(%mirror, topic = %tp.0, partition = tp.1, %reason, "mirror partition failed");
                if let Some(m) = machine {
                    m.on_fetch_failed(now, reason);
                }
            }
        }
    }

    fn key_of(&self, mirror: &str, tp: &TopicPartition) -> Option<MirrorPartitionKey> {
        let image = self.controller.image();
        let topic = image.topic(&tp.0)?;
        Some(MirrorPartitionKey {
            mirror: mirror.to_string(),
            topic_id: topic.id,
            partition: tp.1,
        })
    }

    /// The state of a partition this broker drives (UNKNOWN when none).
    fn state(&self, key: &MirrorPartitionKey) -> MirrorPartitionState {
        self.driven
            .lock()
            .get(key)
            .map(|d| d.machine.state())
            .unwrap_or(MirrorPartitionState::Unknown)
    }

    /// How FAILED partitions are retried.
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.config.failed_retry_max_attempts,
            initial_backoff: self.config.failed_retry_initial_backoff,
            max_backoff: self.config.failed_retry_max_backoff,
        }
    }

    /// Writes a driven partition's state to its coordinator.
    async fn persist(
        &self,
        key: &MirrorPartitionKey,
        topic: &str,
        record: &PartitionStateRecord,
        last_mirrored_offset: Option<i64>,
    ) -> Result<(), StepError> {
        let Some(replica) = self.host.leader_replica(topic, key.partition) else {
            return Err(StepError::NotLed {
                topic: topic.to_string(),
                partition: key.partition,
            });
        };
        // The metadata image may already hold a raised epoch the partition has not taken yet;
        // the coordinator fences writers by the image's epoch.
        let image_epoch = self
            .controller
            .image()
            .topic_by_id(&key.topic_id)
            .and_then(|t| t.partitions.get(&key.partition))
            .filter(|info| info.leader == self.host.node_id())
            .map(|info| info.leader_epoch)
            .unwrap_or(-1);
        let write = WritePartition::default()
            .with_partition_index(key.partition)
            .with_state(record.state.id())
            .with_retry_attempt(record.retry_attempt)
            .with_error_message(record.error_message.clone().map(Into::into))
            .with_last_mirrored_offset(last_mirrored_offset.unwrap_or(-1))
            .with_previous_state(record.previous_state.id())
            .with_leader_epoch(replica.leader_epoch.max(image_epoch));
        self.states
            .write(key, topic, write)
            .await
            .map_err(StepError::Persist)
    }

    /// Moves a led partition towards what its `mirror.name` asks: its state machine decides,
    /// this carries its actions out. Source actions need the mirror's runtime (only the
    /// mirror's own task has it).
    async fn drive(
        &self,
        mut rt: Option<&mut MirrorRuntime>,
        key: &MirrorPartitionKey,
        tp: &TopicPartition,
        desired: DesiredState,
    ) {
        let fetchers = match rt.as_ref() {
            Some(rt) => Some(rt.fetchers.clone()),
            None => self
                .tasks
                .lock()
                .get(&key.mirror)
                .map(|t| t.fetchers.clone()),
        };
        for _ in 0..MAX_STEPS_PER_PASS {
            let seen = Observed {
                log: self.host.leader_replica(&tp.0, tp.1).map(|r| LocalLog {
                    start: r.log.log_start_offset(),
                    end: r.log.log_end_offset(),
                }),
                fetching: fetchers.as_ref().is_some_and(|f| f.is_fetching(tp)),
                source: rt.is_some(),
            };
            let action = {
                let mut driven = self.driven.lock();
                let Some(d) = driven.get_mut(key) else { return };
                d.machine.poll(Instant::now(), desired, seen)
            };
            let Some(action) = action else { return };
            let outcome = self
                .execute(rt.as_deref_mut(), fetchers.as_ref(), key, tp, &action)
                .await;
            match (&action, &outcome) {
                (Action::Persist { record, .. }, Outcome::Done) => {
                    tracing::info!(mirror = %key.mirror, topic = %tp.0, partition = tp.1, to = record.state.name(), retry = record.retry_attempt, "mirror partition state")
                }
                (_, Outcome::Failed(e)) => {
                    tracing::warn!(mirror = %key.mirror, topic = %tp.0, partition = tp.1, action = ?action, error = %e, "mirror partition step failed")
                }
                _ => {}
            }
            let mut driven = self.driven.lock();
            let Some(d) = driven.get_mut(key) else { return };
            d.machine.on_outcome(Instant::now(), outcome);
            if d.machine.is_stale() {
                // The coordinator refused or missed the write: read its state again next pass.
                driven.remove(key);
                return;
            }
        }
    }

    /// Carries out one action of a partition's state machine.
    async fn execute(
        &self,
        rt: Option<&mut MirrorRuntime>,
        fetchers: Option<&Fetchers>,
        key: &MirrorPartitionKey,
        tp: &TopicPartition,
        action: &Action,
    ) -> Outcome {
        let done = |r: Result<(), StepError>| r.map_or_else(Outcome::from, |()| Outcome::Done);
        match action {
            Action::Persist {
                record,
                last_mirrored_offset,
            } => done(
                self.persist(key, &tp.0, record, *last_mirrored_offset)
                    .await,
            ),
            Action::StopFetching => {
                if let Some(f) = fetchers {
                    let _guard = self.assign_guard.lock();
                    f.remove_partition(tp);
                }
                Outcome::Done
            }
            Action::AskRemoteOffset => match rt {
                Some(rt) => self.ask_remote_offset(rt, key, tp).await,
                None => Outcome::Skipped,
            },
            Action::Truncate { to } => done(self.truncate(tp, *to)),
            Action::AwaitFollowers { offset } => {
                if self.host.followers_end_at_or_below(&tp.0, tp.1, *offset) {
                    Outcome::Done
                } else {
                    Outcome::Skipped
                }
            }
            Action::Assign { refresh_metadata } => match rt {
                Some(rt) => self.assign(rt, key, tp, *refresh_metadata).await,
                None => Outcome::Skipped,
            },
            Action::PrepareStop => self.prepare_stop(tp),
        }
    }

    /// Failback: the offset the other side last mirrored of this partition.
    async fn ask_remote_offset(
        &self,
        rt: &mut MirrorRuntime,
        key: &MirrorPartitionKey,
        tp: &TopicPartition,
    ) -> Outcome {
        let answer = match rt.connection(&key.mirror).await {
            Ok(conn) => {
                conn.last_mirrored_offsets(&key.mirror, &tp.0, &[tp.1])
                    .await
            }
            Err(e) => return StepError::Connect(e).into(),
        };
        let not_stopped = tern_protocol::mirror::errors::MIRROR_TOPIC_NOT_STOPPED.code();
        let remote = match answer {
            Ok(Some(offsets)) => match offsets.get(&tp.1) {
                Some((0, offset)) if *offset >= 0 => RemoteOffset::At(*offset),
                // The other side still mirrors this topic: failing back now would truncate
                // this log and let the two clusters truncate each other.
                Some((code, _)) if *code == not_stopped => RemoteOffset::StillMirrored,
                _ => RemoteOffset::Unknown,
            },
            Ok(None) | Err(crate::source::SourceError::Kafka { .. }) => RemoteOffset::Unknown,
            Err(e) => {
                rt.source = None;
                return StepError::LastMirroredOffsets(e).into();
            }
        };
        Outcome::RemoteOffset(remote)
    }

    /// Truncates the local log to `to` (restarting it there if that is at or below its start).
    fn truncate(&self, tp: &TopicPartition, to: i64) -> Result<(), StepError> {
        let replica = self
            .host
            .leader_replica(&tp.0, tp.1)
            .ok_or_else(|| StepError::not_led(tp))?;
        let log = &replica.log;
        tracing::info!(topic = %tp.0, partition = tp.1, local_end = log.log_end_offset(), truncate_to = to, "failback: truncating to the last mirrored offset");
        let result = if to <= log.log_start_offset() {
            log.truncate_fully_and_start_at(to)
        } else {
            log.truncate_to(to)
        };
        result.map_err(|error| StepError::Truncate { offset: to, error })?;
        self.host.on_log_reset(&tp.0, tp.1);
        Ok(())
    }

    /// One pass of the coordinator's loop: leadership of `__mirror_state` and of mirror
    /// partitions, one task per mirror, states of newly led partitions. The source work of
    /// each mirror runs in its own task ([`MirrorManager::mirror_pass`]).
    async fn reconcile(self: &Arc<Self>) {
        self.states.store().sync_leadership();
        let image = self.controller.image();
        self.sync_tasks(&image);
        let led = self.led_mirror_partitions(&image);
        self.forget_unled(&led);
        self.load_driven(&led).await;
        // Stopping and pausing need no source, so they are done here, never held up by a
        // slow source; so are the partitions of a mirror that no longer exists (no task).
        for (key, tp, desired) in &led {
            let has_task = self.tasks.lock().contains_key(&key.mirror);
            let here = !has_task || *desired != DesiredState::Mirroring;
            if here && self.driven.lock().contains_key(key) {
                self.drive(None, key, tp, *desired).await;
            }
        }
        for task in self.tasks.lock().values() {
            task.wake.notify_one();
        }
    }

    /// One task per mirror in the image, started afresh when the mirror's configs change.
    fn sync_tasks(self: &Arc<Self>, image: &MetadataImage) {
        let mut tasks = self.tasks.lock();
        tasks.retain(|name, task| {
            let keep = image
                .mirrors
                .get(name)
                .is_some_and(|m| m.configs == task.configs);
            if !keep {
                std::mem::replace(task, MirrorTask::placeholder()).stop();
            }
            keep
        });
        for (name, mirror) in &image.mirrors {
            if !tasks.contains_key(name) {
                tasks.insert(name.clone(), self.spawn_mirror_task(name, &mirror.configs));
            }
        }
    }

    fn spawn_mirror_task(
        self: &Arc<Self>,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> MirrorTask {
        let mut rt = MirrorRuntime::new(configs);
        let fetchers = rt.fetchers.clone();
        let wake = Arc::new(Notify::new());
        let (passes_tx, passes) = watch::channel(0u64);
        let manager = self.clone();
        let (mirror, task_wake) = (name.to_string(), wake.clone());
        let handle = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = task_wake.notified() => {}
                    _ = tokio::time::sleep(TICK) => {}
                }
                manager.mirror_pass(&mirror, &mut rt).await;
                passes_tx.send_modify(|n| *n += 1);
            }
        });
        MirrorTask {
            configs: configs.clone(),
            fetchers,
            wake,
            passes,
            handle: Some(handle),
        }
    }

    /// One pass of a mirror's own task: drives the mirror partitions this broker leads and,
    /// on the mirror's metadata coordinator, syncs metadata and completes failovers.
    async fn mirror_pass(&self, name: &str, rt: &mut MirrorRuntime) {
        let image = self.controller.image();
        let led = self.led_mirror_partitions(&image);
        let mirrored = led
            .iter()
            .filter(|(k, _, d)| k.mirror == name && *d == DesiredState::Mirroring);
        for (key, tp, desired) in mirrored {
            if self.driven.lock().contains_key(key) {
                self.drive(Some(&mut *rt), key, tp, *desired).await;
            }
        }
        if let Some(id) = rt.cluster_id.clone() {
            self.cluster_ids.lock().insert(name.to_string(), id);
        }
        if self.is_metadata_coordinator(name, &image) {
            let due = rt
                .last_sync
                .is_none_or(|at| at.elapsed() >= self.config.metadata_refresh_interval);
            let discovering = !rt.settings.topics_include.is_empty();
            if due && (discovering || !image.mirror_topics(name).is_empty()) {
                rt.last_sync = Some(Instant::now());
                self.sync_metadata(name, rt, &image).await;
            }
            let stopping = failing_over_topics(&image, name);
            if !stopping.is_empty() {
                self.complete_failovers(name, &stopping).await;
            }
        }
        rt.fetchers.drop_idle();
    }

    /// The mirror partitions this broker leads, with what their topic's `mirror.name` asks.
    fn led_mirror_partitions(
        &self,
        image: &MetadataImage,
    ) -> Vec<(MirrorPartitionKey, TopicPartition, DesiredState)> {
        let node = self.host.node_id();
        let mut led = Vec::new();
        for ((kind, topic), configs) in &image.configs {
            if *kind != ConfigResourceType::Topic {
                continue;
            }
            let Some((mirror, desired)) = configs
                .get(MIRROR_NAME_CONFIG)
                .and_then(|v| parse_mirror_name(v))
            else {
                continue;
            };
            let Some(topic_image) = image.topic(topic) else {
                continue;
            };
            for (&partition, info) in &topic_image.partitions {
                if info.leader != node || self.host.leader_replica(topic, partition).is_none() {
                    continue;
                }
                let key = MirrorPartitionKey {
                    mirror: mirror.to_string(),
                    topic_id: topic_image.id,
                    partition,
                };
                led.push((key, (topic.clone(), partition), desired));
            }
        }
        led
    }

    /// Partitions this broker drove but no longer leads: their new leader continues them, so
    /// this broker stops fetching them and forgets their state.
    fn forget_unled(&self, led: &[(MirrorPartitionKey, TopicPartition, DesiredState)]) {
        let led: HashSet<&MirrorPartitionKey> = led.iter().map(|(k, _, _)| k).collect();
        let lost: Vec<(MirrorPartitionKey, String)> = self
            .driven
            .lock()
            .iter()
            .filter(|(k, _)| !led.contains(k))
            .map(|(k, d)| (k.clone(), d.topic.clone()))
            .collect();
        for (key, topic) in lost {
            tracing::info!(mirror = %key.mirror, %topic, partition = key.partition, "no longer leading the mirror partition: its new leader continues it");
            self.driven.lock().remove(&key);
            self.status.lock().remove(&key);
            let tp = (topic, key.partition);
            for task in self.tasks.lock().values() {
                task.fetchers.remove_partition(&tp);
            }
        }
    }

    /// Reads from their coordinators the states of led partitions not driven here yet.
    async fn load_driven(&self, led: &[(MirrorPartitionKey, TopicPartition, DesiredState)]) {
        let mut missing: BTreeMap<(String, String, Uuid), Vec<i32>> = BTreeMap::new();
        {
            let driven = self.driven.lock();
            for (key, tp, _) in led {
                if !driven.contains_key(key) {
                    missing
                        .entry((key.mirror.clone(), tp.0.clone(), key.topic_id))
                        .or_default()
                        .push(key.partition);
                }
            }
        }
        for ((mirror, topic, topic_id), partitions) in missing {
            let stored = self
                .states
                .read(&mirror, &topic, topic_id, &partitions)
                .await;
            for (partition, result) in stored {
                let key = MirrorPartitionKey {
                    mirror: mirror.clone(),
                    topic_id,
                    partition,
                };
                match result {
                    Ok(stored) => {
                        tracing::info!(%mirror, %topic, partition, state = stored.state().name(), "leading a mirror partition");
                        let machine =
                            PartitionMachine::new(stored, self.retry_policy(), jitter_seed(&key));
                        self.driven.lock().insert(
                            key,
                            Driven {
                                topic: topic.clone(),
                                machine,
                            },
                        );
                    }
                    Err(e) => {
                        tracing::debug!(%mirror, %topic, partition, code = e.code(), message = %e, "mirror partition state not readable yet");
                    }
                }
            }
        }
    }

    /// Whether this broker is the mirror's metadata coordinator: the leader of the
    /// `__mirror_state` partition its name hashes to.
    fn is_metadata_coordinator(&self, mirror: &str, image: &MetadataImage) -> bool {
        let p = metadata_coordinator_partition(mirror, self.config.state_topic_partitions);
        image
            .topic(MIRROR_STATE_TOPIC)
            .and_then(|t| t.partitions.get(&p))
            .is_some_and(|info| info.leader == self.host.node_id())
    }

    /// Completes the failover of each of these topics whose every partition is STOPPED at its
    /// coordinator: `M.removed` becomes `M.stopped`, and from then on the topic takes writes.
    /// Returns the topics whose failover is complete.
    pub(super) async fn complete_failovers(&self, mirror: &str, topics: &[String]) -> Vec<String> {
        let mut done = Vec::new();
        for topic in topics {
            let image = self.controller.image();
            let value = image.topic_configs(topic).get(MIRROR_NAME_CONFIG).cloned();
            match value.as_deref().and_then(parse_mirror_name) {
                Some((m, DesiredState::Stopped)) if m == mirror => {}
                _ => continue,
            }
            if value.as_deref().is_some_and(failover_complete) {
                done.push(topic.clone());
                continue;
            }
            let Some(t) = image.topic(topic) else {
                continue;
            };
            let partitions: Vec<i32> = t.partitions.keys().copied().collect();
            let stored = self.states.read(mirror, topic, t.id, &partitions).await;
            let all_stopped = stored.len() == partitions.len()
                && stored.values().all(|r| {
                    r.as_ref()
                        .is_ok_and(|s| s.state() == MirrorPartitionState::Stopped)
                });
            if !all_stopped {
                continue;
            }
            let complete = format!("{mirror}{MIRROR_STOPPED_SUFFIX}");
            let result = self
                .controller
                .update_topic_config(topic, MIRROR_NAME_CONFIG, |cur| {
                    Ok(match cur.and_then(parse_mirror_name) {
                        Some((m, DesiredState::Stopped)) if m == mirror => Some(complete.clone()),
                        _ => cur.map(str::to_string),
                    })
                });
            match result {
                Ok(()) => {
                    tracing::info!(%mirror, %topic, "every partition is STOPPED: the topic is writable");
                    done.push(topic.clone());
                }
                Err(e) => {
                    tracing::warn!(%mirror, %topic, error = ?e, "cannot complete the failover")
                }
            }
        }
        done
    }

    /// Hands a MIRRORING partition to the fetcher of its source leader.
    async fn assign(
        &self,
        rt: &mut MirrorRuntime,
        key: &MirrorPartitionKey,
        tp: &TopicPartition,
        refresh: bool,
    ) -> Outcome {
        let max_age = if refresh {
            Duration::ZERO
        } else {
            METADATA_MAX_AGE
        };
        let metadata = match rt.metadata(&key.mirror, max_age).await {
            Ok(m) => m.clone(),
            Err(e) => return StepError::SourceMetadata(e).into(),
        };
        // A source topic recreated under the same name (another topic id) is not this topic:
        // treat it as the deletion of the mirrored one.
        let source_topic = metadata
            .topics
            .get(&tp.0)
            .filter(|t| t.error_code == 0 && (t.topic_id.is_nil() || t.topic_id == key.topic_id));
        let Some(topic) = source_topic else {
            // The source topic is gone: the spec stops the mirror topic.
            tracing::warn!(mirror = %key.mirror, topic = %tp.0, "source topic deleted or recreated: stopping the mirror topic");
            let stopped = format!("{}{MIRROR_REMOVED_SUFFIX}", key.mirror);
            let _ = self
                .controller
                .update_topic_config(&tp.0, MIRROR_NAME_CONFIG, |_| Ok(Some(stopped.clone())));
            return Outcome::Skipped;
        };
        let Some(p) = topic.partitions.get(&tp.1).copied() else {
            return StepError::MissingOnSource { partition: tp.1 }.into();
        };
        let Some(addr) = metadata.brokers.get(&p.leader).cloned() else {
            return StepError::NoSourceLeader {
                topic: tp.0.clone(),
                partition: tp.1,
            }
            .into();
        };
        let Some(replica) = self.host.leader_replica(&tp.0, tp.1) else {
            return Outcome::Skipped;
        };
        rt.fetchers.remove_partition(tp);
        let connections = rt.settings.fetch_connections;
        let fetcher = rt.fetchers.get_or_spawn(p.leader, tp, connections, || {
            MirrorFetcher::spawn(
                &key.mirror,
                p.leader,
                addr,
                rt.settings.clone(),
                self.host.clone(),
                self.events_tx.clone(),
                self.stats.clone(),
            )
        });
        // Under the guard the coordinator's loop takes to stop or pause a partition: a stop
        // decided meanwhile either is seen here or removes what is added here.
        let _guard = self.assign_guard.lock();
        let still_mirrored = self
            .controller
            .image()
            .topic_configs(&tp.0)
            .get(MIRROR_NAME_CONFIG)
            .and_then(|v| parse_mirror_name(v))
            .is_some_and(|(m, d)| m == key.mirror && d == DesiredState::Mirroring);
        if !still_mirrored || self.state(key) != MirrorPartitionState::Mirroring {
            return Outcome::Skipped;
        }
        fetcher.add(
            tp.clone(),
            PartitionFetchState {
                fetch_offset: replica.log.log_end_offset(),
                source_epoch: p.leader_epoch,
            },
        );
        let retried = self
            .status
            .lock()
            .get_mut(key)
            .is_some_and(|st| std::mem::take(&mut st.retry_pending));
        if retried {
            self.stats.retried(&key.mirror);
        }
        Outcome::Done
    }

    /// The fetching counters of every mirror that exists.
    pub fn counters(&self) -> Vec<(String, MirrorCounters)> {
        let image = self.controller.image();
        let mut all = self.stats.snapshot();
        for (name, _) in &all {
            if !image.mirrors.contains_key(name) {
                self.stats.forget(name);
            }
        }
        all.retain(|(name, _)| image.mirrors.contains_key(name));
        all
    }

    /// The newest record timestamp mirrored into a partition led here, if any was.
    pub fn newest_mirrored_timestamp(
        &self,
        mirror: &str,
        topic: &str,
        partition: i32,
    ) -> Option<i64> {
        let key = self.key_of(mirror, &(topic.to_string(), partition))?;
        self.status.lock().get(&key)?.newest_mirrored_timestamp
    }

    /// Before STOPPED: keep producer ids apart and start an epoch of this cluster's own.
    fn prepare_stop(&self, tp: &TopicPartition) -> Outcome {
        let Some(replica) = self.host.leader_replica(&tp.0, tp.1) else {
            return StepError::not_led(tp).into();
        };
        let last_mirrored_offset = replica.log.log_end_offset();
        if let Some(max) = replica.log.max_producer_id() {
            self.host.reserve_producer_ids_above(max);
        }
        // Writes after the failover start a leader epoch of their own, above every mirrored
        // batch's and every epoch this partition led in before: OffsetForLeaderEpoch then shows
        // where this cluster parts from the source (a KIP-320 client switching clusters past
        // that point sees the divergence), and no epoch stands for two different histories.
        if let Some(latest) = replica.log.latest_epoch() {
            let next = latest.max(replica.leader_epoch) + 1;
            if let Err(e) = self.host.raise_leader_epoch(&tp.0, tp.1, next) {
                return StepError::RaiseEpoch(e).into();
            }
        }
        tracing::info!(topic = %tp.0, partition = tp.1, last_mirrored_offset, "mirror partition stopping at its log end");
        Outcome::Stopped {
            last_mirrored_offset,
        }
    }
}

/// A seed that spreads the retries of many partitions: the key and the clock.
fn jitter_seed(key: &MirrorPartitionKey) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
        .hash(&mut h);
    h.finish()
}

/// Whether a `mirror.name` value says the topic's failover is complete (every partition
/// STOPPED): `M.stopped`.
pub(crate) fn failover_complete(value: &str) -> bool {
    value.ends_with(MIRROR_STOPPED_SUFFIX)
}

/// A mirror's topics that are failing over and not yet complete (`M.removed`).
fn failing_over_topics(image: &MetadataImage, mirror: &str) -> Vec<String> {
    image
        .configs
        .iter()
        .filter(|((kind, _), _)| *kind == ConfigResourceType::Topic)
        .filter_map(|((_, topic), configs)| {
            let value = configs.get(MIRROR_NAME_CONFIG)?;
            match parse_mirror_name(value) {
                Some((m, DesiredState::Stopped)) if m == mirror && !failover_complete(value) => {
                    Some(topic.clone())
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_name_values() {
        assert_eq!(parse_mirror_name(""), None);
        assert_eq!(
            parse_mirror_name("dr"),
            Some(("dr", DesiredState::Mirroring))
        );
        assert_eq!(
            parse_mirror_name("dr.paused"),
            Some(("dr", DesiredState::Paused))
        );
        assert_eq!(
            parse_mirror_name("dr.removed"),
            Some(("dr", DesiredState::Stopped))
        );
        assert_eq!(
            parse_mirror_name("dr.paused.removed"),
            Some(("dr", DesiredState::Stopped))
        );
        // Mirror names may contain dots.
        assert_eq!(
            parse_mirror_name("dr.stopped"),
            Some(("dr", DesiredState::Stopped))
        );
        assert!(failover_complete("dr.stopped"));
        assert!(!failover_complete("dr.removed"));
        assert_eq!(
            parse_mirror_name("eu.west.removed"),
            Some(("eu.west", DesiredState::Stopped))
        );
    }

    #[test]
    fn a_refused_state_names_the_coordinators_error() {
        let e = StepError::Persist(CoordinationError::NotAvailable { partition: 3 });
        assert_eq!(
            e.to_string(),
            "the mirror coordinator refused the state (error 15): \
             __mirror_state partition 3 has no leader"
        );
    }
}
