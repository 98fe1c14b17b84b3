//! `__mirror_state` as the mirror coordinator's store loads a partition it leads
//! (`coordinator::store::load_partition`): batches walked, control batches skipped, records
//! decoded (`state::decode_record`) and applied; every decoded record encodes again to one
//! that decodes alike.
//!
//! Input: batches back to back; their CRCs are fixed first (the log checked them on append).

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use tern_fuzz::seeds::{self, Seed};
use tern_mirror::state::{
    decode_record, encode_last_mirrored_offset, encode_state, MirrorPartitionKey,
    MirrorPartitionState, PartitionStateRecord, StateRecord,
};
use tern_protocol::record_batch::{BatchIter, Compression};
use tern_protocol::records::decode_records;

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let mut buf = data.to_vec();
    tern_fuzz::fix_crcs(&mut buf);
    let mut states = HashMap::new();
    let mut last_mirrored = HashMap::new();
    // The store's own walk: it skips control batches before decoding.
    for item in BatchIter::new(&buf) {
        let Ok((header, batch)) = item else { break };
        let _ = header.next_offset();
        if header.is_control() {
            continue;
        }
        let Ok((_, records)) = decode_records(batch, tern_fuzz::LOAD_MAX_UNCOMPRESSED) else {
            continue;
        };
        for r in records {
            let Some(key) = r.key.as_deref() else {
                continue;
            };
            let record = decode_record(key, r.value.as_deref());
            if let Some(record) = &record {
                check_round_trip(record);
            }
            match record {
                Some(StateRecord::State(k, Some(v))) => {
                    states.insert(k, v);
                }
                Some(StateRecord::State(k, None)) => {
                    states.remove(&k);
                }
                Some(StateRecord::LastMirroredOffset(k, Some(o))) => {
                    last_mirrored.insert(k, o);
                }
                Some(StateRecord::LastMirroredOffset(k, None)) => {
                    last_mirrored.remove(&k);
                }
                None => {}
            }
        }
    }
    for k in states.keys().chain(last_mirrored.keys()) {
        let _ = tern_mirror::state::coordinator_partition(k, 50);
    }
}

/// What the coordinator writes for a decoded record decodes to that record.
fn check_round_trip(record: &StateRecord) {
    let (k, v) = match record {
        StateRecord::State(k, Some(v)) => encode_state(k, v),
        StateRecord::LastMirroredOffset(k, Some(o)) => encode_last_mirrored_offset(k, *o),
        _ => return,
    };
    assert_eq!(decode_record(&k, Some(&v)).as_ref(), Some(record));
}

/// States of several partitions, last mirrored offsets, tombstones, a gzip batch.
fn make_seeds() -> Vec<Seed> {
    let key = |p: i32| MirrorPartitionKey {
        mirror: "dr".into(),
        topic_id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        partition: p,
    };
    let state = |s, prev, error: Option<&str>| PartitionStateRecord {
        state: s,
        previous_state: prev,
        retry_attempt: 2,
        error_message: error.map(str::to_string),
    };
    let kv = |(k, v): (bytes::Bytes, bytes::Bytes)| (k, Some(v));
    let records = vec![
        kv(encode_state(
            &key(0),
            &state(
                MirrorPartitionState::Mirroring,
                MirrorPartitionState::Preparing,
                None,
            ),
        )),
        kv(encode_state(
            &key(1),
            &state(
                MirrorPartitionState::Failed,
                MirrorPartitionState::Mirroring,
                Some("source unreachable"),
            ),
        )),
        kv(encode_state(
            &key(2),
            &state(
                MirrorPartitionState::Stopped,
                MirrorPartitionState::Stopping,
                None,
            ),
        )),
        kv(encode_last_mirrored_offset(&key(2), 12345)),
    ];
    let tombstones = vec![
        (
            encode_state(
                &key(0),
                &state(
                    MirrorPartitionState::Paused,
                    MirrorPartitionState::Mirroring,
                    None,
                ),
            )
            .0,
            None,
        ),
        (encode_last_mirrored_offset(&key(2), 0).0, None),
    ];
    let plain = seeds::batch(Compression::None, None, &records);
    let gone = seeds::batch(Compression::None, None, &tombstones);
    let gzip = seeds::batch(Compression::Gzip, None, &records[1..3]);
    vec![
        ("states".into(), plain.clone()),
        ("tombstones".into(), [&plain[..], &gone].concat()),
        ("gzip".into(), gzip),
    ]
}
