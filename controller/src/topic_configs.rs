//! The catalog of topic configs Tern accepts: Kafka's names, types, defaults and the broker
//! config that supplies each default.

/// Topic config naming the cluster mirror a topic is mirrored by; while set (without the
/// [`MIRROR_REMOVED_SUFFIX`]) the topic is read-only.
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";
/// Appended to `mirror.name` when a topic is being stopped (failover requested): read-only
/// until every partition is STOPPED, then [`MIRROR_STOPPED_SUFFIX`] replaces it.
pub const MIRROR_REMOVED_SUFFIX: &str = ".removed";
/// Appended to `mirror.name` while a topic's mirroring is paused (still read-only).
pub const MIRROR_PAUSED_SUFFIX: &str = ".paused";
/// Suffix of `mirror.name` once a failover is complete: every partition is STOPPED and the
/// topic takes writes.
pub const MIRROR_STOPPED_SUFFIX: &str = ".stopped";

/// Value type of a config, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// true/false.
    Boolean,
    /// 32-bit integer.
    Int,
    /// 16-bit integer.
    Short,
    /// 64-bit integer.
    Long,
    /// Floating point.
    Double,
    /// Free text or an enumerated word.
    String,
    /// Comma-separated list.
    List,
    /// A secret: never shown.
    Password,
}

impl ConfigType {
    /// Kafka's `ConfigDef.Type` name, as its "Not a number of type" message gives it.
    pub fn java_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
            ConfigType::Password => "PASSWORD",
        }
    }

    /// Kafka's DescribeConfigs config_type code.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Password => 9,
        }
    }
}

/// One topic config.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    /// Topic-level name.
    pub name: &'static str,
    /// Built-in default.
    pub default: &'static str,
    /// Value type.
    pub kind: ConfigType,
    /// Broker config that sets the cluster-wide default, if any.
    pub broker_synonym: Option<&'static str>,
    /// Smallest accepted numeric value.
    pub min: Option<f64>,
    /// Accepted words for enumerated strings and lists.
    pub choices: &'static [&'static str],
}

const fn def(
    name: &'static str,
    default: &'static str,
    kind: ConfigType,
    broker_synonym: Option<&'static str>,
    min: Option<f64>,
    choices: &'static [&'static str],
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        default,
        kind,
        broker_synonym,
        min,
        choices,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long};

/// Every topic config Tern knows, sorted by name.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        "delete",
        List,
        Some("log.cleanup.policy"),
        None,
        &["compact", "delete"],
    ),
    def(
        COMPRESSION_GZIP_LEVEL,
        "-1",
        Int,
        Some(COMPRESSION_GZIP_LEVEL),
        None,
        &[],
    ),
    def(
        COMPRESSION_LZ4_LEVEL,
        "9",
        Int,
        Some(COMPRESSION_LZ4_LEVEL),
        None,
        &[],
    ),
    def(
        "compression.type",
        "producer",
        ConfigType::String,
        Some("compression.type"),
        None,
        &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
    ),
    def(
        COMPRESSION_ZSTD_LEVEL,
        "3",
        Int,
        Some(COMPRESSION_ZSTD_LEVEL),
        None,
        &[],
    ),
    def(
        "delete.retention.ms",
        "86400000",
        Long,
        Some("log.cleaner.delete.retention.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "file.delete.delay.ms",
        "60000",
        Long,
        Some("log.segment.delete.delay.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "flush.messages",
        "9223372036854775807",
        Long,
        Some("log.flush.interval.messages"),
        Some(1.0),
        &[],
    ),
    def(
        "flush.ms",
        "9223372036854775807",
        Long,
        Some("log.flush.interval.ms"),
        Some(0.0),
        &[],
    ),
    // Replication throttles (kafka-reassign-partitions.sh sets and clears them): kept and
    // described, not enforced yet (the broker warns when one is set).
    def(THROTTLED_REPLICAS_FOLLOWER, "", List, None, None, &[]),
    def(
        "index.interval.bytes",
        "4096",
        Int,
        Some("log.index.interval.bytes"),
        Some(0.0),
        &[],
    ),
    def(THROTTLED_REPLICAS_LEADER, "", List, None, None, &[]),
    def(
        "max.compaction.lag.ms",
        "9223372036854775807",
        Long,
        Some("log.cleaner.max.compaction.lag.ms"),
        Some(1.0),
        &[],
    ),
    def(
        "max.message.bytes",
        "1048588",
        Int,
        Some("message.max.bytes"),
        Some(0.0),
        &[],
    ),
    def(
        "message.timestamp.after.max.ms",
        "3600000",
        Long,
        Some("log.message.timestamp.after.max.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "message.timestamp.before.max.ms",
        "9223372036854775807",
        Long,
        Some("log.message.timestamp.before.max.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "message.timestamp.type",
        "CreateTime",
        ConfigType::String,
        Some("log.message.timestamp.type"),
        None,
        &["CreateTime", "LogAppendTime"],
    ),
    def(
        "min.cleanable.dirty.ratio",
        "0.5",
        Double,
        Some("log.cleaner.min.cleanable.ratio"),
        Some(0.0),
        &[],
    ),
    def(
        "min.compaction.lag.ms",
        "0",
        Long,
        Some("log.cleaner.min.compaction.lag.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "min.insync.replicas",
        "1",
        Int,
        Some("min.insync.replicas"),
        Some(1.0),
        &[],
    ),
    def(MIRROR_NAME_CONFIG, "", ConfigType::String, None, None, &[]),
    def(
        "preallocate",
        "false",
        Boolean,
        Some("log.preallocate"),
        None,
        &[],
    ),
    def(
        "retention.bytes",
        "-1",
        Long,
        Some("log.retention.bytes"),
        None,
        &[],
    ),
    def(
        "retention.ms",
        "604800000",
        Long,
        Some("log.retention.ms"),
        Some(-1.0),
        &[],
    ),
    def(
        "segment.bytes",
        "1073741824",
        Int,
        Some("log.segment.bytes"),
        Some(14.0),
        &[],
    ),
    def(
        "segment.index.bytes",
        "10485760",
        Int,
        Some("log.index.size.max.bytes"),
        Some(4.0),
        &[],
    ),
    def(
        "segment.jitter.ms",
        "0",
        Long,
        Some("log.roll.jitter.ms"),
        Some(0.0),
        &[],
    ),
    def(
        "segment.ms",
        "604800000",
        Long,
        Some("log.roll.ms"),
        Some(1.0),
        &[],
    ),
    def(
        "unclean.leader.election.enable",
        "false",
        Boolean,
        Some("unclean.leader.election.enable"),
        None,
        &[],
    ),
];

/// The definition of a topic config name.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Kafka's leader-side replication throttle of a topic (`[partition]:[broker],...` or `*`).
pub const THROTTLED_REPLICAS_LEADER: &str = "leader.replication.throttled.replicas";
/// Kafka's follower-side replication throttle of a topic.
pub const THROTTLED_REPLICAS_FOLLOWER: &str = "follower.replication.throttled.replicas";

/// KIP-390: the gzip level a topic's `compression.type=gzip` recompresses at (-1: zlib's default).
pub const COMPRESSION_GZIP_LEVEL: &str = "compression.gzip.level";
/// KIP-390: the lz4 level (accepted and described; Tern's lz4 encoder has one level).
pub const COMPRESSION_LZ4_LEVEL: &str = "compression.lz4.level";
/// KIP-390: the zstd level a topic's `compression.type=zstd` recompresses at.
pub const COMPRESSION_ZSTD_LEVEL: &str = "compression.zstd.level";

/// The range Kafka's `CompressionType` validator accepts for a level config, and the one value
/// outside it that it also takes (gzip's -1, zlib's default); None for other configs.
fn level_bounds(name: &str) -> Option<(i32, i32, Option<i32>)> {
    match name {
        COMPRESSION_GZIP_LEVEL => Some((1, 9, Some(-1))),
        COMPRESSION_LZ4_LEVEL => Some((1, 17, None)),
        COMPRESSION_ZSTD_LEVEL => Some((-131_072, 22, None)),
        _ => None,
    }
}

/// The level to recompress at under codec `compression_type`, from the topic's effective level
/// configs (`level_of(config)`); None is the codec's default (gzip's -1, or a value that does not
/// read as a level).
pub fn compression_level(
    compression_type: &str,
    level_of: impl Fn(&str) -> Option<String>,
) -> Option<i32> {
    let config = match compression_type.trim() {
        "gzip" => COMPRESSION_GZIP_LEVEL,
        "lz4" => COMPRESSION_LZ4_LEVEL,
        "zstd" => COMPRESSION_ZSTD_LEVEL,
        _ => return None,
    };
    let (min, max, also) = level_bounds(config)?;
    let level: i32 = level_of(config)?.trim().parse().ok()?;
    ((min..=max).contains(&level) && Some(level) != also).then_some(level)
}

/// `unclean.leader.election.enable`: elect an out-of-sync replica when no in-sync one is live.
pub const UNCLEAN_ELECTION: &str = "unclean.leader.election.enable";

/// A DOUBLE as Java's `Double.valueOf` reads it (Kafka's ConfigDef): a decimal with an
/// optional exponent and `d`/`f` suffix, or `NaN`/`Infinity` spelled so; Rust's spellings
/// (`inf`, `nan`, `infinity`) are not numbers to Kafka. Hexadecimal floats are refused.
pub fn parse_java_double(value: &str) -> Option<f64> {
    let v = value.trim();
    let v = v
        .strip_suffix(['d', 'D', 'f', 'F'])
        .filter(|rest| rest.ends_with(|c: char| c.is_ascii_digit() || c == '.'))
        .unwrap_or(v);
    let unsigned = v.strip_prefix(['+', '-']).unwrap_or(v);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return v.replace("Infinity", "inf").parse().ok();
    }
    if unsigned
        .chars()
        .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        return None;
    }
    v.parse().ok()
}

/// A BOOLEAN setting's value as Kafka's ConfigDef takes it (`true` or `false`, any case); the
/// error is Kafka's message.
pub fn validate_boolean(name: &str, value: &str) -> Result<(), String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "false" => Ok(()),
        _ => Err(format!(
            "Invalid value {value} for configuration {name}: Expected value to be either true \
             or false"
        )),
    }
}

/// Checks a value against its definition; the error is Kafka's INVALID_CONFIG message.
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), String> {
    let Some(d) = topic_config(name) else {
        return Err(format!("Unknown topic config name: {name}"));
    };
    let bad = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    let number = match d.kind {
        Boolean => return validate_boolean(name, value),
        Int => value.trim().parse::<i32>().map(f64::from).ok(),
        ConfigType::Short => value.trim().parse::<i16>().map(f64::from).ok(),
        Long => value.trim().parse::<i64>().map(|v| v as f64).ok(),
        Double => parse_java_double(value),
        ConfigType::String | ConfigType::Password => {
            return if d.choices.is_empty() || d.choices.contains(&value.trim()) {
                Ok(())
            } else {
                bad(&format!("String must be one of: {}", d.choices.join(", ")))
            }
        }
        List => {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            return if d.choices.is_empty() || items.iter().all(|i| d.choices.contains(i)) {
                Ok(())
            } else {
                bad(&format!(
                    "List items must be among: {}",
                    d.choices.join(", ")
                ))
            };
        }
    };
    if let (Some(n), Some((min, max, also))) = (number, level_bounds(name)) {
        let (min, max) = (f64::from(min), f64::from(max));
        if (min..=max).contains(&n) || also.is_some_and(|also| n == f64::from(also)) {
            return Ok(());
        }
        return match also {
            Some(also) => bad(&format!(
                "Value must be between {min} and {max} or equal to {also}"
            )),
            None if n < min => bad(&format!("Value must be at least {min}")),
            None => bad(&format!("Value must be no more than {max}")),
        };
    }
    match number {
        None => bad(&format!("Not a number of type {}", d.kind.java_name())),
        Some(n) => match d.min {
            Some(min) if n < min => bad(&format!("Value must be at least {min}")),
            _ => Ok(()),
        },
    }
}

/// Checks rules between a topic's configs, as Kafka's `LogConfig.validateValues` does (a
/// config not set counts at the broker's default, `lag_defaults` (min, max)):
/// `min.compaction.lag.ms` may not exceed `max.compaction.lag.ms`. The error is Kafka's
/// INVALID_CONFIG message.
pub fn validate_topic_config_set<'a>(
    configs: impl IntoIterator<Item = (&'a str, &'a str)>,
    lag_defaults: (i64, i64),
) -> Result<(), String> {
    let (mut min_lag, mut max_lag) = lag_defaults;
    for (name, value) in configs {
        match name {
            "min.compaction.lag.ms" => min_lag = value.trim().parse().unwrap_or(min_lag),
            "max.compaction.lag.ms" => max_lag = value.trim().parse().unwrap_or(max_lag),
            _ => {}
        }
    }
    if min_lag > max_lag {
        return Err(format!(
            "conflict topic config setting min.compaction.lag.ms ({min_lag}) > \
             max.compaction.lag.ms ({max_lag})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn unclean_election_is_a_boolean_and_throttles_are_kept() {
        assert!(validate_topic_config(UNCLEAN_ELECTION, "false").is_ok());
        assert!(validate_topic_config(UNCLEAN_ELECTION, "TRUE").is_ok());
        assert!(validate_topic_config(UNCLEAN_ELECTION, "yes").is_err());
        assert!(validate_topic_config(THROTTLED_REPLICAS_LEADER, "0:1,1:2").is_ok());
        assert!(validate_topic_config(THROTTLED_REPLICAS_FOLLOWER, "*").is_ok());
    }

    use super::*;

    #[test]
    fn catalog_is_sorted_and_defaults_validate() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        for d in TOPIC_CONFIGS.iter().filter(|d| d.name != "mirror.name") {
            validate_topic_config(d.name, d.default).unwrap();
        }
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(validate_topic_config("retention.ms", "abc").is_err());
        assert!(validate_topic_config("segment.bytes", "10").is_err());
        assert!(validate_topic_config("segment.bytes", "99999999999").is_err());
        assert!(validate_topic_config("cleanup.policy", "compact,bogus").is_err());
        assert!(validate_topic_config("no.such.config", "1").is_err());
        assert!(validate_topic_config("preallocate", "maybe").is_err());
        validate_topic_config("cleanup.policy", "compact,delete").unwrap();
        assert_eq!(
            validate_topic_config_set(
                [
                    ("min.compaction.lag.ms", "5000"),
                    ("max.compaction.lag.ms", "1000")
                ],
                (0, i64::MAX)
            ),
            Err(
                "conflict topic config setting min.compaction.lag.ms (5000) > \
                 max.compaction.lag.ms (1000)"
                    .to_string()
            )
        );
        assert!(
            validate_topic_config_set([("min.compaction.lag.ms", "5000")], (0, i64::MAX)).is_ok()
        );
        // A lag the topic does not set counts at the broker's default.
        assert_eq!(
            validate_topic_config_set([("min.compaction.lag.ms", "5000")], (0, 2000)),
            Err(
                "conflict topic config setting min.compaction.lag.ms (5000) > \
                 max.compaction.lag.ms (2000)"
                    .to_string()
            )
        );
        assert!(validate_topic_config_set([("max.compaction.lag.ms", "1000")], (500, 9)).is_ok());
    }

    #[test]
    fn compression_levels_are_checked_and_read_as_kafka_does() {
        validate_topic_config(COMPRESSION_GZIP_LEVEL, "-1").unwrap();
        validate_topic_config(COMPRESSION_GZIP_LEVEL, "9").unwrap();
        assert_eq!(
            validate_topic_config(COMPRESSION_GZIP_LEVEL, "0"),
            Err(
                "Invalid value 0 for configuration compression.gzip.level: Value must be \
                 between 1 and 9 or equal to -1"
                    .to_string()
            )
        );
        assert_eq!(
            validate_topic_config(COMPRESSION_LZ4_LEVEL, "18"),
            Err(
                "Invalid value 18 for configuration compression.lz4.level: Value must be no \
                 more than 17"
                    .to_string()
            )
        );
        validate_topic_config(COMPRESSION_ZSTD_LEVEL, "-131072").unwrap();
        assert!(validate_topic_config(COMPRESSION_ZSTD_LEVEL, "-131073").is_err());
        assert!(validate_topic_config(COMPRESSION_ZSTD_LEVEL, "23").is_err());
        assert_eq!(
            validate_topic_config(COMPRESSION_ZSTD_LEVEL, "high"),
            Err(
                "Invalid value high for configuration compression.zstd.level: Not a number of \
                 type INT"
                    .to_string()
            )
        );

        let set = |config: &str, value: &'static str| {
            let config = config.to_string();
            move |c: &str| (c == config).then(|| value.to_string())
        };
        assert_eq!(
            compression_level("zstd", set(COMPRESSION_ZSTD_LEVEL, "19")),
            Some(19)
        );
        assert_eq!(
            compression_level("gzip", set(COMPRESSION_GZIP_LEVEL, "1")),
            Some(1)
        );
        // gzip's -1 is zlib's own default; another codec's level does not apply.
        assert_eq!(
            compression_level("gzip", set(COMPRESSION_GZIP_LEVEL, "-1")),
            None
        );
        assert_eq!(
            compression_level("gzip", set(COMPRESSION_ZSTD_LEVEL, "5")),
            None
        );
        assert_eq!(
            compression_level("producer", set(COMPRESSION_ZSTD_LEVEL, "5")),
            None
        );
    }

    #[test]
    fn booleans_read_as_kafka_reads_them() {
        assert!(validate_boolean("x", " TRUE ").is_ok());
        assert_eq!(
            validate_boolean("x", "maybe"),
            Err(
                "Invalid value maybe for configuration x: Expected value to be either true or \
                 false"
                    .to_string()
            )
        );
        assert!(validate_topic_config("preallocate", "yes").is_err());
    }

    #[test]
    fn doubles_read_as_java_reads_them() {
        assert_eq!(parse_java_double(" 0.5 "), Some(0.5));
        assert_eq!(parse_java_double("1e-2"), Some(0.01));
        assert_eq!(parse_java_double("2d"), Some(2.0));
        assert_eq!(parse_java_double("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_java_double("NaN").is_some_and(f64::is_nan));
        for rust_only in ["inf", "nan", "infinity", "INF", "1.5x", "0x1p3", "d"] {
            assert_eq!(parse_java_double(rust_only), None, "{rust_only}");
        }
        assert!(validate_topic_config("min.cleanable.dirty.ratio", "inf").is_err());
        validate_topic_config("retention.ms", "-1").unwrap();
    }
}
