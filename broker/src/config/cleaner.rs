//! The log cleaner's settings (`log.cleaner.*`): read from server.properties with the dynamic
//! values over them, checked as Kafka checks a change, and handed to the running cleaner at
//! each metadata image.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use tern_protocol::error::ApiError;
use tern_storage::{CleanerConfig, LogCleaner};

/// The cleaner settings a broker takes at runtime, with Kafka's least value (None: any).
pub(crate) const CLEANER_KEYS: &[(&str, Option<i64>)] = &[
    ("log.cleaner.backoff.ms", Some(0)),
    ("log.cleaner.dedupe.buffer.size", None),
    ("log.cleaner.io.buffer.load.factor", None),
    ("log.cleaner.io.max.bytes.per.second", None),
    ("log.cleaner.threads", Some(0)),
];

/// Kafka's floor on each thread's share of the dedupe buffer.
const MIN_DEDUPE_PER_THREAD: u64 = 1 << 20;

/// The cleaner's settings in `props` (server.properties, or it with dynamic values over it).
pub(crate) fn cleaner_config(props: &BTreeMap<String, String>) -> Result<CleanerConfig, String> {
    fn get<T: std::str::FromStr>(
        props: &BTreeMap<String, String>,
        key: &str,
        default: T,
    ) -> Result<T, String> {
        match props.get(key) {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("config {key}={v} is not a valid number")),
            None => Ok(default),
        }
    }
    let d = CleanerConfig::default();
    let config = CleanerConfig {
        threads: get(props, "log.cleaner.threads", d.threads)?,
        backoff_ms: get(props, "log.cleaner.backoff.ms", d.backoff_ms)?,
        max_io_bytes_per_second: get(
            props,
            "log.cleaner.io.max.bytes.per.second",
            d.max_io_bytes_per_second,
        )?,
        dedupe_buffer_size: get(
            props,
            "log.cleaner.dedupe.buffer.size",
            d.dedupe_buffer_size,
        )?,
        dedupe_buffer_load_factor: get(
            props,
            "log.cleaner.io.buffer.load.factor",
            d.dedupe_buffer_load_factor,
        )?,
    };
    if config.threads > 0
        && config.dedupe_buffer_size / (config.threads as u64) < MIN_DEDUPE_PER_THREAD
    {
        return Err(
            "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner \
             thread."
                .into(),
        );
    }
    Ok(config)
}

/// Whether `key` is a cleaner setting taken at runtime.
pub(crate) fn is_cleaner_key(key: &str) -> bool {
    CLEANER_KEYS.iter().any(|(k, _)| *k == key)
}

/// Checks the cleaner settings `after` a change against those in force, `before`, with
/// Kafka's rules and messages: at least one thread, at most double and at least half as many
/// as now, and a megabyte of dedupe buffer per thread.
pub(crate) fn check_change(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
    let invalid = |m: String| ApiError::new(ResponseError::InvalidRequest, m);
    let current = cleaner_config(before).map_or(1, |c| c.threads);
    let threads: usize = after
        .get("log.cleaner.threads")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(current);
    let why = if threads < 1 {
        Some("Log cleaner threads should be at least 1".to_string())
    } else if threads < current / 2 {
        Some(format!(
            "Log cleaner threads cannot be reduced to less than half the current value {current}"
        ))
    } else if threads > current * 2 {
        Some(format!(
            "Log cleaner threads cannot be increased to more than double the current value \
             {current}"
        ))
    } else {
        None
    };
    if let Some(why) = why {
        return Err(invalid(format!(
            "Invalid value org.apache.kafka.common.config.ConfigException: {why} for \
             configuration Invalid dynamic configuration"
        )));
    }
    cleaner_config(after).map(|_| ()).map_err(invalid)
}

/// The running cleaner and the static settings under its dynamic ones.
pub(crate) struct DynamicCleaner {
    cleaner: Arc<LogCleaner>,
    node_id: i32,
    properties: BTreeMap<String, String>,
}

impl DynamicCleaner {
    /// Follows the settings for `cleaner` on this broker.
    pub(crate) fn new(cleaner: Arc<LogCleaner>, config: &super::BrokerConfig) -> Self {
        DynamicCleaner {
            cleaner,
            node_id: config.node_id,
            properties: config.properties.clone(),
        }
    }

    /// Hands the cleaner the settings in force in `image` when they changed.
    pub(crate) fn apply(&self, image: &tern_controller::MetadataImage) {
        let merged = super::dynamic::overlay(
            &self.properties,
            &image.broker_configs(""),
            &image.broker_configs(&self.node_id.to_string()),
        );
        match cleaner_config(&merged) {
            Ok(config) if config != self.cleaner.config() => self.cleaner.reconfigure(config),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "dynamic log cleaner settings refused"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_kafka_defaults_and_names() {
        assert_eq!(
            cleaner_config(&BTreeMap::new()).unwrap(),
            CleanerConfig::default()
        );
        let c = cleaner_config(&props(&[
            ("log.cleaner.threads", "2"),
            (
                "log.cleaner.io.max.bytes.per.second",
                "1.7976931348623157E308",
            ),
            ("log.cleaner.backoff.ms", "100"),
        ]))
        .unwrap();
        assert_eq!((c.threads, c.backoff_ms), (2, 100));
        assert_eq!(c.max_io_bytes_per_second, f64::MAX);
        assert!(cleaner_config(&props(&[("log.cleaner.threads", "x")])).is_err());
    }

    #[test]
    fn threads_change_by_half_to_double_as_in_kafka() {
        let one = props(&[]);
        let three = props(&[("log.cleaner.threads", "3")]);
        let msg = |r: Result<(), ApiError>| r.unwrap_err().message;
        assert!(check_change(&one, &props(&[("log.cleaner.threads", "2")])).is_ok());
        assert_eq!(
            msg(check_change(&one, &props(&[("log.cleaner.threads", "5")]))),
            "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads \
             cannot be increased to more than double the current value 1 for configuration \
             Invalid dynamic configuration"
        );
        assert!(check_change(&three, &props(&[("log.cleaner.threads", "1")])).is_ok());
        assert!(msg(check_change(
            &three,
            &props(&[("log.cleaner.threads", "0")])
        ))
        .contains("should be at least 1"));
        let five = props(&[("log.cleaner.threads", "5")]);
        assert!(
            msg(check_change(&five, &props(&[("log.cleaner.threads", "1")])))
                .contains("cannot be reduced to less than half the current value 5")
        );
        assert_eq!(
            msg(check_change(
                &one,
                &props(&[
                    ("log.cleaner.threads", "2"),
                    ("log.cleaner.dedupe.buffer.size", "1000")
                ])
            )),
            "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner \
             thread."
        );
    }
}
