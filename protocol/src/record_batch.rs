//! A view of a record batch (magic v2) header, read and patched in place without touching the
//! records. The layout (all big-endian):
//!
//! ```text
//! 0  base_offset i64            8  batch_length i32 (bytes after this field)
//! 12 partition_leader_epoch i32 16 magic i8       17 crc u32 (CRC32C of bytes 21..)
//! 21 attributes i16             23 last_offset_delta i32
//! 27 base_timestamp i64         35 max_timestamp i64
//! 43 producer_id i64            51 producer_epoch i16  53 base_sequence i32
//! 57 records_count i32          61 records...
//! ```
//!
//! Base offset and partition leader epoch lie outside the CRC, so a broker may rewrite them.

use bytes::Bytes;

/// Length of the fixed batch header.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes before and including `batch_length`; `batch_length` counts what follows.
pub const LOG_OVERHEAD: usize = 12;
/// The only message format version Tern stores.
pub const MAGIC_V2: i8 = 2;
/// Producer id of a batch written without an idempotent producer.
pub const NO_PRODUCER_ID: i64 = -1;
/// Producer epoch of a batch written without an idempotent producer.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// Sequence of a batch written without an idempotent producer.
pub const NO_SEQUENCE: i32 = -1;
/// Partition leader epoch meaning "unknown".
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

const OFF_BASE_OFFSET: usize = 0;
const OFF_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORDS_COUNT: usize = 57;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
/// Attributes bit: timestamps are LOG_APPEND_TIME (clear: CREATE_TIME).
pub(crate) const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
/// Attributes bit: the batch belongs to a transaction.
pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Attributes bit: the batch holds control records (transaction markers).
pub(crate) const ATTR_CONTROL: i16 = 0x20;
pub(crate) const ATTR_DELETE_HORIZON: i16 = 0x40;

/// Why bytes are not a valid record batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than a header, or than the declared length.
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// `batch_length` is smaller than a header or larger than allowed.
    #[error("record batch length {0} is invalid")]
    InvalidLength(i32),
    /// A message format other than v2.
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// The stored CRC32C does not match the bytes.
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CorruptCrc {
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// Header fields that contradict each other (e.g. a negative record count).
    #[error("record batch header is inconsistent: {0}")]
    Inconsistent(&'static str),
    /// An unknown compression codec id in the attributes.
    #[error("unknown compression codec id {0}")]
    UnknownCompression(i16),
}

/// Compression codec named by a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Uncompressed records.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy, in Kafka's xerial framing when produced by the Java client.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The codec for an attributes id, if known.
    pub fn from_id(id: i16) -> Result<Self, BatchError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(BatchError::UnknownCompression(other)),
        }
    }

    /// The attributes id of this codec.
    pub fn id(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's config name (`compression.type` values).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Timestamp semantics of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Timestamps set by the producer.
    CreateTime,
    /// Timestamps set by the broker on append (`max_timestamp` holds it).
    LogAppendTime,
}

/// The decoded fixed header of one record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the length field.
    pub batch_length: i32,
    /// Leader epoch of the partition when the batch was appended.
    pub partition_leader_epoch: i32,
    /// Message format version.
    pub magic: i8,
    /// CRC32C of the bytes from `attributes` to the end.
    pub crc: u32,
    /// Compression, timestamp type, transactional, control and delete-horizon bits.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record (or the delete horizon when that bit is set).
    pub base_timestamp: i64,
    /// Largest record timestamp in the batch.
    pub max_timestamp: i64,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Idempotent producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

impl RecordBatchHeader {
    /// Reads the header at the start of `buf`. Checks lengths and magic but not the CRC.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            // Magic is readable earlier than the full header; report an old format clearly.
            if buf.len() > OFF_MAGIC && buf[OFF_MAGIC] as i8 != MAGIC_V2 {
                return Err(BatchError::UnsupportedMagic(buf[OFF_MAGIC] as i8));
            }
            return Err(BatchError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let magic = buf[OFF_MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(buf, OFF_LENGTH);
        if batch_length < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32 {
            return Err(BatchError::InvalidLength(batch_length));
        }
        let header = RecordBatchHeader {
            base_offset: be_i64(buf, OFF_BASE_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(buf, OFF_LEADER_EPOCH),
            magic,
            crc: u32::from_be_bytes([
                buf[OFF_CRC],
                buf[OFF_CRC + 1],
                buf[OFF_CRC + 2],
                buf[OFF_CRC + 3],
            ]),
            attributes: be_i16(buf, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(buf, OFF_LAST_OFFSET_DELTA),
            base_timestamp: be_i64(buf, OFF_BASE_TIMESTAMP),
            max_timestamp: be_i64(buf, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(buf, OFF_PRODUCER_ID),
            producer_epoch: be_i16(buf, OFF_PRODUCER_EPOCH),
            base_sequence: be_i32(buf, OFF_BASE_SEQUENCE),
            records_count: be_i32(buf, OFF_RECORDS_COUNT),
        };
        if header.records_count < 0 {
            return Err(BatchError::Inconsistent("negative records count"));
        }
        if header.last_offset_delta < 0 {
            return Err(BatchError::Inconsistent("negative last offset delta"));
        }
        // The offset after the batch must be an offset: next_offset() is then exact (past
        // i64::MAX it overflowed, a panic under overflow checks and a negative offset without).
        if header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .is_none()
        {
            return Err(BatchError::Inconsistent("last offset past i64::MAX"));
        }
        Ok(header)
    }

    /// Total size of the batch in bytes, header included.
    pub fn size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// Offset right after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// The compression codec.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_id(self.attributes & ATTR_COMPRESSION_MASK)
    }

    /// CreateTime or LogAppendTime.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & ATTR_TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// A control batch (transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// The base timestamp holds the delete horizon (set by compaction).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & ATTR_DELETE_HORIZON != 0
    }

    /// KIP-534: the time from which compaction may remove the batch's tombstones (or the
    /// marker), once a pass has set it; None before.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon().then_some(self.base_timestamp)
    }

    /// Written by an idempotent or transactional producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence of the last record (wrapping at i32::MAX as Kafka does).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        if last > i32::MAX as i64 {
            (last - i32::MAX as i64 - 1) as i32
        } else {
            last as i32
        }
    }
}

/// Computes the CRC32C a batch should carry (over bytes 21 to the end of the batch).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[OFF_ATTRIBUTES..])
}

/// Parses the header of the batch at the start of `buf`, checks the whole batch is present and
/// that its CRC matches. Returns the header; the batch is `&buf[..header.size()]`.
pub fn validate_batch(buf: &[u8]) -> Result<RecordBatchHeader, BatchError> {
    let header = RecordBatchHeader::parse(buf)?;
    let size = header.size();
    if buf.len() < size {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    let computed = compute_crc(&buf[..size]);
    if computed != header.crc {
        return Err(BatchError::CorruptCrc {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Rewrites the base offset of the batch at the start of `batch`. Outside the CRC.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites the partition leader epoch of the batch at the start of `batch`. Outside the CRC.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Sets the max timestamp and the LogAppendTime bit, then recomputes the CRC (these fields
/// are inside it). Used when a topic has `message.timestamp.type=LogAppendTime`.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    let attributes = be_i16(batch, OFF_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE;
    batch[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates over the batches of a buffer holding whole batches back to back, validating each
/// header (not the CRC). Stops with an error at the first bad or partial batch.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    /// Iterates over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter { buf, pos: 0 }
    }

    /// Byte position of the next batch.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(RecordBatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let header = match RecordBatchHeader::parse(rest) {
            Ok(h) => h,
            Err(e) => {
                self.pos = self.buf.len();
                return Some(Err(e));
            }
        };
        let size = header.size();
        if rest.len() < size {
            self.pos = self.buf.len();
            return Some(Err(BatchError::Truncated {
                needed: size,
                available: rest.len(),
            }));
        }
        self.pos += size;
        Some(Ok((header, &rest[..size])))
    }
}

/// Splits a `Bytes` of whole batches into one `Bytes` per batch without copying.
pub fn split_batches(buf: &Bytes) -> Result<Vec<(RecordBatchHeader, Bytes)>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0;
    for item in BatchIter::new(buf) {
        let (header, slice) = item?;
        out.push((header, buf.slice(pos..pos + slice.len())));
        pos += slice.len();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid batch with `count` empty-bodied records claimed (records bytes are opaque here).
    fn sample_batch(base_offset: i64, last_offset_delta: i32, body: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; RECORD_BATCH_OVERHEAD];
        b.extend_from_slice(body);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[OFF_BASE_OFFSET..8].copy_from_slice(&base_offset.to_be_bytes());
        b[OFF_LENGTH..12].copy_from_slice(&len.to_be_bytes());
        b[OFF_MAGIC] = 2;
        b[OFF_LAST_OFFSET_DELTA..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        b[OFF_PRODUCER_ID..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[OFF_RECORDS_COUNT..61].copy_from_slice(&(last_offset_delta + 1).to_be_bytes());
        let crc = compute_crc(&b);
        b[OFF_CRC..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn from_hex(hex: &str) -> Vec<u8> {
        let hex: String = hex.split_whitespace().collect();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Found by the fuzz targets (`fuzz/`, the internal-topic loaders): a batch at base offset
    /// i64::MAX, CRC right, whose next offset overflowed in `next_offset()`.
    #[test]
    fn a_batch_past_the_last_offset_is_refused() {
        let at_max = from_hex(
            "7fffffffffffffff0000003a0000000002e99b8dd80000000000000000018bcf
             e568000000018bcfe56800ffffffffffffffffffffffffffff00000001100000
             00026b027600",
        );
        let refused = Err(BatchError::Inconsistent("last offset past i64::MAX"));
        assert_eq!(RecordBatchHeader::parse(&at_max), refused);
        assert_eq!(validate_batch(&at_max), refused);
        assert!(matches!(
            BatchIter::new(&at_max).next(),
            Some(Err(BatchError::Inconsistent(_)))
        ));
        // One below: the batch ends at i64::MAX, and next_offset() says so.
        let below = sample_batch(i64::MAX - 1, 0, b"");
        assert_eq!(validate_batch(&below).unwrap().next_offset(), i64::MAX);
        let delta_too_far = sample_batch(i64::MAX - 4, 4, b"");
        assert!(validate_batch(&delta_too_far).is_err());
    }

    #[test]
    fn valid_batch_round_trips_header_fields() {
        let b = sample_batch(42, 4, b"abc");
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.last_offset(), 46);
        assert_eq!(h.size(), b.len());
        assert_eq!(h.records_count, 5);
        assert_eq!(h.compression().unwrap(), Compression::None);
    }

    #[test]
    fn flipped_byte_inside_crc_range_is_rejected() {
        let mut b = sample_batch(0, 0, b"hello");
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(
            validate_batch(&b),
            Err(BatchError::CorruptCrc { .. })
        ));
    }

    #[test]
    fn offset_and_epoch_patches_keep_crc_valid() {
        let mut b = sample_batch(0, 2, b"xyz");
        set_base_offset(&mut b, 1000);
        set_partition_leader_epoch(&mut b, 7);
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.base_offset, 1000);
        assert_eq!(h.partition_leader_epoch, 7);
    }

    #[test]
    fn log_append_time_patch_recomputes_crc() {
        let mut b = sample_batch(0, 0, b"x");
        set_log_append_time(&mut b, 123);
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.max_timestamp, 123);
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    }

    #[test]
    fn truncated_and_bad_magic_are_errors() {
        let b = sample_batch(0, 0, b"abc");
        assert!(matches!(
            validate_batch(&b[..b.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate_batch(&b[..10]),
            Err(BatchError::Truncated { .. })
        ));
        let mut old = b.clone();
        old[OFF_MAGIC] = 1;
        assert_eq!(validate_batch(&old), Err(BatchError::UnsupportedMagic(1)));
        let mut short = b.clone();
        short[OFF_LENGTH..12].copy_from_slice(&3i32.to_be_bytes());
        assert_eq!(validate_batch(&short), Err(BatchError::InvalidLength(3)));
    }

    #[test]
    fn split_batches_yields_each_batch() {
        let mut buf = sample_batch(0, 1, b"a");
        buf.extend(sample_batch(2, 0, b"bb"));
        let buf = Bytes::from(buf);
        let parts = split_batches(&buf).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].0.base_offset, 2);
        assert_eq!(parts[0].1.len() + parts[1].1.len(), buf.len());
    }

    #[test]
    fn last_sequence_wraps() {
        let mut h = RecordBatchHeader::parse(&sample_batch(0, 4, b"")).unwrap();
        h.base_sequence = i32::MAX - 1;
        assert_eq!(h.last_sequence(), 2);
    }
}
