//! Mirror configs: the per-mirror settings given to CreateClusterMirror (validated here, stored
//! in the controller's metadata) and the broker-level `mirror.*` settings.

use crate::acl_rules::AclRules;
use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;
use tern_protocol::error::{ApiError, ResponseError};

/// Why a mirror config was refused (reported as INVALID_CONFIG).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidMirrorConfig(pub String);

impl InvalidMirrorConfig {
    /// The Kafka error a mirror RPC answers with: INVALID_CONFIG.
    pub fn response_error(&self) -> ResponseError {
        ResponseError::InvalidConfig
    }
}

impl From<InvalidMirrorConfig> for ApiError {
    fn from(e: InvalidMirrorConfig) -> Self {
        ApiError::new(e.response_error(), e.0)
    }
}

/// A pattern of a request's list (StartMirrorTopics, StopMirrorTopics, the CLI's topic
/// patterns) that is not a valid regex.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Invalid regex {pattern}: {error}")]
pub struct InvalidPattern {
    /// The pattern as given.
    pub pattern: String,
    /// Why it does not compile (its text is part of this error's message).
    pub error: regex::Error,
}

impl InvalidPattern {
    /// The Kafka error a mirror RPC answers with: INVALID_REQUEST.
    pub fn response_error(&self) -> ResponseError {
        ResponseError::InvalidRequest
    }
}

impl From<InvalidPattern> for ApiError {
    fn from(e: InvalidPattern) -> Self {
        ApiError::new(e.response_error(), e.to_string())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    /// A non-negative integer.
    Int,
    /// Comma-separated regexes.
    Regexes,
    /// Comma-separated strings.
    List,
}

/// The per-mirror keys Tern knows, with their types and defaults.
const MIRROR_KEYS: &[(&str, Kind, &str)] = &[
    ("bootstrap.servers", Kind::List, ""),
    ("security.protocol", Kind::Str, "PLAINTEXT"),
    ("mirror.source.cluster.id", Kind::Str, ""),
    ("request.timeout.ms", Kind::Int, "30000"),
    ("socket.connection.setup.timeout.ms", Kind::Int, "10000"),
    ("socket.connection.setup.timeout.max.ms", Kind::Int, "30000"),
    ("connections.max.idle.ms", Kind::Int, "600000"),
    ("mirror.fetch.wait.max.ms", Kind::Int, "1000"),
    ("mirror.fetch.backoff.ms", Kind::Int, "1000"),
    ("mirror.fetch.min.bytes", Kind::Int, "1"),
    ("mirror.fetch.response.max.bytes", Kind::Int, "10485760"),
    ("mirror.fetch.max.bytes", Kind::Int, "1048576"),
    ("mirror.fetch.rate.max.bytes", Kind::Int, "0"),
    ("mirror.fetch.connections", Kind::Int, "1"),
    ("mirror.socket.timeout.ms", Kind::Int, "30000"),
    ("mirror.socket.receive.buffer.bytes", Kind::Int, "65536"),
    (
        "mirror.topic.properties.exclude",
        Kind::List,
        "follower.replication.throttled.replicas,leader.replication.throttled.replicas,message.timestamp.difference.max.ms,log.message.timestamp.before.max.ms,log.message.timestamp.after.max.ms,message.timestamp.type,unclean.leader.election.enable,min.insync.replicas",
    ),
    ("mirror.topics.include", Kind::Regexes, ""),
    ("mirror.topics.exclude", Kind::Regexes, "__.*"),
    ("mirror.groups.include", Kind::Regexes, ".*"),
    ("mirror.groups.exclude", Kind::Regexes, ""),
    ("mirror.acls.include", Kind::Str, "*"),
    ("mirror.acls.exclude", Kind::Str, ""),
    ("sasl.mechanism", Kind::Str, "PLAIN"),
];

/// Whether a key holds a secret that is never returned to clients.
pub(crate) fn is_secret(key: &str) -> bool {
    key == "sasl.jaas.config"
        || key.contains("password")
        || key == "ssl.keystore.key"
        || key == "ssl.keystore.certificate.chain"
        || key.starts_with("sasl.") && key.contains("secret")
}

/// Checks a CreateClusterMirror config and fills nothing in; returns the configs to store.
pub(crate) fn validate_mirror_configs(
    configs: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, InvalidMirrorConfig> {
    let mut out = BTreeMap::new();
    for (key, value) in configs {
        let Some(value) = value else {
            return Err(InvalidMirrorConfig(format!(
                "Mirror config {key} has a null value"
            )));
        };
        let known = MIRROR_KEYS.iter().find(|(k, _, _)| k == key);
        match known {
            Some((_, kind, _)) => {
                check_value(key, *kind, value)?;
                check_range(key, value)?;
            }
            None if key.starts_with("sasl.") || key.starts_with("ssl.") => {}
            None => return Err(InvalidMirrorConfig(format!("Unknown mirror config {key}"))),
        }
        if out.insert(key.clone(), value.clone()).is_some() {
            return Err(InvalidMirrorConfig(format!(
                "Mirror config {key} is given twice"
            )));
        }
    }
    match out.get("bootstrap.servers") {
        None => {
            return Err(InvalidMirrorConfig(
                "Missing required mirror config bootstrap.servers".into(),
            ))
        }
        Some(servers) => {
            for server in split_list(servers) {
                parse_host_port(server)?;
            }
        }
    }
    for key in ["mirror.acls.include", "mirror.acls.exclude"] {
        if let Some(rules) = out.get(key) {
            AclRules::parse(rules).map_err(|e| InvalidMirrorConfig(format!("{key}: {e}")))?;
        }
    }
    // TLS and SASL settings are checked (and files read) now, so mistakes surface on create.
    crate::source_security::client_security(&out)?;
    Ok(out)
}

fn check_value(key: &str, kind: Kind, value: &str) -> Result<(), InvalidMirrorConfig> {
    match kind {
        Kind::Str | Kind::List => Ok(()),
        Kind::Int => match value.trim().parse::<i64>() {
            Ok(n) if (0..=i32::MAX as i64).contains(&n) => Ok(()),
            _ => Err(InvalidMirrorConfig(format!(
                "Invalid value {value} for mirror config {key}: expected an integer between 0 and {}",
                i32::MAX
            ))),
        },
        Kind::Regexes => {
            for pattern in split_patterns(value) {
                anchored(pattern).map_err(|e| {
                    InvalidMirrorConfig(format!(
                        "Invalid regex {pattern} in mirror config {key}: {e}"
                    ))
                })?;
            }
            Ok(())
        }
    }
}

/// The narrower ranges some integer configs have.
fn check_range(key: &str, value: &str) -> Result<(), InvalidMirrorConfig> {
    let range = match key {
        "mirror.fetch.connections" => 1..=MAX_FETCH_CONNECTIONS,
        _ => return Ok(()),
    };
    match value.trim().parse::<i64>() {
        Ok(n) if range.contains(&n) => Ok(()),
        _ => Err(InvalidMirrorConfig(format!(
            "Invalid value {value} for mirror config {key}: expected an integer between {} and {}",
            range.start(),
            range.end()
        ))),
    }
}

/// The most connections a mirror opens to one source broker.
const MAX_FETCH_CONNECTIONS: i64 = 16;

/// Splits a comma-separated list, trimming and dropping empty items.
pub(crate) fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Splits a comma-separated list of regexes at the commas that separate them: a comma inside
/// `{}`, `[]` or `()`, or escaped with a backslash, belongs to its pattern (`orders-[0-9]{1,3}`).
pub fn split_patterns(value: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut escaped, mut in_class, mut start) = (0i32, false, false, 0);
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '[' => in_class = true,
            '(' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            ',' if depth <= 0 => {
                items.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&value[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn anchored(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{pattern})$"))
}

/// Parses `host:port`.
pub fn parse_host_port(server: &str) -> Result<(String, u16), InvalidMirrorConfig> {
    let bad = || {
        InvalidMirrorConfig(format!(
            "Invalid bootstrap server {server}: expected host:port"
        ))
    };
    let (host, port) = server.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

/// A set of anchored regexes (`mirror.topics.include` and friends).
#[derive(Debug, Clone, Default)]
pub struct PatternSet(Vec<Regex>);

impl PatternSet {
    /// Compiles a comma-separated list (a config value); invalid items are skipped (configs are
    /// validated on create).
    pub fn parse(list: &str) -> Self {
        PatternSet(
            split_patterns(list)
                .into_iter()
                .filter_map(|p| anchored(p).ok())
                .collect(),
        )
    }

    /// Compiles patterns given one by one (a request's list); the first invalid one is an
    /// error naming it.
    pub fn compile<S: AsRef<str>>(patterns: &[S]) -> Result<Self, InvalidPattern> {
        patterns
            .iter()
            .map(|p| {
                let p = p.as_ref();
                anchored(p).map_err(|error| InvalidPattern {
                    pattern: p.to_string(),
                    error,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(PatternSet)
    }

    /// Whether the set has no pattern.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any pattern matches all of `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|r| r.is_match(name))
    }
}

/// The effective settings of one mirror.
#[derive(Clone)]
pub struct MirrorSettings {
    /// Source bootstrap servers.
    pub bootstrap_servers: Vec<(String, u16)>,
    /// Fetch long-poll wait.
    pub fetch_wait_max_ms: i32,
    /// Fetch min bytes.
    pub fetch_min_bytes: i32,
    /// Fetch response max bytes.
    pub fetch_response_max_bytes: i32,
    /// Per-partition fetch max bytes.
    pub fetch_partition_max_bytes: i32,
    /// Wait after a failed fetch.
    pub fetch_backoff: Duration,
    /// `mirror.fetch.rate.max.bytes` (bytes per second, 0: none), shared by the fetchers that
    /// are given these settings.
    pub fetch_rate: Option<std::sync::Arc<crate::fetcher::rate::ByteRate>>,
    /// `mirror.fetch.connections`: fetchers (each with its connection) per source broker, the
    /// broker's partitions spread over them.
    pub fetch_connections: usize,
    /// How long a source request may take.
    pub request_timeout: Duration,
    /// Topic configs not copied from the source.
    pub topic_properties_exclude: Vec<String>,
    /// Topics started automatically.
    pub topics_include: PatternSet,
    /// Topics never started.
    pub topics_exclude: PatternSet,
    /// Consumer groups whose offsets are synced.
    pub groups_include: PatternSet,
    /// Consumer groups whose offsets are not synced.
    pub groups_exclude: PatternSet,
    /// `mirror.acls.include`: which source ACLs are synced.
    pub acls_include: AclRules,
    /// `mirror.acls.exclude`: source ACLs that are not synced even when included.
    pub acls_exclude: AclRules,
    /// `security.protocol`, `sasl.*` and `ssl.*` (secrets included; never printed).
    security_configs: BTreeMap<String, String>,
}

impl MirrorSettings {
    /// Settings from stored configs, defaults filled in.
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Self {
        let get = |key: &str| -> String {
            configs.get(key).cloned().unwrap_or_else(|| {
                MIRROR_KEYS
                    .iter()
                    .find(|(k, _, _)| *k == key)
                    .map(|(_, _, d)| d.to_string())
                    .unwrap_or_default()
            })
        };
        let int = |key: &str| get(key).trim().parse::<i64>().unwrap_or(0);
        MirrorSettings {
            bootstrap_servers: split_list(&get("bootstrap.servers"))
                .filter_map(|s| parse_host_port(s).ok())
                .collect(),
            fetch_wait_max_ms: int("mirror.fetch.wait.max.ms") as i32,
            fetch_min_bytes: int("mirror.fetch.min.bytes") as i32,
            fetch_response_max_bytes: int("mirror.fetch.response.max.bytes") as i32,
            fetch_partition_max_bytes: int("mirror.fetch.max.bytes") as i32,
            fetch_backoff: Duration::from_millis(int("mirror.fetch.backoff.ms") as u64),
            fetch_connections: int("mirror.fetch.connections").clamp(1, MAX_FETCH_CONNECTIONS)
                as usize,
            fetch_rate: (int("mirror.fetch.rate.max.bytes") > 0).then(|| {
                std::sync::Arc::new(crate::fetcher::rate::ByteRate::new(int(
                    "mirror.fetch.rate.max.bytes",
                )
                    as u64))
            }),
            request_timeout: Duration::from_millis(
                int("request.timeout.ms").max(int("mirror.socket.timeout.ms")) as u64,
            ),
            topic_properties_exclude: split_list(&get("mirror.topic.properties.exclude"))
                .map(str::to_string)
                .collect(),
            topics_include: PatternSet::parse(&get("mirror.topics.include")),
            topics_exclude: PatternSet::parse(&get("mirror.topics.exclude")),
            groups_include: PatternSet::parse(&get("mirror.groups.include")),
            groups_exclude: PatternSet::parse(&get("mirror.groups.exclude")),
            // Validated on create; a stored value that no longer parses syncs no ACL.
            acls_include: AclRules::parse(&get("mirror.acls.include")).unwrap_or_default(),
            acls_exclude: AclRules::parse(&get("mirror.acls.exclude")).unwrap_or_default(),
            security_configs: configs
                .iter()
                .filter(|(k, _)| {
                    *k == "security.protocol" || k.starts_with("sasl.") || k.starts_with("ssl.")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// How to secure connections to the source (files are read now, for renewed certificates).
    pub fn client_security(
        &self,
    ) -> Result<tern_protocol::client_security::ClientSecurity, InvalidMirrorConfig> {
        crate::source_security::client_security(&self.security_configs)
    }
}

impl std::fmt::Debug for MirrorSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The security configs hold secrets: only their names are shown.
        f.debug_struct("MirrorSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("request_timeout", &self.request_timeout)
            .field(
                "security_configs",
                &self.security_configs.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Broker-level mirroring settings.
#[derive(Debug, Clone)]
pub struct BrokerMirrorConfig {
    /// Partitions of `__mirror_state`.
    pub state_topic_partitions: i32,
    /// How often source metadata (configs, partitions, group offsets) is synced.
    pub metadata_refresh_interval: Duration,
    /// First retry backoff of a FAILED partition (full jitter).
    pub failed_retry_initial_backoff: Duration,
    /// Largest retry backoff.
    pub failed_retry_max_backoff: Duration,
    /// Retries before a FAILED partition stays failed (0: never retry).
    pub failed_retry_max_attempts: i16,
}

impl Default for BrokerMirrorConfig {
    fn default() -> Self {
        BrokerMirrorConfig {
            state_topic_partitions: 50,
            metadata_refresh_interval: Duration::from_secs(30),
            failed_retry_initial_backoff: Duration::from_millis(1000),
            failed_retry_max_backoff: Duration::from_millis(300_000),
            failed_retry_max_attempts: 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    #[test]
    fn pattern_lists_split_only_between_patterns() {
        assert_eq!(
            split_patterns(r"orders-[0-9]{1,3}, pay(a|b,c) ,x\,y,[,],,"),
            vec!["orders-[0-9]{1,3}", "pay(a|b,c)", r"x\,y", "[,]"]
        );
        let set = PatternSet::parse("orders-[0-9]{1,3},payments");
        assert!(set.matches("orders-12") && set.matches("payments"));
        assert!(!set.matches("orders-1234"));
        // A request's list is taken pattern by pattern, never split again.
        let set = PatternSet::compile(&["orders-[0-9]{1,3}"]).unwrap();
        assert!(set.matches("orders-7"));
        let e = PatternSet::compile(&["ok", "orders-[0-9"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("Invalid regex orders-[0-9:"), "{e}");
        // A config value with a counted repetition validates.
        let c = validate_mirror_configs(&cfg(&[
            ("bootstrap.servers", "localhost:9092"),
            ("mirror.topics.include", "orders-[0-9]{1,3}"),
        ]))
        .unwrap();
        assert!(MirrorSettings::from_configs(&c)
            .topics_include
            .matches("orders-42"));
    }

    #[test]
    fn accepts_a_minimal_config() {
        let c = validate_mirror_configs(&cfg(&[("bootstrap.servers", "localhost:9092")])).unwrap();
        assert_eq!(c["bootstrap.servers"], "localhost:9092");
        let s = MirrorSettings::from_configs(&c);
        assert_eq!(s.bootstrap_servers, vec![("localhost".to_string(), 9092)]);
        assert_eq!(s.fetch_partition_max_bytes, 1_048_576);
        assert!(s.topics_exclude.matches("__consumer_offsets"));
        assert!(!s.topics_exclude.matches("orders"));
        assert!(s.groups_include.matches("anything"));
        assert_eq!(s.fetch_connections, 1);
        let c = validate_mirror_configs(&cfg(&[
            ("bootstrap.servers", "localhost:9092"),
            ("mirror.fetch.connections", "4"),
        ]))
        .unwrap();
        assert_eq!(MirrorSettings::from_configs(&c).fetch_connections, 4);
    }

    #[test]
    fn fetch_connections_are_one_to_sixteen() {
        for bad in ["0", "17", "-1", "many"] {
            let e = validate_mirror_configs(&cfg(&[
                ("bootstrap.servers", "h:1"),
                ("mirror.fetch.connections", bad),
            ]))
            .unwrap_err();
            assert!(e.to_string().contains("mirror.fetch.connections"), "{e}");
        }
    }

    #[test]
    fn refuses_bad_configs() {
        let cases: &[&[(&str, &str)]] = &[
            &[],
            &[("bootstrap.servers", "nohostport")],
            &[("bootstrap.servers", "h:notaport")],
            &[("bootstrap.servers", "h:1"), ("no.such.key", "x")],
            &[
                ("bootstrap.servers", "h:1"),
                ("mirror.fetch.max.bytes", "-1"),
            ],
            &[
                ("bootstrap.servers", "h:1"),
                ("mirror.fetch.max.bytes", "lots"),
            ],
            &[("bootstrap.servers", "h:1"), ("mirror.topics.include", "(")],
            &[
                ("bootstrap.servers", "h:1"),
                ("security.protocol", "SASL_SSL"),
            ],
            &[
                ("bootstrap.servers", "h:1"),
                ("security.protocol", "SSL"),
                ("ssl.truststore.location", "/does/not/exist.pem"),
            ],
            &[
                ("bootstrap.servers", "h:1"),
                ("security.protocol", "CARRIER_PIGEON"),
            ],
        ];
        for case in cases {
            assert!(validate_mirror_configs(&cfg(case)).is_err(), "{case:?}");
        }
        let null = vec![("bootstrap.servers".to_string(), None)];
        assert!(validate_mirror_configs(&null).is_err());
    }

    #[test]
    fn secrets_are_recognised() {
        assert!(is_secret("sasl.jaas.config"));
        assert!(is_secret("ssl.truststore.password"));
        assert!(!is_secret("bootstrap.servers"));
    }
}
