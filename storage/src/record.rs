//! A small reader and writer of v2 records (varint encoded, uncompressed) for the few places
//! storage needs record contents: transaction markers, compaction keys, and test batches.

use tern_protocol::record_batch::{compute_crc, RECORD_BATCH_OVERHEAD};

/// One record inside an uncompressed batch, borrowed from the batch bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Offset relative to the batch base offset.
    pub offset_delta: i32,
    /// Timestamp relative to the batch base timestamp.
    pub timestamp_delta: i64,
    /// Record key; `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// Record value; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The whole encoded record, length prefix included.
    pub raw: &'a [u8],
}

fn read_varlong(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        raw |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

/// A zigzag varint as Kafka's ByteUtils reads it: at most five bytes, the bits of the fifth
/// beyond 32 dropped (the protocol decoder reads it the same way, so both see one record).
fn read_varint(b: &[u8], pos: &mut usize) -> Option<i32> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        raw |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    None
}

fn read_bytes<'a>(b: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = read_varint(b, pos)?;
    if len < 0 {
        return Some(None);
    }
    let end = pos.checked_add(len as usize)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(Some(s))
}

/// Parses the records of an uncompressed batch (the bytes after the 61-byte header).
/// Returns `None` if the bytes are not well-formed records.
pub fn parse_records(records: &[u8], count: usize) -> Option<Vec<RecordView<'_>>> {
    let mut out = Vec::with_capacity(count.min(records.len()));
    let mut pos = 0usize;
    for _ in 0..count {
        let start = pos;
        let len = read_varint(records, &mut pos)?;
        if len < 0 {
            return None;
        }
        let end = pos.checked_add(len as usize)?;
        let body = records.get(pos..end)?;
        let mut p = 0usize;
        let _attributes = *body.first()?;
        p += 1;
        let timestamp_delta = read_varlong(body, &mut p)?;
        let offset_delta = read_varint(body, &mut p)?;
        let key = read_bytes(body, &mut p)?;
        let value = read_bytes(body, &mut p)?;
        let headers = read_varint(body, &mut p)?;
        for _ in 0..headers.max(0) {
            read_bytes(body, &mut p)?;
            read_bytes(body, &mut p)?;
        }
        out.push(RecordView {
            offset_delta,
            timestamp_delta,
            key,
            value,
            raw: &records[start..end],
        });
        pos = end;
    }
    Some(out)
}

/// A transaction marker batch's type (`true` commit) and the epoch of the coordinator that wrote
/// it (-1 when its value does not hold one).
pub fn control_marker(batch: &[u8]) -> Option<(bool, i32)> {
    let records = parse_records(batch.get(RECORD_BATCH_OVERHEAD..)?, 1)?;
    let record = records.first()?;
    let key = record.key?;
    if key.len() < 4 {
        return None;
    }
    let commit = match i16::from_be_bytes([key[2], key[3]]) {
        0 => false,
        1 => true,
        _ => return None,
    };
    let epoch = record
        .value
        .and_then(|v| v.get(2..6))
        .map_or(-1, |e| i32::from_be_bytes([e[0], e[1], e[2], e[3]]));
    Some((commit, epoch))
}

fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varlong(out, -1),
        Some(b) => {
            write_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Encodes one record (no headers).
pub fn encode_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let mut body =
        Vec::with_capacity(16 + key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len()));
    body.push(0);
    write_varlong(&mut body, timestamp_delta);
    write_varlong(&mut body, offset_delta as i64);
    write_bytes(&mut body, key);
    write_bytes(&mut body, value);
    write_varlong(&mut body, 0);
    write_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

/// A record's key and value; `None` is null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Fields of a batch header chosen by the builder.
#[derive(Debug, Clone, Copy)]
pub struct BatchSpec {
    /// Base offset written in the header.
    pub base_offset: i64,
    /// Partition leader epoch.
    pub leader_epoch: i32,
    /// Base timestamp; record i gets `base_timestamp + i`.
    pub base_timestamp: i64,
    /// Producer id, -1 for none.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Base sequence, -1 for none.
    pub base_sequence: i32,
    /// Transactional bit.
    pub transactional: bool,
    /// Control bit.
    pub control: bool,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            base_offset: 0,
            leader_epoch: -1,
            base_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
        }
    }
}

impl BatchSpec {
    /// A transactional batch of `producer_id` at `producer_epoch`, first sequence
    /// `base_sequence` (-1 for a marker).
    pub fn transactional(producer_id: i64, producer_epoch: i16, base_sequence: i32) -> BatchSpec {
        BatchSpec {
            producer_id,
            producer_epoch,
            base_sequence,
            transactional: true,
            ..BatchSpec::default()
        }
    }
}

/// Builds a valid uncompressed v2 batch from (key, value) pairs; record i has offset delta i.
pub fn build_batch(spec: &BatchSpec, records: &[KeyValue<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        encode_record(&mut body, i as i32, i as i64, *k, *v);
    }
    let last_delta = records.len().saturating_sub(1) as i32;
    assemble_batch(
        spec,
        last_delta,
        spec.base_timestamp + last_delta as i64,
        records.len() as i32,
        &body,
    )
}

/// Puts a header in front of encoded records and computes the CRC.
pub fn assemble_batch(
    spec: &BatchSpec,
    last_offset_delta: i32,
    max_timestamp: i64,
    count: i32,
    records: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
    b.extend_from_slice(&spec.base_offset.to_be_bytes());
    b.extend_from_slice(&((RECORD_BATCH_OVERHEAD - 12 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&spec.leader_epoch.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]);
    let mut attributes: i16 = 0;
    if spec.transactional {
        attributes |= 0x10;
    }
    if spec.control {
        attributes |= 0x20;
    }
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&last_offset_delta.to_be_bytes());
    b.extend_from_slice(&spec.base_timestamp.to_be_bytes());
    b.extend_from_slice(&max_timestamp.to_be_bytes());
    b.extend_from_slice(&spec.producer_id.to_be_bytes());
    b.extend_from_slice(&spec.producer_epoch.to_be_bytes());
    b.extend_from_slice(&spec.base_sequence.to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(records);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Builds a transaction marker (control batch) for `producer_id`.
pub fn build_control_batch(spec: &BatchSpec, commit: bool) -> Vec<u8> {
    let mut key = Vec::new();
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(commit as i16).to_be_bytes());
    let value = [0u8, 0, 0, 0, 0, 0];
    let spec = BatchSpec {
        control: true,
        transactional: true,
        ..*spec
    };
    build_batch(&spec, &[(Some(&key), Some(&value))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_protocol::record_batch::validate_batch;

    #[test]
    fn built_batch_parses_back() {
        let b = build_batch(
            &BatchSpec::default(),
            &[
                (Some(b"k1"), Some(b"v1")),
                (None, None),
                (Some(b"k3"), Some(&[7u8; 300])),
            ],
        );
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        let recs = parse_records(&b[RECORD_BATCH_OVERHEAD..], 3).unwrap();
        assert_eq!(recs[0].key, Some(&b"k1"[..]));
        assert_eq!(recs[1].key, None);
        assert_eq!(recs[1].value, None);
        assert_eq!(recs[2].value.map(|v| v.len()), Some(300));
        assert_eq!(recs[2].offset_delta, 2);
        assert!(parse_records(&b[RECORD_BATCH_OVERHEAD..b.len() - 1], 3).is_none());
    }

    #[test]
    fn control_batches_say_commit_or_abort() {
        // build_control_batch writes coordinator epoch 0.
        assert_eq!(
            control_marker(&build_control_batch(&BatchSpec::default(), true)),
            Some((true, 0))
        );
        assert_eq!(
            control_marker(&build_control_batch(&BatchSpec::default(), false)),
            Some((false, 0))
        );
    }

    #[test]
    fn varints_are_read_as_kafka_reads_them() {
        // Five bytes at most; the fifth byte's bits beyond 32 are dropped, as Kafka drops them.
        let mut p = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x70], &mut p),
            Some(0)
        );
        assert_eq!(p, 5);
        let mut p = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], &mut p),
            None
        );
        let mut p = 0;
        assert_eq!(read_varint(&[0x03], &mut p), Some(-2));
    }

    #[test]
    fn varlong_round_trips() {
        for v in [
            0i64,
            -1,
            1,
            63,
            -64,
            64,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            let mut p = 0;
            assert_eq!(read_varlong(&out, &mut p), Some(v));
            assert_eq!(p, out.len());
        }
    }
}
