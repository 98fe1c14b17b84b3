//! The broker's shared state and its start-up: storage, controller, replica manager.

use std::sync::Arc;

use anyhow::{Context, Result};
use parking_lot::Mutex;
use tern_controller::{Controller, ControllerConfig, RaftMetadataLog};
use tern_protocol::error::ApiError;
use tern_storage::{LogConfig, LogManager};

use crate::config::BrokerConfig;
use crate::group_coordinator::offsets_topic::OFFSETS_TOPIC;
use crate::group_coordinator::GroupCoordinator;
use crate::meta_properties::load_or_format;
use crate::replica_manager::ReplicaManager;

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
    /// Incremental fetch sessions.
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// Consumer groups and committed offsets.
    pub groups: Arc<GroupCoordinator>,
    /// Topic-config defaults from the broker's `log.*` settings.
    pub default_log_config: LogConfig,
    /// Cluster mirroring: the mirror coordinator and fetchers.
    pub mirrors: Arc<tern_mirror::MirrorManager>,
    producer_ids: Arc<Mutex<(i64, i64)>>,
    /// This broker's advertised (listener name, host, port), ports filled in after binding.
    endpoints: parking_lot::RwLock<Vec<(String, String, u16)>>,
}

/// Topic-config defaults from broker properties (`log.retention.ms`, `log.segment.bytes`, ...).
pub fn default_log_config(config: &BrokerConfig) -> Result<LogConfig> {
    let mut log_config = LogConfig::default();
    for def in tern_controller::topic_configs::TOPIC_CONFIGS {
        let Some(synonym) = def.broker_synonym else {
            continue;
        };
        if let Some(value) = config.properties.get(synonym) {
            log_config
                .set(def.name, value)
                .with_context(|| format!("broker config {synonym}={value}"))?;
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
                    .with_context(|| format!("broker config {key}={v}"))?;
                log_config.set("retention.ms", &(n * unit).to_string())?;
                break;
            }
        }
    }
    Ok(log_config)
}

/// Creates `__consumer_offsets` (compacted, `offsets.topic.num.partitions`) if missing.
fn ensure_offsets_topic(controller: &Controller, config: &BrokerConfig) -> Result<()> {
    if controller.image().topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let request = tern_controller::CreateTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions: config.coordinator.offsets_partitions,
        replication_factor: config.offsets_topic_replication_factor,
        configs: vec![
            ("cleanup.policy".into(), "compact".into()),
            ("segment.bytes".into(), "104857600".into()),
            ("compression.type".into(), "producer".into()),
        ],
        ..Default::default()
    };
    controller
        .create_topic(&request, false)
        .map_err(|e| anyhow::anyhow!("creating {OFFSETS_TOPIC}: {e}"))?;
    Ok(())
}

/// Creates `__mirror_state` (compacted, `mirror.state.topic.num.partitions`) if missing.
fn ensure_mirror_state_topic(controller: &Controller, config: &BrokerConfig) -> Result<()> {
    if controller
        .image()
        .topic(tern_mirror::MIRROR_STATE_TOPIC)
        .is_some()
    {
        return Ok(());
    }
    let request = tern_controller::CreateTopic {
        name: tern_mirror::MIRROR_STATE_TOPIC.to_string(),
        num_partitions: config.mirror.state_topic_partitions,
        replication_factor: config.offsets_topic_replication_factor,
        configs: vec![
            ("cleanup.policy".into(), "compact".into()),
            ("compression.type".into(), "producer".into()),
            ("retention.ms".into(), "-1".into()),
        ],
        ..Default::default()
    };
    controller
        .create_topic(&request, false)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", tern_mirror::MIRROR_STATE_TOPIC))?;
    Ok(())
}

impl Broker {
    /// Opens (formatting on first start) storage and metadata, and registers this broker.
    pub fn start(config: BrokerConfig) -> Result<Arc<Broker>> {
        for dir in &config.log_dirs {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating log dir {}", dir.display()))?;
        }
        let meta = load_or_format(&config.log_dirs, config.node_id)?;
        let default_log_config = default_log_config(&config)?;
        let logs = Arc::new(
            LogManager::open(&config.log_dirs, default_log_config.clone())
                .context("opening partition logs")?,
        );
        let metadata_log =
            RaftMetadataLog::open_single_voter(&config.metadata_dir(), config.node_id)
                .context("opening the metadata log")?;
        let controller = Arc::new(Controller::open(
            Box::new(metadata_log),
            ControllerConfig {
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
            },
        )?);
        let advertised = config.advertised().clone();
        controller
            .register_broker(
                config.node_id,
                &advertised.host,
                advertised.port,
                config.rack.clone(),
            )
            .map_err(|e| anyhow::anyhow!("registering broker: {e}"))?;
        let replicas = Arc::new(ReplicaManager::new(
            config.node_id,
            logs.clone(),
            default_log_config.clone(),
        ));
        ensure_offsets_topic(&controller, &config)?;
        ensure_mirror_state_topic(&controller, &config)?;
        replicas.apply_image(&controller.image());
        let groups = Arc::new(GroupCoordinator::new(
            config.coordinator.clone(),
            replicas.clone(),
        ));
        groups.load();
        let producer_ids = Arc::new(Mutex::new((0, 0)));
        let mirrors = tern_mirror::MirrorManager::new(
            Arc::new(crate::mirror_host::BrokerMirrorHost {
                node_id: config.node_id,
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
        let config_endpoints = config
            .advertised_listeners
            .iter()
            .map(|l| (l.name.clone(), l.host.clone(), l.port))
            .collect();
        Ok(Arc::new(Broker {
            config,
            cluster_id: meta.cluster_id,
            controller,
            replicas,
            logs,
            fetch_sessions,
            groups,
            default_log_config,
            mirrors,
            producer_ids,
            endpoints: parking_lot::RwLock::new(config_endpoints),
        }))
    }

    /// A listener was bound on `port`: an advertised port 0 of that listener becomes it, and the
    /// first listener's is registered with the controller.
    pub fn set_bound_port(&self, listener: &str, port: u16) -> Result<(), ApiError> {
        let mut endpoints = self.endpoints.write();
        let Some(i) = endpoints.iter().position(|(name, _, _)| name == listener) else {
            return Ok(());
        };
        if endpoints[i].2 != 0 {
            return Ok(());
        }
        endpoints[i].2 = port;
        if i != 0 {
            return Ok(());
        }
        let host = endpoints[0].1.clone();
        drop(endpoints);
        self.controller
            .register_broker(self.config.node_id, &host, port, self.config.rack.clone())
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

    /// Hands out the next producer id, taking a new block from the controller when needed.
    pub fn next_producer_id(&self) -> Result<i64, ApiError> {
        let mut ids = self.producer_ids.lock();
        if ids.0 >= ids.1 {
            let (first, count) = self.controller.allocate_producer_ids()?;
            *ids = (first, first + count);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    /// Follows controller images into the replica manager until `shutdown` fires.
    pub fn spawn_metadata_listener(
        &self,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let mut rx = self.controller.subscribe();
        let replicas = self.replicas.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = rx.changed() => if changed.is_err() { return },
                    _ = shutdown.changed() => return,
                }
                let image = rx.borrow_and_update().clone();
                let replicas = replicas.clone();
                // Log creation and deletion touch the disk: keep them off the reactor.
                let _ = tokio::task::spawn_blocking(move || replicas.apply_image(&image)).await;
            }
        })
    }
}
