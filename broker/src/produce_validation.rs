//! The few produce paths where Kafka must look inside batches: a topic whose
//! `compression.type` names a codec other than the batch's (recompress), and compacted topics
//! (every record needs a key). Everything else passes through as the bytes that arrived.

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use tern_protocol::error::ApiError;
use tern_protocol::record_batch::{split_batches, Compression};
use tern_protocol::records::{decode_records, RecordBatchBuilder};

/// What a topic's configs ask of incoming batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicWritePolicy {
    /// Codec every stored batch must use; `None` keeps the producer's.
    pub compression: Option<Compression>,
    /// `cleanup.policy` includes compact.
    pub compacted: bool,
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
        }
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

/// Applies the policy to a produce request's records (of `partition`, `topic-N`, named in
/// errors); returns the bytes to append.
pub fn prepare(
    records: &Bytes,
    policy: TopicWritePolicy,
    max_uncompressed: usize,
    partition: &str,
) -> Result<BytesMut, Refused> {
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
                    r.offset - header.base_offset,
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
        )
        .unwrap();
        assert_eq!(&out[..], &b[..]);
    }

    #[test]
    fn topic_codec_recompresses_and_keeps_records_and_producer_fields() {
        let b = batch(Compression::None, &[Some(b"a"), None, Some(b"c")]);
        let policy = TopicWritePolicy::from_configs("zstd", "delete");
        let out = prepare(&b, policy, 1 << 20, "t-0").unwrap();
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
        assert_eq!(&prepare(&z, policy, 1 << 20, "t-0").unwrap()[..], &z[..]);
    }

    #[test]
    fn compacted_topic_refuses_null_keys() {
        let policy = TopicWritePolicy::from_configs("producer", "compact,delete");
        let ok = batch(Compression::Gzip, &[Some(b"a"), Some(b"b")]);
        assert_eq!(&prepare(&ok, policy, 1 << 20, "t-0").unwrap()[..], &ok[..]);
        let bad = batch(Compression::Gzip, &[Some(b"a"), None, Some(b"c"), None]);
        let err = prepare(&bad, policy, 1 << 20, "t-3").unwrap_err();
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
        let err = prepare(&two.freeze(), policy, 1 << 20, "t-0").unwrap_err();
        assert_eq!(
            err.record_errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![3]
        );
    }
}
