//! [`LogSegments`]: a log's segments ordered by base offset (Kafka's LogSegments), and the
//! lookups the log makes in them. Only the list changes here; segment files are left to the
//! callers.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::segment::LogSegment;

/// The ordered segments of one log; the last one is the active segment. Every method takes the
/// lock for itself, so a caller that needs several steps to agree holds the log's writer lock.
#[derive(Debug, Default)]
pub(crate) struct LogSegments {
    map: RwLock<BTreeMap<i64, Arc<LogSegment>>>,
}

impl LogSegments {
    /// The list of `segments`.
    pub(crate) fn new(segments: impl IntoIterator<Item = Arc<LogSegment>>) -> LogSegments {
        let list = LogSegments::default();
        for seg in segments {
            list.add(seg);
        }
        list
    }

    /// The segment appends go to.
    pub(crate) fn active(&self) -> Arc<LogSegment> {
        match self.map.read().values().next_back() {
            Some(s) => s.clone(),
            None => unreachable!("a log always has an active segment"),
        }
    }

    /// True if the segment at `base` is the active one.
    pub(crate) fn is_active(&self, base: i64) -> bool {
        self.map.read().keys().next_back() == Some(&base)
    }

    /// The segment at `base`, if any.
    pub(crate) fn get(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.map.read().get(&base).cloned()
    }

    /// Every segment, oldest first.
    pub(crate) fn all(&self) -> Vec<Arc<LogSegment>> {
        self.map.read().values().cloned().collect()
    }

    /// The segment that may hold `offset` and every later one.
    pub(crate) fn floor_and_later(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let map = self.map.read();
        let from = map
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        map.range(from..).map(|(_, s)| s.clone()).collect()
    }

    /// The segment that may hold `offset` (the first one when `offset` is below them all).
    pub(crate) fn floor_or_first(&self, offset: i64) -> Option<Arc<LogSegment>> {
        let map = self.map.read();
        map.range(..=offset)
            .next_back()
            .or_else(|| map.iter().next())
            .map(|(_, s)| s.clone())
    }

    /// The segment after the one at `base`.
    pub(crate) fn higher(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.map
            .read()
            .range((Bound::Excluded(base), Bound::Unbounded))
            .next()
            .map(|(_, s)| s.clone())
    }

    /// Number of segments.
    pub(crate) fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Base offsets, ascending.
    pub(crate) fn base_offsets(&self) -> Vec<i64> {
        self.map.read().keys().copied().collect()
    }

    /// Bytes of all segments.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.map.read().values().map(|s| s.size()).sum()
    }

    /// Adds (or replaces) the segment at its base offset.
    pub(crate) fn add(&self, seg: Arc<LogSegment>) {
        self.map.write().insert(seg.base_offset(), seg);
    }

    /// Removes the segment at `base`.
    pub(crate) fn remove(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.map.write().remove(&base)
    }

    /// Makes `seg` the only segment; returns the ones it replaced.
    pub(crate) fn replace_all(&self, seg: Arc<LogSegment>) -> Vec<Arc<LogSegment>> {
        let mut map = self.map.write();
        let old = std::mem::take(&mut *map).into_values().collect();
        map.insert(seg.base_offset(), seg);
        old
    }

    /// Removes every segment.
    pub(crate) fn clear(&self) {
        self.map.write().clear();
    }

    /// Removes the segments based past `offset`, keeping at least one; returns them.
    pub(crate) fn remove_after(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let mut map = self.map.write();
        let later: Vec<i64> = map
            .range((Bound::Excluded(offset), Bound::Unbounded))
            .map(|(b, _)| *b)
            .collect();
        let skip = usize::from(later.len() == map.len());
        later[skip..].iter().filter_map(|b| map.remove(b)).collect()
    }

    /// Removes the segments wholly below `offset` (the next one starts at or below it);
    /// returns them.
    pub(crate) fn remove_below(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let mut map = self.map.write();
        let bases: Vec<i64> = map.keys().copied().collect();
        bases
            .windows(2)
            .filter(|w| w[1] <= offset)
            .filter_map(|w| map.remove(&w[0]))
            .collect()
    }

    /// Removes the active segment if another remains; returns the new active one.
    pub(crate) fn remove_active(&self) -> Option<Arc<LogSegment>> {
        let mut map = self.map.write();
        if map.len() < 2 {
            return None;
        }
        map.pop_last();
        map.values().next_back().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty segments at `bases` in `dir`.
    fn list(dir: &std::path::Path, bases: &[i64]) -> LogSegments {
        LogSegments::new(
            bases
                .iter()
                .map(|&b| Arc::new(LogSegment::open(dir, b, 1024, None).unwrap())),
        )
    }

    fn bases(segs: &[Arc<LogSegment>]) -> Vec<i64> {
        segs.iter().map(|s| s.base_offset()).collect()
    }

    #[test]
    fn lookups_find_the_segment_that_may_hold_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let segs = list(dir.path(), &[10, 20, 30]);
        assert_eq!(segs.active().base_offset(), 30);
        assert!(segs.is_active(30) && !segs.is_active(20));
        assert_eq!(segs.floor_or_first(25).unwrap().base_offset(), 20);
        assert_eq!(segs.floor_or_first(5).unwrap().base_offset(), 10);
        assert_eq!(segs.higher(20).unwrap().base_offset(), 30);
        assert!(segs.higher(30).is_none());
        assert_eq!(bases(&segs.floor_and_later(25)), vec![20, 30]);
        assert_eq!(bases(&segs.floor_and_later(5)), vec![10, 20, 30]);
    }

    #[test]
    fn removals_never_take_the_last_segment() {
        let dir = tempfile::tempdir().unwrap();
        let segs = list(dir.path(), &[0, 10, 20]);
        assert_eq!(bases(&segs.remove_below(15)), vec![0]);
        assert_eq!(bases(&segs.remove_below(i64::MAX)), vec![10]);
        assert_eq!(segs.base_offsets(), vec![20]);
        assert!(segs.remove_active().is_none());

        let segs = list(dir.path(), &[0, 10, 20]);
        assert_eq!(bases(&segs.remove_after(10)), vec![20]);
        assert_eq!(bases(&segs.remove_after(-1)), vec![10]);
        assert_eq!(segs.base_offsets(), vec![0]);

        let segs = list(dir.path(), &[0, 10]);
        assert_eq!(segs.remove_active().unwrap().base_offset(), 0);
        assert_eq!(segs.base_offsets(), vec![0]);
    }
}
