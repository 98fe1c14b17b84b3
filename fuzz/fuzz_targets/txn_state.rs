//! `__transaction_state` as the transaction coordinator loads a partition on start
//! (`TxnCoordinator::load_partition`): batches decoded as `internal_topic::scan` reads them,
//! transactional-id keys and metadata values decoded (tombstones remove an id), then each
//! loaded id's metadata re-encoded and decoded alike, and its state checked as the load does
//! (transactions being prepared are completed).
//!
//! Input: batches back to back; their CRCs are fixed first (the log checked them on append).

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use tern_broker::fuzzing::transaction_state::{decode_key, decode_value, key, value};
use tern_broker::fuzzing::{TxnMetadata, TxnState};
use tern_fuzz::seeds::{self, Seed};
use tern_fuzz::NOW_MS;
use tern_protocol::record_batch::Compression;

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let mut buf = data.to_vec();
    tern_fuzz::fix_crcs(&mut buf);
    let mut loaded: HashMap<String, TxnMetadata> = HashMap::new();
    tern_fuzz::scan(&buf, |header, records| {
        if header.is_control() {
            return;
        }
        for r in records {
            let Some(id) = r.key.as_deref().and_then(decode_key) else {
                continue;
            };
            match r.value.as_deref() {
                None => {
                    loaded.remove(&id);
                }
                Some(v) => {
                    if let Some(m) = decode_value(&id, v) {
                        loaded.insert(id, m);
                    }
                }
            }
        }
    });
    for (id, m) in &loaded {
        assert_eq!(decode_key(&key(id)).as_deref(), Some(id.as_str()));
        let again = decode_value(id, &value(m)).expect("loaded metadata re-encodes");
        assert_eq!(again.state, m.state);
        assert_eq!(again.partitions, m.partitions);
        assert_eq!(
            (again.producer_id, again.producer_epoch, again.timeout_ms),
            (m.producer_id, m.producer_epoch, m.timeout_ms)
        );
        assert_eq!(
            (again.last_producer_id, again.next_producer_id, again.txn_version),
            (m.last_producer_id, m.next_producer_id, m.txn_version)
        );
        let _ = m.state.is_preparing();
    }
}

/// Ids in every state, with partitions, a tombstone, a compressed batch.
fn make_seeds() -> Vec<Seed> {
    let states = TxnState::ALL;
    let records: Vec<_> = states
        .iter()
        .enumerate()
        .map(|(i, &state)| {
            let id = format!("txn-{i}");
            let m = TxnMetadata {
                transactional_id: id.clone(),
                producer_id: 1000 + i as i64,
                last_producer_id: if i % 2 == 0 { -1 } else { 900 + i as i64 },
                next_producer_id: if state.is_preparing() { 2000 } else { -1 },
                producer_epoch: i as i16,
                last_producer_epoch: -1,
                timeout_ms: 60_000,
                state,
                partitions: [
                    ("orders".to_string(), 0),
                    ("orders".to_string(), 1),
                    ("t".to_string(), 3),
                ]
                .into_iter()
                .take(i % 4)
                .collect(),
                start_ms: NOW_MS,
                last_update_ms: NOW_MS + 5,
                txn_version: if i % 3 == 0 { 0 } else { 2 },
            };
            (key(&id), Some(value(&m)))
        })
        .collect();
    let all = seeds::batch(Compression::None, None, &records);
    let tombstone = seeds::batch(Compression::None, None, &[(key("txn-1"), None)]);
    let zstd = seeds::batch(Compression::Zstd, None, &records[2..4]);
    vec![
        ("every_state".into(), all.clone()),
        ("tombstone".into(), [&all[..], &tombstone].concat()),
        ("zstd".into(), zstd),
    ]
}
