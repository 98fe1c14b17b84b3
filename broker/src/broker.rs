//! The broker's shared state and its start-up: storage, controller, replica manager.

use std::sync::Arc;

use parking_lot::Mutex;
use tern_controller::{BrokerEndpoint, BrokerRegistration, Controller, ControllerConfig};
use tern_protocol::error::{ApiError, ResponseError};
use tern_storage::{LogConfig, LogManager};

use crate::config::{BrokerConfig, ConfigError};
use crate::group_coordinator::offsets_topic::OFFSETS_TOPIC;
use crate::group_coordinator::GroupCoordinator;
use crate::meta_properties::{load_existing, load_or_format, load_or_format_as};
use crate::replica_manager::ReplicaManager;
use crate::replication::fetcher_manager::ReplicaFetcherManager;
use crate::replication::hw_checkpoint;
use crate::replication::replica_fetcher::FetcherContext;
use crate::start_error::{Result, StartError};
use crate::txn_coordinator::state_log::TXN_STATE_TOPIC;
use crate::txn_coordinator::{ProducerIdSource, TransactionCoordinator};

/// Everything a request handler needs.
pub struct Broker {
    /// Static configuration.
    pub config: BrokerConfig,
    /// Cluster id from meta.properties.
    pub cluster_id: String,
    /// The metadata controller (in-process: the combined broker,controller mode).
    pub controller: Arc<Controller>,
    /// Hosted partitions.
    pub replicas: Arc<ReplicaManager>,
    /// All partition logs.
    pub logs: Arc<LogManager>,
    /// The log cleaner's threads (None with `log.cleaner.enable=false`).
    pub cleaner: Option<Arc<tern_storage::LogCleaner>>,
    /// Incremental fetch sessions.
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// Consumer groups and committed offsets.
    pub groups: Arc<GroupCoordinator>,
    /// Share consumers' records in flight, and their share sessions.
    pub(crate) share: crate::share::ShareManager,
    /// Topic-config defaults from the broker's `log.*` settings.
    pub default_log_config: LogConfig,
    /// Transactional producers' ids, epochs and transactions.
    pub txns: Arc<TransactionCoordinator>,
    /// Cluster mirroring: the mirror coordinator and fetchers.
    pub mirrors: Arc<tern_mirror::MirrorManager>,
    /// This broker's advertised (listener name, host, port), ports filled in after binding.
    endpoints: parking_lot::RwLock<Vec<(String, String, u16)>>,
    /// Random per process start: tells this process apart from another with the same node id.
    pub(crate) incarnation_id: uuid::Uuid,
    /// Followers' fetchers.
    pub fetchers: Arc<ReplicaFetcherManager>,
    /// Counters for `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// How long a node of a larger cluster waits for the quorum to elect an active controller
/// (and write the cluster id) at startup.
const QUORUM_STARTUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A LONG setting from server.properties, or `otherwise`.
fn long_setting(config: &BrokerConfig, key: &str, otherwise: i64) -> i64 {
    config
        .properties
        .get(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(otherwise)
}

/// Starts this node's controller and returns it with the cluster id. A single voter formats
/// its log dirs on first start; a node of a larger cluster takes the id the quorum's first
/// active controller wrote, and refuses to start if its data belongs to another cluster.
pub fn start_controller(config: &BrokerConfig) -> Result<(Arc<Controller>, String)> {
    let controller_config = ControllerConfig {
        num_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        leader_rebalance: config.leader_rebalance.clone(),
        unclean_leader_election: config.unclean_leader_election,
        compaction_lag_defaults: (
            long_setting(config, "log.cleaner.min.compaction.lag.ms", 0),
            long_setting(config, "log.cleaner.max.compaction.lag.ms", i64::MAX),
        ),
    };
    for dir in &config.log_dirs {
        std::fs::create_dir_all(dir)
            .map_err(|e| StartError::io(format!("creating log dir {}", dir.display()), e))?;
    }
    if !config.is_multi_node() {
        let meta = load_or_format(&config.log_dirs, config.node_id)?;
        let controller = tern_controller::start(
            &config.quorum_config(Some(meta.cluster_id.clone())),
            controller_config,
        )
        .map_err(|source| StartError::Controller {
            what: "opening the metadata log",
            source,
        })?;
        check_cluster_id(&controller, &meta.cluster_id)?;
        return Ok((controller, meta.cluster_id));
    }
    let formatted = load_existing(&config.log_dirs, config.node_id, None)?;
    let controller = tern_controller::start(
        &config.quorum_config(formatted.as_ref().map(|m| m.cluster_id.clone())),
        controller_config,
    )
    .map_err(|source| StartError::Controller {
        what: "joining the metadata quorum",
        source,
    })?;
    let deadline = std::time::Instant::now() + QUORUM_STARTUP_TIMEOUT;
    let mut next_note = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let cluster_id = loop {
        if let Some(id) = controller.image().cluster_id.clone() {
            break id;
        }
        if let Some(why) = controller.peer_refusal() {
            return Err(StartError::Refused(format!(
                "the metadata quorum refused this node: {why}"
            )));
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return Err(StartError::Refused(format!(
                "no active controller in {} s: is a majority of controller.quorum.voters up?",
                QUORUM_STARTUP_TIMEOUT.as_secs()
            )));
        }
        if now >= next_note {
            tracing::info!(voters = ?config.quorum_voters, "waiting for the metadata quorum");
            next_note = now + std::time::Duration::from_secs(5);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    if let Some(meta) = &formatted {
        if meta.cluster_id != cluster_id {
            return Err(StartError::Refused(format!(
                "this node's log dirs belong to cluster {}, but the metadata quorum's cluster is \
                 {cluster_id}; refusing to join it",
                meta.cluster_id
            )));
        }
    }
    load_or_format_as(&config.log_dirs, config.node_id, Some(&cluster_id))?;
    Ok((controller, cluster_id))
}

/// Registers this broker. A process with the same node id that died a moment ago still
/// holds its session: like Kafka's broker, retry until that session has expired, then give
/// up (another live process really has the node id).
fn register_at_start(
    controller: &Controller,
    registration: &BrokerRegistration,
    session_timeout: std::time::Duration,
) -> Result<()> {
    let deadline = std::time::Instant::now() + session_timeout + session_timeout / 2;
    loop {
        match controller.register_broker(registration.clone()) {
            Ok(()) => return Ok(()),
            Err(e)
                if e.error == ResponseError::DuplicateBrokerRegistration
                    && std::time::Instant::now() < deadline =>
            {
                tracing::info!(
                    node = registration.broker_id,
                    "node id still registered by an earlier process; retrying until its session expires"
                );
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => return Err(StartError::Refused(format!("registering broker: {e}"))),
        }
    }
}

/// The metadata log must belong to the cluster the log dirs were formatted for.
fn check_cluster_id(controller: &Controller, cluster_id: &str) -> Result<()> {
    match controller.image().cluster_id.as_deref() {
        Some(id) if id != cluster_id => Err(StartError::Refused(format!(
            "the metadata log belongs to cluster {id}, but meta.properties says {cluster_id}"
        ))),
        _ => Ok(()),
    }
}

/// Topic-config defaults from broker properties (`log.retention.ms`, `log.segment.bytes`, ...).
pub(crate) fn default_log_config(config: &BrokerConfig) -> Result<LogConfig> {
    let mut log_config = LogConfig::default();
    for def in tern_controller::topic_configs::TOPIC_CONFIGS {
        let Some(synonym) = def.broker_synonym else {
            continue;
        };
        if let Some(value) = config.properties.get(synonym) {
            log_config
                .set(def.name, value)
                .map_err(|e| StartError::storage(format!("broker config {synonym}={value}"), e))?;
        }
    }
    // Kafka also accepts these coarser retention settings.
    if !config.properties.contains_key("log.retention.ms") {
        let coarse = [
            ("log.retention.minutes", 60_000i64),
            ("log.retention.hours", 3_600_000),
        ];
        for (key, unit) in coarse {
            if let Some(v) = config.properties.get(key) {
                let n: i64 = v
                    .parse()
                    .map_err(|e| ConfigError::Invalid(format!("broker config {key}={v}: {e}")))?;
                log_config
                    .set("retention.ms", &(n * unit).to_string())
                    .map_err(|e| StartError::storage(format!("broker config {key}={v}"), e))?;
                break;
            }
        }
    }
    Ok(log_config)
}

/// The replication factor of an internal topic: `wanted` (the configured one) capped at the
/// live brokers, so that one node needs no configuration.
fn internal_replication_factor(controller: &Controller, wanted: i16) -> i16 {
    let live = controller.image().live_brokers().len().max(1);
    wanted.clamp(1, live.min(i16::MAX as usize) as i16)
}

/// Creates the internal topic `name` with `configs` unless it exists; another node of the
/// cluster may have created it first.
fn create_internal_topic(
    controller: &Controller,
    name: &str,
    num_partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> Result<()> {
    if controller.image().topic(name).is_some() {
        return Ok(());
    }
    let request = tern_controller::CreateTopic {
        name: name.to_string(),
        num_partitions,
        replication_factor,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    match controller.create_topic(&request, false) {
        Err(e) if e.error != ResponseError::TopicAlreadyExists => {
            Err(StartError::Refused(format!("creating {name}: {e}")))
        }
        _ => Ok(()),
    }
}

/// Creates `__consumer_offsets` (compacted, `offsets.topic.num.partitions`) if missing.
fn ensure_offsets_topic(controller: &Controller, config: &BrokerConfig) -> Result<()> {
    create_internal_topic(
        controller,
        OFFSETS_TOPIC,
        config.coordinator.offsets_partitions,
        internal_replication_factor(controller, config.offsets_topic_replication_factor),
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "104857600"),
            ("compression.type", "producer"),
        ],
    )
}

/// Creates `__transaction_state` (compacted, `transaction.state.log.*`) if missing.
fn ensure_txn_state_topic(controller: &Controller, config: &BrokerConfig) -> Result<()> {
    let replication_factor = internal_replication_factor(controller, config.txn.replication_factor);
    let segment_bytes = config.txn.segment_bytes.to_string();
    let min_isr = config.txn.min_isr.clamp(1, replication_factor).to_string();
    create_internal_topic(
        controller,
        TXN_STATE_TOPIC,
        config.txn.num_partitions,
        replication_factor,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", &segment_bytes),
            ("compression.type", "uncompressed"),
            ("min.insync.replicas", &min_isr),
            ("unclean.leader.election.enable", "false"),
        ],
    )
}

/// Creates `__mirror_state` (compacted, `mirror.state.topic.num.partitions`) if missing.
fn ensure_mirror_state_topic(controller: &Controller, config: &BrokerConfig) -> Result<()> {
    create_internal_topic(
        controller,
        tern_mirror::MIRROR_STATE_TOPIC,
        config.mirror.state_topic_partitions,
        internal_replication_factor(controller, config.offsets_topic_replication_factor),
        &[
            ("cleanup.policy", "compact"),
            ("compression.type", "producer"),
            ("retention.ms", "-1"),
        ],
    )
}

/// Waits `interval`, then answers the broker for the next round of a periodic task; `None`
/// once `shutdown` fires (or its sender is gone) or the broker has been dropped.
async fn next_tick(
    broker: &std::sync::Weak<Broker>,
    interval: std::time::Duration,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<Arc<Broker>> {
    tokio::select! {
        _ = tokio::time::sleep(interval) => {}
        _ = shutdown.changed() => return None,
    }
    broker.upgrade()
}

/// A registration of `config`'s broker with `endpoints` (listener, host, port).
fn registration(
    config: &BrokerConfig,
    incarnation_id: uuid::Uuid,
    endpoints: &[(String, String, u16)],
) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: config.node_id,
        incarnation_id,
        endpoints: endpoints
            .iter()
            .map(|(listener, host, port)| BrokerEndpoint {
                listener: listener.clone(),
                host: host.clone(),
                port: *port,
            })
            .collect(),
        rack: config.rack.clone(),
    }
}

impl Broker {
    /// Opens (formatting on first start) storage and metadata, and registers this broker.
    pub fn start(config: BrokerConfig) -> Result<Arc<Broker>> {
        let (controller, cluster_id) = start_controller(&config)?;
        let default_log_config = default_log_config(&config)?;
        let logs = Arc::new(
            LogManager::open_with_threads(
                &config.log_dirs,
                default_log_config.clone(),
                config.recovery_threads_per_data_dir,
            )
            .map_err(|e| StartError::storage("opening partition logs", e))?,
        );
        let cleaner = config
            .log_cleaner
            .clone()
            .map(|c| Arc::new(tern_storage::LogCleaner::start(&logs, c)));
        let incarnation_id = uuid::Uuid::new_v4();
        let config_endpoints: Vec<(String, String, u16)> = config
            .advertised_listeners
            .iter()
            .map(|l| (l.name.clone(), l.host.clone(), l.port))
            .collect();
        register_at_start(
            &controller,
            &registration(&config, incarnation_id, &config_endpoints),
            std::time::Duration::from_millis(config.broker_session_timeout_ms),
        )?;
        let fetchers = Arc::new(ReplicaFetcherManager::new(FetcherContext {
            node_id: config.node_id,
            config: config.replication.clone(),
            controller: controller.clone(),
            listener: config.inter_broker_listener(),
            quotas: Arc::default(),
        }));
        let replicas = Arc::new(ReplicaManager::new(
            config.node_id,
            logs.clone(),
            default_log_config.clone(),
            fetchers.clone(),
        ));
        replicas.set_checkpointed_high_watermarks(hw_checkpoint::load(&config.log_dirs));
        // In a cluster they are created at first use (FindCoordinator, a mirror RPC), once
        // brokers have joined to spread and replicate their partitions (as Kafka does).
        if !config.is_multi_node() {
            ensure_offsets_topic(&controller, &config)?;
            ensure_mirror_state_topic(&controller, &config)?;
        }
        replicas.apply_image(&controller.image());
        let groups = Arc::new(GroupCoordinator::new(
            config.coordinator.clone(),
            replicas.clone(),
        ));
        let images = controller.clone();
        groups.set_image_source(move || images.image());
        groups.load();
        groups.follow_leadership();
        let producer_ids = Arc::new(Mutex::new((0, 0)));
        let txns = Arc::new(TransactionCoordinator::new(
            config.txn.clone(),
            config.node_id,
            config.inter_broker_listener(),
            replicas.clone(),
            groups.clone(),
            ProducerIdSource {
                block: producer_ids.clone(),
                controller: controller.clone(),
            },
        ));
        txns.load();
        txns.follow_leadership();
        let mirrors = tern_mirror::MirrorManager::new(
            Arc::new(crate::mirror_host::BrokerMirrorHost {
                node_id: config.node_id,
                listener: config.inter_broker_listener(),
                replicas: replicas.clone(),
                controller: controller.clone(),
                groups: groups.clone(),
                producer_ids: producer_ids.clone(),
            }),
            controller.clone(),
            config.mirror.clone(),
        );
        mirrors.load();
        let fetch_sessions = crate::fetch_session::FetchSessionCache::new(
            config.fetch_session_cache_slots,
            config.fetch_session_eviction_ms,
        );
        let share = crate::share::ShareManager::new(config.node_id, config.inter_broker_listener());
        Ok(Arc::new(Broker {
            metrics: Arc::default(),
            config,
            cluster_id,
            controller,
            replicas,
            logs,
            cleaner,
            fetch_sessions,
            share,
            groups,
            default_log_config,
            txns,
            mirrors,
            endpoints: parking_lot::RwLock::new(config_endpoints),
            incarnation_id,
            fetchers,
        }))
    }

    /// This broker's registration as it stands (ports filled in once bound).
    pub fn registration(&self) -> BrokerRegistration {
        registration(&self.config, self.incarnation_id, &self.endpoints.read())
    }

    /// Heartbeats to the active controller every `broker.heartbeat.interval.ms` until
    /// `shutdown` fires, registering again when the controller no longer knows this process.
    pub fn spawn_heartbeats(
        self: &Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let broker = Arc::downgrade(self);
        let interval = std::time::Duration::from_millis(self.config.broker_heartbeat_interval_ms);
        tokio::spawn(async move {
            while let Some(b) = next_tick(&broker, interval, &mut shutdown).await {
                let beat = tokio::task::spawn_blocking(move || {
                    let beat = b
                        .controller
                        .broker_heartbeat(b.config.node_id, b.incarnation_id);
                    match beat {
                        Err(e) if e.error == ResponseError::StaleBrokerEpoch => {
                            b.controller.register_broker(b.registration())
                        }
                        other => other,
                    }
                });
                let outcome = tokio::select! {
                    o = beat => o,
                    // Shutting down: the heartbeat in flight does not hold the exit up.
                    _ = shutdown.changed() => return,
                };
                if let Ok(Err(e)) = outcome {
                    tracing::warn!(error = %e, "broker heartbeat failed");
                }
            }
        })
    }

    /// Tells the active controller this broker is going away, so its partitions get other
    /// leaders now rather than after `broker.session.timeout.ms`.
    pub fn controlled_shutdown(&self) {
        if let Err(e) = self
            .controller
            .controlled_shutdown(self.config.node_id, self.incarnation_id)
        {
            tracing::warn!(error = %e, "controlled shutdown: the controller did not answer");
        }
    }

    /// A listener was bound on `port`: an advertised port 0 of that listener becomes it, and
    /// the registration with the controller is brought up to date.
    pub fn set_bound_port(&self, listener: &str, port: u16) -> Result<(), ApiError> {
        let mut endpoints = self.endpoints.write();
        let Some(i) = endpoints.iter().position(|(name, _, _)| name == listener) else {
            return Ok(());
        };
        if endpoints[i].2 != 0 {
            return Ok(());
        }
        endpoints[i].2 = port;
        drop(endpoints);
        self.controller.register_broker(self.registration())
    }

    /// The (host, port) clients on `listener` are told to use for this broker: Kafka answers
    /// Metadata, FindCoordinator and DescribeCluster with the endpoints of the listener the
    /// request came in on, so a SASL_SSL client is never sent to the SSL port.
    pub fn endpoint_for(&self, listener: &str) -> (String, u16) {
        let endpoints = self.endpoints.read();
        let (_, host, port) = endpoints
            .iter()
            .find(|(name, _, _)| name == listener)
            .unwrap_or(&endpoints[0]);
        (host.clone(), *port)
    }

    /// Whether `topic` is read-only in `image` because it is mirrored (Produce answers
    /// READ_ONLY_TOPIC; no transaction may take it in, or its markers would break the mirror's
    /// same offsets).
    pub fn is_mirrored_read_only(
        &self,
        image: &tern_controller::MetadataImage,
        topic: &str,
    ) -> bool {
        let configs = image.topic_configs(topic);
        let mirror_name = configs.get(tern_controller::topic_configs::MIRROR_NAME_CONFIG);
        self.mirrors.is_read_only(mirror_name.map(String::as_str))
    }

    /// The error for a partition this broker does not host: NOT_LEADER_OR_FOLLOWER if it
    /// exists elsewhere in the cluster (clients then refresh their metadata), else
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn unhosted_partition_error(&self, topic: &str, partition: i32) -> ResponseError {
        let image = self.controller.image();
        match image.topic(topic) {
            Some(t) if t.partitions.contains_key(&partition) => ResponseError::NotLeaderOrFollower,
            _ => ResponseError::UnknownTopicOrPartition,
        }
    }

    /// The (host, port) clients on `listener` use for broker `b` (this one's bound ports
    /// included).
    pub fn endpoint_of(&self, b: &tern_controller::BrokerInfo, listener: &str) -> (String, u16) {
        if b.id == self.config.node_id {
            return self.endpoint_for(listener);
        }
        let (host, port) = b.endpoint(listener);
        (host.to_string(), port)
    }

    /// The node id clients are told is the controller: this broker, as KRaft brokers answer
    /// with a live broker rather than the quorum leader. Every broker forwards controller
    /// requests, so an admin client never waits on a controller that has just died (librdkafka
    /// would keep sending to the dead one until its metadata refresh, minutes later); the
    /// quorum's leader is what DescribeQuorum shows.
    pub fn controller_id(&self) -> i32 {
        self.config.node_id
    }

    /// Creates `__consumer_offsets` if it does not exist yet (the first FindCoordinator of a
    /// cluster); true if it exists now.
    pub fn ensure_offsets_topic(&self) -> bool {
        self.ensure_internal_topic(OFFSETS_TOPIC, ensure_offsets_topic)
    }

    /// Creates `__transaction_state` if it does not exist yet (the first FindCoordinator for a
    /// transactional id, as in Kafka); true if it exists now.
    pub fn ensure_txn_state_topic(&self) -> bool {
        self.ensure_internal_topic(TXN_STATE_TOPIC, ensure_txn_state_topic)
    }

    /// Creates internal topic `name` with `create` unless it exists; true if it exists now.
    fn ensure_internal_topic(
        &self,
        name: &str,
        create: fn(&Controller, &BrokerConfig) -> Result<()>,
    ) -> bool {
        if self.controller.image().topic(name).is_some() {
            return true;
        }
        match create(&self.controller, &self.config) {
            Ok(()) => {
                self.replicas.apply_image(&self.controller.image());
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot create {name}");
                false
            }
        }
    }

    /// Creates `__mirror_state` if it does not exist yet (the first mirror RPC of a cluster).
    pub fn ensure_mirror_state_topic(&self) {
        if self
            .controller
            .image()
            .topic(tern_mirror::MIRROR_STATE_TOPIC)
            .is_some()
        {
            return;
        }
        match ensure_mirror_state_topic(&self.controller, &self.config) {
            Ok(()) => self.replicas.apply_image(&self.controller.image()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot create {}", tern_mirror::MIRROR_STATE_TOPIC)
            }
        }
    }

    /// Hands out the next producer id, taking a new block from the controller when needed.
    pub fn next_producer_id(&self) -> Result<i64, ApiError> {
        self.txns.next_producer_id()
    }

    /// Writes every partition's high watermark to the checkpoint.
    pub fn checkpoint_high_watermarks(&self) {
        hw_checkpoint::write(&self.config.log_dirs, &self.replicas.all_partitions());
    }

    /// Checkpoints high watermarks every `replica.high.watermark.checkpoint.interval.ms`
    /// until `shutdown` fires.
    pub fn spawn_high_watermark_checkpoints(
        self: &Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let broker = Arc::downgrade(self);
        let interval =
            std::time::Duration::from_millis(self.config.replication.hw_checkpoint_interval_ms);
        tokio::spawn(async move {
            while let Some(b) = next_tick(&broker, interval, &mut shutdown).await {
                let _ = tokio::task::spawn_blocking(move || b.checkpoint_high_watermarks()).await;
            }
        })
    }

    /// Follows controller images into the replica manager and the listeners' TLS stores until
    /// `shutdown` fires.
    pub fn spawn_metadata_listener(
        &self,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let mut rx = self.controller.subscribe();
        let replicas = self.replicas.clone();
        let tls = crate::security::listener::DynamicTls::of(&self.config);
        let cleaner = self
            .cleaner
            .clone()
            .map(|c| crate::config::cleaner::DynamicCleaner::new(c, &self.config));
        // Settings made dynamically before this start apply now, not at the next change.
        let image = rx.borrow_and_update().clone();
        tls.apply(&image);
        if let Some(c) = &cleaner {
            c.apply(&image);
        }
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = rx.changed() => if changed.is_err() { return },
                    _ = shutdown.changed() => return,
                }
                let image = rx.borrow_and_update().clone();
                tls.apply(&image);
                if let Some(c) = &cleaner {
                    c.apply(&image);
                }
                let replicas = replicas.clone();
                // Log creation and deletion touch the disk: keep them off the reactor.
                let _ = tokio::task::spawn_blocking(move || replicas.apply_image(&image)).await;
            }
        })
    }
}
