//! Property test: random sequences of appends (leader and replicated), reads, truncations,
//! DeleteRecords, rolls and reopens agree with a simple in-memory model of the log.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use tern_protocol::record_batch::{set_base_offset, set_partition_leader_epoch, BatchIter};
use tern_storage::record::{build_batch, BatchSpec, KeyValue};
use tern_storage::{Log, LogConfig, StorageError};

#[derive(Debug, Clone)]
enum Op {
    AppendLeader {
        records: usize,
        value_len: usize,
        epoch_bump: bool,
    },
    AppendReplicated {
        gap: i64,
        records: usize,
        value_len: usize,
    },
    Read {
        at: u16,
        max_bytes: usize,
        min_one: bool,
        bound: Option<u16>,
    },
    Truncate {
        at: u16,
    },
    DeleteBefore {
        at: u16,
    },
    AppendIdempotent {
        records: usize,
    },
    ResendLast,
    Roll,
    Reopen {
        clean: bool,
    },
}

const PRODUCER: i64 = 77;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..6, 0usize..300, proptest::bool::weighted(0.1))
            .prop_map(|(records, value_len, epoch_bump)| Op::AppendLeader { records, value_len, epoch_bump }),
        3 => (0i64..4, 1usize..6, 0usize..300)
            .prop_map(|(gap, records, value_len)| Op::AppendReplicated { gap, records, value_len }),
        4 => (any::<u16>(), 1usize..3000, any::<bool>(), proptest::option::of(any::<u16>()))
            .prop_map(|(at, max_bytes, min_one, bound)| Op::Read { at, max_bytes, min_one, bound }),
        1 => any::<u16>().prop_map(|at| Op::Truncate { at }),
        1 => any::<u16>().prop_map(|at| Op::DeleteBefore { at }),
        2 => (1usize..4).prop_map(|records| Op::AppendIdempotent { records }),
        1 => Just(Op::ResendLast),
        1 => Just(Op::Roll),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// The model: batches by base offset (bytes as stored), log start and end offsets.
#[derive(Debug, Default)]
struct Model {
    batches: BTreeMap<i64, (i64, Vec<u8>)>,
    log_start: i64,
    leo: i64,
    /// Leader epoch cache: (epoch, start offset).
    epochs: Vec<(i32, i64)>,
    /// Batches of the idempotent producer: (first seq, last seq, first offset, last offset).
    producer: Vec<(i32, i32, i64, i64)>,
}

impl Model {
    fn assign_epoch(&mut self, epoch: i32, start: i64) {
        if let Some(&(e, o)) = self.epochs.last() {
            if e == epoch && o <= start {
                return;
            }
        }
        self.epochs.retain(|&(e, o)| e < epoch && o < start);
        self.epochs.push((epoch, start));
    }

    fn clear(&mut self, at: i64) {
        self.batches.clear();
        self.log_start = at;
        self.leo = at;
        self.epochs.clear();
        self.producer.clear();
    }

    /// Batches visible at or after `offset`, in order.
    fn from(&self, offset: i64) -> Vec<(i64, i64, Vec<u8>)> {
        self.batches
            .iter()
            .filter(|(_, (last, _))| *last >= offset)
            .map(|(b, (l, bytes))| (*b, *l, bytes.clone()))
            .collect()
    }
}

fn make_batch(records: usize, value_len: usize, base_offset: i64, epoch: i32) -> Vec<u8> {
    let value = vec![b'v'; value_len];
    let recs: Vec<KeyValue<'_>> = (0..records)
        .map(|_| (Some(&b"key"[..]), Some(&value[..])))
        .collect();
    build_batch(
        &BatchSpec {
            base_offset,
            leader_epoch: epoch,
            base_timestamp: 1000,
            ..BatchSpec::default()
        },
        &recs,
    )
}

fn pick(at: u16, lo: i64, hi: i64) -> i64 {
    // Spread over [lo - 2, hi + 2] to hit the edges and just beyond.
    let span = (hi - lo + 5).max(1);
    lo - 2 + (at as i64 % span)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1500,
        index_interval_bytes: 300,
        ..LogConfig::default()
    }
}

fn check_state(log: &Log, model: &Model) {
    assert_eq!(log.log_start_offset(), model.log_start, "log start");
    assert_eq!(log.log_end_offset(), model.leo, "log end");
    assert_eq!(log.epoch_entries(), model.epochs, "leader epochs");
    if let Some(&(_, last_seq, _, last)) = model.producer.last() {
        if let Some(entry) = log.producer_state(PRODUCER) {
            assert_eq!(
                (entry.last_sequence(), entry.last_offset()),
                (last_seq, last),
                "producer state"
            );
        }
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config()).unwrap();
    let mut model = Model::default();
    let mut epoch = 0i32;
    for op in ops {
        match op {
            Op::AppendLeader {
                records,
                value_len,
                epoch_bump,
            } => {
                if epoch_bump {
                    epoch += 1;
                }
                let mut bytes = make_batch(records, value_len, 0, -1);
                let info = log
                    .append_as_leader(BytesMut::from(&bytes[..]), epoch)
                    .unwrap();
                assert_eq!(info.first_offset, model.leo);
                set_base_offset(&mut bytes, model.leo);
                set_partition_leader_epoch(&mut bytes, epoch);
                let last = model.leo + records as i64 - 1;
                model.assign_epoch(epoch, model.leo);
                model.batches.insert(model.leo, (last, bytes));
                model.leo = last + 1;
            }
            Op::AppendReplicated {
                gap,
                records,
                value_len,
            } => {
                let base = model.leo + gap;
                let bytes = make_batch(records, value_len, base, epoch);
                let info = log
                    .append_replicated(Bytes::copy_from_slice(&bytes), None)
                    .unwrap();
                assert_eq!(
                    (info.first_offset, info.last_offset),
                    (base, base + records as i64 - 1)
                );
                model.assign_epoch(epoch, base);
                model
                    .batches
                    .insert(base, (base + records as i64 - 1, bytes));
                model.leo = base + records as i64;
            }
            Op::Read {
                at,
                max_bytes,
                min_one,
                bound,
            } => {
                let start = pick(at, model.log_start, model.leo);
                let max_offset = bound.map(|b| pick(b, model.log_start, model.leo));
                let r = log.read(start, max_bytes, max_offset, min_one);
                if start < model.log_start || start > model.leo {
                    assert!(
                        matches!(r, Err(StorageError::OffsetOutOfRange { .. })),
                        "{r:?}"
                    );
                    continue;
                }
                let r = r.unwrap();
                let got: Vec<(i64, i64, Vec<u8>)> = BatchIter::new(&r.records)
                    .map(|b| {
                        b.map(|(h, bytes)| (h.base_offset, h.last_offset(), bytes.to_vec()))
                            .unwrap()
                    })
                    .collect();
                let expected = model.from(start);
                // A prefix of the model's batches from `start`, within the limits.
                assert!(got.len() <= expected.len());
                assert_eq!(got[..], expected[..got.len()]);
                if let Some(m) = max_offset {
                    assert!(got.iter().all(|(_, last, _)| *last < m));
                }
                if got.len() > 1 {
                    assert!(r.records.len() <= max_bytes);
                }
                let first_fits = expected.first().is_some_and(|(_, last, b)| {
                    max_offset.is_none_or(|m| *last < m) && (min_one || b.len() <= max_bytes)
                });
                if first_fits {
                    assert!(!got.is_empty(), "expected at least one batch from {start}");
                    assert_eq!(r.first_offset, expected[0].0);
                } else {
                    assert!(got.is_empty());
                }
            }
            Op::Truncate { at } => {
                let to = pick(at, model.log_start, model.leo).max(0);
                log.truncate_to(to).unwrap();
                if to >= model.leo {
                } else if to < model.log_start {
                    model.clear(to);
                } else {
                    model.batches.retain(|_, (last, _)| *last < to);
                    let end = model.batches.values().next_back().map(|(l, _)| l + 1);
                    match end {
                        Some(e) if e > model.log_start => {
                            model.leo = e;
                            model.epochs.retain(|&(_, o)| o < e);
                            model.producer.retain(|p| p.3 < e);
                        }
                        _ => model.clear(model.log_start),
                    }
                }
            }
            Op::DeleteBefore { at } => {
                let to = pick(at, model.log_start, model.leo);
                let r = log.delete_records_before(to);
                if to > model.leo || to < 0 {
                    assert!(r.is_err());
                } else {
                    let start = r.unwrap();
                    if to > model.log_start {
                        model.log_start = to;
                        model.batches.retain(|_, (last, _)| *last >= to);
                        if let Some(i) = model.epochs.iter().rposition(|&(_, o)| o <= to) {
                            model.epochs.drain(..i);
                            model.epochs[0].1 = to;
                        }
                    }
                    assert_eq!(start, model.log_start);
                }
            }
            Op::AppendIdempotent { records } => {
                let seq = model.producer.last().map_or(0, |p| p.1 + 1);
                let spec = BatchSpec {
                    producer_id: PRODUCER,
                    producer_epoch: 0,
                    base_sequence: seq,
                    base_timestamp: 1000,
                    ..BatchSpec::default()
                };
                let recs: Vec<KeyValue<'_>> =
                    (0..records).map(|_| (None, Some(&b"idem"[..]))).collect();
                let mut bytes = build_batch(&spec, &recs);
                let info = log
                    .append_as_leader(BytesMut::from(&bytes[..]), epoch)
                    .unwrap();
                assert!(!info.duplicate);
                assert_eq!(info.first_offset, model.leo);
                set_base_offset(&mut bytes, model.leo);
                set_partition_leader_epoch(&mut bytes, epoch);
                let last = model.leo + records as i64 - 1;
                model.assign_epoch(epoch, model.leo);
                model
                    .producer
                    .push((seq, seq + records as i32 - 1, model.leo, last));
                model.batches.insert(model.leo, (last, bytes));
                model.leo = last + 1;
            }
            Op::ResendLast => {
                // Only meaningful while the producer's last batch is still in the log.
                let Some(&(first_seq, last_seq, first, last)) = model.producer.last() else {
                    continue;
                };
                if first < model.log_start {
                    continue;
                }
                let spec = BatchSpec {
                    producer_id: PRODUCER,
                    producer_epoch: 0,
                    base_sequence: first_seq,
                    base_timestamp: 1000,
                    ..BatchSpec::default()
                };
                let n = (last_seq - first_seq + 1) as usize;
                let recs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(&b"idem"[..]))).collect();
                let info = log
                    .append_as_leader(BytesMut::from(&build_batch(&spec, &recs)[..]), epoch)
                    .unwrap();
                assert!(info.duplicate, "a resent batch must be recognised");
                assert_eq!((info.first_offset, info.last_offset), (first, last));
            }
            Op::Roll => log.roll().unwrap(),
            Op::Reopen { clean } => {
                if clean {
                    log.close().unwrap();
                } else {
                    drop(log);
                }
                log = Log::open(dir.path(), config()).unwrap();
            }
        }
        check_state(&log, &model);
    }
    // Everything readable matches the model, batch by batch.
    let mut next = model.log_start;
    let mut seen = Vec::new();
    while next < model.leo {
        let r = log.read(next, 1 << 20, None, true).unwrap();
        if r.records.is_empty() {
            break;
        }
        for b in BatchIter::new(&r.records) {
            let (h, bytes) = b.unwrap();
            seen.push((h.base_offset, h.last_offset(), bytes.to_vec()));
            next = h.next_offset();
        }
    }
    assert_eq!(seen, model.from(model.log_start));
}

proptest! {
    // PROPTEST_CASES overrides the default of 64 for longer runs.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn log_agrees_with_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}

/// Regression: found by the model test (stale offset index entry after truncation).
#[test]
fn regression_truncate_after_delete_records() {
    use Op::*;
    run(vec![
        AppendReplicated {
            gap: 2,
            records: 2,
            value_len: 0,
        },
        AppendReplicated {
            gap: 2,
            records: 2,
            value_len: 0,
        },
        AppendLeader {
            records: 1,
            value_len: 0,
            epoch_bump: false,
        },
        AppendIdempotent { records: 3 },
        AppendIdempotent { records: 2 },
        AppendReplicated {
            gap: 1,
            records: 4,
            value_len: 0,
        },
        AppendIdempotent { records: 1 },
        AppendReplicated {
            gap: 2,
            records: 1,
            value_len: 148,
        },
        AppendLeader {
            records: 4,
            value_len: 147,
            epoch_bump: false,
        },
        Truncate { at: 32 },
        AppendLeader {
            records: 2,
            value_len: 122,
            epoch_bump: false,
        },
        AppendReplicated {
            gap: 3,
            records: 5,
            value_len: 0,
        },
        DeleteBefore { at: 26043 },
        AppendLeader {
            records: 2,
            value_len: 0,
            epoch_bump: false,
        },
        AppendLeader {
            records: 3,
            value_len: 0,
            epoch_bump: false,
        },
        Truncate { at: 3 },
    ]);
}
