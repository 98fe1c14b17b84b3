//! The log cleaner: key-based compaction of a log's inactive segments. Compressed batches are
//! decompressed and recompressed with their codec (tern_protocol::records); uncompressed ones
//! are filtered by copying the retained records' bytes.
//!
//! One pass builds a map key -> latest offset over the dirty part of the log (from the cleaner
//! checkpoint to the end of the last inactive segment before any open transaction), then
//! rewrites every inactive segment keeping, per key, only the latest record. As in Kafka,
//! records of committed transactions are compacted like any others, those of aborted
//! transactions are removed, and a transaction marker goes once no batch of its transaction
//! is left (cleaner_txn). Tombstones and such markers stay for `delete.retention.ms` from the
//! pass that first finds them, which writes that delete horizon into their batch (KIP-534).
//! Offsets never change: a batch keeps its base
//! offset and last offset delta, so gaps stay gaps. Batches where nothing is removed are copied
//! byte for byte. A rewritten segment is written as `.log.cleaned`, fsynced, renamed to
//! `.log.swap` (the commit point), then renamed over `.log`; recovery finishes a committed swap.

use std::collections::HashMap;

use tern_protocol::record_batch::{
    compute_crc, Compression, RecordBatchHeader, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD,
};

use tern_protocol::records::{decode_records, Record, RecordBatchBuilder};

use crate::cleaner_txn::{MarkerFate, TxnWalk};
use crate::error::Result;
use crate::log::Log;
use crate::record::{parse_records, RecordView};
use crate::txn_index::AbortedTxn;

/// What one compaction pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments rewritten or removed.
    pub segments_cleaned: usize,
    /// Bytes of the segments before cleaning.
    pub bytes_before: u64,
    /// Bytes of the segments after cleaning.
    pub bytes_after: u64,
    /// Records removed because a later record has the same key.
    pub records_removed: u64,
    /// Tombstones removed because their delete horizon passed.
    pub tombstones_removed: u64,
    /// Records of aborted transactions removed.
    pub aborted_records_removed: u64,
    /// Transaction markers removed (their transaction had no batch left).
    pub markers_removed: u64,
    /// Batches given a delete horizon (KIP-534): they hold a tombstone, or are a marker no
    /// longer needed, that the pass found for the first time.
    pub horizons_set: u64,
}

enum Cleaned {
    Keep,
    Drop,
    Rewrite(Vec<u8>),
}

/// Upper bound on a decompressed records section read by the cleaner.
const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

/// Calls `f(key, offset)` for every keyed record of a data batch (compressed or not). The
/// caller leaves out batches of aborted transactions: their records supersede nothing.
fn for_each_key(h: &RecordBatchHeader, batch: &[u8], mut f: impl FnMut(&[u8], i64)) {
    if h.is_control() {
        return;
    }
    if h.compression() == Ok(Compression::None) {
        if let Some(records) =
            parse_records(&batch[RECORD_BATCH_OVERHEAD..], h.records_count as usize)
        {
            for r in records {
                if let Some(k) = r.key {
                    f(k, h.base_offset + r.offset_delta as i64);
                }
            }
        }
    } else if let Ok((_, records)) = decode_records(batch, MAX_DECOMPRESSED_BYTES) {
        for r in records {
            if let Some(k) = &r.key {
                f(k, r.offset);
            }
        }
    }
}

/// What one pass keeps: the latest offset of every key in the dirty part of the log up to
/// `end`, and the pass's clock for delete horizons.
struct OffsetMap {
    latest: HashMap<Vec<u8>, i64>,
    horizons: Horizons,
    /// The last offset the map covers; records after it are kept as they are (a tombstone
    /// there may still hide an earlier record of its key).
    end: i64,
}

impl OffsetMap {
    /// Decides the fate of one data batch not aborted. Its records are filtered (compressed
    /// ones decompressed and recompressed with the same codec through the protocol crate);
    /// control and undecodable batches are kept as they are. Base offset and last offset
    /// delta never change.
    fn clean_batch(
        &self,
        h: &RecordBatchHeader,
        batch: &[u8],
        keep_whole: bool,
        stats: &mut CompactionStats,
    ) -> Cleaned {
        if h.is_control() {
            return Cleaned::Keep;
        }
        if h.compression() == Ok(Compression::None) {
            let Some(records) =
                parse_records(&batch[RECORD_BATCH_OVERHEAD..], h.records_count as usize)
            else {
                return Cleaned::Keep;
            };
            return self.filter(
                h,
                batch,
                records,
                keep_whole,
                stats,
                |r| (r.key, h.base_offset + r.offset_delta as i64, r.value),
                |kept, horizon| match horizon {
                    // A new horizon moves the base timestamp every record's delta counts from.
                    Some(horizon) if !h.has_delete_horizon() => {
                        rebuild_decoded(h, batch, Compression::None, kept, horizon)
                    }
                    _ => Some(rebuild_uncompressed(batch, kept)),
                },
            );
        }
        let (Ok(codec), Ok((_, records))) = (
            h.compression(),
            decode_records(batch, MAX_DECOMPRESSED_BYTES),
        ) else {
            return Cleaned::Keep;
        };
        self.filter(
            h,
            batch,
            records,
            keep_whole,
            stats,
            |r| (r.key.as_deref(), r.offset, r.value.as_deref()),
            |kept, horizon| rebuild_compressed(h, codec, kept, horizon),
        )
    }

    /// Drops the records a later one with the same key supersedes and the tombstones whose
    /// batch's delete horizon has passed; `fields` gives a record's (key, offset, value),
    /// `rebuild` makes the batch of the records kept under a delete horizon (`None`: keep the
    /// batch as it is). A batch that keeps a tombstone and has no horizon yet gets one (KIP-534),
    /// so every tombstone is readable for `delete.retention.ms` after a pass first finds it. With
    /// no record left, the producer's last batch (`keep_whole`) stays as an empty header.
    #[allow(clippy::too_many_arguments)]
    fn filter<R>(
        &self,
        h: &RecordBatchHeader,
        batch: &[u8],
        records: Vec<R>,
        keep_whole: bool,
        stats: &mut CompactionStats,
        fields: impl Fn(&R) -> (Option<&[u8]>, i64, Option<&[u8]>),
        rebuild: impl FnOnce(&[R], Option<i64>) -> Option<Vec<u8>>,
    ) -> Cleaned {
        let total = records.len();
        let (mut superseded, mut tombstones) = (0u64, 0u64);
        let kept: Vec<R> = records
            .into_iter()
            .filter(|r| {
                let (key, offset, value) = fields(r);
                let Some(key) = key else { return true };
                if offset > self.end {
                    return true;
                }
                if self.latest.get(key).is_some_and(|&latest| offset < latest) {
                    superseded += 1;
                    return false;
                }
                if value.is_none() && self.horizons.passed(h) {
                    tombstones += 1;
                    return false;
                }
                true
            })
            .collect();
        let set_horizon = !h.has_delete_horizon() && kept.iter().any(|r| fields(r).2.is_none());
        if kept.len() == total && !set_horizon {
            return Cleaned::Keep;
        }
        let horizon = h
            .delete_horizon_ms()
            .or(set_horizon.then_some(self.horizons.new_horizon));
        let cleaned = if kept.is_empty() && keep_whole {
            Cleaned::Rewrite(empty_batch(batch))
        } else if kept.is_empty() {
            Cleaned::Drop
        } else {
            match rebuild(&kept, horizon) {
                Some(out) => Cleaned::Rewrite(out),
                None => return Cleaned::Keep,
            }
        };
        stats.records_removed += superseded;
        stats.tombstones_removed += tombstones;
        stats.horizons_set += u64::from(set_horizon && !kept.is_empty());
        cleaned
    }
}

/// `batch` with no records left, as Kafka writes the producer's last batch when all its records
/// go: the header alone (offsets, producer, sequence and epoch kept), uncompressed, both
/// timestamps the batch's maximum. The producer state it carries survives a reload.
fn empty_batch(batch: &[u8]) -> Vec<u8> {
    let mut out = batch[..RECORD_BATCH_OVERHEAD].to_vec();
    // Uncompressed, and no delete horizon: the base timestamp becomes the maximum.
    out[22] &= !0x47;
    let max_timestamp = [
        out[35], out[36], out[37], out[38], out[39], out[40], out[41], out[42],
    ];
    out[27..35].copy_from_slice(&max_timestamp);
    seal(&mut out, 0);
    out
}

/// An uncompressed batch of the `kept` records of `batch`, their bytes copied as they are.
fn rebuild_uncompressed(batch: &[u8], kept: &[RecordView<'_>]) -> Vec<u8> {
    let body_len: usize = kept.iter().map(|r| r.raw.len()).sum();
    let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + body_len);
    out.extend_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    for r in kept {
        out.extend_from_slice(r.raw);
    }
    seal(&mut out, kept.len() as i32);
    out
}

/// Writes the batch length and `records` count of the uncompressed batch `out`, then its CRC.
fn seal(out: &mut [u8], records: i32) {
    let batch_length = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[57..61].copy_from_slice(&records.to_be_bytes());
    let crc = compute_crc(out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The records of `batch` at the offsets of `kept`, rebuilt with `codec` under delete
/// horizon `horizon` (see [`rebuild_compressed`]).
fn rebuild_decoded(
    h: &RecordBatchHeader,
    batch: &[u8],
    codec: Compression,
    kept: &[RecordView<'_>],
    horizon: i64,
) -> Option<Vec<u8>> {
    let (_, records) = decode_records(batch, MAX_DECOMPRESSED_BYTES).ok()?;
    let offsets: std::collections::HashSet<i64> = kept
        .iter()
        .map(|r| h.base_offset + r.offset_delta as i64)
        .collect();
    let records: Vec<Record> = records
        .into_iter()
        .filter(|r| offsets.contains(&r.offset))
        .collect();
    (records.len() == kept.len())
        .then(|| rebuild_compressed(h, codec, &records, Some(horizon)))
        .flatten()
}

/// The `kept` records recompressed with `codec` under `h`'s base offset, epoch, producer and
/// kind, with `horizon` as the batch's delete horizon if given.
fn rebuild_compressed(
    h: &RecordBatchHeader,
    codec: Compression,
    kept: &[Record],
    horizon: Option<i64>,
) -> Option<Vec<u8>> {
    let mut builder = RecordBatchBuilder::new(codec)
        .base_offset(h.base_offset)
        .partition_leader_epoch(h.partition_leader_epoch)
        .timestamp_type(h.timestamp_type())
        .producer(h.producer_id, h.producer_epoch, h.base_sequence)
        .transactional(h.is_transactional())
        .control(h.is_control());
    if let Some(horizon) = horizon {
        builder = builder.delete_horizon(horizon);
    }
    for r in kept {
        builder
            .push_with_offset(
                r.offset,
                r.timestamp,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            )
            .ok()?;
    }
    let mut out = builder.build().ok()?.to_vec();
    // Kafka keeps the original last offset so the producer's sequence range stays intact.
    out[23..27].copy_from_slice(&h.last_offset_delta.to_be_bytes());
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Some(out)
}

/// What a pass may spend, from the cleaner's settings.
pub(crate) struct PassLimits<'a> {
    /// Keys the offset map may hold: Kafka's share of `log.cleaner.dedupe.buffer.size` for one
    /// cleaner thread. A dirty section with more keys is cleaned up to where the map filled,
    /// and the next pass goes on from there.
    pub map_capacity: usize,
    /// Told the bytes read and written, to hold the cleaners to
    /// `log.cleaner.io.max.bytes.per.second`.
    pub throttle: &'a dyn Fn(u64),
    /// True once the cleaner stops: the pass ends at the next batch, without moving its
    /// checkpoint.
    pub stopped: &'a dyn Fn() -> bool,
}

impl PassLimits<'_> {
    /// No bound on keys and no throttle.
    const UNLIMITED: PassLimits<'static> = PassLimits {
        map_capacity: usize::MAX,
        throttle: &|_| {},
        stopped: &|| false,
    };
}

impl Log {
    /// One compaction pass (only with `cleanup.policy` containing `compact`). Skips the pass
    /// when the dirty ratio is below `min.cleanable.dirty.ratio` and `max.compaction.lag.ms`
    /// has not passed; never touches the active segment or segments younger than
    /// `min.compaction.lag.ms`. An I/O error takes the log offline, as on any other path.
    pub fn compact(&self, now_ms: i64) -> Result<CompactionStats> {
        self.compact_within(now_ms, &PassLimits::UNLIMITED)
    }

    /// As [`Log::compact`], within the cleaner's limits.
    pub(crate) fn compact_within(
        &self,
        now_ms: i64,
        limits: &PassLimits<'_>,
    ) -> Result<CompactionStats> {
        self.io_guard(compact_pass(self, now_ms, limits))
    }

    /// The share of the cleanable bytes not compacted yet, when a pass would clean something
    /// (the log is compacted, has dirty bytes, and they reach `min.cleanable.dirty.ratio` or
    /// have waited past `max.compaction.lag.ms`).
    pub(crate) fn cleanable_ratio(&self, now_ms: i64) -> Option<f64> {
        let config = self.config();
        if !config.cleanup_policy.compact {
            return None;
        }
        let section = Section::of(self, &config, now_ms)?;
        section.due(&config, now_ms).then(|| section.dirty_ratio())
    }
}

/// The part of a log a pass may clean: the inactive segments older than
/// `min.compaction.lag.ms` and before any open transaction, split at the cleaner checkpoint
/// into clean and dirty bytes.
struct Section {
    segs: Vec<std::sync::Arc<crate::segment::LogSegment>>,
    /// Segments `segs[..end]` are cleanable.
    end: usize,
    first_dirty: i64,
    /// The offset after the last cleanable segment.
    dirty_end: i64,
    clean_bytes: u64,
    dirty_bytes: u64,
}

impl Section {
    /// None when nothing is dirty.
    fn of(log: &Log, config: &crate::LogConfig, now_ms: i64) -> Option<Section> {
        let segs = log.segment_list();
        let mut end = segs.len().saturating_sub(1);
        if config.min_compaction_lag_ms > 0 {
            if let Some(i) = segs[..end]
                .iter()
                .position(|s| s.largest_timestamp() > now_ms - config.min_compaction_lag_ms)
            {
                end = i;
            }
        }
        // Nothing at or after an open transaction's first offset is cleaned: its batches
        // are neither committed nor aborted yet.
        if let Some(unstable) = log.first_unstable_offset() {
            if let Some(i) = (0..end).find(|&i| segs[i + 1].base_offset() > unstable) {
                end = i;
            }
        }
        if end == 0 {
            return None;
        }
        let dirty_end = segs[end].base_offset();
        let first_dirty = log.cleaner_checkpoint().max(log.log_start_offset());
        let mut section = Section {
            segs,
            end,
            first_dirty,
            dirty_end,
            clean_bytes: 0,
            dirty_bytes: 0,
        };
        for i in 0..end {
            let size = section.segs[i].size();
            if section.is_clean(i) {
                section.clean_bytes += size;
            } else {
                section.dirty_bytes += size;
            }
        }
        (section.dirty_bytes > 0).then_some(section)
    }

    /// Whether cleanable segment `i` lies wholly before the first dirty offset.
    fn is_clean(&self, i: usize) -> bool {
        self.segs[i + 1].base_offset() <= self.first_dirty
    }

    fn dirty_ratio(&self) -> f64 {
        self.dirty_bytes as f64 / (self.clean_bytes + self.dirty_bytes) as f64
    }

    /// Whether a pass is due: the dirty ratio reaches `min.cleanable.dirty.ratio`, or a dirty
    /// inactive segment's first batch is older than `max.compaction.lag.ms` (Kafka's
    /// `maxCompactionDelay`).
    fn due(&self, config: &crate::LogConfig, now_ms: i64) -> bool {
        if self.dirty_ratio() >= config.min_cleanable_dirty_ratio {
            return true;
        }
        if config.max_compaction_lag_ms == i64::MAX {
            return false;
        }
        let clean_until = now_ms.saturating_sub(config.max_compaction_lag_ms.max(0));
        let inactive = self.segs.len() - 1;
        (0..inactive)
            .filter(|&i| self.segs[i + 1].base_offset() > self.first_dirty)
            .filter_map(|i| self.segs[i].first_batch_timestamp())
            .filter(|&ts| ts > 0)
            .min()
            .is_some_and(|earliest| earliest < clean_until)
    }
}

fn compact_pass(log: &Log, now_ms: i64, limits: &PassLimits<'_>) -> Result<CompactionStats> {
    let mut stats = CompactionStats::default();
    let config = log.config();
    if !config.cleanup_policy.compact {
        return Ok(stats);
    }
    let truncations = log.truncations();
    let Some(section) = Section::of(log, &config, now_ms) else {
        return Ok(stats);
    };
    if !section.due(&config, now_ms) {
        return Ok(stats);
    }
    let cleanable = &section.segs[..section.end];

    let mut map = OffsetMap {
        latest: HashMap::new(),
        horizons: Horizons {
            now_ms,
            new_horizon: now_ms.saturating_add(config.delete_retention_ms),
        },
        end: section.dirty_end - 1,
    };
    let mut txns = TxnWalk::new(log.aborted_transactions(section.first_dirty, section.dirty_end));
    for (i, s) in cleanable.iter().enumerate() {
        if section.is_clean(i) {
            continue;
        }
        let mut full = false;
        let end = s.scan(0, s.size(), false, |_, h, batch| {
            if full || h.last_offset() < section.first_dirty || (limits.stopped)() {
                return Ok(());
            }
            (limits.throttle)(batch.len() as u64);
            if h.is_control() {
                txns.marker(h, batch);
            } else if !txns.is_aborted(h) {
                for_each_key(h, batch, |k, offset| {
                    map.latest.insert(k.to_vec(), offset);
                });
            }
            // Past the map's capacity the pass covers what it has mapped (at least one batch).
            if map.latest.len() >= limits.map_capacity {
                full = true;
                map.end = h.last_offset();
            }
            Ok(())
        })?;
        // A batch that does not read leaves the map short of it: nothing is cleaned (a
        // truncation meanwhile explains it, and the next pass starts over).
        if let Some(e) = end.error {
            return aborted(log, truncations, stats, e);
        }
        if (limits.stopped)() {
            return Ok(stats);
        }
        if full {
            break;
        }
    }

    let mut txns =
        TxnWalk::new(log.aborted_transactions(cleanable[0].base_offset(), section.dirty_end));
    for s in cleanable.iter().filter(|s| s.base_offset() <= map.end) {
        if (limits.stopped)() {
            // Segments already rewritten stay so; the checkpoint stays where it was.
            return Ok(stats);
        }
        let size = s.size();
        let mut out = Vec::with_capacity(size as usize);
        let mut changed = false;
        // The aborted transactions whose markers stay in this segment.
        let mut aborts = Vec::new();
        let mut last_marker_removed = None;
        let end = s.scan(0, size, false, |_, h, batch| {
            (limits.throttle)(batch.len() as u64);
            let keep_whole = log.is_producers_last_batch(h);
            let cleaned = if h.is_control() {
                let cleaned = clean_marker(
                    &mut txns,
                    h,
                    batch,
                    keep_whole,
                    &map.horizons,
                    &mut aborts,
                    &mut stats,
                );
                if matches!(cleaned, Cleaned::Drop) {
                    last_marker_removed = Some(h.last_offset());
                }
                cleaned
            } else if txns.is_aborted(h) {
                stats.aborted_records_removed += u64::try_from(h.records_count).unwrap_or(0);
                match (keep_whole, h.records_count) {
                    (false, _) => Cleaned::Drop,
                    (true, 0) => Cleaned::Keep,
                    (true, _) => Cleaned::Rewrite(empty_batch(batch)),
                }
            } else {
                map.clean_batch(h, batch, keep_whole, &mut stats)
            };
            match cleaned {
                Cleaned::Keep => out.extend_from_slice(batch),
                Cleaned::Drop => changed = true,
                Cleaned::Rewrite(b) => {
                    out.extend_from_slice(&b);
                    changed = true;
                }
            }
            Ok(())
        })?;
        // Rewriting only the batches that read would cut the segment's tail off.
        if let Some(e) = end.error {
            return aborted(log, truncations, stats, e);
        }
        if !changed {
            continue;
        }
        (limits.throttle)(out.len() as u64);
        if let Some(marker) = last_marker_removed {
            // A producer snapshot from before the marker may hold its transaction open; replayed
            // after a crash without the marker, it would stay open for ever.
            log.drop_snapshots_through(marker)?;
        }
        if log.replace_segment(s, size, &out, &aborts)? {
            stats.segments_cleaned += 1;
            stats.bytes_before += size;
            stats.bytes_after += out.len() as u64;
        }
    }
    log.advance_cleaner_checkpoint(map.end + 1, truncations)?;
    Ok(stats)
}

/// The clock of one pass for KIP-534's delete horizons.
struct Horizons {
    now_ms: i64,
    /// The horizon a batch gets when a pass first finds a tombstone in it, or finds it a marker
    /// no longer needed: `delete.retention.ms` from now.
    new_horizon: i64,
}

impl Horizons {
    /// Whether `h` has a delete horizon and it has passed (Kafka keeps a tombstone while the
    /// clock is before the horizon).
    fn passed(&self, h: &RecordBatchHeader) -> bool {
        h.delete_horizon_ms()
            .is_some_and(|horizon| self.now_ms >= horizon)
    }
}

/// A transaction marker goes once no batch of its transaction is left and its delete horizon
/// has passed: the first pass that finds it so gives it a horizon (`delete.retention.ms`
/// later), as Kafka's cleaner does (KIP-534). A kept abort marker whose transaction still has
/// batches keeps its transaction index entry (`aborts`).
fn clean_marker(
    txns: &mut TxnWalk,
    h: &RecordBatchHeader,
    batch: &[u8],
    keep_whole: bool,
    horizons: &Horizons,
    aborts: &mut Vec<AbortedTxn>,
    stats: &mut CompactionStats,
) -> Cleaned {
    match txns.marker(h, batch) {
        MarkerFate::Unneeded if !h.has_delete_horizon() => {
            let rebuilt =
                decode_records(batch, MAX_DECOMPRESSED_BYTES)
                    .ok()
                    .and_then(|(_, records)| {
                        rebuild_compressed(
                            h,
                            Compression::None,
                            &records,
                            Some(horizons.new_horizon),
                        )
                    });
            match rebuilt {
                Some(out) => {
                    stats.horizons_set += 1;
                    Cleaned::Rewrite(out)
                }
                None => Cleaned::Keep,
            }
        }
        MarkerFate::Unneeded if horizons.passed(h) && !keep_whole => {
            stats.markers_removed += 1;
            Cleaned::Drop
        }
        // The producer's last batch keeps its epoch for fencing: its header stays, without the
        // marker's record, as Kafka's cleaner leaves it.
        MarkerFate::Unneeded if horizons.passed(h) && h.records_count > 0 => {
            stats.markers_removed += 1;
            Cleaned::Rewrite(empty_batch(batch))
        }
        MarkerFate::Needed(Some(txn)) => {
            aborts.push(txn);
            Cleaned::Keep
        }
        _ => Cleaned::Keep,
    }
}

/// The end of a pass that met a batch it could not read: quietly when the log was truncated
/// meanwhile, else the error (the cleaner then leaves the log alone).
fn aborted(
    log: &Log,
    truncations: u64,
    stats: CompactionStats,
    e: tern_protocol::record_batch::BatchError,
) -> Result<CompactionStats> {
    if log.truncations() != truncations {
        return Ok(stats);
    }
    Err(e.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, BatchSpec, KeyValue};
    use crate::segment::{file_name, INDEX_SUFFIX, LOG_SUFFIX};
    use crate::{CleanupPolicy, LogConfig};
    use bytes::BytesMut;
    use tern_protocol::record_batch::{validate_batch, BatchIter};

    fn compact_config() -> LogConfig {
        LogConfig {
            delete_retention_ms: 1000,
            ..LogConfig::compacted_for_tests(600)
        }
    }

    fn kv(log: &Log, pairs: &[(&str, Option<&str>)], ts: i64) {
        let spec = BatchSpec {
            base_timestamp: ts,
            ..BatchSpec::default()
        };
        append(log, &spec, pairs);
    }

    /// Appends one batch of `spec` holding the (key, value) `pairs`.
    fn append(log: &Log, spec: &BatchSpec, pairs: &[(&str, Option<&str>)]) {
        let recs: Vec<KeyValue<'_>> = pairs
            .iter()
            .map(|(k, v)| (Some(k.as_bytes()), v.map(str::as_bytes)))
            .collect();
        let b = build_batch(spec, &recs);
        log.append_as_leader(BytesMut::from(&b[..]), 0).unwrap();
    }

    /// Every record as (offset, key, value) plus the raw batches.
    type Dumped = (Vec<(i64, String, Option<String>)>, Vec<Vec<u8>>);

    fn dump(log: &Log) -> Dumped {
        let mut out = Vec::new();
        let mut raw = Vec::new();
        for (h, b) in batches(log) {
            validate_batch(&b).unwrap();
            for rec in parse_records(&b[RECORD_BATCH_OVERHEAD..], h.records_count as usize).unwrap()
            {
                out.push((
                    h.base_offset + rec.offset_delta as i64,
                    String::from_utf8(rec.key.unwrap().to_vec()).unwrap(),
                    rec.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                ));
            }
            raw.push(b);
        }
        (out, raw)
    }

    /// Every batch of the log, compressed or not, with its header.
    fn batches(log: &Log) -> Vec<(RecordBatchHeader, Vec<u8>)> {
        let mut out = Vec::new();
        let mut next = log.log_start_offset();
        while next < log.log_end_offset() {
            let r = log.read(next, 1 << 20, None, true).unwrap();
            if r.records.is_empty() {
                break;
            }
            for item in BatchIter::new(&r.records) {
                let (h, b) = item.unwrap();
                next = h.next_offset();
                out.push((h, b.to_vec()));
            }
        }
        out
    }

    #[test]
    fn keeps_latest_value_per_key_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        for round in 0..6 {
            for k in 0..4 {
                let v = format!("v{round}");
                kv(&log, &[(&format!("k{k}"), Some(&v))], 1000);
            }
        }
        kv(&log, &[("solo", Some("x"))], 1000);
        log.roll().unwrap();
        let (before, _) = dump(&log);
        let stats = log.compact(2000).unwrap();
        assert!(stats.segments_cleaned > 0);
        assert_eq!(stats.records_removed, 20);
        let (after, _) = dump(&log);
        let mut expected: Vec<_> = before
            .iter()
            .filter(|(o, k, _)| !before.iter().any(|(o2, k2, _)| k2 == k && o2 > o))
            .cloned()
            .collect();
        expected.sort();
        assert_eq!(after, expected);
        assert_eq!(
            after.iter().find(|r| r.1 == "k2").unwrap(),
            &(22, "k2".to_string(), Some("v5".to_string()))
        );
        assert_eq!(log.log_end_offset(), 25);
        // Survives a reopen, with indexes rebuilt.
        drop(log);
        let log = Log::open(dir.path(), compact_config()).unwrap();
        assert_eq!(dump(&log).0, expected);
        for (o, _, _) in &expected {
            let r = log.read(*o, 1, None, true).unwrap();
            assert!(!r.records.is_empty());
        }
    }

    #[test]
    fn a_small_offset_map_cleans_in_steps_to_the_same_result() {
        let fill = |log: &Log| {
            for round in 0..6 {
                for k in 0..4 {
                    let v = format!("v{round}");
                    kv(log, &[(&format!("k{k}"), Some(&v))], 1000);
                }
            }
            // An old tombstone late in the log: it must outlive every partial pass, or k0's
            // earlier value would come back.
            kv(log, &[("k0", None)], 0);
            kv(log, &[("tail", Some("t"))], 1000);
            log.roll().unwrap();
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let whole = Log::open(a.path(), compact_config()).unwrap();
        fill(&whole);
        whole.compact(5000).unwrap();
        let expected = dump(&whole).0;
        // The tombstone stays, now with a delete horizon: only k0's tombstone is left of it.
        let k0: Vec<_> = expected.iter().filter(|r| r.1 == "k0").collect();
        assert!(k0.len() == 1 && k0[0].2.is_none(), "{expected:?}");

        let stepped = Log::open(b.path(), every_dirty_byte()).unwrap();
        fill(&stepped);
        let seen = std::cell::Cell::new(0u64);
        let throttle = |n: u64| seen.set(seen.get() + n);
        let limits = PassLimits {
            map_capacity: 2,
            throttle: &throttle,
            stopped: &|| false,
        };
        let mut passes = 0;
        while stepped.cleanable_ratio(5000).is_some() {
            let before = stepped.cleaner_checkpoint();
            stepped.compact_within(5000, &limits).unwrap();
            assert!(stepped.cleaner_checkpoint() > before, "each pass moves on");
            let k0: Vec<_> = dump(&stepped)
                .0
                .into_iter()
                .filter(|r| r.1 == "k0")
                .collect();
            assert!(
                k0.is_empty() || k0.last().unwrap().2.is_none(),
                "k0's tombstone stays last: {k0:?}"
            );
            passes += 1;
            assert!(passes < 50);
        }
        assert!(
            passes > 2,
            "two keys at a time take several passes: {passes}"
        );
        assert!(seen.get() > 0, "the pass reports its I/O to the throttle");
        assert_eq!(dump(&stepped).0, expected);
        // Past the horizon the next pass removes the tombstone in both.
        for log in [&whole, &stepped] {
            kv(log, &[("more", Some("m"))], 6000);
            log.roll().unwrap();
            log.update_config(every_dirty_byte());
            assert_eq!(log.compact(6000).unwrap().tombstones_removed, 1);
            assert!(!dump(log).0.iter().any(|r| r.1 == "k0"));
        }
        assert_eq!(dump(&whole).0, dump(&stepped).0);
    }

    /// Appends a transactional batch of producer `pid` (epoch 0) with sequence `seq`.
    fn txn_kv(log: &Log, pid: i64, seq: i32, pairs: &[(&str, Option<&str>)], ts: i64) {
        append(log, &txn_spec(pid, seq, ts), pairs);
    }

    fn txn_spec(pid: i64, seq: i32, ts: i64) -> BatchSpec {
        BatchSpec {
            base_timestamp: ts,
            ..BatchSpec::transactional(pid, 0, seq)
        }
    }

    /// Ends producer `pid`'s transaction with a commit or abort marker written at `ts`.
    fn end_txn(log: &Log, pid: i64, commit: bool, ts: i64) {
        let m = crate::record::build_control_batch(&txn_spec(pid, -1, ts), commit);
        log.append_as_leader(BytesMut::from(&m[..]), 0).unwrap();
    }

    fn every_dirty_byte() -> LogConfig {
        LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..compact_config()
        }
    }

    /// Offsets of the control batches left in the log.
    fn markers(log: &Log) -> Vec<i64> {
        let r = log.read(0, 1 << 20, None, true).unwrap();
        BatchIter::new(&r.records)
            .map(|b| b.unwrap().0)
            .filter(|h| h.is_control())
            .map(|h| h.base_offset)
            .collect()
    }

    #[test]
    fn aborted_records_go_and_their_marker_follows_once_nothing_needs_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        kv(&log, &[("k", Some("committed"))], 1000);
        // An aborted transaction writes the same key again (as a TxnOffsetCommit does).
        txn_kv(&log, 5, 0, &[("k", Some("aborted"))], 1000);
        end_txn(&log, 5, false, 1000);
        // The producer goes on, so the aborted batch is not its last (which Kafka keeps).
        txn_kv(&log, 5, 1, &[("j", Some("later"))], 1000);
        end_txn(&log, 5, true, 1000);
        kv(&log, &[("other", Some("x"))], 1000);
        log.roll().unwrap();
        let abort = AbortedTxn {
            producer_id: 5,
            first_offset: 1,
            last_offset: 2,
            last_stable_offset: 3,
        };
        assert_eq!(log.aborted_transactions(0, 10), vec![abort]);

        // Within delete.retention.ms of the markers: the aborted record goes, the markers stay
        // (a read_committed consumer may be between them) and so does the index entry.
        let stats = log.compact(1500).unwrap();
        assert_eq!(stats.aborted_records_removed, 1);
        let (after, _) = dump(&log);
        let data: Vec<_> = after.iter().filter(|r| r.1.len() > 1 || r.0 == 0).collect();
        assert!(
            after.contains(&(0, "k".to_string(), Some("committed".to_string()))),
            "{after:?}"
        );
        assert!(!after.iter().any(|r| r.0 == 1), "{data:?}");
        assert_eq!(markers(&log), vec![2, 4]);
        assert_eq!(log.aborted_transactions(0, 10), vec![abort]);

        // The next pass finds no batch of its transaction left: the abort marker gets a delete
        // horizon (KIP-534) and loses its index entry; the commit marker stays while its
        // record does.
        kv(&log, &[("more", Some("x"))], 5000);
        log.roll().unwrap();
        let marker_at = |log: &Log, offset: i64| {
            batches(log)
                .into_iter()
                .find(|(h, _)| h.base_offset == offset)
                .unwrap()
        };
        let (before, _) = marker_at(&log, 2);
        let stats = log.compact(5000).unwrap();
        assert_eq!((stats.markers_removed, stats.horizons_set), (0, 1));
        assert_eq!(markers(&log), vec![2, 4]);
        assert_eq!(log.aborted_transactions(0, 10), vec![]);
        // The same marker but for its horizon: only attributes, base timestamp, CRC and length
        // (the record's timestamp delta is longer) change.
        let (after, bytes) = marker_at(&log, 2);
        assert_eq!(after.delete_horizon_ms(), Some(6000));
        assert_eq!(
            RecordBatchHeader {
                attributes: before.attributes,
                base_timestamp: before.base_timestamp,
                crc: before.crc,
                batch_length: before.batch_length,
                ..after
            },
            before
        );
        let (_, control) = decode_records(&bytes, 1 << 20).unwrap();
        assert_eq!(control.len(), 1);
        assert_eq!(control[0].timestamp, 1000);
        assert_eq!(control[0].key.as_deref(), Some(&[0u8, 0, 0, 0][..])); // ABORT
                                                                          // Before the horizon it stays.
        kv(&log, &[("more", Some("x"))], 5999);
        log.roll().unwrap();
        assert_eq!(log.compact(5999).unwrap().markers_removed, 0);
        assert_eq!(markers(&log), vec![2, 4]);
        // Past the horizon, the abort marker goes.
        kv(&log, &[("more", Some("x"))], 6000);
        log.roll().unwrap();
        let stats = log.compact(6000).unwrap();
        assert_eq!(stats.markers_removed, 1);
        assert_eq!(markers(&log), vec![4]);
        assert_eq!(log.aborted_transactions(0, 10), vec![]);
        drop(log);
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        assert_eq!(log.aborted_transactions(0, 10), vec![]);
        assert_eq!(markers(&log), vec![4]);
        let (after, _) = dump(&log);
        assert_eq!(
            after
                .iter()
                .filter(|r| r.0 != 4)
                .map(|r| (r.0, r.1.as_str()))
                .collect::<Vec<_>>(),
            vec![(0, "k"), (3, "j"), (5, "other"), (8, "more")]
        );
    }

    /// A marker that is its producer's last batch (its epoch bump left the producer no data
    /// batch) outlives its horizon as an empty control batch, as Kafka leaves it: it keeps the
    /// producer's epoch for fencing and ends no transaction on reload.
    #[test]
    fn a_producers_last_marker_becomes_an_empty_header_past_its_horizon() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        txn_kv(&log, 5, 0, &[("k", Some("aborted"))], 1000);
        // The coordinator aborts on a timeout with the epoch bumped (transaction version 2).
        let bumped = BatchSpec {
            producer_epoch: 1,
            ..txn_spec(5, -1, 1000)
        };
        let m = crate::record::build_control_batch(&bumped, false);
        log.append_as_leader(BytesMut::from(&m[..]), 0).unwrap();
        kv(&log, &[("other", Some("x"))], 1000);
        log.roll().unwrap();
        assert_eq!(log.compact(5000).unwrap().aborted_records_removed, 1);
        kv(&log, &[("more", Some("x"))], 5000);
        log.roll().unwrap();
        assert_eq!(log.compact(5000).unwrap().horizons_set, 1);
        kv(&log, &[("later", Some("x"))], 6000);
        log.roll().unwrap();
        assert_eq!(log.compact(6000).unwrap().markers_removed, 1);
        let (h, _) = batches(&log)
            .into_iter()
            .find(|(h, _)| h.base_offset == 1)
            .unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.records_count, h.producer_id, h.producer_epoch),
            (0, 5, 1)
        );
        assert_eq!(h.delete_horizon_ms(), None);
        assert_eq!(h.base_timestamp, h.max_timestamp);
        drop(log);
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        assert_eq!(log.first_unstable_offset(), None);
        assert_eq!(log.producer_state(5).map(|e| e.producer_epoch), Some(1));
        assert_eq!(log.aborted_transactions(0, 10), vec![]);
    }

    #[test]
    fn a_committed_transactional_record_does_not_outlive_a_later_tombstone() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        // An offset committed in a transaction, then deleted (a tombstone).
        txn_kv(&log, 5, 0, &[("k", Some("txn"))], 1000);
        end_txn(&log, 5, true, 1000);
        kv(&log, &[("k", None)], 1000);
        txn_kv(&log, 5, 1, &[("j", Some("later"))], 1000);
        end_txn(&log, 5, true, 1000);
        kv(&log, &[("other", Some("x"))], 1000);
        log.roll().unwrap();
        let stats = log.compact(5000).unwrap();
        // The tombstone stays for delete.retention.ms from this pass (its delete horizon).
        assert_eq!(
            (
                stats.records_removed,
                stats.tombstones_removed,
                stats.horizons_set
            ),
            (1, 0, 1)
        );
        let keys = |log: &Log| -> Vec<String> {
            dump(log)
                .0
                .into_iter()
                .filter(|r| !markers(log).contains(&r.0))
                .map(|r| r.1)
                .collect()
        };
        assert_eq!(keys(&log), vec!["k", "j", "other"]);
        // Its commit marker stayed for this pass (its batch was there when the pass began);
        // the next one finds no batch of that transaction and gives it a horizon.
        assert_eq!(markers(&log), vec![1, 4]);
        kv(&log, &[("more", Some("x"))], 5000);
        log.roll().unwrap();
        assert_eq!(log.compact(5000).unwrap().horizons_set, 1);
        assert_eq!(markers(&log), vec![1, 4]);
        // Past both horizons the tombstone and the marker go. Kafka's behaviour: the
        // transactional value does not come back once the tombstone goes.
        kv(&log, &[("later", Some("x"))], 6000);
        log.roll().unwrap();
        let stats = log.compact(6000).unwrap();
        assert_eq!((stats.tombstones_removed, stats.markers_removed), (1, 1));
        assert_eq!(markers(&log), vec![4]);
        assert_eq!(keys(&log), vec!["j", "other", "more", "later"]);
    }

    #[test]
    fn removing_a_marker_drops_the_snapshots_that_hold_its_transaction_open() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        txn_kv(&log, 5, 0, &[("k", Some("txn"))], 1000);
        // A roll snapshots producer state with the transaction open.
        log.roll().unwrap();
        let snapshots = || {
            crate::ProducerStateManager::list_snapshots(dir.path())
                .unwrap()
                .into_iter()
                .map(|(at, _)| at)
                .collect::<Vec<_>>()
        };
        assert_eq!(snapshots(), vec![1]);
        end_txn(&log, 5, true, 1000);
        kv(&log, &[("k", Some("plain"))], 1000);
        txn_kv(&log, 5, 1, &[("j", Some("later"))], 1000);
        end_txn(&log, 5, true, 1000);
        log.roll().unwrap();
        // The first pass removes the transaction's record, the second its marker (offset 1).
        log.compact(5000).unwrap();
        assert_eq!(markers(&log), vec![1, 4]);
        kv(&log, &[("more", Some("x"))], 5000);
        log.roll().unwrap();
        assert_eq!(log.compact(5000).unwrap().horizons_set, 1);
        assert_eq!(snapshots()[0], 1, "the marker is still there");
        kv(&log, &[("later", Some("x"))], 6000);
        log.roll().unwrap();
        assert_eq!(log.compact(6000).unwrap().markers_removed, 1);
        assert_eq!(markers(&log), vec![4]);
        assert!(
            snapshots().iter().all(|&at| at > 1),
            "a snapshot from before the removed marker is left: {:?}",
            snapshots()
        );
        drop(log);
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        assert_eq!(log.first_unstable_offset(), None);
    }

    #[test]
    fn a_compressed_transactional_batch_stays_transactional_when_compacted() {
        use tern_protocol::records::RecordBatchBuilder;
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        let mut b = RecordBatchBuilder::new(Compression::Lz4)
            .producer(5, 0, 0)
            .transactional(true);
        b.push(1000, Some(&b"k"[..]), Some(&b"old"[..]), &[])
            .unwrap();
        b.push(1000, Some(&b"j"[..]), Some(&b"kept"[..]), &[])
            .unwrap();
        log.append_as_leader(BytesMut::from(&b.build().unwrap()[..]), 0)
            .unwrap();
        end_txn(&log, 5, true, 1000);
        txn_kv(&log, 5, 2, &[("later", Some("x"))], 1000);
        end_txn(&log, 5, true, 1000);
        kv(&log, &[("k", Some("new"))], 1000);
        log.roll().unwrap();
        assert_eq!(log.compact(5000).unwrap().records_removed, 1);
        let r = log.read(0, 1 << 20, None, true).unwrap();
        let (h, _) = BatchIter::new(&r.records).next().unwrap().unwrap();
        assert_eq!(h.base_offset, 0);
        assert!(h.is_transactional(), "the rewritten batch keeps its flag");
        assert_eq!(h.compression().unwrap(), Compression::Lz4);
        // The next pass still sees the transaction's batch: its commit marker stays.
        kv(&log, &[("more", Some("x"))], 5000);
        log.roll().unwrap();
        log.compact(5000).unwrap();
        assert!(markers(&log).contains(&2), "{:?}", markers(&log));
    }

    #[test]
    fn nothing_from_an_open_transaction_on_is_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        kv(&log, &[("k", Some("v0"))], 1000);
        kv(&log, &[("k", Some("v1"))], 1000);
        log.roll().unwrap();
        txn_kv(&log, 5, 0, &[("k", Some("open"))], 1000);
        log.roll().unwrap();
        kv(&log, &[("k", Some("v3"))], 1000);
        log.roll().unwrap();
        kv(&log, &[("tail", Some("x"))], 1000);
        log.compact(2000).unwrap();
        let values = |log: &Log| -> Vec<(i64, Option<String>)> {
            dump(log)
                .0
                .into_iter()
                .filter(|r| r.1 == "k")
                .map(|r| (r.0, r.2))
                .collect()
        };
        // Only the segment before the open transaction was cleaned, and only with what it
        // holds itself: neither the open record nor v3 after it superseded v1.
        assert_eq!(
            values(&log),
            vec![
                (1, Some("v1".into())),
                (2, Some("open".into())),
                (3, Some("v3".into()))
            ]
        );
        end_txn(&log, 5, true, 1000);
        log.roll().unwrap();
        kv(&log, &[("tail", Some("y"))], 1000);
        log.compact(2000).unwrap();
        assert_eq!(values(&log), vec![(3, Some("v3".into()))]);
        // The committed record was the producer's last batch: as in Kafka, its header stays,
        // empty and uncompressed, so the producer's sequence survives a reload.
        let r = log.read(2, 1 << 20, None, true).unwrap();
        let (h, b) = BatchIter::new(&r.records).next().unwrap().unwrap();
        validate_batch(b).unwrap();
        assert_eq!((h.base_offset, h.records_count, h.producer_id), (2, 0, 5));
        assert_eq!(log.producer_state(5).map(|e| e.last_offset()), Some(2));
        drop(log);
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        assert_eq!(log.producer_state(5).map(|e| e.last_sequence()), Some(0));
    }

    #[test]
    fn compressed_batches_are_compacted_and_keep_their_codec() {
        use tern_protocol::records::RecordBatchBuilder;
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        for round in 0..3 {
            let mut b = RecordBatchBuilder::new(Compression::Gzip);
            for k in ["x", "y", "z"] {
                let v = format!("{k}{round}");
                let key = if round == 2 && k == "z" { "w" } else { k };
                b.push(500, Some(key.as_bytes()), Some(v.as_bytes()), &[])
                    .unwrap();
            }
            log.append_as_leader(BytesMut::from(&b.build().unwrap()[..]), 0)
                .unwrap();
        }
        log.roll().unwrap();
        let stats = log.compact(1000).unwrap();
        assert_eq!(stats.records_removed, 5);
        let r = log.read(0, 1 << 20, None, true).unwrap();
        let mut seen = Vec::new();
        for item in BatchIter::new(&r.records) {
            let (h, bytes) = item.unwrap();
            assert_eq!(h.compression().unwrap(), Compression::Gzip);
            assert_eq!(h.last_offset_delta, 2, "last offset kept");
            let (_, recs) = decode_records(bytes, 1 << 20).unwrap();
            for rec in recs {
                seen.push((
                    rec.offset,
                    String::from_utf8(rec.key.unwrap().to_vec()).unwrap(),
                ));
            }
        }
        assert_eq!(
            seen,
            vec![
                (5, "z".into()),
                (6, "x".into()),
                (7, "y".into()),
                (8, "w".into())
            ]
        );
    }

    /// KIP-534: a tombstone lives `delete.retention.ms` from the pass that first finds it,
    /// however old its timestamp. That pass writes the horizon into its batch (attribute bit 6,
    /// base timestamp), in compressed batches too, and the records keep their timestamps.
    #[test]
    fn a_tombstone_lives_delete_retention_from_the_pass_that_finds_it() {
        use tern_protocol::records::RecordBatchBuilder;
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), every_dirty_byte()).unwrap();
        kv(&log, &[("a", Some("1")), ("b", Some("1"))], 0);
        // Written long ago (timestamp 0), as a producer may stamp records.
        kv(&log, &[("a", None), ("c", Some("kept"))], 0);
        let mut zstd = RecordBatchBuilder::new(Compression::Zstd);
        zstd.push(50, Some(&b"b"[..]), None, &[]).unwrap();
        zstd.push(60, Some(&b"d"[..]), Some(&b"kept"[..]), &[])
            .unwrap();
        log.append_as_leader(BytesMut::from(&zstd.build().unwrap()[..]), 0)
            .unwrap();
        // A tombstone and a record its own batch supersedes: the batch is rebuilt without it.
        kv(&log, &[("x", Some("1")), ("g", None), ("x", Some("2"))], 0);
        log.roll().unwrap();
        let with_tombstones = |log: &Log| -> Vec<RecordBatchHeader> {
            batches(log)
                .into_iter()
                .filter(|(_, b)| {
                    decode_records(b, 1 << 20)
                        .unwrap()
                        .1
                        .iter()
                        .any(|r| r.value.is_none())
                })
                .map(|(h, _)| h)
                .collect()
        };
        let timestamps = |log: &Log| -> Vec<(i64, i64)> {
            batches(log)
                .into_iter()
                .flat_map(|(_, b)| {
                    validate_batch(&b).unwrap();
                    decode_records(&b, 1 << 20).unwrap().1
                })
                .map(|r| (r.offset, r.timestamp))
                .collect()
        };

        let stats = log.compact(100_000).unwrap();
        assert_eq!(
            (
                stats.records_removed,
                stats.tombstones_removed,
                stats.horizons_set
            ),
            (3, 0, 3)
        );
        let marked = with_tombstones(&log);
        assert_eq!(marked.len(), 3);
        assert!(marked
            .iter()
            .all(|h| h.delete_horizon_ms() == Some(101_000)));
        assert_eq!(marked[1].compression().unwrap(), Compression::Zstd);
        assert_eq!(
            timestamps(&log),
            vec![(2, 0), (3, 1), (4, 50), (5, 60), (7, 1), (8, 2)]
        );

        // Before the horizon the tombstones stay; batches rebuilt for other reasons keep the
        // horizon they have.
        kv(&log, &[("c", Some("new")), ("d", Some("new"))], 100_500);
        log.roll().unwrap();
        let stats = log.compact(100_999).unwrap();
        assert_eq!(
            (
                stats.records_removed,
                stats.tombstones_removed,
                stats.horizons_set
            ),
            (2, 0, 0)
        );
        let kept = with_tombstones(&log);
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|h| h.delete_horizon_ms() == Some(101_000)));
        assert_eq!(
            timestamps(&log),
            vec![(2, 0), (4, 50), (7, 1), (8, 2), (9, 100_500), (10, 100_501)]
        );

        // At the horizon they go; the records around them stay.
        kv(&log, &[("f", Some("1"))], 101_000);
        log.roll().unwrap();
        assert_eq!(log.compact(101_000).unwrap().tombstones_removed, 3);
        assert!(with_tombstones(&log).is_empty());
        let keys: Vec<Vec<u8>> = batches(&log)
            .into_iter()
            .flat_map(|(_, b)| decode_records(&b, 1 << 20).unwrap().1)
            .map(|r| r.key.unwrap().to_vec())
            .collect();
        assert_eq!(keys, [b"x", b"c", b"d", b"f"]);
    }

    #[test]
    fn tombstones_expire_after_delete_retention() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        kv(&log, &[("a", Some("1")), ("b", Some("1"))], 10_000);
        kv(&log, &[("a", None)], 10_000);
        log.roll().unwrap();
        log.compact(10_500).unwrap();
        let (recs, _) = dump(&log);
        assert_eq!(
            recs,
            vec![(1, "b".into(), Some("1".into())), (2, "a".into(), None)]
        );
        // More dirty data, and the horizon has passed: the tombstone goes.
        kv(&log, &[("c", Some("1"))], 20_000);
        log.roll().unwrap();
        log.update_config(LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..compact_config()
        });
        let stats = log.compact(20_000).unwrap();
        assert_eq!(stats.tombstones_removed, 1);
        let (recs, _) = dump(&log);
        assert_eq!(
            recs,
            vec![
                (1, "b".into(), Some("1".into())),
                (3, "c".into(), Some("1".into()))
            ]
        );
    }

    #[test]
    fn untouched_batches_stay_byte_identical_and_active_is_never_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        kv(&log, &[("a", Some("1")), ("b", Some("1"))], 1);
        kv(&log, &[("c", Some("1"))], 1);
        kv(&log, &[("a", Some("2"))], 1);
        log.roll().unwrap();
        kv(&log, &[("c", Some("2"))], 1);
        let (_, before) = dump(&log);
        log.compact(5).unwrap();
        let (recs, after) = dump(&log);
        // c=1 stays: its newer value is in the active segment, which is not cleaned.
        assert_eq!(
            recs.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(after[1], before[1]);
        assert_eq!(after[2], before[2]);
        assert_ne!(after[0], before[0]);
    }

    #[test]
    fn max_compaction_lag_cleans_below_the_dirty_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        for i in 0..30 {
            kv(&log, &[(&format!("k{}", i % 3), Some("v"))], 1000);
        }
        log.roll().unwrap();
        log.compact(2000).unwrap();
        // A few dirty records written at 10,000: far below a 0.99 ratio.
        kv(&log, &[("k0", Some("w"))], 10_000);
        kv(&log, &[("x", Some("w"))], 10_000);
        log.roll().unwrap();
        let mut c = compact_config();
        c.min_cleanable_dirty_ratio = 0.99;
        c.max_compaction_lag_ms = 5_000;
        log.update_config(c);
        assert_eq!(log.cleanable_ratio(14_000), None, "not yet 5 s old");
        assert_eq!(log.compact(14_000).unwrap(), CompactionStats::default());
        assert!(log.cleanable_ratio(15_001).is_some(), "past the lag");
        assert_eq!(log.compact(15_001).unwrap().records_removed, 1);
        assert_eq!(log.cleanable_ratio(20_000), None, "nothing dirty is left");
    }

    #[test]
    fn dirty_ratio_gates_cleaning_and_delete_policy_skips() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        for i in 0..30 {
            kv(&log, &[(&format!("k{}", i % 3), Some("v"))], 1);
        }
        log.roll().unwrap();
        assert!(log.compact(5).unwrap().segments_cleaned > 0);
        let cleaned_size = log.size_bytes();
        // A little more dirty data: ratio far below 0.5, nothing happens.
        for i in 0..30 {
            kv(&log, &[(&format!("x{i}"), Some("v"))], 1);
        }
        kv(&log, &[("k0", Some("w"))], 1);
        log.roll().unwrap();
        let mut c = compact_config();
        c.min_cleanable_dirty_ratio = 0.99;
        log.update_config(c.clone());
        assert_eq!(log.compact(5).unwrap(), CompactionStats::default());
        c.min_cleanable_dirty_ratio = 0.0;
        log.update_config(c.clone());
        assert_eq!(log.compact(5).unwrap().records_removed, 1);
        assert!(log.size_bytes() > cleaned_size);
        c.cleanup_policy = CleanupPolicy::default();
        log.update_config(c);
        assert_eq!(log.compact(5).unwrap(), CompactionStats::default());
    }

    #[test]
    fn interrupted_swaps_are_finished_or_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        kv(&log, &[("a", Some("1")), ("a", Some("2"))], 1);
        log.roll().unwrap();
        kv(&log, &[("b", Some("1"))], 1);
        let seg0 = dir.path().join(file_name(0, LOG_SUFFIX));
        let original = std::fs::read(&seg0).unwrap();
        drop(log);
        // A committed swap: the cleaned bytes replace the log on open.
        let cleaned = {
            let h = tern_protocol::record_batch::validate_batch(&original).unwrap();
            let mut stats = CompactionStats::default();
            let map = OffsetMap {
                latest: HashMap::from([(b"a".to_vec(), 1i64)]),
                horizons: Horizons {
                    now_ms: 0,
                    new_horizon: 0,
                },
                end: i64::MAX,
            };
            match map.clean_batch(&h, &original, false, &mut stats) {
                Cleaned::Rewrite(b) => b,
                _ => panic!("expected a rewrite"),
            }
        };
        std::fs::write(
            dir.path()
                .join(format!("{}.swap", file_name(0, LOG_SUFFIX))),
            &cleaned,
        )
        .unwrap();
        std::fs::write(
            dir.path()
                .join(format!("{}.cleaned", file_name(0, INDEX_SUFFIX))),
            b"junk",
        )
        .unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        assert_eq!(std::fs::read(&seg0).unwrap(), cleaned);
        assert_eq!(
            dump(&log).0,
            vec![
                (1, "a".into(), Some("2".into())),
                (2, "b".into(), Some("1".into()))
            ]
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            let n = e.unwrap().file_name();
            !n.to_string_lossy().ends_with(".swap") && !n.to_string_lossy().ends_with(".cleaned")
        }));
        drop(log);
        // An uncommitted one (index swap without a log swap) is discarded.
        std::fs::write(
            dir.path()
                .join(format!("{}.swap", file_name(0, INDEX_SUFFIX))),
            b"junk",
        )
        .unwrap();
        let log = Log::open(dir.path(), compact_config()).unwrap();
        assert_eq!(dump(&log).0.len(), 2);
    }
}
