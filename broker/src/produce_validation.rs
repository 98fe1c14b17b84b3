//! The few produce paths where Kafka must look inside batches: a topic whose
//! `compression.type` names a codec other than the batch's (recompress), compacted topics
//! (every record needs a key), and a batch whose header timestamps fall outside the topic's
//! `message.timestamp.{before,after}.max.ms` (to name the records at fault). Everything else passes
//! through as the bytes that arrived.

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use tern_protocol::error::ApiError;
use tern_protocol::record_batch::{split_batches, BatchIter, Compression, TimestampType};
use tern_protocol::records::{decode_records, RecordBatchBuilder};

/// What a topic's configs ask of incoming batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicWritePolicy {
    /// Codec every stored batch must use; `None` keeps the producer's.
    pub compression: Option<Compression>,
    /// `cleanup.policy` includes compact.
    pub compacted: bool,
    /// CreateTime topics: how far before and after the broker's clock a record's timestamp may be
    /// (`message.timestamp.before.max.ms`, `message.timestamp.after.max.ms`).
    pub timestamp_window: Option<(i64, i64)>,
    /// KIP-390 level to recompress at (`compression.<codec>.level`); None: the codec's default.
    pub compression_level: Option<i32>,
}

impl TopicWritePolicy {
    /// Reads the policy from a topic's effective `compression.type` and `cleanup.policy`.
    pub fn from_configs(compression_type: &str, cleanup_policy: &str) -> Self {
        let compression = match compression_type.trim() {
            "uncompressed" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        };
        let compacted = cleanup_policy.split(',').any(|p| p.trim() == "compact");
        TopicWritePolicy {
            compression,
            compacted,
            timestamp_window: None,
            compression_level: None,
        }
    }

    /// Sets the level recompression uses (see [`tern_controller::topic_configs::compression_level`]).
    pub fn with_compression_level(mut self, level: Option<i32>) -> Self {
        self.compression_level = level;
        self
    }

    /// Adds the timestamp window of a topic whose `message.timestamp.type` is `timestamp_type`
    /// (none under LogAppendTime, where the broker sets every timestamp).
    pub fn with_timestamps(mut self, timestamp_type: &str, before_ms: i64, after_ms: i64) -> Self {
        self.timestamp_window =
            (timestamp_type.trim() != "LogAppendTime").then_some((before_ms, after_ms));
        self
    }

    /// Whether batches may be stored exactly as they arrived without looking inside.
    pub fn is_passthrough(&self) -> bool {
        self.compression.is_none() && !self.compacted
    }
}

fn invalid(message: impl Into<String>) -> Refused {
    ApiError::new(ResponseError::InvalidRecord, message).into()
}

/// Why a produce was refused: the error, and (KIP-467) the records that caused it, by their
/// index in the request's records with a message each, as Kafka's `record_errors` name them.
#[derive(Debug)]
pub struct Refused {
    /// The partition's error code and message.
    pub error: ApiError,
    /// `(batch_index, message)` of each record at fault.
    pub record_errors: Vec<(i32, String)>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Self {
        Refused {
            error,
            record_errors: Vec::new(),
        }
    }
}

/// How many record errors Kafka's summary message quotes.
const QUOTED_RECORD_ERRORS: usize = 3;

/// INVALID_RECORD naming every keyless record of a compacted topic, worded as Kafka words it.
fn keyless(indexes: &[i32], partition: &str) -> Refused {
    let record_errors: Vec<(i32, String)> = indexes
        .iter()
        .map(|&i| {
            (
                i,
                format!("Compacted topic cannot accept message without key in topic partition {partition}."),
            )
        })
        .collect();
    let quoted: Vec<String> = record_errors
        .iter()
        .take(QUOTED_RECORD_ERRORS)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    Refused {
        error: ApiError::new(
            ResponseError::InvalidRecord,
            format!(
                "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                record_errors.len(),
                quoted.join(", ")
            ),
        ),
        record_errors,
    }
}

/// Kafka's summary message for records refused for their timestamps.
const INVALID_TIMESTAMPS: &str = "One or more records have been rejected due to invalid timestamp";

/// INVALID_TIMESTAMP naming each record whose timestamp is outside `[now - before, now + after]`.
/// With `before` unbounded (the default) only the batch headers are read: the max timestamp
/// bounds every record from above, and a batch is decoded only when it is out of the window, to
/// name its records. A bounded `before` needs each record's timestamp (a batch's records may come
/// in any time order), so then every batch is decoded.
fn check_timestamps(
    records: &[u8],
    (before, after): (i64, i64),
    now: i64,
    max_uncompressed: usize,
) -> Result<(), Refused> {
    let (low, high) = (now.saturating_sub(before), now.saturating_add(after));
    let outside = |ts: i64| ts != -1 && (ts < low || ts > high);
    let mut record_errors = Vec::new();
    let mut first_index = 0i32;
    for item in BatchIter::new(records) {
        let (header, batch) =
            item.map_err(|e| ApiError::new(ResponseError::CorruptMessage, e.to_string()))?;
        let checked = !header.is_control() && header.timestamp_type() == TimestampType::CreateTime;
        let suspect =
            before != i64::MAX || outside(header.base_timestamp) || outside(header.max_timestamp);
        if checked && suspect {
            let (_, decoded) = decode_records(batch, max_uncompressed)
                .map_err(|e| ApiError::new(ResponseError::CorruptMessage, e.to_string()))?;
            for (i, r) in decoded.iter().enumerate() {
                if outside(r.timestamp) {
                    record_errors.push((
                        first_index + i as i32,
                        format!(
                            "Timestamp {} of message with offset {} is out of range. The \
                             timestamp should be within [{low}, {high}]",
                            r.timestamp, r.offset
                        ),
                    ));
                }
            }
        }
        first_index += header.records_count.max(0);
    }
    if record_errors.is_empty() {
        return Ok(());
    }
    Err(Refused {
        error: ApiError::new(ResponseError::InvalidTimestamp, INVALID_TIMESTAMPS),
        record_errors,
    })
}

/// Applies the policy to a produce request's records (of `partition`, `topic-N`, named in
/// errors) at broker time `now` (ms); returns the bytes to append.
pub fn prepare(
    records: &Bytes,
    policy: TopicWritePolicy,
    max_uncompressed: usize,
    partition: &str,
    now: i64,
) -> Result<BytesMut, Refused> {
    // Markers come from transaction coordinators only (Kafka's LogValidator).
    let control = tern_protocol::record_batch::BatchIter::new(records)
        .any(|b| b.is_ok_and(|(h, _)| h.is_control()));
    if control {
        return Err(ApiError::new(
            ResponseError::InvalidRecord,
            format!(
                "Clients are not allowed to write control records in topic partition {partition}."
            ),
        )
        .into());
    }
    if let Some(window) = policy.timestamp_window {
        check_timestamps(records, window, now, max_uncompressed)?;
    }
    if policy.is_passthrough() {
        return Ok(BytesMut::from(&records[..]));
    }
    let batches = split_batches(records)
        .map_err(|e| ApiError::new(ResponseError::CorruptMessage, e.to_string()))?;
    let mut out = BytesMut::with_capacity(records.len());
    // Record indexes count across the request's batches, as Kafka's do.
    let mut first_index = 0i32;
    for (header, batch) in batches {
        let codec = header
            .compression()
            .map_err(|e| ApiError::new(ResponseError::CorruptMessage, e.to_string()))?;
        let recompress = policy.compression.is_some_and(|c| c != codec);
        if !recompress && !policy.compacted {
            out.extend_from_slice(&batch);
            continue;
        }
        let (_, decoded) = decode_records(&batch, max_uncompressed)
            .map_err(|e| ApiError::new(ResponseError::CorruptMessage, e.to_string()))?;
        if policy.compacted && !header.is_control() {
            let missing: Vec<i32> = decoded
                .iter()
                .enumerate()
                .filter(|(_, r)| r.key.is_none())
                .map(|(i, _)| first_index + i as i32)
                .collect();
            if !missing.is_empty() {
                return Err(keyless(&missing, partition));
            }
        }
        first_index += decoded.len() as i32;
        if !recompress {
            out.extend_from_slice(&batch);
            continue;
        }
        let target = policy.compression.unwrap_or(codec);
        let mut builder = RecordBatchBuilder::new(target)
            .compression_level(policy.compression_level)
            .timestamp_type(header.timestamp_type())
            .producer(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
            )
            .transactional(header.is_transactional())
            .control(header.is_control());
        for r in &decoded {
            builder
                .push_with_offset(
                    // The record's own delta: its offset wrapped if the batch's base offset
                    // (which the log replaces) plus the delta passed i64::MAX.
                    r.offset.wrapping_sub(header.base_offset),
                    r.timestamp,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                )
                .map_err(|e| invalid(e.to_string()))?;
        }
        let rebuilt = builder.build().map_err(|e| invalid(e.to_string()))?;
        out.extend_from_slice(&rebuilt);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_protocol::record_batch::validate_batch;

    fn batch(codec: Compression, keys: &[Option<&[u8]>]) -> Bytes {
        let mut b = RecordBatchBuilder::new(codec).producer(7, 1, 10);
        for (i, k) in keys.iter().enumerate() {
            b.push(100 + i as i64, *k, Some(b"value"), &[]).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn passthrough_keeps_bytes() {
        let b = batch(Compression::Lz4, &[Some(b"k")]);
        let out = prepare(
            &b,
            TopicWritePolicy::from_configs("producer", "delete"),
            1 << 20,
            "t-0",
            0,
        )
        .unwrap();
        assert_eq!(&out[..], &b[..]);
    }

    #[test]
    fn topic_codec_recompresses_and_keeps_records_and_producer_fields() {
        let b = batch(Compression::None, &[Some(b"a"), None, Some(b"c")]);
        let policy = TopicWritePolicy::from_configs("zstd", "delete");
        let out = prepare(&b, policy, 1 << 20, "t-0", 0).unwrap();
        let h = validate_batch(&out).unwrap();
        assert_eq!(h.compression().unwrap(), Compression::Zstd);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 1, 10)
        );
        let (_, before) = decode_records(&b, 1 << 20).unwrap();
        let (_, after) = decode_records(&out, 1 << 20).unwrap();
        assert_eq!(before.len(), after.len());
        for (x, y) in before.iter().zip(&after) {
            assert_eq!(
                (x.offset, x.timestamp, &x.key, &x.value),
                (y.offset, y.timestamp, &y.key, &y.value)
            );
        }
        // Same codec: untouched.
        let z = batch(Compression::Zstd, &[Some(b"a")]);
        assert_eq!(&prepare(&z, policy, 1 << 20, "t-0", 0).unwrap()[..], &z[..]);
    }

    /// KIP-390: recompression uses the topic's level, and the batch's records are the same at
    /// every level; the same codec at another level is left as it arrived.
    #[test]
    fn recompression_uses_the_topics_level() {
        let mut b = RecordBatchBuilder::new(Compression::None).producer(7, 1, 10);
        for i in 0..200 {
            let value = format!("record {i} of a run of text, {} again", i * 7919 % 1000);
            b.push(100 + i, Some(b"k"), Some(value.as_bytes()), &[])
                .unwrap();
        }
        let b = b.build().unwrap();
        let at = |level| {
            let policy =
                TopicWritePolicy::from_configs("gzip", "delete").with_compression_level(level);
            prepare(&b, policy, 1 << 20, "t-0", 0).unwrap()
        };
        let (fast, best, default) = (at(Some(1)), at(Some(9)), at(None));
        assert!(
            best.len() < fast.len(),
            "level 9: {} bytes, level 1: {}",
            best.len(),
            fast.len()
        );
        assert_ne!(default, fast);
        let (_, original) = decode_records(&b, 1 << 20).unwrap();
        for out in [&fast, &best, &default] {
            assert_eq!(
                validate_batch(out).unwrap().compression().unwrap(),
                Compression::Gzip
            );
            let (_, records) = decode_records(out, 1 << 20).unwrap();
            assert_eq!(records.len(), original.len());
            assert!(records
                .iter()
                .zip(&original)
                .all(|(x, y)| x.value == y.value));
        }
        let policy =
            TopicWritePolicy::from_configs("gzip", "delete").with_compression_level(Some(1));
        let best = best.freeze();
        assert_eq!(
            &prepare(&best, policy, 1 << 20, "t-0", 0).unwrap()[..],
            &best[..]
        );
    }

    #[test]
    fn clients_may_not_write_markers() {
        use tern_storage::record::{build_control_batch, BatchSpec};
        let marker = Bytes::from(build_control_batch(
            &BatchSpec::transactional(3, 0, -1),
            false,
        ));
        let policy = TopicWritePolicy::from_configs("producer", "delete");
        let err = prepare(&marker, policy, 1 << 20, "t-0", 0).unwrap_err();
        assert_eq!(err.error.error, ResponseError::InvalidRecord);
        assert_eq!(
            err.error.message,
            "Clients are not allowed to write control records in topic partition t-0."
        );
    }

    #[test]
    fn compacted_topic_refuses_null_keys() {
        let policy = TopicWritePolicy::from_configs("producer", "compact,delete");
        let ok = batch(Compression::Gzip, &[Some(b"a"), Some(b"b")]);
        assert_eq!(
            &prepare(&ok, policy, 1 << 20, "t-0", 0).unwrap()[..],
            &ok[..]
        );
        let bad = batch(Compression::Gzip, &[Some(b"a"), None, Some(b"c"), None]);
        let err = prepare(&bad, policy, 1 << 20, "t-3", 0).unwrap_err();
        assert_eq!(err.error.error, ResponseError::InvalidRecord);
        let expected = "Compacted topic cannot accept message without key in topic partition t-3.";
        assert_eq!(
            err.record_errors,
            vec![(1, expected.to_string()), (3, expected.to_string())]
        );
        assert!(err
            .error
            .message
            .starts_with("One or more records have been rejected due to 2 record errors in total"));
        assert!(err
            .error
            .message
            .contains(&format!("RecordError(batchIndex=3, message='{expected}')")));
    }

    #[test]
    fn record_indexes_count_across_batches() {
        let policy = TopicWritePolicy::from_configs("producer", "compact");
        let mut two = BytesMut::new();
        two.extend_from_slice(&batch(Compression::None, &[Some(b"a"), Some(b"b")]));
        two.extend_from_slice(&batch(Compression::Lz4, &[Some(b"c"), None]));
        let err = prepare(&two.freeze(), policy, 1 << 20, "t-0", 0).unwrap_err();
        assert_eq!(
            err.record_errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![3]
        );
    }

    #[test]
    fn timestamps_outside_the_window_are_named_per_record() {
        let policy = TopicWritePolicy::from_configs("producer", "delete").with_timestamps(
            "CreateTime",
            i64::MAX,
            3_600_000,
        );
        let now = 10_000_000;
        let mut b = RecordBatchBuilder::new(Compression::Lz4);
        for ts in [now, now + 3_600_000, now + 3_600_001, now - 1_000_000_000] {
            b.push(ts, Some(b"k"), Some(b"v"), &[]).unwrap();
        }
        let batch = b.build().unwrap();
        // Header max timestamp over the window: the batch is decoded, the one record named.
        let err = prepare(&batch, policy, 1 << 20, "t-0", now).unwrap_err();
        assert_eq!(err.error.error, ResponseError::InvalidTimestamp);
        assert_eq!(err.error.message, INVALID_TIMESTAMPS);
        assert_eq!(err.record_errors.len(), 1);
        assert_eq!(err.record_errors[0].0, 2);
        assert!(err.record_errors[0].1.starts_with(&format!(
            "Timestamp {} of message with offset 2 is out of range",
            now + 3_600_001
        )));
        // In the window (the old record too: before.max.ms is unbounded): bytes kept as sent.
        let ok = prepare(&batch, policy, 1 << 20, "t-0", now + 10).unwrap();
        assert_eq!(&ok[..], &batch[..]);
        // A bounded before.max.ms refuses the old record; LogAppendTime topics check nothing.
        let strict = policy.with_timestamps("CreateTime", 1_000, 3_600_000);
        let err = prepare(&batch, strict, 1 << 20, "t-0", now + 10).unwrap_err();
        assert_eq!(
            err.record_errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![3]
        );
        let append_time = policy.with_timestamps("LogAppendTime", 1, 1);
        assert!(prepare(&batch, append_time, 1 << 20, "t-0", 0).is_ok());
    }

    /// Found by the fuzz targets (`fuzz/`, `record_batch`): a batch at base offset
    /// i64::MAX - 1 whose record says offset delta 5 (its offset wraps) made the recompression
    /// subtract with overflow (a panic under overflow checks; release builds wrapped to the
    /// right delta, and the fuzz CI step replays the input with overflow checks on). The record
    /// keeps its delta in the rebuilt batch.
    #[test]
    fn recompressing_a_record_whose_offset_wraps() {
        let hex = "7ffffffffffffffe0000003a0000000002521135040000000000000000018bcf\
                   e568000000018bcfe56800ffffffffffffffffffffffffffff00000001100000\
                   0a026b027600";
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let batch = Bytes::from(bytes);
        validate_batch(&batch).unwrap();
        let policy = TopicWritePolicy::from_configs("gzip", "delete");
        let out = prepare(&batch, policy, 1 << 20, "t-0", 0).unwrap();
        let (header, records) = decode_records(&out, 1 << 20).unwrap();
        assert_eq!(header.compression(), Ok(Compression::Gzip));
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset - header.base_offset, 5);
        assert_eq!(records[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(records[0].value.as_deref(), Some(&b"v"[..]));
    }
}
