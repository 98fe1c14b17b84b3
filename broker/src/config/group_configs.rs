//! Group configs (Kafka's GROUP config resource, KIP-848 and KIP-932): the per-group overrides
//! of the `group.consumer.*` and `group.share.*` broker settings that Tern applies, with Kafka's
//! types, broker synonyms, validation and error messages (Kafka's GroupConfig).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use tern_controller::topic_configs::ConfigType;
use tern_protocol::error::ApiError;

use crate::group_coordinator::consumer_group::ConsumerGroupConfig;
use crate::group_coordinator::share_group::{ShareGroupConfig, ShareOffsetReset};
use crate::group_coordinator::CoordinatorConfig;

/// One group config Tern applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// Value type as DescribeConfigs reports it.
    pub kind: ConfigType,
    /// The broker setting whose value applies when the group sets none.
    pub broker_synonym: Option<&'static str>,
    /// Kafka's default (GroupConfig's), used to validate a group's configs as a whole.
    pub default: &'static str,
}

const fn def(
    name: &'static str,
    kind: ConfigType,
    broker_synonym: Option<&'static str>,
    default: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        kind,
        broker_synonym,
        default,
    }
}

const CONSUMER_SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
const CONSUMER_HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
const SHARE_SESSION_TIMEOUT: &str = "share.session.timeout.ms";
const SHARE_HEARTBEAT_INTERVAL: &str = "share.heartbeat.interval.ms";
const SHARE_LOCK_DURATION: &str = "share.record.lock.duration.ms";
const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
const SHARE_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";
const SHARE_RENEW_ACKNOWLEDGE_ENABLE: &str = "share.renew.acknowledge.enable";

/// The group configs Tern applies, by name.
pub(crate) const GROUP_CONFIGS: &[GroupConfigDef] = &[
    def(
        CONSUMER_HEARTBEAT_INTERVAL,
        ConfigType::Int,
        Some("group.consumer.heartbeat.interval.ms"),
        "5000",
    ),
    def(
        CONSUMER_SESSION_TIMEOUT,
        ConfigType::Int,
        Some("group.consumer.session.timeout.ms"),
        "45000",
    ),
    def(SHARE_AUTO_OFFSET_RESET, ConfigType::String, None, "latest"),
    def(
        SHARE_DELIVERY_COUNT_LIMIT,
        ConfigType::Int,
        Some("group.share.delivery.count.limit"),
        "5",
    ),
    def(
        SHARE_HEARTBEAT_INTERVAL,
        ConfigType::Int,
        Some("group.share.heartbeat.interval.ms"),
        "5000",
    ),
    def(
        SHARE_ISOLATION_LEVEL,
        ConfigType::String,
        None,
        "read_uncommitted",
    ),
    def(
        SHARE_MAX_RECORD_LOCKS,
        ConfigType::Int,
        Some("group.share.partition.max.record.locks"),
        "2000",
    ),
    def(
        SHARE_LOCK_DURATION,
        ConfigType::Int,
        Some("group.share.record.lock.duration.ms"),
        "30000",
    ),
    def(
        SHARE_RENEW_ACKNOWLEDGE_ENABLE,
        ConfigType::Boolean,
        None,
        "true",
    ),
    def(
        SHARE_SESSION_TIMEOUT,
        ConfigType::Int,
        Some("group.share.session.timeout.ms"),
        "45000",
    ),
];

/// Group configs Kafka 4.4 has that Tern does not apply (streams groups, the share DLQ, the
/// assignment batching interval): refused rather than
/// stored, since storing them would look as if they took effect.
pub(crate) const NOT_APPLIED: &[&str] = &[
    "consumer.assignment.interval.ms",
    "errors.deadletterqueue.copy.record.enable",
    "errors.deadletterqueue.topic.name",
    "share.assignment.interval.ms",
    "streams.assignment.interval.ms",
    "streams.assignor.name",
    "streams.heartbeat.interval.ms",
    "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas",
    "streams.rack.aware.assignment.tags",
    "streams.session.timeout.ms",
];

/// The definition of group config `name`.
pub(crate) fn group_config(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

fn invalid_config(message: String) -> ApiError {
    ApiError::new(ResponseError::InvalidConfig, message)
}

/// Kafka's bounds on the group overrides (the `group.*.min.*` and `group.*.max.*` broker
/// settings at their defaults, which Tern does not read): (config, lowest, highest).
const BOUNDS: &[(&str, i64, i64)] = &[
    (CONSUMER_HEARTBEAT_INTERVAL, 5_000, 15_000),
    (CONSUMER_SESSION_TIMEOUT, 45_000, 60_000),
    (SHARE_HEARTBEAT_INTERVAL, 5_000, 15_000),
    (SHARE_SESSION_TIMEOUT, 45_000, 60_000),
    (SHARE_LOCK_DURATION, 15_000, 60_000),
    (SHARE_DELIVERY_COUNT_LIMIT, 2, 10),
    (SHARE_MAX_RECORD_LOCKS, 100, 4_000),
];

/// The lowest value each integer config's type check takes (Kafka's `atLeast` validators).
fn at_least(name: &str) -> i64 {
    match name {
        SHARE_LOCK_DURATION => 1_000,
        SHARE_DELIVERY_COUNT_LIMIT => 2,
        SHARE_MAX_RECORD_LOCKS => 100,
        _ => 1,
    }
}

/// Parses one value as Kafka's ConfigDef would, with its message on failure.
fn parse_value(def: &GroupConfigDef, value: &str) -> Result<Option<i64>, ApiError> {
    let name = def.name;
    match def.kind {
        ConfigType::Int => {
            let Ok(n) = value.trim().parse::<i32>() else {
                return Err(invalid_config(format!(
                    "Invalid value {value} for configuration {name}: Not a number of type INT"
                )));
            };
            let min = at_least(name);
            if i64::from(n) < min {
                return Err(invalid_config(format!(
                    "Invalid value {n} for configuration {name}: Value must be at least {min}"
                )));
            }
            Ok(Some(i64::from(n)))
        }
        _ if name == SHARE_AUTO_OFFSET_RESET => {
            ShareOffsetReset::parse(value).map_err(|_| {
                invalid_config(format!(
                    "Invalid value {value} for configuration {name}: Invalid value `{value}` for \
                     configuration {name}. The value must be either 'earliest', 'latest' or of the \
                     format 'by_duration:<PnDTnHnMn.nS>'."
                ))
            })?;
            Ok(None)
        }
        ConfigType::Boolean => {
            if !matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false") {
                return Err(invalid_config(format!(
                    "Invalid value {value} for configuration {name}: Expected value to be either \
                     true or false"
                )));
            }
            Ok(None)
        }
        _ if name == SHARE_ISOLATION_LEVEL => {
            if value != "read_committed" && value != "read_uncommitted" {
                return Err(invalid_config(format!(
                    "Invalid value {value} for configuration {name}: String must be one of: \
                     read_committed, read_uncommitted"
                )));
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Checks a group's configs as they would be after a change, as Kafka 4.4's
/// GroupConfig.validate does: every name known, every value of its type, each set value within
/// its bounds, and each session timeout above its heartbeat interval (the broker's value
/// standing in for the one not set). Names Kafka knows that Tern does not apply are refused.
pub(crate) fn validate(
    configs: &BTreeMap<String, String>,
    broker: &CoordinatorConfig,
) -> Result<(), ApiError> {
    for name in configs.keys() {
        if NOT_APPLIED.contains(&name.as_str()) {
            return Err(invalid_config(format!(
                "Group config {name} is not supported by Tern (streams groups, the share-group \
                 dead-letter queue and assignment intervals are not implemented)"
            )));
        }
        if group_config(name).is_none() {
            return Err(invalid_config(format!("Unknown group config name: {name}")));
        }
    }
    let mut numbers = BTreeMap::new();
    for def in GROUP_CONFIGS {
        if let Some(value) = configs.get(def.name) {
            if let Some(n) = parse_value(def, value)? {
                numbers.insert(def.name, n);
            }
        }
    }
    for &(name, low, high) in BOUNDS {
        if numbers.get(name).is_some_and(|n| *n < low || *n > high) {
            return Err(invalid_config(format!(
                "{name} must be in the range {low} to {high} inclusive."
            )));
        }
    }
    let pairs = [
        (
            (CONSUMER_SESSION_TIMEOUT, broker.consumer.session_timeout_ms),
            (
                CONSUMER_HEARTBEAT_INTERVAL,
                broker.consumer.heartbeat_interval_ms,
            ),
        ),
        (
            (SHARE_SESSION_TIMEOUT, broker.share.session_timeout_ms),
            (SHARE_HEARTBEAT_INTERVAL, broker.share.heartbeat_interval_ms),
        ),
    ];
    for ((session, session_default), (heartbeat, heartbeat_default)) in pairs {
        if !numbers.contains_key(session) && !numbers.contains_key(heartbeat) {
            continue;
        }
        let s = numbers
            .get(session)
            .copied()
            .unwrap_or(session_default.into());
        let h = numbers
            .get(heartbeat)
            .copied()
            .unwrap_or(heartbeat_default.into());
        if s <= h {
            return Err(invalid_config(format!(
                "{session} must be greater than {heartbeat}"
            )));
        }
    }
    Ok(())
}

fn int_of(configs: &BTreeMap<String, String>, name: &str) -> Option<i64> {
    configs.get(name).and_then(|v| v.trim().parse().ok())
}

/// The settings of one consumer-protocol group: the broker's, with the group's overrides.
pub(crate) fn consumer_settings(
    base: &ConsumerGroupConfig,
    configs: &BTreeMap<String, String>,
) -> ConsumerGroupConfig {
    let mut out = base.clone();
    if let Some(n) = int_of(configs, CONSUMER_SESSION_TIMEOUT) {
        out.session_timeout_ms = n as i32;
    }
    if let Some(n) = int_of(configs, CONSUMER_HEARTBEAT_INTERVAL) {
        out.heartbeat_interval_ms = n as i32;
    }
    out
}

/// The settings of one share group: the broker's, with the group's overrides.
pub(crate) fn share_settings(
    base: &ShareGroupConfig,
    configs: &BTreeMap<String, String>,
) -> ShareGroupConfig {
    let mut out = base.clone();
    if configs.is_empty() {
        return out;
    }
    if let Some(n) = int_of(configs, SHARE_SESSION_TIMEOUT) {
        out.session_timeout_ms = n as i32;
    }
    if let Some(n) = int_of(configs, SHARE_HEARTBEAT_INTERVAL) {
        out.heartbeat_interval_ms = n as i32;
    }
    if let Some(n) = int_of(configs, SHARE_LOCK_DURATION) {
        out.limits.lock_duration_ms = n;
    }
    if let Some(n) = int_of(configs, SHARE_DELIVERY_COUNT_LIMIT) {
        out.limits.delivery_count_limit = n as i16;
    }
    if let Some(n) = int_of(configs, SHARE_MAX_RECORD_LOCKS) {
        out.limits.max_in_flight = n;
    }
    if let Some(reset) = configs
        .get(SHARE_AUTO_OFFSET_RESET)
        .and_then(|v| ShareOffsetReset::parse(v).ok())
    {
        out.auto_offset_reset = reset;
    }
    if let Some(level) = configs.get(SHARE_ISOLATION_LEVEL) {
        out.read_committed = level == "read_committed";
    }
    if let Some(enabled) = configs.get(SHARE_RENEW_ACKNOWLEDGE_ENABLE) {
        out.renew_enabled = !enabled.trim().eq_ignore_ascii_case("false");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn broker() -> CoordinatorConfig {
        crate::config::BrokerConfig::from_properties(BTreeMap::new())
            .unwrap()
            .coordinator
    }

    fn message(pairs: &[(&str, &str)]) -> String {
        let e = validate(&configs(pairs), &broker()).unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidConfig);
        e.message
    }

    #[test]
    fn valid_overrides_pass_and_apply() {
        let c = configs(&[
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "15000"),
            ("share.isolation.level", "read_committed"),
            ("consumer.session.timeout.ms", "50000"),
        ]);
        validate(&c, &broker()).unwrap();
        let share = share_settings(&ShareGroupConfig::default(), &c);
        assert_eq!(share.auto_offset_reset, ShareOffsetReset::Earliest);
        assert_eq!(share.limits.lock_duration_ms, 15_000);
        assert!(share.read_committed);
        let consumer = consumer_settings(&ConsumerGroupConfig::default(), &c);
        assert_eq!(consumer.session_timeout_ms, 50_000);
        assert_eq!(consumer.heartbeat_interval_ms, 5_000);
    }

    #[test]
    fn bad_configs_get_kafkas_messages() {
        assert_eq!(message(&[("nope", "1")]), "Unknown group config name: nope");
        assert!(message(&[("streams.num.standby.replicas", "1")]).contains("not supported"));
        assert_eq!(
            message(&[("share.delivery.count.limit", "x")]),
            "Invalid value x for configuration share.delivery.count.limit: Not a number of type INT"
        );
        assert_eq!(
            message(&[("share.delivery.count.limit", "1")]),
            "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"
        );
        assert_eq!(
            message(&[("share.delivery.count.limit", "11")]),
            "share.delivery.count.limit must be in the range 2 to 10 inclusive."
        );
        assert_eq!(
            message(&[("consumer.session.timeout.ms", "1000")]),
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        validate(
            &configs(&[("share.heartbeat.interval.ms", "15000")]),
            &broker(),
        )
        .unwrap();
        // The broker's session timeout stands in for the group's.
        let mut low_session = broker();
        low_session.share.session_timeout_ms = 10_000;
        let e = validate(
            &configs(&[("share.heartbeat.interval.ms", "12000")]),
            &low_session,
        );
        assert_eq!(
            e.unwrap_err().message,
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
        );
        assert!(message(&[("share.auto.offset.reset", "none")]).contains("by_duration"));
        assert!(message(&[("share.isolation.level", "READ_COMMITTED")])
            .contains("String must be one of"));
    }
}
