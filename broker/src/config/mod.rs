//! Broker configuration: Apache Kafka's names and defaults, read from a server.properties file
//! with `--override key=value` on top.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::security::listener::ListenerSecurity;

pub(crate) mod catalog;
pub(crate) mod cleaner;
pub(crate) mod dynamic;
mod error;
pub(crate) mod group_configs;
pub(crate) mod policy;

pub use error::ConfigError;
use error::{invalid, refuse};

/// Results of reading configuration.
pub(crate) type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// One `NAME://host:port` listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Listener name (PLAINTEXT, ...).
    pub name: String,
    /// Host or IP; empty binds every interface.
    pub host: String,
    /// TCP port (0 picks a free one).
    pub port: u16,
}

impl Listener {
    /// Address to bind, `host:port`, with IPv6 literals bracketed.
    pub fn bind_addr(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        if host.contains(':') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Parses a comma-separated listener list such as `PLAINTEXT://127.0.0.1:9092,EXTERNAL://[::1]:9093`.
pub(crate) fn parse_listeners(value: &str) -> Result<Vec<Listener>> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| invalid!("listener '{item}' is not NAME://host:port"))?;
        let (host, port) = if let Some(stripped) = rest.strip_prefix('[') {
            let (h, p) = stripped
                .split_once("]:")
                .ok_or_else(|| invalid!("listener '{item}': bad IPv6 literal"))?;
            (h.to_string(), p)
        } else {
            let (h, p) = rest
                .rsplit_once(':')
                .ok_or_else(|| invalid!("listener '{item}' has no port"))?;
            (h.to_string(), p)
        };
        let port = port
            .parse::<u16>()
            .map_err(|e| invalid!("listener '{item}': bad port: {e}"))?;
        out.push(Listener {
            name: name.to_ascii_uppercase(),
            host,
            port,
        });
    }
    if out.is_empty() {
        refuse!("no listeners in '{value}'");
    }
    Ok(out)
}

/// `http.listeners`: one `http://host:port` (default `http://127.0.0.1:9644`), or empty for none.
fn parse_http_listener(value: Option<&str>) -> Result<Option<(String, bool)>> {
    let Some(value) = value else {
        return Ok(Some(("127.0.0.1:9644".to_string(), false)));
    };
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let addr = value.strip_prefix("http://").ok_or_else(|| {
        invalid!("http.listeners: {value} is not http://host:port (https is not supported)")
    })?;
    match addr.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() && !addr.contains(',') => {
            Ok(Some((addr.to_string(), true)))
        }
        _ => refuse!("http.listeners: {value} is not one http://host:port"),
    }
}

/// `group.consumer.assignors`: Kafka's short or class names, the first the default; an assignor
/// Tern does not have is a startup error, as a class Kafka cannot load is.
/// `group.consumer.migration.policy`: Kafka's four values, in any case.
fn migration_policy(
    value: Option<&str>,
) -> Result<crate::group_coordinator::group::MigrationPolicy> {
    use crate::group_coordinator::group::MigrationPolicy;
    let value = value.unwrap_or("bidirectional");
    Ok(match value.trim().to_ascii_lowercase().as_str() {
        "bidirectional" => MigrationPolicy::Bidirectional,
        "upgrade" => MigrationPolicy::Upgrade,
        "downgrade" => MigrationPolicy::Downgrade,
        "disabled" => MigrationPolicy::Disabled,
        _ => refuse!(
            "Invalid value {value} for configuration group.consumer.migration.policy: String \
             must be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"
        ),
    })
}

fn consumer_assignors(value: Option<&str>) -> Result<Vec<String>> {
    let value = value.unwrap_or("uniform,range");
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let short = crate::group_coordinator::assignor::short_name(name).ok_or_else(|| {
            invalid!(
                "group.consumer.assignors: {name} is not an assignor Tern has (it has {})",
                crate::group_coordinator::assignor::ASSIGNORS.join(", ")
            )
        })?;
        out.push(short.to_string());
    }
    if out.is_empty() {
        refuse!("group.consumer.assignors is empty");
    }
    Ok(out)
}

/// Reads `key=value` lines; `#` and `!` start comments.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line.find(['=', ':']);
        let (k, v) = match split {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, ""),
        };
        map.insert(k.trim().to_string(), v.trim().to_string());
    }
    map
}

/// The broker's settings.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `node.id`.
    pub node_id: i32,
    /// `process.roles`.
    pub process_roles: Vec<String>,
    /// `listeners` that serve clients (controller-only listeners are left out).
    pub listeners: Vec<Listener>,
    /// The security of each of `listeners`, in the same order.
    pub listener_security: Vec<ListenerSecurity>,
    /// `advertised.listeners`, defaulting to `listeners`.
    pub advertised_listeners: Vec<Listener>,
    /// `log.dirs` (or `log.dir`).
    pub log_dirs: Vec<PathBuf>,
    /// `num.recovery.threads.per.data.dir`: threads per log dir that open logs at start and
    /// close them at shutdown.
    pub recovery_threads_per_data_dir: usize,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `socket.request.max.bytes`.
    pub socket_request_max_bytes: usize,
    /// `queued.max.requests`: requests buffered per connection.
    pub queued_max_requests: usize,
    /// `max.connections`.
    pub max_connections: usize,
    /// `connections.max.idle.ms`: a connection with no request read and no response written for
    /// this long is closed (a half-sent frame counts as idle).
    pub connections_max_idle_ms: u64,
    /// `http.listeners` (`/metrics`, `/health`): the address, and whether it was configured (a
    /// default that cannot be bound is only a warning); None when set empty.
    pub http_listener: Option<(String, bool)>,
    /// `log.retention.check.interval.ms`.
    pub log_retention_check_interval_ms: u64,
    /// Group coordinator settings (`group.*`, `offsets.*`).
    pub coordinator: crate::group_coordinator::CoordinatorConfig,
    /// `offsets.topic.replication.factor` (capped at the live brokers when the topic is made).
    pub offsets_topic_replication_factor: i16,
    /// Transaction coordinator settings (`transaction.*`, `transactional.id.*`).
    pub txn: crate::txn_coordinator::TxnConfig,
    /// Followers, ISR and the inter-broker listener (`replica.*`).
    pub replication: ReplicationConfig,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// `log.cleaner.*`; None with `log.cleaner.enable=false` (nothing is compacted).
    pub log_cleaner: Option<tern_storage::CleanerConfig>,
    /// `auto.leader.rebalance.enable`, `leader.imbalance.*`.
    pub leader_rebalance: tern_controller::LeaderRebalance,
    /// `max.incremental.fetch.session.cache.slots`.
    pub fetch_session_cache_slots: usize,
    /// `min.incremental.fetch.session.eviction.ms` (Kafka's internal default).
    pub fetch_session_eviction_ms: i64,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `controller.quorum.voters` as (node id, host:port); empty: this node is the only voter.
    pub quorum_voters: Vec<(i32, String)>,
    /// This node's controller listener (the first of `controller.listener.names` in `listeners`).
    pub controller_listener: Option<Listener>,
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms`.
    pub broker_heartbeat_interval_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` and
    /// `metadata.log.max.snapshot.interval.ms`.
    pub snapshots: tern_controller::SnapshotPolicy,
    /// Cluster mirroring (`mirror.state.topic.num.partitions`, `mirror.failed.retry.*`, ...).
    pub mirror: tern_mirror::BrokerMirrorConfig,
    /// The ACL authorizer (`authorizer.class.name`), or None: every request is allowed.
    pub authorizer: Option<crate::security::authorizer::Authorizer>,
    /// Every property given, for DescribeConfigs and topic-config defaults.
    pub properties: BTreeMap<String, String>,
}

const CONTROLLER_LISTENER: &str = "CONTROLLER";

impl BrokerConfig {
    /// Builds the config from a properties file (optional) and overrides, with Kafka's defaults.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self> {
        let mut props = match file {
            Some(path) => parse_properties(&std::fs::read_to_string(path).map_err(|source| {
                ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            })?),
            None => BTreeMap::new(),
        };
        for o in overrides {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| invalid!("--override '{o}' is not key=value"))?;
            props.insert(k.trim().to_string(), v.trim().to_string());
        }
        Self::from_properties(props)
    }

    /// Builds the config from a property map.
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<Self> {
        let get = |k: &str| props.get(k).map(String::as_str);
        fn num<T: std::str::FromStr>(props: &BTreeMap<String, String>, k: &str, d: T) -> Result<T> {
            match props.get(k) {
                Some(v) => v
                    .parse::<T>()
                    .map_err(|_| invalid!("config {k}={v} is not a valid number")),
                None => Ok(d),
            }
        }
        let controller_names: Vec<String> = get("controller.listener.names")
            .unwrap_or(CONTROLLER_LISTENER)
            .split(',')
            .map(|s| s.trim().to_ascii_uppercase())
            .collect();
        let all_listeners =
            parse_listeners(get("listeners").unwrap_or("PLAINTEXT://127.0.0.1:9092"))?;
        let all_advertised = match get("advertised.listeners") {
            Some(v) => parse_listeners(v)?,
            None => all_listeners.clone(),
        };
        let node_id = num(&props, "node.id", num(&props, "broker.id", 1)?)?;
        let refused = policy::refused_settings(policy::StartSettings {
            props: &props,
            node_id,
            listeners: &[
                ("listeners", &all_listeners),
                ("advertised.listeners", &all_advertised),
            ],
            controller_names: &controller_names,
        });
        let mut refused = refused;
        for a in &all_advertised {
            if !all_listeners.iter().any(|l| l.name == a.name) {
                refused.push(format!(
                    "advertised.listeners: listener name {} is not one of the names in listeners",
                    a.name
                ));
            }
        }
        let mut listener_security = Vec::new();
        for l in all_listeners
            .iter()
            .filter(|l| !controller_names.contains(&l.name))
        {
            let Some(protocol) = policy::listener_protocol(&props, &l.name, &controller_names)
            else {
                continue; // already refused above
            };
            match ListenerSecurity::build(&props, &l.name, &protocol) {
                Ok(s) => listener_security.push(s),
                Err(e) => refused.push(format!("listener {}://{}:{}: {e}", l.name, l.host, l.port)),
            }
        }
        if !refused.is_empty() {
            refuse!(
                "refusing to start with settings Tern does not implement:\n  {}",
                refused.join("\n  ")
            );
        }
        let client_only = |list: Vec<Listener>| -> Vec<Listener> {
            list.into_iter()
                .filter(|l| !controller_names.contains(&l.name))
                .collect()
        };
        let process_roles: Vec<String> = get("process.roles")
            .unwrap_or("broker,controller")
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        let is_broker = process_roles.iter().any(|r| r == "broker");
        let controller_listener = controller_names
            .iter()
            .find_map(|name| all_listeners.iter().find(|l| l.name == *name))
            .cloned();
        let listeners = client_only(all_listeners);
        if listeners.is_empty() && is_broker {
            refuse!("no client listener in 'listeners'");
        }
        let advertised_listeners = client_only(all_advertised);
        if advertised_listeners.is_empty() && is_broker {
            refuse!("no client listener in 'advertised.listeners'");
        }
        let quorum_voters = match get("controller.quorum.voters").filter(|v| !v.trim().is_empty()) {
            Some(v) => policy::parse_voters(v).map_err(ConfigError::Invalid)?,
            None => Vec::new(),
        };
        let log_dirs: Vec<PathBuf> = get("log.dirs")
            .or(get("log.dir"))
            .unwrap_or("./data")
            .split(',')
            .map(|s| PathBuf::from(s.trim()))
            .collect();
        let bool_of = |k: &str, d: bool| -> Result<bool> {
            match get(k) {
                None => Ok(d),
                Some(v) => v
                    .parse::<bool>()
                    .map_err(|_| invalid!("config {k}={v} is not true/false")),
            }
        };
        Ok(BrokerConfig {
            node_id,
            process_roles,
            listeners,
            listener_security,
            advertised_listeners,
            log_dirs,
            recovery_threads_per_data_dir: num(
                &props,
                "num.recovery.threads.per.data.dir",
                2usize,
            )?
            .max(1),
            num_partitions: num(&props, "num.partitions", 1)?,
            default_replication_factor: num(&props, "default.replication.factor", 1)?,
            auto_create_topics_enable: bool_of("auto.create.topics.enable", true)?,
            socket_request_max_bytes: num(&props, "socket.request.max.bytes", 104_857_600)?,
            queued_max_requests: num(&props, "queued.max.requests", 500)?,
            max_connections: num(&props, "max.connections", 10_000)?,
            connections_max_idle_ms: num(&props, "connections.max.idle.ms", 600_000)?,
            http_listener: parse_http_listener(get("http.listeners"))?,
            log_retention_check_interval_ms: num(
                &props,
                "log.retention.check.interval.ms",
                300_000,
            )?,
            coordinator: crate::group_coordinator::CoordinatorConfig {
                group: crate::group_coordinator::group::GroupConfig {
                    min_session_timeout_ms: num(&props, "group.min.session.timeout.ms", 6_000)?,
                    max_session_timeout_ms: num(&props, "group.max.session.timeout.ms", 1_800_000)?,
                    initial_rebalance_delay_ms: num(
                        &props,
                        "group.initial.rebalance.delay.ms",
                        3_000,
                    )?,
                    max_size: num(&props, "group.max.size", 2_147_483_647)?,
                    migration: migration_policy(get("group.consumer.migration.policy"))?,
                },
                consumer: crate::group_coordinator::consumer_group::ConsumerGroupConfig {
                    session_timeout_ms: num(&props, "group.consumer.session.timeout.ms", 45_000)?,
                    heartbeat_interval_ms: num(
                        &props,
                        "group.consumer.heartbeat.interval.ms",
                        5_000,
                    )?,
                    assignors: consumer_assignors(get("group.consumer.assignors"))?,
                    max_size: num(&props, "group.consumer.max.size", 2_147_483_647)?,
                },
                share: crate::group_coordinator::share_group::ShareGroupConfig {
                    session_timeout_ms: num(&props, "group.share.session.timeout.ms", 45_000)?,
                    heartbeat_interval_ms: num(&props, "group.share.heartbeat.interval.ms", 5_000)?,
                    max_size: num(&props, "group.share.max.size", 200)?,
                    limits: crate::share::partition::ShareLimits {
                        lock_duration_ms: num(
                            &props,
                            "group.share.record.lock.duration.ms",
                            30_000,
                        )?,
                        delivery_count_limit: num(&props, "group.share.delivery.count.limit", 5)?,
                        max_in_flight: num(
                            &props,
                            "group.share.partition.max.record.locks",
                            2_000,
                        )?,
                    },
                    // Group configs only (share.auto.offset.reset, share.isolation.level,
                    // share.renew.acknowledge.enable).
                    auto_offset_reset: Default::default(),
                    read_committed: false,
                    renew_enabled: true,
                },
                offsets_partitions: num(&props, "offsets.topic.num.partitions", 50)?,
                offset_metadata_max_bytes: num(&props, "offset.metadata.max.bytes", 4096)?,
                offsets_retention_ms: num::<i64>(&props, "offsets.retention.minutes", 10_080)?
                    * 60_000,
            },
            offsets_topic_replication_factor: num(&props, "offsets.topic.replication.factor", 3)?,
            txn: crate::txn_coordinator::TxnConfig {
                num_partitions: num(&props, "transaction.state.log.num.partitions", 50)?,
                replication_factor: num(&props, "transaction.state.log.replication.factor", 3)?,
                min_isr: num(&props, "transaction.state.log.min.isr", 2)?,
                segment_bytes: num(&props, "transaction.state.log.segment.bytes", 104_857_600)?,
                max_timeout_ms: num(&props, "transaction.max.timeout.ms", 900_000)?,
                id_expiration_ms: num(&props, "transactional.id.expiration.ms", 604_800_000)?,
                abort_interval_ms: num(
                    &props,
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    10_000,
                )?,
                remove_expired_interval_ms: num(
                    &props,
                    "transaction.remove.expired.transaction.cleanup.interval.ms",
                    3_600_000,
                )?,
            },
            unclean_leader_election: bool_of("unclean.leader.election.enable", false)?,
            log_cleaner: if bool_of("log.cleaner.enable", true)? {
                Some(cleaner::cleaner_config(&props).map_err(|e| invalid!("{e}"))?)
            } else {
                None
            },
            leader_rebalance: tern_controller::LeaderRebalance {
                enabled: bool_of("auto.leader.rebalance.enable", true)?,
                check_interval: std::time::Duration::from_secs(num(
                    &props,
                    "leader.imbalance.check.interval.seconds",
                    300,
                )?),
                imbalance_percentage: num(&props, "leader.imbalance.per.broker.percentage", 10)?,
            },
            replication: ReplicationConfig {
                lag_time_max_ms: num(&props, "replica.lag.time.max.ms", 30_000)?,
                fetch_wait_max_ms: num(&props, "replica.fetch.wait.max.ms", 500)?,
                fetch_min_bytes: num(&props, "replica.fetch.min.bytes", 1)?,
                fetch_max_bytes: num(&props, "replica.fetch.max.bytes", 1_048_576)?,
                fetch_response_max_bytes: num(
                    &props,
                    "replica.fetch.response.max.bytes",
                    10_485_760,
                )?,
                fetch_backoff_ms: num(&props, "replica.fetch.backoff.ms", 1_000)?,
                num_fetchers: num(&props, "num.replica.fetchers", 1usize)?.max(1),
                inter_broker_listener: get("inter.broker.listener.name")
                    .map(|n| n.trim().to_ascii_uppercase()),
                hw_checkpoint_interval_ms: num(
                    &props,
                    "replica.high.watermark.checkpoint.interval.ms",
                    5_000u64,
                )?
                .max(1),
                leader_throttled_rate: num(&props, "leader.replication.throttled.rate", i64::MAX)?,
                follower_throttled_rate: num(
                    &props,
                    "follower.replication.throttled.rate",
                    i64::MAX,
                )?,
            },
            fetch_session_cache_slots: num(
                &props,
                "max.incremental.fetch.session.cache.slots",
                1000,
            )?,
            fetch_session_eviction_ms: num(
                &props,
                "min.incremental.fetch.session.eviction.ms",
                120_000,
            )?,
            rack: get("broker.rack").map(str::to_string),
            quorum_voters,
            controller_listener,
            broker_session_timeout_ms: num(&props, "broker.session.timeout.ms", 9_000)?,
            broker_heartbeat_interval_ms: num(&props, "broker.heartbeat.interval.ms", 2_000)?,
            snapshots: tern_controller::SnapshotPolicy {
                max_bytes_between: num(
                    &props,
                    "metadata.log.max.record.bytes.between.snapshots",
                    20_971_520,
                )?,
                max_interval: std::time::Duration::from_millis(num(
                    &props,
                    "metadata.log.max.snapshot.interval.ms",
                    3_600_000,
                )?),
            },
            mirror: tern_mirror::BrokerMirrorConfig {
                state_topic_partitions: num(&props, "mirror.state.topic.num.partitions", 50)?,
                metadata_refresh_interval: std::time::Duration::from_millis(num(
                    &props,
                    "mirror.metadata.refresh.interval.ms",
                    30_000,
                )?),
                failed_retry_initial_backoff: std::time::Duration::from_millis(num(
                    &props,
                    "mirror.failed.retry.initial.backoff.ms",
                    1_000,
                )?),
                failed_retry_max_backoff: std::time::Duration::from_millis(num(
                    &props,
                    "mirror.failed.retry.max.backoff.ms",
                    300_000,
                )?),
                failed_retry_max_attempts: num(&props, "mirror.failed.retry.max.attempts", 100)?,
            },
            // Problems were refused above, so this only builds the authorizer.
            authorizer: crate::security::authorizer::Authorizer::from_properties(&props)
                .map_err(|problems| ConfigError::Invalid(problems.join("; ")))?,
            properties: props,
        })
    }

    /// Kafka settings given that Tern does not read, to be logged once as ignored.
    pub fn ignored_settings(&self) -> Vec<String> {
        policy::ignored_settings(&self.properties)
    }

    /// Whether this node serves clients (`process.roles` includes `broker`).
    pub fn is_broker(&self) -> bool {
        self.process_roles.iter().any(|r| r == "broker")
    }

    /// Whether this node votes in the metadata quorum (`process.roles` includes `controller`).
    pub fn is_controller(&self) -> bool {
        self.process_roles.iter().any(|r| r == "controller")
    }

    /// How this node takes part in the metadata quorum.
    pub fn quorum_config(&self, cluster_id: Option<String>) -> tern_controller::QuorumConfig {
        tern_controller::QuorumConfig {
            node_id: self.node_id,
            voters: self.quorum_voters.clone(),
            is_voter: self.is_controller(),
            metadata_dir: self.metadata_dir(),
            // Only a configured quorum opens the port: two single nodes on one machine with
            // Kafka's sample settings must not fight over it.
            listener: if self.quorum_voters.is_empty() {
                None
            } else {
                self.controller_listener.as_ref().map(Listener::bind_addr)
            },
            cluster_id,
            session_timeout: std::time::Duration::from_millis(self.broker_session_timeout_ms),
            snapshots: self.snapshots,
        }
    }

    /// Whether other nodes share the metadata quorum (voters besides this node).
    pub fn is_multi_node(&self) -> bool {
        self.quorum_voters.iter().any(|(id, _)| *id != self.node_id) || !self.is_controller()
    }

    /// The listener other brokers' replica fetchers connect to: `inter.broker.listener.name`,
    /// else the first listener.
    pub fn inter_broker_listener(&self) -> String {
        self.replication
            .inter_broker_listener
            .clone()
            .unwrap_or_else(|| self.advertised().name.clone())
    }

    /// The advertised listener clients should use (the first).
    pub fn advertised(&self) -> &Listener {
        &self.advertised_listeners[0]
    }

    /// Where the controller keeps the metadata log.
    pub fn metadata_dir(&self) -> PathBuf {
        match self.properties.get("metadata.log.dir") {
            Some(d) => PathBuf::from(d),
            // No "-<n>" suffix, so the partition-log scan does not take it for a topic.
            None => self.log_dirs[0].join("__cluster_metadata"),
        }
    }
}

/// How this broker replicates: Kafka's `replica.*` settings.
#[derive(Debug, Clone)]
pub struct ReplicationConfig {
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`.
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `replica.fetch.max.bytes` (per partition).
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms`.
    pub fetch_backoff_ms: u64,
    /// `num.replica.fetchers` per source broker.
    pub num_fetchers: usize,
    /// `inter.broker.listener.name`, if set (else the first listener).
    pub inter_broker_listener: Option<String>,
    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub hw_checkpoint_interval_ms: u64,
    /// `leader.replication.throttled.rate` (bytes per second).
    pub leader_throttled_rate: i64,
    /// `follower.replication.throttled.rate` (bytes per second).
    pub follower_throttled_rate: i64,
}

/// Properties from pairs, for unit tests of the settings readers.
#[cfg(test)]
pub(crate) fn test_props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_serve_loopback_9092_from_data() {
        let c = BrokerConfig::from_properties(BTreeMap::new()).unwrap();
        assert_eq!(c.listeners[0].bind_addr(), "127.0.0.1:9092");
        assert_eq!(c.log_dirs, vec![PathBuf::from("./data")]);
        assert_eq!(c.node_id, 1);
        assert!(c.auto_create_topics_enable);
    }

    #[test]
    fn listeners_parse_ipv6_and_skip_controller() {
        let l = parse_listeners("PLAINTEXT://[::1]:9093,CONTROLLER://:9094").unwrap();
        assert_eq!(l[0].bind_addr(), "[::1]:9093");
        let mut p = BTreeMap::new();
        p.insert(
            "listeners".to_string(),
            "PLAINTEXT://[::1]:9093,CONTROLLER://:9094".to_string(),
        );
        let c = BrokerConfig::from_properties(p).unwrap();
        assert_eq!(c.listeners.len(), 1);
        assert!(parse_listeners("nonsense").is_err());
        assert!(parse_listeners("PLAINTEXT://host:notaport").is_err());
    }

    #[test]
    fn properties_and_overrides() {
        let p = parse_properties("# c\nnode.id=3\nlog.dirs = /tmp/x \n\n");
        assert_eq!(p["node.id"], "3");
        assert_eq!(p["log.dirs"], "/tmp/x");
        let c = BrokerConfig::load(None, &["num.partitions=4".into()]).unwrap();
        assert_eq!(c.num_partitions, 4);
        assert!(BrokerConfig::load(None, &["num.partitions=four".into()]).is_err());
    }
}
