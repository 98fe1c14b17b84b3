//! Loading a log from its directory (Kafka's LogLoader): finishing or rolling back interrupted
//! cleaner swaps, opening the segments, recovering those that may hold unflushed or damaged
//! data, and rebuilding the leader epoch cache and producer state from them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tern_protocol::record_batch::RecordBatchHeader;

use crate::checkpoint::{
    fsync_dir, read_offset, CLEANER_OFFSET_CHECKPOINT, CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use crate::config::LogConfig;
use crate::epoch::LeaderEpochFileCache;
use crate::error::{IoContext, Result};
use crate::producer_state::ProducerStateManager;
use crate::segment::{
    control_of, file_name, LogSegment, CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX,
    SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};

/// What loading found: the state a [`crate::Log`] starts from.
pub(crate) struct LoadedLog {
    /// The segments, oldest first; the last one is active.
    pub(crate) segments: Vec<Arc<LogSegment>>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) epochs: LeaderEpochFileCache,
    pub(crate) producers: ProducerStateManager,
    /// Offset up to which the cleaner had compacted, within the log's range.
    pub(crate) cleaner_checkpoint: i64,
}

/// Opens the log in `dir`, creating it if missing and recovering after a crash.
pub(crate) fn load(dir: &Path, config: &LogConfig) -> Result<LoadedLog> {
    std::fs::create_dir_all(dir).ctx(dir)?;
    let clean = take_clean_shutdown_marker(dir)?;
    let mut must_recover = cleanup_stray_files(dir)?;
    let (mut bases, without_index) = segment_files(dir)?;
    // A cleaner swap (or a user) removed the index: rebuild rather than trust an empty one.
    must_recover.extend(without_index);

    let checkpointed_start = read_offset(dir, LOG_START_OFFSET_CHECKPOINT).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring unreadable log start offset checkpoint");
        None
    });
    let recovery_point = read_recovery_point(dir, clean);
    if bases.is_empty() {
        bases.push(checkpointed_start.unwrap_or(0).max(0));
    }
    let mut segments = Vec::with_capacity(bases.len());
    for (i, &b) in bases.iter().enumerate() {
        let active = i + 1 == bases.len();
        segments.push(Arc::new(open_segment(dir, b, config, active)?));
    }

    let (mut epochs, rebuild_epochs) = load_epochs(dir);
    let must_recover = |seg: &LogSegment, next_base: i64| {
        must_recover.contains(&seg.base_offset()) || (!clean && next_base > recovery_point)
    };
    let recovered = recover_segments(&mut segments, config, &mut epochs, must_recover)?;
    let mut leo = recovered.log_end_offset;

    let mut log_start = checkpointed_start
        .unwrap_or(i64::MIN)
        .max(segments.first().map_or(0, |s| s.base_offset()));
    if log_start > leo {
        // Everything below the checkpointed start was deleted: start empty there.
        for seg in &segments {
            seg.delete_files()?;
        }
        segments = vec![Arc::new(open_segment(dir, log_start, config, true)?)];
        leo = log_start;
        epochs.clear();
    }
    log_start = log_start.min(leo);
    if rebuild_epochs {
        // Start over: the recovery pass only saw the recovered segments.
        rebuild_epoch_cache(&mut epochs, &segments)?;
    }
    // An entry may start exactly at the log end (a new leader, or DeleteRecords up to the
    // end); only entries beyond it lost their data.
    epochs.truncate_from_end(leo + 1);
    epochs.truncate_from_start(log_start);
    epochs.flush()?;
    if let Some(active) = segments.last() {
        active.make_active()?;
    }

    let cleaner_checkpoint = read_offset(dir, CLEANER_OFFSET_CHECKPOINT)
        .ok()
        .flatten()
        .unwrap_or(log_start)
        .clamp(log_start, leo);
    let producers = load_producer_state(dir, &segments, leo, recovered.first_recovered)?;
    Ok(LoadedLog {
        segments,
        log_start_offset: log_start,
        log_end_offset: leo,
        epochs,
        producers,
        cleaner_checkpoint,
    })
}

/// Removes the marker of a clean shutdown; returns whether there was one.
fn take_clean_shutdown_marker(dir: &Path) -> Result<bool> {
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    let clean = marker.exists();
    if clean {
        // Must be durable before any write, or a later crash would skip recovery.
        std::fs::remove_file(&marker).ctx(&marker)?;
        fsync_dir(dir)?;
    }
    Ok(clean)
}

/// The checkpointed recovery point; 0 (recover everything) if there is none or it is
/// unreadable.
fn read_recovery_point(dir: &Path, clean: bool) -> i64 {
    let read = read_offset(dir, RECOVERY_POINT_CHECKPOINT);
    if clean {
        return read.ok().flatten().unwrap_or(0);
    }
    read.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring unreadable recovery point checkpoint; recovering everything");
        None
    })
    .unwrap_or(0)
}

/// The leader epoch cache from its checkpoint, and whether it must be rebuilt from the log
/// (the checkpoint is unreadable).
fn load_epochs(dir: &Path) -> (LeaderEpochFileCache, bool) {
    match LeaderEpochFileCache::load(dir) {
        Ok(Some(c)) => (c, false),
        Ok(None) => (LeaderEpochFileCache::empty(dir), false),
        Err(e) => {
            tracing::warn!(error = %e, "rebuilding the leader epoch cache from the log");
            (LeaderEpochFileCache::empty(dir), true)
        }
    }
}

/// Rebuilds the epoch cache from every batch of `segments`.
fn rebuild_epoch_cache(
    epochs: &mut LeaderEpochFileCache,
    segments: &[Arc<LogSegment>],
) -> Result<()> {
    epochs.clear();
    for seg in segments {
        seg.scan(0, seg.size(), false, |_, h, _| {
            assign_recovered_epoch(epochs, h);
            Ok(())
        })?;
    }
    Ok(())
}

/// Opens the segment at `base`, preallocated if it is the active one and the config asks.
pub(crate) fn open_segment(
    dir: &Path,
    base: i64,
    config: &LogConfig,
    active: bool,
) -> Result<LogSegment> {
    let preallocate = (active && config.preallocate).then_some(config.segment_bytes);
    LogSegment::open(dir, base, config.segment_index_bytes, preallocate)
}

/// Kafka's recovery rule: only a newer epoch starts an entry, so scanning from the middle of an
/// epoch cannot move its start offset.
fn assign_recovered_epoch(epochs: &mut LeaderEpochFileCache, h: &RecordBatchHeader) {
    if epochs
        .latest_epoch()
        .is_none_or(|e| h.partition_leader_epoch > e)
    {
        epochs.assign(h.partition_leader_epoch, h.base_offset);
    }
}

/// What the recovery pass found.
struct Recovered {
    log_end_offset: i64,
    /// Base offset of the first segment recovered, if any was.
    first_recovered: Option<i64>,
}

/// Recovers the segments `must_recover(segment, next segment's base)` picks or whose indexes
/// fail the sanity check, and deletes every segment after a torn or corrupt batch.
fn recover_segments(
    segments: &mut Vec<Arc<LogSegment>>,
    config: &LogConfig,
    epochs: &mut LeaderEpochFileCache,
    must_recover: impl Fn(&LogSegment, i64) -> bool,
) -> Result<Recovered> {
    let mut first_recovered = None;
    let mut leo = segments.first().map_or(0, |s| s.base_offset());
    let mut cut_after = None;
    for (i, seg) in segments.iter().enumerate() {
        let next_base = segments.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
        let mut next = None;
        if !must_recover(seg, next_base) {
            next = seg.next_offset().ok().filter(|&n| seg.sanity_check(n));
        }
        if next.is_none() {
            first_recovered.get_or_insert(seg.base_offset());
            let end = seg.recover(config.index_interval_bytes, |h, _| {
                assign_recovered_epoch(epochs, h);
                Ok(())
            })?;
            seg.flush()?;
            if i + 1 != segments.len() {
                seg.make_inactive()?;
            }
            next = Some(end.next_offset.unwrap_or(seg.base_offset()));
            if end.error.is_some() {
                // Anything after a torn or corrupt batch is not a valid prefix.
                cut_after = Some(i);
            }
        }
        leo = next.unwrap_or(seg.base_offset());
        if cut_after.is_some() {
            break;
        }
    }
    if let Some(i) = cut_after {
        for seg in segments.drain(i + 1..) {
            seg.delete_files()?;
        }
    }
    Ok(Recovered {
        log_end_offset: leo,
        first_recovered,
    })
}

/// Rebuilds producer state up to `upto` from the newest usable snapshot in `dir` and the
/// `segments` after it. Segments at or after `rebuild_txn_from` get their transaction index
/// entries re-added.
pub(crate) fn load_producer_state(
    dir: &Path,
    segments: &[Arc<LogSegment>],
    upto: i64,
    rebuild_txn_from: Option<i64>,
) -> Result<ProducerStateManager> {
    let limit = rebuild_txn_from.map_or(upto, |b| b.min(upto));
    let mut snapshots = ProducerStateManager::list_snapshots(dir)?;
    let mut state = None;
    while let Some((offset, path)) = snapshots.pop() {
        if offset > upto {
            std::fs::remove_file(&path).ctx(&path)?;
            continue;
        }
        if offset > limit || state.is_some() {
            continue;
        }
        match ProducerStateManager::load_snapshot(dir, &path) {
            Ok(m) => state = Some((offset, m)),
            Err(e) => {
                tracing::warn!(error = %e, "deleting unreadable producer snapshot");
                std::fs::remove_file(&path).ctx(&path)?;
            }
        }
    }
    let (from, mut state) = state.unwrap_or_else(|| (i64::MIN, ProducerStateManager::new(dir)));
    for (i, seg) in segments.iter().enumerate() {
        let next_base = segments.get(i + 1).map_or(i64::MAX, |s| s.base_offset());
        if next_base <= from || seg.base_offset() >= upto {
            continue;
        }
        let rebuild = rebuild_txn_from.is_some_and(|b| seg.base_offset() >= b);
        if rebuild {
            seg.reset_txn_index()?;
        }
        seg.scan(0, seg.size(), false, |_, h, batch| {
            if h.base_offset < from || h.base_offset >= upto {
                return Ok(());
            }
            if let Some(done) = state.replay(h, control_of(h, batch)) {
                if done.aborted && rebuild {
                    seg.append_aborted_txn(state.aborted_entry(&done))?;
                }
            }
            Ok(())
        })?;
    }
    Ok(state)
}

/// The 20-digit base offset of a segment file named `<base>.<suffix>`.
fn base_of(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The files in `dir` as (name, path); a name that is not UTF-8 reads as empty.
fn dir_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let path = entry.ctx(dir)?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        out.push((name, path));
    }
    Ok(out)
}

/// Base offsets of the `.log` files in `dir`, ascending, and those of them (not empty) that
/// have no offset index. Index files without a `.log` are removed.
fn segment_files(dir: &Path) -> Result<(Vec<i64>, Vec<i64>)> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for (name, path) in dir_entries(dir)? {
        if let Some(b) = base_of(&name, LOG_SUFFIX) {
            bases.push(b);
        } else if let Some(b) = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .find_map(|s| base_of(&name, s))
        {
            index_files.push((b, path));
        }
    }
    bases.sort_unstable();
    let without_index = bases
        .iter()
        .copied()
        .filter(|&b| {
            let has_index = index_files
                .iter()
                .any(|(ib, p)| *ib == b && p.extension().is_some_and(|e| e == INDEX_SUFFIX));
            let log_len =
                std::fs::metadata(dir.join(file_name(b, LOG_SUFFIX))).map_or(0, |m| m.len());
            !has_index && log_len > 0
        })
        .collect();
    for (b, path) in index_files {
        if bases.binary_search(&b).is_err() {
            std::fs::remove_file(&path).ctx(&path)?;
        }
    }
    Ok((bases, without_index))
}

/// Removes temp/cleaned/deleted files and finishes or rolls back interrupted cleaner swaps.
/// Returns base offsets of segments that must be recovered.
fn cleanup_stray_files(dir: &Path) -> Result<BTreeSet<i64>> {
    let mut swaps: BTreeMap<i64, Vec<PathBuf>> = BTreeMap::new();
    let mut committed = BTreeSet::new();
    for (name, path) in dir_entries(dir)? {
        if name.ends_with(".tmp")
            || name.ends_with(&format!(".{DELETED_SUFFIX}"))
            || name.ends_with(&format!(".{CLEANED_SUFFIX}"))
        {
            std::fs::remove_file(&path).ctx(&path)?;
        } else if let Some(inner) = name.strip_suffix(&format!(".{SWAP_SUFFIX}")) {
            let base = [
                LOG_SUFFIX,
                INDEX_SUFFIX,
                TIME_INDEX_SUFFIX,
                TXN_INDEX_SUFFIX,
            ]
            .iter()
            .find_map(|s| base_of(inner, s));
            if let Some(b) = base {
                if inner.ends_with(".log") {
                    committed.insert(b);
                }
                swaps.entry(b).or_default().push(path);
            }
        }
    }
    for (base, mut files) in swaps {
        if committed.contains(&base) {
            // The swap was committed (the .log.swap exists): finish it, log last.
            files.sort_by_key(|p| p.to_string_lossy().ends_with(".log.swap"));
            for f in files {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let target = dir.join(name.trim_end_matches(&format!(".{SWAP_SUFFIX}")));
                std::fs::rename(&f, &target).ctx(&f)?;
            }
        } else {
            for f in files {
                std::fs::remove_file(&f).ctx(&f)?;
            }
        }
    }
    if !committed.is_empty() {
        fsync_dir(dir)?;
    }
    Ok(committed)
}
