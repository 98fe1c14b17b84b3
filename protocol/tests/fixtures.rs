//! Cross-checks with implementations nobody here wrote: kafka-python and Apache Kafka's Java
//! client.
//!
//! `testdata/kafka_python/*.bin` are batches built by kafka-python's `DefaultRecordBatchBuilder`
//! and codecs (`testdata/gen_fixtures.py gen`); `testdata/kafka_java/*.bin` by Kafka 4.3.1's
//! `MemoryRecordsBuilder` with snappy-java, lz4-java, zstd-jni and java.util.zip
//! (`testdata/KafkaInterop.java gen`). Each `.expected` lists the records that were appended.
//! We decode every batch and compare every field.
//!
//! `testdata/tern_built/*.bin` are batches from our `RecordBatchBuilder`, checked with
//! kafka-python (`gen_fixtures.py verify`) and Kafka's Java client (`KafkaInterop.java verify`). The test below fails if the builder's output
//! drifts from those verified bytes; then regenerate with `TERN_REGEN_FIXTURES=1 cargo test -p
//! tern-protocol --test fixtures` and rerun both `verify` steps.

use std::fmt::Write as _;
use std::path::PathBuf;

use bytes::Bytes;
use tern_protocol::compression::{decompress, CompressionError};
use tern_protocol::record_batch::{validate_batch, Compression, RecordBatchHeader, TimestampType};
use tern_protocol::records::{
    build_control_batch, control_record_type, decode_records, end_txn_coordinator_epoch,
    ControlRecordType, Record, RecordBatchBuilder, RecordHeader, RecordsError,
};

const MAX: usize = 16 << 20;

fn testdata(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(sub)
}

/// Bytes in the `.expected` notation: null, hex up to 64 bytes, else length and CRC32C.
fn fmt_bytes(b: Option<&[u8]>) -> String {
    match b {
        None => "null".to_string(),
        Some(b) if b.len() <= 64 => b.iter().map(|x| format!("{x:02x}")).collect(),
        Some(b) => format!("#{}:{:08x}", b.len(), crc32c::crc32c(b)),
    }
}

fn header_line(h: &RecordBatchHeader) -> String {
    format!(
        "header base_offset={} partition_leader_epoch={} attributes={} last_offset_delta={} \
         base_timestamp={} max_timestamp={} producer_id={} producer_epoch={} base_sequence={} \
         records_count={}\n",
        h.base_offset,
        h.partition_leader_epoch,
        h.attributes,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        h.records_count
    )
}

fn record_line(
    offset: i64,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[RecordHeader],
) -> String {
    let hs: Vec<String> = headers
        .iter()
        .map(|h| {
            format!(
                "{}:{}",
                fmt_bytes(Some(&h.key)),
                fmt_bytes(h.value.as_deref())
            )
        })
        .collect();
    format!(
        "record offset={offset} timestamp={timestamp} key={} value={} headers={}\n",
        fmt_bytes(key),
        fmt_bytes(value),
        hs.join(",")
    )
}

fn describe(header: &RecordBatchHeader, records: &[Record]) -> String {
    let mut out = header_line(header);
    for r in records {
        out.push_str(&record_line(
            r.offset,
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
            &r.headers,
        ));
    }
    out
}

fn fixture_names(dir: &PathBuf) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".bin").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Directories of batches written by other implementations, and how many each must hold.
const FOREIGN: [(&str, usize); 2] = [("kafka_python", 13), ("kafka_java", 13)];

#[test]
fn decodes_every_foreign_fixture() {
    for (sub, min) in FOREIGN {
        let dir = testdata(sub);
        let names = fixture_names(&dir);
        assert!(names.len() >= min, "{sub}: fixtures missing: {names:?}");
        for name in &names {
            let batch = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
            let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
            let (header, records) =
                decode_records(&batch, MAX).unwrap_or_else(|e| panic!("{sub}/{name}: {e}"));
            assert_eq!(describe(&header, &records), expected, "{sub}/{name}");
            // The codec in the attributes is the one the fixture is named after.
            let codec = header.compression().unwrap();
            assert!(
                name.starts_with(codec.name()) || name.starts_with("control"),
                "{sub}/{name} has codec {codec:?}"
            );
        }
    }
}

#[test]
fn java_control_batches_are_transaction_markers() {
    let dir = testdata("kafka_java");
    for (name, want) in [
        ("control_commit", ControlRecordType::Commit),
        ("control_abort", ControlRecordType::Abort),
    ] {
        let batch = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let (h, records) = decode_records(&batch, MAX).unwrap();
        assert!(h.is_control() && h.is_transactional(), "{name}");
        assert_eq!(records.len(), 1);
        assert_eq!(control_record_type(&records[0]), Some(want));
        assert_eq!(end_txn_coordinator_epoch(&records[0]), Some(12));
        // Our marker for the same transaction is the same batch, up to offset and epoch.
        let mut ours = build_control_batch(
            4242,
            7,
            want == ControlRecordType::Commit,
            12,
            1_700_000_000_123,
        )
        .unwrap()
        .to_vec();
        tern_protocol::record_batch::set_base_offset(&mut ours, h.base_offset);
        tern_protocol::record_batch::set_partition_leader_epoch(
            &mut ours,
            h.partition_leader_epoch,
        );
        assert_eq!(ours, batch, "{name}");
    }
}

#[test]
fn kafka_python_fixture_flags() {
    let dir = testdata("kafka_python");
    let read = |n: &str| std::fs::read(dir.join(format!("{n}.bin"))).unwrap();
    let (h, _) = decode_records(&read("gzip_transactional"), MAX).unwrap();
    assert!(h.is_transactional());
    assert_eq!(
        (h.producer_id, h.producer_epoch, h.base_sequence),
        (77, 1, 0)
    );
    let (h, _) = decode_records(&read("zstd"), MAX).unwrap();
    assert!(!h.is_transactional());
    assert_eq!(
        (h.producer_id, h.producer_epoch, h.last_sequence()),
        (4242, 3, 22)
    );
    let (h, records) = decode_records(&read("none_offset_gaps"), MAX).unwrap();
    assert_eq!(h.last_offset(), 1007);
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [1000, 1003, 1007]);
}

#[test]
fn foreign_fixtures_respect_the_output_bound() {
    for (sub, _) in FOREIGN {
        let dir = testdata(sub);
        for name in fixture_names(&dir) {
            let batch = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
            let header = validate_batch(&batch).unwrap();
            let size = decompress(header.compression().unwrap(), &batch[61..], MAX)
                .unwrap()
                .len();
            assert!(decode_records(&batch, size).is_ok(), "{sub}/{name}");
            let err = decode_records(&batch, size - 1).unwrap_err();
            assert!(
                matches!(
                    err,
                    RecordsError::Compression(CompressionError::OutputTooLarge { limit, .. }) if limit == size - 1
                ),
                "{sub}/{name}: {err}"
            );
        }
    }
}

/// What a builder was asked to write, in the `.expected` notation.
struct Pushed {
    offset: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<RecordHeader>,
}

fn sample_records(base_offset: i64) -> Vec<Pushed> {
    let big: Vec<u8> = b"tern builds batches ".repeat(150);
    let mut out = vec![
        Pushed {
            offset: 0,
            timestamp: 1_700_000_000_000,
            key: Some(b"k0".to_vec()),
            value: Some(big.clone()),
            headers: vec![
                RecordHeader::new("trace-id", Some(Bytes::from_static(b"xyz"))),
                RecordHeader::new("empty", Some(Bytes::new())),
                RecordHeader::new("null", None),
            ],
        },
        Pushed {
            offset: 1,
            timestamp: 1_700_000_000_007,
            key: None,
            value: Some(b"null key".to_vec()),
            headers: vec![],
        },
        Pushed {
            offset: 2,
            timestamp: 1_699_999_999_000,
            key: Some(b"tombstone".to_vec()),
            value: None,
            headers: vec![],
        },
        Pushed {
            offset: 3,
            timestamp: 1_700_000_005_000,
            key: Some(Vec::new()),
            value: Some(Vec::new()),
            headers: vec![RecordHeader::new(
                "\u{043a}\u{043b}\u{044e}\u{0447}",
                Some(Bytes::from_static(&[0, 1, 255])),
            )],
        },
    ];
    for i in 4..40 {
        let mut value = format!("record {i} ").into_bytes();
        value.extend_from_slice(&big);
        value.extend(std::iter::repeat_n(i as u8, 2000));
        out.push(Pushed {
            offset: i,
            timestamp: 1_700_000_000_000 + i,
            key: Some(format!("key-{i}").into_bytes()),
            value: Some(value),
            headers: vec![],
        });
    }
    for p in &mut out {
        p.offset += base_offset;
    }
    out
}

/// Builds `pushed` with `builder` (at explicit offsets when `explicit_offsets`, else with
/// `push`); returns name, batch and the expected text.
fn build_sample(
    name: &str,
    builder: RecordBatchBuilder,
    pushed: &[Pushed],
    explicit_offsets: bool,
) -> (String, Bytes, String) {
    let mut builder = builder;
    for p in pushed {
        let (k, v) = (p.key.as_deref(), p.value.as_deref());
        if explicit_offsets {
            builder
                .push_with_offset(p.offset, p.timestamp, k, v, &p.headers)
                .unwrap();
        } else {
            builder.push(p.timestamp, k, v, &p.headers).unwrap();
        }
    }
    let batch = builder.build().unwrap();
    let header = validate_batch(&batch).unwrap();
    let mut expected = header_line(&header);
    for p in pushed {
        let ts = match header.timestamp_type() {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => p.timestamp,
        };
        expected.push_str(&record_line(
            p.offset,
            ts,
            p.key.as_deref(),
            p.value.as_deref(),
            &p.headers,
        ));
    }
    (name.to_string(), batch, expected)
}

fn tern_built_batches() -> Vec<(String, Bytes, String)> {
    let mut out = Vec::new();
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let b = RecordBatchBuilder::new(codec)
            .base_offset(500)
            .partition_leader_epoch(3);
        let mut records = sample_records(500);
        // Uncompressed, all 40 records would make a 180 KB fixture.
        if codec == Compression::None {
            records.truncate(6);
        }
        out.push(build_sample(codec.name(), b, &records, false));
    }
    let b = RecordBatchBuilder::new(Compression::Lz4)
        .base_offset(9)
        .producer(1234, 5, 100)
        .transactional(true);
    out.push(build_sample(
        "lz4_transactional",
        b,
        &sample_records(9),
        false,
    ));
    let b = RecordBatchBuilder::new(Compression::Zstd)
        .compression_level(Some(19))
        .producer(99, 0, i32::MAX - 10);
    out.push(build_sample(
        "zstd_level19_idempotent",
        b,
        &sample_records(0),
        false,
    ));
    let b = RecordBatchBuilder::new(Compression::Gzip)
        .compression_level(Some(1))
        .timestamp_type(TimestampType::LogAppendTime);
    out.push(build_sample(
        "gzip_log_append_time",
        b,
        &sample_records(0),
        false,
    ));
    // Offsets with gaps, as compaction leaves them: 100, 101, 104, 109, ...
    let mut gapped = sample_records(0);
    gapped.truncate(8);
    for (i, p) in gapped.iter_mut().enumerate() {
        p.offset = 100 + (i * i) as i64;
    }
    let b = RecordBatchBuilder::new(Compression::Snappy).base_offset(100);
    out.push(build_sample("snappy_offset_gaps", b, &gapped, true));
    for (name, commit) in [("control_commit", true), ("control_abort", false)] {
        let batch = build_control_batch(4242, 7, commit, 12, 1_700_000_000_123).unwrap();
        let header = validate_batch(&batch).unwrap();
        let mut expected = header_line(&header);
        let kind: u8 = if commit { 1 } else { 0 };
        expected.push_str(&record_line(
            0,
            1_700_000_000_123,
            Some(&[0, 0, 0, kind]),
            Some(&[0, 0, 0, 0, 0, 12]),
            &[],
        ));
        out.push((name.to_string(), batch, expected));
    }
    out
}

#[test]
fn tern_built_batches_match_the_bytes_kafka_python_and_java_verified() {
    let dir = testdata("tern_built");
    let regen = std::env::var_os("TERN_REGEN_FIXTURES").is_some();
    if regen {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let batches = tern_built_batches();
    for (name, batch, expected) in &batches {
        let (header, records) = decode_records(batch, MAX).unwrap();
        assert_eq!(&describe(&header, &records), expected, "{name}");
        let bin = dir.join(format!("{name}.bin"));
        let exp = dir.join(format!("{name}.expected"));
        if regen {
            std::fs::write(&bin, batch).unwrap();
            std::fs::write(&exp, expected).unwrap();
            continue;
        }
        let committed = std::fs::read(&bin).unwrap();
        assert!(
            committed == batch[..],
            "{name}: builder output differs from the bytes kafka-python and Java verified; \
             regenerate (TERN_REGEN_FIXTURES=1) and rerun both verify steps"
        );
        assert_eq!(&std::fs::read_to_string(&exp).unwrap(), expected, "{name}");
    }
    assert_eq!(fixture_names(&dir).len(), batches.len());
}

#[test]
fn control_batches_carry_markers() {
    for commit in [true, false] {
        let batch = build_control_batch(4242, 7, commit, 12, 5).unwrap();
        let (h, records) = decode_records(&batch, MAX).unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(h.compression().unwrap(), Compression::None);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (4242, 7, -1)
        );
        assert_eq!(records.len(), 1);
        let want = if commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        };
        assert_eq!(control_record_type(&records[0]), Some(want));
        assert_eq!(end_txn_coordinator_epoch(&records[0]), Some(12));
    }
}

#[test]
fn describe_is_stable() {
    // Guards the notation shared with gen_fixtures.py.
    let mut s = String::new();
    write!(s, "{}", fmt_bytes(Some(&[0xab; 65]))).unwrap();
    assert!(s.starts_with("#65:"));
    assert_eq!(fmt_bytes(Some(b"")), "");
    assert_eq!(fmt_bytes(None), "null");
}
