//! High watermarks on disk (Kafka's `replication-offset-checkpoint`, one file per log dir):
//! written every `replica.high.watermark.checkpoint.interval.ms` and at shutdown, read when a
//! partition is opened, so a restarted broker that leads again does not start from a high
//! watermark of nothing (consumers would see it go back), nor from its log end (it would show
//! records its ISR may not have).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tern_storage::{read_entries, write_entries};

use crate::replica_manager::Partition;

/// The checkpoint file's name in each log dir.
pub(crate) const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";

/// Every checkpointed high watermark in `log_dirs`; unreadable files are skipped with a
/// warning (the partitions then start as if none was written).
pub(crate) fn load(log_dirs: &[PathBuf]) -> HashMap<(String, i32), i64> {
    let mut out = HashMap::new();
    for dir in log_dirs {
        match read_entries(dir, HIGH_WATERMARK_CHECKPOINT) {
            Ok(Some(entries)) => {
                for line in entries {
                    if let Some((tp, hw)) = parse_entry(&line) {
                        out.insert(tp, hw);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "ignoring the high watermark checkpoint")
            }
        }
    }
    out
}

/// One line: `<topic> <partition> <offset>` (topic names hold no spaces).
fn parse_entry(line: &str) -> Option<((String, i32), i64)> {
    let mut parts = line.split(' ');
    let topic = parts.next()?.to_string();
    let partition = parts.next()?.parse().ok()?;
    let hw = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some(((topic, partition), hw))
}

/// Writes the high watermarks of `partitions`, each into the log dir that holds its log.
pub(crate) fn write(log_dirs: &[PathBuf], partitions: &[Arc<Partition>]) {
    let mut by_dir: BTreeMap<&Path, Vec<String>> =
        log_dirs.iter().map(|d| (d.as_path(), Vec::new())).collect();
    for p in partitions {
        let Some(parent) = p.log.dir().parent() else {
            continue;
        };
        if let Some(entries) = by_dir.get_mut(parent) {
            entries.push(format!("{} {} {}", p.topic, p.index, p.high_watermark()));
        }
    }
    for (dir, entries) in by_dir {
        if let Err(e) = write_entries(dir, HIGH_WATERMARK_CHECKPOINT, &entries) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot write the high watermark checkpoint");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        assert!(load(&dirs).is_empty());
        write_entries(
            dir.path(),
            HIGH_WATERMARK_CHECKPOINT,
            &[
                "t.a 0 42".into(),
                "t.a 1 x".into(),
                "u 3 7 9".into(),
                "u 2 7".into(),
            ],
        )
        .unwrap();
        let loaded = load(&dirs);
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded[&("t.a".to_string(), 0)], 42);
        assert_eq!(loaded[&("u".to_string(), 2)], 7);
        std::fs::write(dir.path().join(HIGH_WATERMARK_CHECKPOINT), b"garbage").unwrap();
        assert!(load(&dirs).is_empty());
    }
}
