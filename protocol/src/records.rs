//! The records inside a v2 record batch: decoding them (after the CRC check and decompression)
//! and building whole batches.
//!
//! Each record (all varints zigzag-encoded, as Kafka's `ByteUtils`):
//!
//! ```text
//! length varint (bytes after it)   attributes i8   timestampDelta varlong   offsetDelta varint
//! keyLength varint, key (-1 = null)   valueLength varint, value (-1 = null)
//! headerCount varint, then per header: keyLength varint, key, valueLength varint, value (-1 = null)
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use crate::compression::{self, CompressionError};
use crate::record_batch::{
    self, BatchError, Compression, RecordBatchHeader, TimestampType, ATTR_CONTROL,
    ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, LOG_OVERHEAD, MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
};

/// Timestamp of a batch without records ("no timestamp" in Kafka).
pub const NO_TIMESTAMP: i64 = -1;

/// The smallest encoded record: length, attributes, two deltas, two null lengths, no headers.
const MIN_RECORD_SIZE: usize = 7;
/// Version of the control record key and of the end-transaction marker value.
const CONTROL_RECORD_VERSION: i16 = 0;

/// Why the records of a batch could not be decoded or a batch could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    /// The batch header is invalid or its CRC does not match.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The records section could not be (de)compressed.
    #[error(transparent)]
    Compression(#[from] CompressionError),
    /// Bytes follow the end of the batch.
    #[error("{0} bytes follow the record batch")]
    TrailingBatchData(usize),
    /// A record could not be parsed.
    #[error("malformed record {index}: {detail}")]
    Malformed {
        /// Position of the record in the batch.
        index: usize,
        /// What was wrong.
        detail: &'static str,
    },
    /// Bytes remain in the records section after `records_count` records.
    #[error("{0} bytes remain after the declared number of records")]
    TrailingRecordData(usize),
    /// An offset passed to the builder is below the previous one or out of the batch's range.
    #[error("offset {0} is not after the previous record or out of the batch's range")]
    InvalidOffset(i64),
    /// A batch being built exceeds a limit of the format.
    #[error("record batch too large: {0}")]
    TooLarge(&'static str),
}

/// A record header: a key (UTF-8 by convention, kept as bytes) and an optional value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// Header key bytes.
    pub key: Bytes,
    /// Header value, or `None` for null.
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// A header from a key and an optional value.
    pub fn new(key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        RecordHeader {
            key: key.into(),
            value,
        }
    }

    /// The key as UTF-8, if it is valid UTF-8.
    pub fn key_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.key).ok()
    }
}

/// One decoded record with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// Absolute offset (`base_offset + offsetDelta`).
    pub offset: i64,
    /// Absolute timestamp (`base_timestamp + timestampDelta`, or the batch's max timestamp
    /// under LogAppendTime).
    pub timestamp: i64,
    /// Key, or `None` for null.
    pub key: Option<Bytes>,
    /// Value, or `None` for null (a tombstone).
    pub value: Option<Bytes>,
    /// Headers in wire order.
    pub headers: Vec<RecordHeader>,
}

/// Type of a control record (the key of a record in a control batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// Transaction abort marker (type 0).
    Abort,
    /// Transaction commit marker (type 1).
    Commit,
    /// Any other type (KRaft leader change, snapshot header/footer, ...).
    Other(i16),
}

impl ControlRecordType {
    /// The wire id of this type.
    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::Other(id) => id,
        }
    }

    fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            other => ControlRecordType::Other(other),
        }
    }
}

/// The type of a control record, read from its key (version i16, type i16); `None` if the key
/// is missing, shorter than 4 bytes or has a negative version. Newer versions are accepted.
pub fn control_record_type(record: &Record) -> Option<ControlRecordType> {
    let key = record.key.as_ref()?;
    let version = i16::from_be_bytes([*key.first()?, *key.get(1)?]);
    if version < 0 {
        return None;
    }
    let id = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    Some(ControlRecordType::from_id(id))
}

/// The coordinator epoch of an end-transaction marker, read from the value of a commit or
/// abort control record (version i16, coordinator epoch i32); `None` if it is malformed.
pub fn end_txn_coordinator_epoch(record: &Record) -> Option<i32> {
    let value = record.value.as_ref()?;
    let (version, rest) = value.split_first_chunk::<2>()?;
    if i16::from_be_bytes(*version) < 0 {
        return None;
    }
    let (epoch, _) = rest.split_first_chunk::<4>()?;
    Some(i32::from_be_bytes(*epoch))
}

/// Validates the batch (header, CRC32C), decompresses its records section with the batch's
/// codec (at most `max_uncompressed` bytes, which also bounds an uncompressed section) and
/// decodes exactly `records_count` records. `batch` must hold exactly one batch.
pub fn decode_records(
    batch: &[u8],
    max_uncompressed: usize,
) -> Result<(RecordBatchHeader, Vec<Record>), RecordsError> {
    let header = record_batch::validate_batch(batch)?;
    let size = header.size();
    if batch.len() > size {
        return Err(RecordsError::TrailingBatchData(batch.len() - size));
    }
    let codec = header.compression()?;
    let body = &batch[RECORD_BATCH_OVERHEAD..size];
    if header.records_count == 0 && body.is_empty() {
        // Empty batches kept by compaction carry no records section whatever the codec.
        return Ok((header, Vec::new()));
    }
    let data = Bytes::from(compression::decompress(codec, body, max_uncompressed)?);
    let count = header.records_count as usize;
    let mut records = Vec::with_capacity(count.min(data.len() / MIN_RECORD_SIZE));
    let mut cursor = Cursor {
        data: &data,
        pos: 0,
        end: data.len(),
    };
    for index in 0..count {
        let record = read_record(&mut cursor, &header)
            .map_err(|detail| RecordsError::Malformed { index, detail })?;
        records.push(record);
    }
    if cursor.pos != data.len() {
        return Err(RecordsError::TrailingRecordData(data.len() - cursor.pos));
    }
    Ok((header, records))
}

/// A read position within `data[..end]`.
struct Cursor<'a> {
    data: &'a Bytes,
    pos: usize,
    end: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, &'static str> {
        if self.pos >= self.end {
            return Err("truncated");
        }
        let b = self.data[self.pos];
        self.pos += 1;
        Ok(b)
    }

    /// A zigzag varint of at most 5 bytes, read as Kafka does.
    fn varint(&mut self) -> Result<i32, &'static str> {
        let mut raw: u32 = 0;
        for i in 0..5 {
            let b = self.byte()?;
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
            }
        }
        Err("varint longer than 5 bytes")
    }

    /// A zigzag varlong of at most 10 bytes.
    fn varlong(&mut self) -> Result<i64, &'static str> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err("varlong longer than 10 bytes")
    }

    fn slice(&mut self, len: usize) -> Result<Bytes, &'static str> {
        if len > self.end - self.pos {
            return Err("field extends past the record");
        }
        let out = self.data.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(out)
    }

    /// A length-prefixed byte field; a negative length is null, as Kafka reads it.
    fn nullable_bytes(&mut self) -> Result<Option<Bytes>, &'static str> {
        let len = self.varint()?;
        match usize::try_from(len) {
            Ok(len) => self.slice(len).map(Some),
            Err(_) => Ok(None),
        }
    }
}

fn read_record(
    cursor: &mut Cursor<'_>,
    header: &RecordBatchHeader,
) -> Result<Record, &'static str> {
    let len = usize::try_from(cursor.varint()?).map_err(|_| "negative record length")?;
    if len > cursor.end - cursor.pos {
        return Err("record extends past the records section");
    }
    let section_end = cursor.end;
    let record_end = cursor.pos + len;
    cursor.end = record_end;
    let _attributes = cursor.byte()?;
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    let key = cursor.nullable_bytes()?;
    let value = cursor.nullable_bytes()?;
    let header_count = usize::try_from(cursor.varint()?).map_err(|_| "negative header count")?;
    // Each header takes at least two bytes; do not trust the count for the allocation.
    let mut headers = Vec::with_capacity(header_count.min((record_end - cursor.pos) / 2));
    for _ in 0..header_count {
        let key_len =
            usize::try_from(cursor.varint()?).map_err(|_| "negative header key length")?;
        let key = cursor.slice(key_len)?;
        let value = cursor.nullable_bytes()?;
        headers.push(RecordHeader { key, value });
    }
    if cursor.pos != record_end {
        return Err("record length does not match its fields");
    }
    cursor.end = section_end;
    let timestamp = match header.timestamp_type() {
        TimestampType::LogAppendTime => header.max_timestamp,
        TimestampType::CreateTime => header.base_timestamp.wrapping_add(timestamp_delta),
    };
    Ok(Record {
        offset: header.base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp,
        key,
        value,
        headers,
    })
}

fn put_varint(buf: &mut BytesMut, v: i32) {
    put_unsigned(buf, u64::from(((v << 1) ^ (v >> 31)) as u32));
}

fn put_varlong(buf: &mut BytesMut, v: i64) {
    put_unsigned(buf, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_unsigned(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn len_i32(len: usize) -> Result<i32, RecordsError> {
    i32::try_from(len).map_err(|_| RecordsError::TooLarge("field longer than i32::MAX"))
}

fn put_nullable(buf: &mut BytesMut, field: Option<&[u8]>) -> Result<(), RecordsError> {
    match field {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, len_i32(b.len())?);
            buf.put_slice(b);
        }
    }
    Ok(())
}

/// Builds one v2 record batch: records are encoded as they are pushed, then `build` compresses
/// them and fills in the header (lengths, timestamps, last offset delta, CRC32C).
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    compression: Compression,
    compression_level: Option<i32>,
    timestamp_type: TimestampType,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    records: BytesMut,
    count: i32,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    delete_horizon: Option<i64>,
    scratch: BytesMut,
}

impl RecordBatchBuilder {
    /// An empty builder: base offset 0, leader epoch -1, CreateTime, no producer id.
    pub fn new(compression: Compression) -> Self {
        RecordBatchBuilder {
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            compression,
            compression_level: None,
            timestamp_type: TimestampType::CreateTime,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            records: BytesMut::new(),
            count: 0,
            last_offset_delta: 0,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: NO_TIMESTAMP,
            delete_horizon: None,
            scratch: BytesMut::new(),
        }
    }

    /// Sets the batch's base offset (the first record's offset under `push`). Set it before
    /// pushing records.
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// KIP-534: the batch carries `horizon` as its delete horizon (attribute bit 6), in the base
    /// timestamp that record timestamps are deltas from. Set it before pushing records.
    pub fn delete_horizon(mut self, horizon: i64) -> Self {
        debug_assert_eq!(self.count, 0, "the horizon is set before the records");
        self.delete_horizon = Some(horizon);
        self.base_timestamp = horizon;
        self
    }

    /// Sets the partition leader epoch.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets the codec level (see [`compression::compress`]); `None` is the codec's default.
    pub fn compression_level(mut self, level: Option<i32>) -> Self {
        self.compression_level = level;
        self
    }

    /// Sets CreateTime or LogAppendTime. Under LogAppendTime the batch's max timestamp (which
    /// readers report for every record) is the largest pushed timestamp.
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Sets the idempotent producer id, epoch and the sequence of the first record.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction.
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Marks the batch as a control batch.
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// No record pushed yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a record at the next offset (the base offset, then one past the last record).
    /// The first record's timestamp is the batch's base timestamp (unless a delete horizon
    /// holds it); deltas wrap as in Java.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader],
    ) -> Result<(), RecordsError> {
        let delta = if self.count == 0 {
            0
        } else {
            self.last_offset_delta
                .checked_add(1)
                .ok_or(RecordsError::TooLarge("offset delta beyond i32::MAX"))?
        };
        self.push_at_delta(delta, timestamp, key, value, headers)
    }

    /// Appends a record at an explicit offset, leaving a gap as compaction does. The offset
    /// must be above the previous record's (or at least the base offset for the first) and
    /// within `i32::MAX` of the base offset.
    pub fn push_with_offset(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader],
    ) -> Result<(), RecordsError> {
        let delta = offset
            .checked_sub(self.base_offset)
            .and_then(|d| i32::try_from(d).ok())
            .filter(|&d| d >= 0)
            .ok_or(RecordsError::InvalidOffset(offset))?;
        if self.count > 0 && delta <= self.last_offset_delta {
            return Err(RecordsError::InvalidOffset(offset));
        }
        self.push_at_delta(delta, timestamp, key, value, headers)
    }

    fn push_at_delta(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader],
    ) -> Result<(), RecordsError> {
        if self.count == i32::MAX {
            return Err(RecordsError::TooLarge("more than i32::MAX records"));
        }
        let base_timestamp = if self.count == 0 && self.delete_horizon.is_none() {
            timestamp
        } else {
            self.base_timestamp
        };
        let body = &mut self.scratch;
        body.clear();
        body.put_i8(0);
        put_varlong(body, timestamp.wrapping_sub(base_timestamp));
        put_varint(body, offset_delta);
        put_nullable(body, key)?;
        put_nullable(body, value)?;
        put_varint(body, len_i32(headers.len())?);
        for h in headers {
            put_varint(body, len_i32(h.key.len())?);
            body.put_slice(&h.key);
            put_nullable(body, h.value.as_deref())?;
        }
        let body_len = len_i32(body.len())?;
        put_varint(&mut self.records, body_len);
        self.records.put_slice(&self.scratch);
        if self.count == 0 {
            self.base_timestamp = base_timestamp;
            self.max_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.last_offset_delta = offset_delta;
        self.count += 1;
        Ok(())
    }

    /// Compresses the records and writes the batch. A batch with no records is written
    /// uncompressed with no records section, as Kafka writes the empty batches compaction keeps.
    pub fn build(self) -> Result<Bytes, RecordsError> {
        let compression = if self.count == 0 {
            Compression::None
        } else {
            self.compression
        };
        let body = compression::compress(compression, &self.records, self.compression_level)?;
        let total = RECORD_BATCH_OVERHEAD + body.len();
        let batch_length = i32::try_from(total - LOG_OVERHEAD)
            .map_err(|_| RecordsError::TooLarge("batch longer than i32::MAX"))?;
        let mut attributes = compression.id();
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= ATTR_TIMESTAMP_TYPE;
        }
        if self.transactional {
            attributes |= ATTR_TRANSACTIONAL;
        }
        if self.control {
            attributes |= ATTR_CONTROL;
        }
        if self.delete_horizon.is_some() {
            attributes |= ATTR_DELETE_HORIZON;
        }
        let mut buf = BytesMut::with_capacity(total);
        buf.put_i64(self.base_offset);
        buf.put_i32(batch_length);
        buf.put_i32(self.partition_leader_epoch);
        buf.put_i8(MAGIC_V2);
        buf.put_u32(0); // CRC, filled in below
        buf.put_i16(attributes);
        buf.put_i32(self.last_offset_delta);
        buf.put_i64(self.base_timestamp);
        buf.put_i64(self.max_timestamp);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        buf.put_i32(self.base_sequence);
        buf.put_i32(self.count);
        buf.put_slice(&body);
        let crc = record_batch::compute_crc(&buf);
        buf[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(buf.freeze())
    }
}

/// Builds a transaction marker: an uncompressed control batch of one COMMIT or ABORT record
/// (key: version 0, type; value: version 0, coordinator epoch) at base offset 0, leader epoch
/// -1 and no sequence; the broker patches offset and epoch on append.
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Result<Bytes, RecordsError> {
    let kind = if commit {
        ControlRecordType::Commit
    } else {
        ControlRecordType::Abort
    };
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&kind.id().to_be_bytes());
    let mut value = [0u8; 6];
    value[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .producer(producer_id, producer_epoch, NO_SEQUENCE)
        .transactional(true)
        .control(true);
    builder.push(timestamp, Some(&key), Some(&value), &[])?;
    builder.build()
}
