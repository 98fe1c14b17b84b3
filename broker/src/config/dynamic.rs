//! Dynamic broker configs: which settings may change without a restart, and the value in effect
//! (a broker's own dynamic value, else the cluster-wide dynamic default, else server.properties).
//!
//! Kafka lets many broker settings change at runtime. Tern applies at runtime the broker defaults
//! of topic configs (`log.retention.ms`, `message.max.bytes`, `compression.type`, ...), which every
//! partition picks up from the next metadata image, `unclean.leader.election.enable` (which the
//! active controller reads at each election), `num.replica.fetchers`, listeners' TLS stores
//! (`[listener.name.<l>.]ssl.keystore.location` and the like), the log cleaner's settings
//! (`log.cleaner.threads` and the rest, see `cleaner`), `max.connections` and
//! `transaction.partition.verification.enable`; a
//! setting Kafka can change but Tern reads only at start is refused with the reason rather than
//! stored and silently not applied (Kafka would take listeners and their TLS files and the
//! like).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use tern_controller::topic_configs::{validate_topic_config, ConfigType, TOPIC_CONFIGS};
use tern_controller::MetadataImage;
use tern_protocol::error::ApiError;

use super::catalog::broker_config;

/// Where a broker setting's value comes from, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// Set for this broker with AlterConfigs.
    DynamicBroker,
    /// Set for every broker with AlterConfigs on the empty broker name.
    DynamicDefault,
    /// server.properties or `--override`.
    Static,
}

impl Layer {
    /// Kafka's DescribeConfigs source code.
    pub(crate) fn source(self) -> i8 {
        match self {
            Layer::DynamicBroker => 2,
            Layer::DynamicDefault => 3,
            Layer::Static => 4,
        }
    }
}

/// The topic config whose default broker setting `key` is, if any.
fn topic_config_of(key: &str) -> Option<&'static str> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| d.broker_synonym == Some(key))
        .map(|d| d.name)
}

/// Broker settings besides topic-config defaults that Tern reads where they take effect, so a
/// dynamic value applies at once, with the least value Kafka takes: `max.connections` at each
/// new connection, `num.replica.fetchers` and the replication throttle rates at the next
/// metadata image.
const APPLIED_AT_RUNTIME: &[(&str, i64)] = &[
    ("max.connections", 0),
    ("num.replica.fetchers", 1),
    ("leader.replication.throttled.rate", 0),
    ("follower.replication.throttled.rate", 0),
];

/// Boolean broker settings read at each use, so a dynamic value applies at once:
/// `transaction.partition.verification.enable` at each transactional produce.
const BOOLEANS_APPLIED_AT_RUNTIME: &[&str] = &["transaction.partition.verification.enable"];

/// An INT, LONG or DOUBLE setting (as the catalog types it) with Kafka's `atLeast(min)`: its
/// messages for a bad value.
fn validate_number_at_least(key: &str, value: &str, min: i64) -> Result<(), ApiError> {
    let bad = |why: &str| {
        ApiError::new(
            ResponseError::InvalidRequest,
            format!("Invalid value {value} for configuration {key}: {why}"),
        )
    };
    let kind = broker_config(key).map(|d| d.kind);
    if kind == Some(ConfigType::Double) {
        let n = tern_controller::topic_configs::parse_java_double(value)
            .ok_or_else(|| bad("Not a number of type DOUBLE"))?;
        if n < min as f64 {
            return Err(bad(&format!("Value must be at least {min}")));
        }
        return Ok(());
    }
    let n: i64 = if kind == Some(ConfigType::Long) {
        value
            .trim()
            .parse()
            .map_err(|_| bad("Not a number of type LONG"))?
    } else {
        value
            .trim()
            .parse::<i32>()
            .map(i64::from)
            .map_err(|_| bad("Not a number of type INT"))?
    };
    if n < min {
        return Err(bad(&format!("Value must be at least {min}")));
    }
    Ok(())
}

/// The TLS store settings a listener takes at runtime (Kafka's reconfigurable SSL configs that
/// Tern reads), plain or as `listener.name.<listener>.<key>`.
const TLS_STORE_KEYS: &[&str] = &[
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.type",
];

/// Whether `key` is a TLS store setting a listener takes at runtime.
pub(crate) fn is_tls_store_key(key: &str) -> bool {
    let base = key
        .strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .map_or(key, |(_, base)| base);
    TLS_STORE_KEYS.contains(&base)
}

/// server.properties with the dynamic values over it: the cluster-wide default `default`,
/// then this broker's own `own`.
pub(crate) fn overlay(
    properties: &BTreeMap<String, String>,
    default: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = properties.clone();
    merged.extend(default.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// Checks one dynamic setting of `key` to `value` the way Kafka answers AlterConfigs on a
/// broker: INVALID_REQUEST for a setting that cannot change at runtime or a bad value. A name
/// Kafka does not know either is stored as Kafka stores it (plugins read such settings), with a
/// warning that Tern reads nothing from it.
pub(crate) fn validate_change(key: &str, value: &str) -> Result<(), ApiError> {
    if is_tls_store_key(key) {
        // Checked as a whole by loading the stores (handlers::alter_configs).
        return Ok(());
    }
    let Some(def) = broker_config(key) else {
        tracing::warn!(
            config = key,
            "dynamic broker config stored; Tern does not read it"
        );
        return Ok(());
    };
    if def.read_only {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("Cannot update these configs dynamically: [{key}]"),
        ));
    }
    if BOOLEANS_APPLIED_AT_RUNTIME.contains(&key) {
        return tern_controller::topic_configs::validate_boolean(key, value)
            .map_err(|m| ApiError::new(ResponseError::InvalidRequest, m));
    }
    if let Some((_, min)) = APPLIED_AT_RUNTIME.iter().find(|(k, _)| *k == key) {
        return validate_number_at_least(key, value, *min);
    }
    if let Some((_, min)) = super::cleaner::CLEANER_KEYS.iter().find(|(k, _)| *k == key) {
        return validate_number_at_least(key, value, min.unwrap_or(i64::MIN));
    }
    let Some(topic_config) = topic_config_of(key) else {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!(
                "Tern applies {key} only at start: set it in server.properties and restart \
                 (broker defaults of topic configs are dynamic)"
            ),
        ));
    };
    validate_topic_config(topic_config, value)
        .map_err(|m| ApiError::new(ResponseError::InvalidRequest, m.replace(topic_config, key)))
}

/// A broker setting in effect on `node_id` and where it comes from.
pub(crate) fn effective<'a>(
    image: &'a MetadataImage,
    node_id: i32,
    properties: &'a BTreeMap<String, String>,
    key: &str,
) -> Option<(String, Layer)> {
    dynamic_values(image, node_id, key)
        .into_iter()
        .next()
        .or_else(|| properties.get(key).map(|v| (v.clone(), Layer::Static)))
}

/// Every dynamic value that applies to `node_id`: (key, value, layer), the broker's own before the
/// cluster-wide default, as DescribeConfigs lists synonyms.
pub(crate) fn dynamic_values(
    image: &MetadataImage,
    node_id: i32,
    key: &str,
) -> Vec<(String, Layer)> {
    let mut out = Vec::new();
    if let Some(v) = image.broker_configs(&node_id.to_string()).get(key) {
        out.push((v.clone(), Layer::DynamicBroker));
    }
    if let Some(v) = image.broker_configs("").get(key) {
        out.push((v.clone(), Layer::DynamicDefault));
    }
    out
}

/// The topic-config defaults set dynamically for `node_id`: (topic config, value), the broker's
/// own over the cluster-wide default.
pub(crate) fn dynamic_topic_defaults(
    image: &MetadataImage,
    node_id: i32,
) -> Vec<(&'static str, String)> {
    let mut merged = image.broker_configs("");
    merged.extend(image.broker_configs(&node_id.to_string()));
    merged
        .into_iter()
        .filter_map(|(k, v)| topic_config_of(&k).map(|t| (t, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), ApiError>) -> Option<ResponseError> {
        r.err().map(|e| e.error)
    }

    #[test]
    fn only_broker_defaults_of_topic_configs_change_at_runtime() {
        assert_eq!(code(validate_change("log.retention.ms", "1000")), None);
        assert_eq!(code(validate_change("message.max.bytes", "2000")), None);
        assert_eq!(
            code(validate_change("num.partitions", "3")),
            Some(ResponseError::InvalidRequest),
            "read-only in Kafka"
        );
        assert_eq!(code(validate_change("max.connections", "3")), None);
        assert_eq!(
            code(validate_change("unclean.leader.election.enable", "true")),
            None
        );
        assert_eq!(
            code(validate_change("unclean.leader.election.enable", "maybe")),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(validate_change("max.connections", "-1")),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(code(validate_change("num.replica.fetchers", "3")), None);
        // LONG settings take longs, not below 0.
        assert_eq!(
            code(validate_change(
                "leader.replication.throttled.rate",
                "10000000000"
            )),
            None
        );
        let bad = validate_change("follower.replication.throttled.rate", "fast").unwrap_err();
        assert!(bad.message.contains("LONG"), "{}", bad.message);
        assert_eq!(
            code(validate_change("follower.replication.throttled.rate", "-1")),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(validate_change("num.replica.fetchers", "0")),
            Some(ResponseError::InvalidRequest)
        );
        assert_eq!(
            code(validate_change("listeners", "PLAINTEXT://:9093")),
            Some(ResponseError::InvalidRequest),
            "dynamic in Kafka, read at start by Tern"
        );
        assert_eq!(
            code(validate_change("no.such.config", "3")),
            None,
            "as Kafka"
        );
        let bad = validate_change("log.retention.ms", "soon").unwrap_err();
        assert_eq!(bad.error, ResponseError::InvalidRequest);
        assert!(bad.message.contains("log.retention.ms"), "{}", bad.message);
    }
}
