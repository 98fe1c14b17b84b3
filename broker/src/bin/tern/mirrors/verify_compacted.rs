//! `--verify` on a compacted topic. Each cluster's cleaner compacts its own copy, as Kafka's
//! replicas do, so batches may legitimately differ; what compaction preserves must not:
//! every offset present on both sides holds the same record (key, value, headers, timestamp),
//! and each key's latest record is at the same offset on both sides. This decodes records (a
//! check, not the data path) and keeps one fingerprint per record in memory.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use anyhow::{anyhow, Result};
use bytes::Bytes;
use tern_protocol::record_batch::BatchIter;
use tern_protocol::records::{decode_records, Record};

use crate::mirrors::source::Side;
use crate::mirrors::verify::Verdict;

/// The most one batch may decompress to here.
const MAX_UNCOMPRESSED: usize = 256 << 20;

/// One side's records over a range: a fingerprint per offset and each key's latest offset
/// (None when that latest record is a tombstone, which a cleaner may drop any time after
/// `delete.retention.ms`, so it counts as the key being absent).
#[derive(Default)]
struct Contents {
    by_offset: BTreeMap<i64, u64>,
    latest: HashMap<Bytes, (i64, bool)>,
}

fn fingerprint(r: &Record) -> u64 {
    let mut h = DefaultHasher::new();
    (&r.key, &r.value, r.timestamp).hash(&mut h);
    for header in &r.headers {
        (&header.key, &header.value).hash(&mut h);
    }
    h.finish()
}

/// Reads `[from, to)` of a partition: its data records (control batches skipped).
async fn contents(
    side: &mut Side,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
) -> Result<Contents> {
    let mut c = Contents::default();
    let mut pos = from;
    while pos < to {
        let fetched = side.batches(topic, partition, pos).await?;
        let mut advanced = false;
        for (header, bytes) in BatchIter::new(&fetched).map_while(Result::ok) {
            let next = header.last_offset() + 1;
            if next <= pos {
                continue;
            }
            if !header.is_control() {
                let (_, records) = decode_records(bytes, MAX_UNCOMPRESSED).map_err(|e| {
                    anyhow!(
                        "{topic}-{partition}: batch at {}: {e:?}",
                        header.base_offset
                    )
                })?;
                for r in records.iter().filter(|r| r.offset >= pos && r.offset < to) {
                    c.by_offset.insert(r.offset, fingerprint(r));
                    if let Some(key) = &r.key {
                        c.latest.insert(key.clone(), (r.offset, r.value.is_none()));
                    }
                }
            }
            pos = next;
            advanced = true;
        }
        if !advanced {
            break;
        }
    }
    Ok(c)
}

/// Compares a compacted partition: the destination over `[start, dest_end)`, the source over
/// `[start, source_end)` (a key the source rewrote at or after `dest_end` is not yet due on
/// the destination, and the source's cleaner may already have dropped its older records).
pub(crate) async fn compare(
    source: &mut Side,
    dest: &mut Side,
    topic: &str,
    partition: i32,
    start: i64,
    dest_end: i64,
    source_end: i64,
) -> Result<Verdict> {
    let d = contents(dest, topic, partition, start, dest_end).await?;
    let s = contents(source, topic, partition, start, source_end).await?;
    Ok(judge(&s, &d, dest_end))
}

fn judge(s: &Contents, d: &Contents, dest_end: i64) -> Verdict {
    let mut shared = 0u64;
    for (offset, fp) in &d.by_offset {
        match s.by_offset.get(offset) {
            Some(sfp) if sfp == fp => shared += 1,
            Some(_) => {
                return Verdict::Differs {
                    offset: *offset,
                    what: "compacted: a different record at the same offset".into(),
                }
            }
            None => {}
        }
    }
    let live = |latest: &HashMap<Bytes, (i64, bool)>, key: &Bytes| {
        latest
            .get(key)
            .filter(|(_, tombstone)| !tombstone)
            .map(|(o, _)| *o)
    };
    let mut first_difference: Option<(i64, String)> = None;
    let keys: HashSet<&Bytes> = d.latest.keys().chain(s.latest.keys()).collect();
    let mut checked = 0u64;
    for key in keys {
        let source_latest = s.latest.get(key).map(|(o, _)| *o);
        if source_latest.is_some_and(|o| o >= dest_end) {
            continue;
        }
        let (so, dof) = (live(&s.latest, key), live(&d.latest, key));
        if so == dof {
            checked += 1;
            continue;
        }
        let at = so.into_iter().chain(dof).min().unwrap_or(0);
        let what = format!(
            "compacted: key {}'s latest record is at {} on the source, {} here",
            String::from_utf8_lossy(key),
            so.map_or("none".to_string(), |o| o.to_string()),
            dof.map_or("none".to_string(), |o| o.to_string()),
        );
        if first_difference.as_ref().is_none_or(|(o, _)| at < *o) {
            first_difference = Some((at, what));
        }
    }
    match first_difference {
        Some((offset, what)) => Verdict::Differs { offset, what },
        None => Verdict::EqualCompacted {
            shared_offsets: shared,
            keys: checked,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(records: &[(i64, &str, Option<u64>)]) -> Contents {
        let mut c = Contents::default();
        for (offset, key, value) in records {
            c.by_offset.insert(*offset, value.unwrap_or(0));
            c.latest
                .insert(Bytes::from(key.to_string()), (*offset, value.is_none()));
        }
        c
    }

    #[test]
    fn equal_when_compaction_kept_different_offsets_but_the_same_latest_records() {
        // The source compacted a@0 away, the destination not yet.
        let s = side(&[(1, "b", Some(2)), (2, "a", Some(3))]);
        let d = side(&[(0, "a", Some(1)), (1, "b", Some(2)), (2, "a", Some(3))]);
        assert_eq!(
            judge(&s, &d, 3),
            Verdict::EqualCompacted {
                shared_offsets: 2,
                keys: 2
            }
        );
    }

    #[test]
    fn a_different_record_at_a_shared_offset_differs_there() {
        let s = side(&[(0, "a", Some(1)), (1, "b", Some(2))]);
        let d = side(&[(0, "a", Some(1)), (1, "b", Some(9))]);
        assert_eq!(
            judge(&s, &d, 2),
            Verdict::Differs {
                offset: 1,
                what: "compacted: a different record at the same offset".into()
            }
        );
    }

    #[test]
    fn a_missing_latest_record_differs_and_tombstones_count_as_absent() {
        let s = side(&[(0, "a", Some(1)), (1, "b", Some(2))]);
        let d = side(&[(0, "a", Some(1))]);
        assert!(matches!(
            judge(&s, &d, 2),
            Verdict::Differs { offset: 1, .. }
        ));
        // b deleted on the source, its tombstone already cleaned here: equal.
        let s = side(&[(0, "a", Some(1)), (1, "b", None)]);
        assert!(matches!(judge(&s, &d, 2), Verdict::EqualCompacted { .. }));
    }

    #[test]
    fn a_key_the_source_rewrote_past_the_destination_end_is_not_due() {
        // The source rewrote a at 5 and cleaned a@0; the destination holds up to 2.
        let s = side(&[(1, "b", Some(2)), (5, "a", Some(7))]);
        let d = side(&[(0, "a", Some(1)), (1, "b", Some(2))]);
        assert!(matches!(judge(&s, &d, 2), Verdict::EqualCompacted { .. }));
    }
}
