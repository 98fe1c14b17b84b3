//! Sparse memory-mapped indexes of a segment: [`OffsetIndex`] (offset -> file position) and
//! [`TimeIndex`] (timestamp -> offset), both one [`Index`] type told apart by their
//! [`IndexKind`]. Both are derived data: after a crash they are rebuilt from the `.log` file,
//! so they carry no checksum.

use std::fs::{File, OpenOptions};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut};

use crate::error::{IoContext, Result, StorageError};

/// What tells the two indexes apart: the entry layout and the order entries must keep.
pub(crate) trait IndexKind {
    /// An entry as callers see it, with absolute offsets.
    type Entry: Copy + PartialEq + std::fmt::Debug;
    /// Bytes of one entry on disk.
    const ENTRY_SIZE: usize;
    /// Decodes an entry (`b` is exactly `ENTRY_SIZE` bytes).
    fn decode(b: &[u8], base_offset: i64) -> Self::Entry;
    /// Encodes an entry into `out` (exactly `ENTRY_SIZE` bytes).
    fn encode(e: Self::Entry, base_offset: i64, out: &mut [u8]);
    /// The value lookups search by (offset, or timestamp).
    fn key(e: Self::Entry) -> i64;
    /// What a lookup below the first entry answers.
    fn before_first(base_offset: i64) -> Self::Entry;
    /// True if an entry may be appended after `last` (otherwise it is skipped).
    fn accepts(last: Self::Entry, e: Self::Entry) -> bool;
    /// True if `e` may follow `prev` in a sane index.
    fn follows(prev: Self::Entry, e: Self::Entry) -> bool;
    /// True if `e` lies within the segment: at or past its base, below `bound` (kind-specific).
    fn in_bounds(e: Self::Entry, base_offset: i64, bound: i64) -> bool;
}

/// Offset index entries: 8 bytes (relative offset u32, position u32), seen as
/// (absolute offset, position).
#[derive(Debug)]
pub(crate) enum OffsetKind {}

/// Time index entries: 12 bytes (timestamp i64, relative offset u32), seen as
/// (timestamp, absolute offset).
#[derive(Debug)]
pub(crate) enum TimeKind {}

/// The sparse offset index of a segment, one entry every `index.interval.bytes` of log, keyed
/// by the last offset of the indexed batch.
pub(crate) type OffsetIndex = Index<OffsetKind>;

/// The sparse time index of a segment, with growing timestamps.
pub(crate) type TimeIndex = Index<TimeKind>;

/// The `N` bytes of `b` at `at` (callers pass whole entries, so they are there).
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut x = [0u8; N];
    x.copy_from_slice(&b[at..at + N]);
    x
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes_at(b, at))
}

impl IndexKind for OffsetKind {
    type Entry = (i64, u32);
    const ENTRY_SIZE: usize = 8;

    fn decode(b: &[u8], base_offset: i64) -> (i64, u32) {
        (base_offset + u32_at(b, 0) as i64, u32_at(b, 4))
    }

    fn encode((offset, position): (i64, u32), base_offset: i64, out: &mut [u8]) {
        out[..4].copy_from_slice(&((offset - base_offset) as u32).to_be_bytes());
        out[4..].copy_from_slice(&position.to_be_bytes());
    }

    fn key(e: (i64, u32)) -> i64 {
        e.0
    }

    fn before_first(base_offset: i64) -> (i64, u32) {
        (base_offset, 0)
    }

    fn accepts(last: (i64, u32), e: (i64, u32)) -> bool {
        e.0 > last.0
    }

    fn follows(prev: (i64, u32), e: (i64, u32)) -> bool {
        e.0 > prev.0 && e.1 > prev.1
    }

    /// `log_size` bounds positions.
    fn in_bounds((o, p): (i64, u32), base_offset: i64, log_size: i64) -> bool {
        (p as i64) < log_size.max(1) && o >= base_offset
    }
}

impl IndexKind for TimeKind {
    type Entry = (i64, i64);
    const ENTRY_SIZE: usize = 12;

    fn decode(b: &[u8], base_offset: i64) -> (i64, i64) {
        (
            i64::from_be_bytes(bytes_at(b, 0)),
            base_offset + u32_at(b, 8) as i64,
        )
    }

    fn encode((timestamp, offset): (i64, i64), base_offset: i64, out: &mut [u8]) {
        out[..8].copy_from_slice(&timestamp.to_be_bytes());
        out[8..].copy_from_slice(&((offset - base_offset) as u32).to_be_bytes());
    }

    fn key(e: (i64, i64)) -> i64 {
        e.0
    }

    fn before_first(base_offset: i64) -> (i64, i64) {
        (-1, base_offset)
    }

    fn accepts(last: (i64, i64), e: (i64, i64)) -> bool {
        e.0 > last.0 && e.1 >= last.1
    }

    fn follows(prev: (i64, i64), e: (i64, i64)) -> bool {
        e.0 > prev.0 && e.1 >= prev.1
    }

    /// `next_offset` bounds offsets.
    fn in_bounds((_, o): (i64, i64), base_offset: i64, next_offset: i64) -> bool {
        o >= base_offset && o < next_offset.max(base_offset + 1)
    }
}

/// A sparse index file of fixed-size entries mapped into memory. While the segment is active
/// the file is preallocated to its maximum size; on roll or close it is trimmed to the entries
/// in use. No file descriptor is held between resizes (Kafka's way): the map outlives its fd,
/// and ten thousand partitions would otherwise hold two more descriptors each.
#[derive(Debug)]
pub(crate) struct Index<K: IndexKind> {
    path: PathBuf,
    mmap: Option<MmapMut>,
    base_offset: i64,
    entries: usize,
    max_entries: usize,
    /// Found at its preallocated size when opened: the process stopped while its segment was
    /// active, so the tail is zeros rather than entries.
    untrimmed: bool,
    kind: PhantomData<K>,
}

impl<K: IndexKind> Index<K> {
    /// Opens or creates the index file; `max_bytes` is `segment.index.bytes`.
    pub(crate) fn open(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Self> {
        let file = open_file(path)?;
        let len = file.metadata().ctx(path)?.len();
        let max_entries = (max_bytes as usize / K::ENTRY_SIZE).max(1);
        // An untrimmed index is taken as empty and its segment recovered (Kafka resets such an
        // index as well): reading its last "entry" would fault in pages of zeros, which across
        // ten thousand partitions made a restart take minutes.
        let untrimmed = len > 0 && len == (max_entries * K::ENTRY_SIZE) as u64;
        let mut index = Index {
            path: path.to_path_buf(),
            mmap: None,
            base_offset,
            // Kafka's rule: a trimmed index holds exactly len / entry size entries.
            entries: if untrimmed {
                0
            } else {
                (len as usize) / K::ENTRY_SIZE
            },
            max_entries,
            untrimmed,
            kind: PhantomData,
        };
        index.map(&file, len)?;
        Ok(index)
    }

    #[allow(unsafe_code)]
    fn map(&mut self, file: &File, len: u64) -> Result<()> {
        self.mmap = None;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the index file belongs to this segment and is only written through this map
        // (the writer holds the segment's index lock); no other process writes it. Truncation
        // by another process would be a misuse of the log directory we do not defend against.
        let map = unsafe { MmapMut::map_mut(file) }.ctx(&self.path)?;
        // Entries are written one page at a time and looked up by binary search: without this
        // a fault reads around it as far as the device's readahead (8 MiB here), zero-filling
        // most of a new index's sparse file, which made each new partition or segment cost
        // tens of milliseconds of CPU. A refused hint only costs that speed.
        let _ = map.advise(Advice::Random);
        self.mmap = Some(map);
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.mmap = None;
        let file = open_file(&self.path)?;
        file.set_len(len).ctx(&self.path)?;
        self.map(&file, len)
    }

    fn capacity(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len() / K::ENTRY_SIZE)
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// True if the file was found untrimmed (a crash while its segment was active): its
    /// segment must be recovered.
    pub(crate) fn was_untrimmed(&self) -> bool {
        self.untrimmed
    }

    /// Entry `n` (below [`Self::entries`]).
    pub(crate) fn entry(&self, n: usize) -> K::Entry {
        let size = K::ENTRY_SIZE;
        match &self.mmap {
            Some(m) => K::decode(&m[n * size..(n + 1) * size], self.base_offset),
            None => K::before_first(self.base_offset),
        }
    }

    /// The last entry, if any.
    pub(crate) fn last_entry(&self) -> Option<K::Entry> {
        self.entries.checked_sub(1).map(|n| self.entry(n))
    }

    /// True when no entry can be added; the segment must roll.
    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// Adds `e` unless it does not grow past the last entry (then it is skipped).
    fn push(&mut self, e: K::Entry) -> Result<()> {
        if self.last_entry().is_some_and(|last| !K::accepts(last, e)) {
            return Ok(());
        }
        if self.entries >= self.capacity() {
            self.make_writable()?;
        }
        let (size, at) = (K::ENTRY_SIZE, self.entries * K::ENTRY_SIZE);
        match &mut self.mmap {
            Some(m) if at + size <= m.len() => {
                K::encode(e, self.base_offset, &mut m[at..at + size]);
                self.entries += 1;
                Ok(())
            }
            _ => Err(StorageError::Corrupt {
                path: self.path.clone(),
                reason: "index is full".into(),
            }),
        }
    }

    /// The entry with the largest key <= `key`, or what a lookup below the first entry gives.
    pub(crate) fn lookup(&self, key: i64) -> K::Entry {
        let (mut lo, mut hi) = (0usize, self.entries);
        // Binary search for the first entry with a key > target.
        while lo < hi {
            let mid = (lo + hi) / 2;
            if K::key(self.entry(mid)) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        match lo {
            0 => K::before_first(self.base_offset),
            _ => self.entry(lo - 1),
        }
    }

    /// Drops the entries at the end for which `past` holds.
    fn truncate_while(&mut self, past: impl Fn(K::Entry) -> bool) {
        while self.entries > 0 && past(self.entry(self.entries - 1)) {
            self.entries -= 1;
        }
    }

    /// Drops all entries (to be rebuilt from the log).
    pub(crate) fn reset(&mut self) {
        self.entries = 0;
        self.untrimmed = false;
    }

    /// Checks entries grow and lie within the segment (`bound`: see [`IndexKind::in_bounds`]).
    fn entries_sane(&self, bound: i64) -> bool {
        // The map reads one page per fault (MADV_RANDOM): ask for the entries in one go, as
        // this reads them all, or a cold restart reads each index a page at a time.
        if let Some(m) = &self.mmap {
            let used = (self.entries * K::ENTRY_SIZE).min(m.len());
            if used > 0 {
                let _ = m.advise_range(Advice::WillNeed, 0, used);
            }
        }
        let mut prev = None;
        for n in 0..self.entries {
            let e = self.entry(n);
            if !K::in_bounds(e, self.base_offset, bound) || prev.is_some_and(|p| !K::follows(p, e))
            {
                return false;
            }
            prev = Some(e);
        }
        true
    }

    /// Grows the file to the maximum size so entries can be appended.
    pub(crate) fn make_writable(&mut self) -> Result<()> {
        let want = (self.max_entries * K::ENTRY_SIZE) as u64;
        if self.capacity() < self.max_entries {
            self.set_len(want.max((self.entries * K::ENTRY_SIZE) as u64))?;
        }
        Ok(())
    }

    /// Shrinks the file to the entries in use.
    pub(crate) fn trim(&mut self) -> Result<()> {
        let want = (self.entries * K::ENTRY_SIZE) as u64;
        if self.mmap.as_ref().map_or(0, |m| m.len() as u64) != want {
            self.set_len(want)?;
        }
        Ok(())
    }

    /// Writes the mapped pages to disk.
    pub(crate) fn flush(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().ctx(&self.path)?;
        }
        Ok(())
    }
}

fn open_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx(path)
}

impl Index<OffsetKind> {
    /// Adds an entry; offsets must grow (an entry that does not is skipped).
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        self.push((offset, position))
    }

    /// Drops entries whose position is at or past `position`.
    pub(crate) fn truncate_to_position(&mut self, position: u32) {
        self.truncate_while(|(_, p)| p >= position);
    }

    /// Checks entries grow and point inside a log of `log_size` bytes.
    pub(crate) fn sanity_check(&self, log_size: u64) -> bool {
        self.entries_sane(log_size.min(i64::MAX as u64) as i64)
    }
}

impl Index<TimeKind> {
    /// Adds an entry if `timestamp` is larger than the last one (and `offset` not smaller).
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) -> Result<()> {
        self.push((timestamp, offset))
    }

    /// Drops entries with offsets at or past `offset`.
    pub(crate) fn truncate_to_offset(&mut self, offset: i64) {
        self.truncate_while(|(_, o)| o >= offset);
    }

    /// Checks timestamps and offsets grow and offsets stay below `next_offset`.
    pub(crate) fn sanity_check(&self, next_offset: i64) -> bool {
        self.entries_sane(next_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_left_at_its_preallocated_size_opens_empty_and_asks_for_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&p, 0, 80).unwrap();
        idx.make_writable().unwrap();
        idx.append(5, 0).unwrap();
        idx.flush().unwrap();
        drop(idx); // a crash: never trimmed
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 80);
        let mut idx = OffsetIndex::open(&p, 0, 80).unwrap();
        assert_eq!((idx.entries(), idx.was_untrimmed()), (0, true));
        idx.reset();
        assert!(!idx.was_untrimmed());
        // Trimmed, the same entry reads back as one entry.
        idx.make_writable().unwrap();
        idx.append(5, 0).unwrap();
        idx.trim().unwrap();
        drop(idx);
        let idx = OffsetIndex::open(&p, 0, 80).unwrap();
        assert_eq!((idx.entries(), idx.was_untrimmed()), (1, false));
        assert_eq!(idx.last_entry(), Some((5, 0)));
    }

    #[test]
    fn offset_index_lookup_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&p, 100, 80).unwrap();
        idx.make_writable().unwrap();
        idx.append(105, 0).unwrap();
        idx.append(110, 500).unwrap();
        idx.append(120, 900).unwrap();
        assert_eq!(idx.lookup(99), (100, 0));
        assert_eq!(idx.lookup(107), (105, 0));
        assert_eq!(idx.lookup(110), (110, 500));
        assert_eq!(idx.lookup(1000), (120, 900));
        assert!(idx.sanity_check(1000));
        assert!(!idx.sanity_check(800));
        idx.truncate_to_position(500);
        assert_eq!(idx.entries(), 1);
        idx.trim().unwrap();
        drop(idx);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 8);
        let idx = OffsetIndex::open(&p, 100, 80).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(idx.last_entry(), Some((105, 0)));
    }

    /// Pages of the file at `path` that are in the page cache.
    #[allow(unsafe_code)]
    fn resident_pages(path: &Path) -> usize {
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a read-only map of a file this test owns, only passed to mincore.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let mut resident = vec![0u8; len.div_ceil(page)];
        // SAFETY: `resident` has one byte per page of the mapping, as mincore requires.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, len, resident.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        resident.iter().filter(|b| **b & 1 == 1).count()
    }

    #[test]
    fn a_new_index_brings_in_the_page_it_writes_not_the_readahead_window() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&p, 0, 10 * 1024 * 1024).unwrap();
        idx.append(1, 100).unwrap();
        idx.append(2, 200).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 10 * 1024 * 1024);
        let resident = resident_pages(&p);
        assert!(
            (1..=4).contains(&resident),
            "{resident} pages of a new 10 MiB index are in the page cache after two entries"
        );
    }

    #[test]
    fn offset_index_fills_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 0, 16).unwrap();
        idx.append(1, 1).unwrap();
        assert!(!idx.is_full());
        idx.append(2, 2).unwrap();
        assert!(idx.is_full());
        assert!(idx.append(3, 3).is_err());
    }

    #[test]
    fn time_index_keeps_growing_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::open(&dir.path().join("0.timeindex"), 10, 120).unwrap();
        idx.maybe_append(1000, 12).unwrap();
        idx.maybe_append(900, 13).unwrap();
        idx.maybe_append(2000, 20).unwrap();
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.lookup(1500), (1000, 12));
        assert_eq!(idx.lookup(10), (-1, 10));
        assert!(idx.sanity_check(21));
        assert!(!idx.sanity_check(20));
        idx.truncate_to_offset(20);
        assert_eq!(idx.entries(), 1);
    }
}
