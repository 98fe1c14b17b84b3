//! Per-topic log configuration with Kafka's names and defaults.

pub use tern_protocol::record_batch::TimestampType;

use crate::error::StorageError;

/// `cleanup.policy`: delete, compact, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Old segments are removed by retention.
    pub delete: bool,
    /// Segments are compacted by key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

/// Topic-level log settings (Kafka topic config names in the field docs).
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment past this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment after this age.
    pub segment_ms: i64,
    /// `segment.index.bytes`: maximum size of an offset or time index.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes between offset index entries.
    pub index_interval_bytes: u64,
    /// `retention.ms`: age beyond which segments are deleted; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: size beyond which old segments are deleted; -1 for no limit.
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record stays uncompacted at most this long (the log is cleaned
    /// below its dirty ratio then, and its active segment rolls at this age).
    pub max_compaction_lag_ms: i64,
    /// `flush.messages`: fsync after this many messages.
    pub flush_messages: i64,
    /// `flush.ms`: fsync after this much time.
    pub flush_ms: i64,
    /// `file.delete.delay.ms`: delay before removing `.deleted` files.
    pub file_delete_delay_ms: i64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `preallocate`: create segment files at full size.
    pub preallocate: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            segment_index_bytes: 10_485_760,
            index_interval_bytes: 4096,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::default(),
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            file_delete_delay_ms: 60_000,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            preallocate: false,
        }
    }
}

fn invalid(name: &str, reason: impl Into<String>) -> StorageError {
    StorageError::InvalidConfig {
        name: name.to_string(),
        reason: reason.into(),
    }
}

fn parse_i64(name: &str, value: &str, min: i64) -> Result<i64, StorageError> {
    let v: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(name, format!("{value:?} is not an integer")))?;
    if v < min {
        return Err(invalid(name, format!("{v} is below the minimum {min}")));
    }
    Ok(v)
}

impl LogConfig {
    /// The age at which the active segment rolls: `segment.ms`, or `max.compaction.lag.ms`
    /// when that is sooner on a compacted log (Kafka's rule, so that no record waits in the
    /// active segment past its compaction deadline).
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms > 0 {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// Sets one topic config by its Kafka name. Returns `Ok(false)` for a name this layer does not use.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, StorageError> {
        match name {
            // Kafka's minimum segment size keeps a segment able to hold a batch header.
            "segment.bytes" => self.segment_bytes = parse_i64(name, value, 14)? as u64,
            "segment.ms" => self.segment_ms = parse_i64(name, value, 1)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_i64(name, value, 8)? as u64,
            "index.interval.bytes" => self.index_interval_bytes = parse_i64(name, value, 0)? as u64,
            "retention.ms" => self.retention_ms = parse_i64(name, value, -1)?,
            "retention.bytes" => self.retention_bytes = parse_i64(name, value, -1)?,
            "cleanup.policy" => {
                let mut policy = CleanupPolicy {
                    delete: false,
                    compact: false,
                };
                for part in value.split(',').map(str::trim) {
                    match part {
                        "delete" => policy.delete = true,
                        "compact" => policy.compact = true,
                        other => return Err(invalid(name, format!("unknown policy {other:?}"))),
                    }
                }
                self.cleanup_policy = policy;
            }
            "delete.retention.ms" => self.delete_retention_ms = parse_i64(name, value, 0)?,
            "min.cleanable.dirty.ratio" => {
                let v: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(name, format!("{value:?} is not a number")))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(invalid(name, format!("{v} is not in [0, 1]")));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = parse_i64(name, value, 0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = parse_i64(name, value, 1)?,
            "flush.messages" => self.flush_messages = parse_i64(name, value, 1)?,
            "flush.ms" => self.flush_ms = parse_i64(name, value, 0)?,
            "file.delete.delay.ms" => self.file_delete_delay_ms = parse_i64(name, value, 0)?,
            "max.message.bytes" => self.max_message_bytes = parse_i64(name, value, 0)? as usize,
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    other => return Err(invalid(name, format!("unknown type {other:?}"))),
                }
            }
            "preallocate" => {
                self.preallocate = match value.trim() {
                    "true" => true,
                    "false" => false,
                    other => return Err(invalid(name, format!("{other:?} is not a boolean"))),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
impl LogConfig {
    /// A log that is compacted only, with segments of `segment_bytes`, for tests.
    pub(crate) fn compacted_for_tests(segment_bytes: u64) -> LogConfig {
        LogConfig {
            segment_bytes,
            cleanup_policy: CleanupPolicy {
                delete: false,
                compact: true,
            },
            ..LogConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kafka() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.retention_ms, 7 * 24 * 3600 * 1000);
        assert!(c.cleanup_policy.delete && !c.cleanup_policy.compact);
        assert_eq!(c.max_message_bytes, 1_048_588);
    }

    #[test]
    fn compacted_logs_roll_by_max_compaction_lag() {
        let mut c = LogConfig::default();
        assert!(c.set("max.compaction.lag.ms", "1000").unwrap());
        assert_eq!(c.max_segment_ms(), c.segment_ms, "not compacted");
        c.set("cleanup.policy", "compact").unwrap();
        assert_eq!(c.max_segment_ms(), 1000);
        c.set("segment.ms", "500").unwrap();
        assert_eq!(c.max_segment_ms(), 500);
        assert!(c.set("max.compaction.lag.ms", "0").is_err());
    }

    #[test]
    fn set_parses_kafka_names() {
        let mut c = LogConfig::default();
        assert!(c.set("cleanup.policy", "compact,delete").unwrap());
        assert_eq!(
            c.cleanup_policy,
            CleanupPolicy {
                delete: true,
                compact: true
            }
        );
        assert!(c.set("retention.ms", "-1").unwrap());
        assert_eq!(c.retention_ms, -1);
        assert!(c.set("message.timestamp.type", "LogAppendTime").unwrap());
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        assert!(!c.set("compression.type", "zstd").unwrap());
        assert!(matches!(
            c.set("segment.bytes", "x"),
            Err(StorageError::InvalidConfig { .. })
        ));
        assert!(c.set("cleanup.policy", "bogus").is_err());
        assert!(c.set("min.cleanable.dirty.ratio", "1.5").is_err());
    }
}
