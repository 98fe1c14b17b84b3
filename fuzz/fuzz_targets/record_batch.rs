//! Record batches (headers, records, compressed payloads of every codec) through the batch
//! walk, CRC check, decompression and record decoding, storage's own record reader, and the
//! produce path (`produce_validation::prepare` under a fuzzed topic policy, then the log's
//! validation and header stamping).
//!
//! Input: `[policy][mode][bytes...]`. `policy` picks the topic's configs (`policy_from`).
//! `mode` bit 0: fix the CRC of every whole batch in `bytes` (which are batches back to back).
//! Bit 1: `bytes` is `[records_count][records section]`, which the target compresses with
//! codec `(mode >> 2) % 5` into one batch (transactional if bit 5, control if bit 6, with a
//! producer id if bit 7), so the record decoder is reached through every codec.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tern_fuzz::seeds::{self, Seed};
use tern_protocol::compression::compress;
use tern_protocol::record_batch::{
    compute_crc, validate_batch, BatchIter, Compression, RECORD_BATCH_OVERHEAD,
};
use tern_protocol::records::{decode_records, RecordBatchBuilder, RecordHeader};

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let [policy, mode, rest @ ..] = data else {
        return;
    };
    let buf = if mode & 2 != 0 {
        match build(*mode, rest) {
            Some(b) => b,
            None => return,
        }
    } else {
        let mut b = rest.to_vec();
        if mode & 1 != 0 {
            tern_fuzz::fix_crcs(&mut b);
        }
        b
    };
    for item in BatchIter::new(&buf) {
        let Ok((header, batch)) = item else { break };
        let _ = (
            header.compression(),
            header.last_sequence(),
            header.next_offset(),
        );
        if validate_batch(batch).is_err() {
            continue;
        }
        let decoded = decode_records(batch, tern_fuzz::PRODUCE_MAX_UNCOMPRESSED);
        if header.is_control() {
            if let Ok((_, records)) = &decoded {
                tern_fuzz::read_marker(records);
            }
            let _ = tern_storage::record::control_marker(batch);
        }
        if header.compression() == Ok(Compression::None) {
            // Storage reads uncompressed records itself (compaction keys, markers): whatever
            // the protocol decoder accepts it must read alike.
            let count = header.records_count as usize;
            let views =
                tern_storage::record::parse_records(tern_fuzz::records_section(batch), count);
            if let Ok((_, records)) = &decoded {
                let views = views.expect("storage reads the records the protocol decoder read");
                assert_eq!(views.len(), records.len());
                for (v, r) in views.iter().zip(records) {
                    assert_eq!(v.key, r.key.as_deref());
                    assert_eq!(v.value, r.value.as_deref());
                }
            }
        }
    }
    tern_fuzz::produce(&Bytes::from(buf), tern_fuzz::policy_from(*policy));
}

/// One batch around `rest[1..]` as its records section, compressed with the mode's codec.
fn build(mode: u8, rest: &[u8]) -> Option<Vec<u8>> {
    let (&count, section) = rest.split_first()?;
    let codec = Compression::from_id(i16::from((mode >> 2) % 5)).ok()?;
    let body = compress(codec, section, None).ok()?;
    let mut attributes = codec.id();
    if mode & 0x20 != 0 {
        attributes |= 0x10;
    }
    if mode & 0x40 != 0 {
        attributes |= 0x20;
    }
    let producer_id: i64 = if mode & 0x80 != 0 { 1000 } else { -1 };
    let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    let length = i32::try_from(RECORD_BATCH_OVERHEAD - 12 + body.len()).ok()?;
    b.extend_from_slice(&length.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&i32::from(count.saturating_sub(1)).to_be_bytes());
    b.extend_from_slice(&tern_fuzz::NOW_MS.to_be_bytes());
    b.extend_from_slice(&tern_fuzz::NOW_MS.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&i32::from(count).to_be_bytes());
    b.extend_from_slice(&body);
    let crc = compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Some(b)
}

/// The fixtures as they are (and with their CRCs fixed) under several policies, and the
/// records sections of uncompressed batches for the build mode under every codec.
fn make_seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    for (i, (name, batch)) in seeds::fixture_batches().into_iter().enumerate() {
        let policy = (i as u8).wrapping_mul(37);
        out.push((
            format!("{name}_p{policy}"),
            [&[policy, 1][..], &batch].concat(),
        ));
    }
    let mut builder = RecordBatchBuilder::new(Compression::None);
    let headers = [RecordHeader::new(
        Bytes::from_static(b"h"),
        Some(Bytes::from_static(b"v")),
    )];
    builder
        .push(tern_fuzz::NOW_MS, Some(b"key"), Some(b"value"), &headers)
        .unwrap();
    builder
        .push(tern_fuzz::NOW_MS + 1, None, Some(b"no key"), &[])
        .unwrap();
    builder
        .push(tern_fuzz::NOW_MS + 2, Some(b"tombstone"), None, &[])
        .unwrap();
    let batch = builder.build().unwrap();
    let section = &batch[RECORD_BATCH_OVERHEAD..];
    for codec in 0u8..5 {
        let mode = 2 | (codec << 2);
        out.push((
            format!("build_codec{codec}"),
            [&[0x1b, mode, 3][..], section].concat(),
        ));
    }
    out
}
