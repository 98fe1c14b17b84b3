//! Record-level encode/decode: builder round trips for every codec, malformed batches, and
//! control records.

use bytes::Bytes;
use proptest::prelude::*;
use tern_protocol::compression::{compress, CompressionError};
use tern_protocol::record_batch::{
    compute_crc, set_base_offset, BatchError, Compression, TimestampType,
};
use tern_protocol::records::{
    build_control_batch, control_record_type, decode_records, end_txn_coordinator_epoch,
    ControlRecordType, Record, RecordBatchBuilder, RecordHeader, RecordsError,
};

const MAX: usize = 64 << 20;

type Input = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<RecordHeader>);

fn bytes_opt() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..300))
}

fn header() -> impl Strategy<Value = RecordHeader> {
    (prop::collection::vec(any::<u8>(), 0..20), bytes_opt())
        .prop_map(|(k, v)| RecordHeader::new(k, v.map(Bytes::from)))
}

fn input() -> impl Strategy<Value = Input> {
    (
        prop_oneof![any::<i64>(), 1_600_000_000_000i64..1_800_000_000_000],
        bytes_opt(),
        bytes_opt(),
        prop::collection::vec(header(), 0..4),
    )
}

fn codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(vec![
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ])
}

/// Header bytes plus `body` as the records section, with a valid CRC.
fn raw_batch(attributes: i16, records_count: i32, last_offset_delta: i32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(61 + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&last_offset_delta.to_be_bytes());
    b.extend_from_slice(&100i64.to_be_bytes());
    b.extend_from_slice(&100i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&records_count.to_be_bytes());
    b.extend_from_slice(body);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn build(codec: Compression, records: &[Input]) -> Bytes {
    let mut b = RecordBatchBuilder::new(codec);
    for (ts, k, v, h) in records {
        b.push(*ts, k.as_deref(), v.as_deref(), h).unwrap();
    }
    b.build().unwrap()
}

/// `PROPTEST_CASES` from the environment (for long fuzzing runs), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    #[test]
    fn builder_round_trips(
        codec in codec(),
        records in prop::collection::vec(input(), 0..40),
        base_offset in 0i64..(1 << 50),
        epoch in -1i32..1000,
        producer in prop::option::of((0i64..1 << 40, 0i16..100, 0i32..i32::MAX)),
        transactional in any::<bool>(),
        log_append in any::<bool>(),
    ) {
        let mut b = RecordBatchBuilder::new(codec)
            .base_offset(base_offset)
            .partition_leader_epoch(epoch)
            .transactional(transactional);
        if let Some((id, e, seq)) = producer {
            b = b.producer(id, e, seq);
        }
        if log_append {
            b = b.timestamp_type(TimestampType::LogAppendTime);
        }
        for (ts, k, v, h) in &records {
            b.push(*ts, k.as_deref(), v.as_deref(), h).unwrap();
        }
        prop_assert_eq!(b.len(), records.len());
        let batch = b.build().unwrap();
        let (h, decoded) = decode_records(&batch, MAX).unwrap();
        prop_assert_eq!(h.size(), batch.len());
        prop_assert_eq!(h.base_offset, base_offset);
        prop_assert_eq!(h.partition_leader_epoch, epoch);
        prop_assert_eq!(h.records_count as usize, records.len());
        prop_assert_eq!(h.last_offset_delta as usize, records.len().saturating_sub(1));
        prop_assert_eq!(h.is_transactional(), transactional);
        prop_assert!(!h.is_control());
        let want_codec = if records.is_empty() { Compression::None } else { codec };
        prop_assert_eq!(h.compression().unwrap(), want_codec);
        if let Some((id, e, seq)) = producer {
            prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (id, e, seq));
        } else {
            prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (-1, -1, -1));
        }
        let max_ts = records.iter().map(|r| r.0).max().unwrap_or(-1);
        prop_assert_eq!(h.max_timestamp, max_ts);
        prop_assert_eq!(h.base_timestamp, records.first().map_or(-1, |r| r.0));
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (r, (ts, k, v, hs))) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(r.offset, base_offset + i as i64);
            prop_assert_eq!(r.timestamp, if log_append { max_ts } else { *ts });
            prop_assert_eq!(r.key.as_deref(), k.as_deref());
            prop_assert_eq!(r.value.as_deref(), v.as_deref());
            prop_assert_eq!(&r.headers, hs);
        }
    }

    #[test]
    fn random_record_sections_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..400),
        count in prop_oneof![0i32..10, any::<i32>().prop_map(|c| c.abs())],
        codec in codec(),
    ) {
        let _ = decode_records(&raw_batch(codec.id(), count, 0, &body), 1 << 20);
        // Garbage that decompresses fine but is not records.
        let compressed = compress(codec, &body, None).unwrap();
        let _ = decode_records(&raw_batch(codec.id(), count, 0, &compressed), 1 << 20);
    }

    #[test]
    fn mutated_valid_sections_never_panic(
        records in prop::collection::vec(input(), 1..8),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        codec in codec(),
    ) {
        let batch = build(Compression::None, &records);
        let mut body = batch[61..].to_vec();
        for (at, x) in flips {
            let i = at.index(body.len());
            body[i] ^= x;
        }
        let body = compress(codec, &body, None).unwrap();
        let count = records.len() as i32;
        if let Ok((_, decoded)) = decode_records(&raw_batch(codec.id(), count, count - 1, &body), MAX) {
            prop_assert_eq!(decoded.len(), records.len());
        }
    }

    #[test]
    fn any_byte_flip_in_a_built_batch_is_detected(
        records in prop::collection::vec(input(), 1..5),
        at in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let mut batch = build(Compression::Lz4, &records).to_vec();
        let i = 17 + at.index(batch.len() - 17); // from the CRC on; earlier fields are not covered
        batch[i] ^= x;
        prop_assert!(decode_records(&batch, MAX).is_err());
    }
}

fn sample() -> Vec<Input> {
    vec![
        (10, Some(b"a".to_vec()), Some(b"1".to_vec()), vec![]),
        (5, None, None, vec![RecordHeader::new("h", None)]),
        (i64::MAX, Some(Vec::new()), Some(b"x".repeat(1000)), vec![]),
        (i64::MIN, Some(b"d".to_vec()), None, vec![]),
    ]
}

#[test]
fn extreme_timestamps_round_trip() {
    let batch = build(Compression::Zstd, &sample());
    let (h, records) = decode_records(&batch, MAX).unwrap();
    let ts: Vec<i64> = records.iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, [10, 5, i64::MAX, i64::MIN]);
    assert_eq!(h.max_timestamp, i64::MAX);
}

#[test]
fn base_offset_patch_moves_record_offsets() {
    let mut batch = build(Compression::Gzip, &sample()).to_vec();
    set_base_offset(&mut batch, 1 << 40);
    let (_, records) = decode_records(&batch, MAX).unwrap();
    assert_eq!(records[3].offset, (1 << 40) + 3);
}

#[test]
fn empty_builder_makes_an_empty_uncompressed_batch() {
    let batch = RecordBatchBuilder::new(Compression::Zstd).build().unwrap();
    assert_eq!(batch.len(), 61);
    let (h, records) = decode_records(&batch, 0).unwrap();
    assert!(records.is_empty());
    assert_eq!(h.compression().unwrap(), Compression::None);
    assert_eq!(
        (h.records_count, h.base_timestamp, h.max_timestamp),
        (0, -1, -1)
    );
    // An empty records section under a compression codec (as compaction may leave) is fine.
    let (_, records) = decode_records(&raw_batch(Compression::Lz4.id(), 0, 0, b""), 0).unwrap();
    assert!(records.is_empty());
}

#[test]
fn count_mismatches_and_trailing_bytes_are_errors() {
    let batch = build(Compression::None, &sample());
    let body = &batch[61..];
    let too_many = raw_batch(0, 5, 3, body);
    assert!(matches!(
        decode_records(&too_many, MAX),
        Err(RecordsError::Malformed { index: 4, .. })
    ));
    let too_few = raw_batch(0, 3, 3, body);
    assert!(matches!(
        decode_records(&too_few, MAX),
        Err(RecordsError::TrailingRecordData(_))
    ));
    let mut trailing = batch.to_vec();
    trailing.push(0);
    assert_eq!(
        decode_records(&trailing, MAX),
        Err(RecordsError::TrailingBatchData(1))
    );
    assert!(matches!(
        decode_records(&batch[..batch.len() - 1], MAX),
        Err(RecordsError::Batch(BatchError::Truncated { .. }))
    ));
    // A huge declared count with a tiny section fails without a huge allocation.
    let huge = raw_batch(0, i32::MAX, 0, body);
    assert!(matches!(
        decode_records(&huge, MAX),
        Err(RecordsError::Malformed { index: 4, .. })
    ));
}

#[test]
fn record_length_must_match_its_fields() {
    // One record: length 7 but fields take 6 bytes (attrs, ts, offset, key -1, value -1, 0 headers).
    let body = [14u8, 0, 0, 0, 1, 1, 0, 0];
    assert!(matches!(
        decode_records(&raw_batch(0, 1, 0, &body), MAX),
        Err(RecordsError::Malformed { index: 0, .. })
    ));
    let ok = [12u8, 0, 0, 0, 1, 1, 0];
    let (_, r) = decode_records(&raw_batch(0, 1, 0, &ok), MAX).unwrap();
    assert_eq!((r[0].key.clone(), r[0].value.clone()), (None, None));
    // Negative header count, negative header key length, 6-byte varint.
    for body in [
        &[12u8, 0, 0, 0, 1, 1, 1][..],
        &[16u8, 0, 0, 0, 1, 1, 2, 1, 1][..],
        &[22u8, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1, 1, 0][..],
    ] {
        assert!(
            matches!(
                decode_records(&raw_batch(0, 1, 0, body), MAX),
                Err(RecordsError::Malformed { .. })
            ),
            "{body:?}"
        );
    }
}

#[test]
fn output_bound_applies_to_records_sections() {
    let batch = build(Compression::Snappy, &sample());
    assert!(matches!(
        decode_records(&batch, 100),
        Err(RecordsError::Compression(
            CompressionError::OutputTooLarge { limit: 100, .. }
        ))
    ));
    let batch = build(Compression::None, &sample());
    assert!(matches!(
        decode_records(&batch, 100),
        Err(RecordsError::Compression(
            CompressionError::OutputTooLarge { limit: 100, .. }
        ))
    ));
}

#[test]
fn control_record_types() {
    let rec = |key: Option<&'static [u8]>| Record {
        offset: 0,
        timestamp: 0,
        key: key.map(Bytes::from_static),
        value: None,
        headers: vec![],
    };
    assert_eq!(
        control_record_type(&rec(Some(&[0, 0, 0, 0]))),
        Some(ControlRecordType::Abort)
    );
    assert_eq!(
        control_record_type(&rec(Some(&[0, 0, 0, 1]))),
        Some(ControlRecordType::Commit)
    );
    assert_eq!(
        control_record_type(&rec(Some(&[0, 1, 0, 3, 9]))),
        Some(ControlRecordType::Other(3))
    );
    assert_eq!(control_record_type(&rec(Some(&[0, 0, 0]))), None);
    assert_eq!(control_record_type(&rec(Some(&[0xff, 0xff, 0, 1]))), None);
    assert_eq!(control_record_type(&rec(None)), None);
    assert_eq!(end_txn_coordinator_epoch(&rec(None)), None);
    let batch = build_control_batch(1, 2, true, -5, 3).unwrap();
    let (h, records) = decode_records(&batch, MAX).unwrap();
    assert_eq!(
        (h.base_offset, h.partition_leader_epoch, h.base_timestamp),
        (0, -1, 3)
    );
    assert_eq!(end_txn_coordinator_epoch(&records[0]), Some(-5));
}

#[test]
fn header_keys_as_text() {
    let h = RecordHeader::new("trace", None);
    assert_eq!(h.key_str(), Some("trace"));
    assert_eq!(RecordHeader::new(vec![0xff], None).key_str(), None);
}

#[test]
fn explicit_offsets_leave_gaps_and_must_increase() {
    let mut b = RecordBatchBuilder::new(Compression::Lz4).base_offset(1000);
    assert_eq!(
        b.push_with_offset(999, 0, None, None, &[]),
        Err(RecordsError::InvalidOffset(999))
    );
    b.push_with_offset(1002, 7, Some(b"a"), None, &[]).unwrap();
    b.push(8, Some(b"b"), None, &[]).unwrap();
    assert_eq!(
        b.push_with_offset(1003, 0, None, None, &[]),
        Err(RecordsError::InvalidOffset(1003))
    );
    assert_eq!(
        b.push_with_offset(1000 + i32::MAX as i64 + 1, 0, None, None, &[]),
        Err(RecordsError::InvalidOffset(1000 + i32::MAX as i64 + 1))
    );
    b.push_with_offset(1000 + i32::MAX as i64, 9, None, Some(b"z"), &[])
        .unwrap();
    assert_eq!(
        b.push(10, None, None, &[]),
        Err(RecordsError::TooLarge("offset delta beyond i32::MAX"))
    );
    let (h, records) = decode_records(&b.build().unwrap(), MAX).unwrap();
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [1002, 1003, 1000 + i32::MAX as i64]);
    assert_eq!((h.records_count, h.last_offset_delta), (3, i32::MAX));
    assert_eq!((h.base_timestamp, h.max_timestamp), (7, 9));
}
