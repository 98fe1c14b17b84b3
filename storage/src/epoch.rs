//! The leader epoch cache: for each leader epoch, the first offset written in it. Persisted
//! as `leader-epoch-checkpoint`; answers OffsetForLeaderEpoch.

use std::path::{Path, PathBuf};

use crate::checkpoint::{read_entries, write_entries, LEADER_EPOCH_CHECKPOINT};
use crate::error::{Result, StorageError};

/// Epoch -> start offset entries, epochs and offsets strictly increasing.
#[derive(Debug, Clone)]
pub struct LeaderEpochFileCache {
    dir: PathBuf,
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochFileCache {
    /// An empty cache persisted in `dir`.
    pub fn empty(dir: &Path) -> Self {
        LeaderEpochFileCache {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
        }
    }

    /// Loads the checkpoint of `dir`; `Ok(None)` if there is none.
    pub fn load(dir: &Path) -> Result<Option<Self>> {
        let Some(lines) = read_entries(dir, LEADER_EPOCH_CHECKPOINT)? else {
            return Ok(None);
        };
        let mut cache = Self::empty(dir);
        for line in lines {
            let mut parts = line.split_whitespace();
            let parsed = (|| {
                let epoch: i32 = parts.next()?.parse().ok()?;
                let offset: i64 = parts.next()?.parse().ok()?;
                Some((epoch, offset))
            })();
            let Some((epoch, offset)) = parsed else {
                return Err(StorageError::Corrupt {
                    path: dir.join(LEADER_EPOCH_CHECKPOINT),
                    reason: format!("bad entry {line:?}"),
                });
            };
            if let Some(&(e, o)) = cache.entries.last() {
                if epoch <= e || offset < o {
                    return Err(StorageError::Corrupt {
                        path: dir.join(LEADER_EPOCH_CHECKPOINT),
                        reason: "entries do not increase".into(),
                    });
                }
            }
            cache.entries.push((epoch, offset));
        }
        Ok(Some(cache))
    }

    /// Writes the checkpoint.
    pub fn flush(&self) -> Result<()> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|(e, o)| format!("{e} {o}"))
            .collect();
        write_entries(&self.dir, LEADER_EPOCH_CHECKPOINT, &lines)
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    /// The latest epoch.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Records that `epoch` starts at `start_offset`. Returns true if the cache changed.
    /// Like Kafka, entries that would break monotonicity (same or later epoch, or later start
    /// offset) are dropped first.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        if let Some(&(e, o)) = self.entries.last() {
            if e == epoch && o <= start_offset {
                return false;
            }
        }
        self.entries.retain(|&(e, o)| e < epoch && o < start_offset);
        self.entries.push((epoch, start_offset));
        true
    }

    /// Kafka's `endOffsetFor`: (epoch, end offset) for a follower at `epoch`, or `None` when
    /// undefined (no epoch asked, or none known). An epoch above every known one ends where the
    /// log ends, in the latest epoch: Kafka's leader always knows its own epoch so never meets
    /// that case, but a mirror partition's log may hold a lower epoch than one its replicas saw
    /// (a failback truncated the higher one away), and the answer must still show them where
    /// they part.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        let latest = self.latest_epoch()?;
        if epoch >= latest {
            return Some((latest, log_end_offset));
        }
        let higher = self.entries.iter().position(|&(e, _)| e > epoch)?;
        let higher_start = self.entries[higher].1;
        if higher == 0 {
            Some((epoch, higher_start))
        } else {
            Some((self.entries[higher - 1].0, higher_start))
        }
    }

    /// The epoch in which `offset` was written.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|&&(_, o)| o <= offset)
            .map(|&(e, _)| e)
    }

    /// Drops entries starting at or after `end_offset` (truncation).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|&(_, o)| o < end_offset);
        before != self.entries.len()
    }

    /// Drops entries wholly below `start_offset`, keeping the one covering it moved up to it.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let covering = self.entries.iter().rposition(|&(_, o)| o <= start_offset);
        match covering {
            Some(i) if i > 0 || self.entries[0].1 < start_offset => {
                self.entries.drain(..i);
                self.entries[0].1 = start_offset;
                true
            }
            _ => false,
        }
    }

    /// Drops everything.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochFileCache {
        let mut c = LeaderEpochFileCache::empty(Path::new("/nonexistent"));
        for &(e, o) in entries {
            assert!(c.assign(e, o));
        }
        c
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(1, 0), (3, 10), (5, 20)]);
        assert_eq!(c.end_offset_for(5, 30), Some((5, 30)));
        assert_eq!(c.end_offset_for(3, 30), Some((3, 20)));
        assert_eq!(c.end_offset_for(4, 30), Some((3, 20)));
        assert_eq!(c.end_offset_for(0, 30), Some((0, 0)));
        assert_eq!(
            c.end_offset_for(6, 30),
            Some((5, 30)),
            "above every known epoch"
        );
        assert_eq!(cache(&[]).end_offset_for(1, 30), None);
        assert_eq!(c.end_offset_for(-1, 30), None);
        assert_eq!(c.epoch_for_offset(15), Some(3));
        assert_eq!(c.epoch_for_offset(25), Some(5));
    }

    #[test]
    fn assign_keeps_monotonic() {
        let mut c = cache(&[(1, 0), (3, 10)]);
        assert!(!c.assign(3, 15));
        assert!(c.assign(2, 5));
        assert_eq!(c.entries(), &[(1, 0), (2, 5)]);
    }

    #[test]
    fn truncation_both_ends() {
        let mut c = cache(&[(1, 0), (3, 10), (5, 20)]);
        c.truncate_from_end(20);
        assert_eq!(c.entries(), &[(1, 0), (3, 10)]);
        c.truncate_from_start(12);
        assert_eq!(c.entries(), &[(3, 12)]);
    }

    #[test]
    fn checkpoint_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochFileCache::empty(dir.path());
        c.assign(0, 0);
        c.assign(4, 100);
        c.flush().unwrap();
        let l = LeaderEpochFileCache::load(dir.path()).unwrap().unwrap();
        assert_eq!(l.entries(), &[(0, 0), (4, 100)]);
        std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT), "0\n1\n5 x\n").unwrap();
        assert!(LeaderEpochFileCache::load(dir.path()).is_err());
    }
}
