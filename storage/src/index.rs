//! Sparse memory-mapped indexes of a segment: [`OffsetIndex`] (offset -> file position) and
//! [`TimeIndex`] (timestamp -> offset). Both are derived data: after a crash they are rebuilt
//! from the `.log` file, so they carry no checksum.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{IoContext, Result, StorageError};

/// A fixed-entry-size file mapped into memory. While the segment is active the file is
/// preallocated to its maximum size; on roll or close it is trimmed to the entries in use.
/// No file descriptor is held between resizes (Kafka's way): the map outlives its fd, and ten
/// thousand partitions would otherwise hold two more descriptors each.
#[derive(Debug)]
struct MmapIndex {
    path: PathBuf,
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    max_entries: usize,
    /// Found at its preallocated size when opened: the process stopped while its segment was
    /// active, so the tail is zeros rather than entries.
    untrimmed: bool,
}

impl MmapIndex {
    fn open(path: &Path, entry_size: usize, max_bytes: u64) -> Result<Self> {
        let file = Self::open_file(path)?;
        let len = file.metadata().ctx(path)?.len();
        let max_entries = (max_bytes as usize / entry_size).max(1);
        // An untrimmed index is taken as empty and its segment recovered (Kafka resets such an
        // index as well): reading its last "entry" would fault in pages of zeros, which across
        // ten thousand partitions made a restart take minutes.
        let untrimmed = len > 0 && len == (max_entries * entry_size) as u64;
        let mut index = MmapIndex {
            path: path.to_path_buf(),
            mmap: None,
            entry_size,
            // Kafka's rule: a trimmed index holds exactly len / entry_size entries.
            entries: if untrimmed {
                0
            } else {
                (len as usize) / entry_size
            },
            max_entries,
            untrimmed,
        };
        index.map(&file, len)?;
        Ok(index)
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
        self.mmap = Some(map);
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.mmap = None;
        let file = Self::open_file(&self.path)?;
        file.set_len(len).ctx(&self.path)?;
        self.map(&file, len)
    }

    /// Grows the file to the maximum size so entries can be appended.
    fn make_writable(&mut self) -> Result<()> {
        let want = (self.max_entries * self.entry_size) as u64;
        if self.capacity() < self.max_entries {
            self.set_len(want.max((self.entries * self.entry_size) as u64))?;
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len() / self.entry_size)
    }

    /// Shrinks the file to the entries in use.
    fn trim(&mut self) -> Result<()> {
        let want = (self.entries * self.entry_size) as u64;
        if self.mmap.as_ref().map_or(0, |m| m.len() as u64) != want {
            self.set_len(want)?;
        }
        Ok(())
    }

    fn entry(&self, n: usize) -> &[u8] {
        match &self.mmap {
            Some(m) => &m[n * self.entry_size..(n + 1) * self.entry_size],
            None => &[],
        }
    }

    fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        if self.entries >= self.capacity() {
            self.make_writable()?;
        }
        let at = self.entries * self.entry_size;
        match &mut self.mmap {
            Some(m) if at + self.entry_size <= m.len() => {
                m[at..at + self.entry_size].copy_from_slice(bytes);
                self.entries += 1;
                Ok(())
            }
            _ => Err(StorageError::Corrupt {
                path: self.path.clone(),
                reason: "index is full".into(),
            }),
        }
    }

    fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    fn flush(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().ctx(&self.path)?;
        }
        Ok(())
    }

    fn rename(&mut self, to: &Path) -> Result<()> {
        std::fs::rename(&self.path, to).ctx(&self.path)?;
        self.path = to.to_path_buf();
        Ok(())
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// The sparse offset index of a segment: 8-byte entries (relative offset u32, position u32),
/// one every `index.interval.bytes` of log, keyed by the last offset of the indexed batch.
#[derive(Debug)]
pub struct OffsetIndex {
    inner: MmapIndex,
    base_offset: i64,
}

impl OffsetIndex {
    /// Opens or creates the index file; `max_bytes` is `segment.index.bytes`.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Self> {
        Ok(OffsetIndex {
            inner: MmapIndex::open(path, 8, max_bytes)?,
            base_offset,
        })
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.inner.entries
    }

    /// True if the file was found untrimmed (a crash while its segment was active): its
    /// segment must be recovered.
    pub fn was_untrimmed(&self) -> bool {
        self.inner.untrimmed
    }

    /// Entry `n` as (absolute offset, position).
    pub fn entry(&self, n: usize) -> (i64, u32) {
        let e = self.inner.entry(n);
        (self.base_offset + u32_at(e, 0) as i64, u32_at(e, 4))
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<(i64, u32)> {
        self.inner.entries.checked_sub(1).map(|n| self.entry(n))
    }

    /// True when no entry can be added; the segment must roll.
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// Adds an entry; offsets must grow.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        if let Some((last, _)) = self.last_entry() {
            if offset <= last {
                return Ok(());
            }
        }
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        e[4..].copy_from_slice(&position.to_be_bytes());
        self.inner.push(&e)
    }

    /// The entry with the largest offset <= `offset`, or (base offset, 0).
    pub fn lookup(&self, offset: i64) -> (i64, u32) {
        let (mut lo, mut hi) = (0usize, self.inner.entries);
        // Binary search for the first entry with offset > target.
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 <= offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            (self.base_offset, 0)
        } else {
            self.entry(lo - 1)
        }
    }

    /// Drops entries whose position is at or past `position`.
    pub fn truncate_to_position(&mut self, position: u32) {
        let mut n = self.inner.entries;
        while n > 0 && self.entry(n - 1).1 >= position {
            n -= 1;
        }
        self.inner.truncate_entries(n);
    }

    /// Drops all entries (to be rebuilt from the log).
    pub fn reset(&mut self) {
        self.inner.truncate_entries(0);
        self.inner.untrimmed = false;
    }

    /// Checks entries grow and point inside a log of `log_size` bytes.
    pub fn sanity_check(&self, log_size: u64) -> bool {
        let mut prev: Option<(i64, u32)> = None;
        for n in 0..self.inner.entries {
            let (o, p) = self.entry(n);
            if p as u64 >= log_size.max(1) || o < self.base_offset {
                return false;
            }
            if let Some((po, pp)) = prev {
                if o <= po || p <= pp {
                    return false;
                }
            }
            prev = Some((o, p));
        }
        true
    }

    /// Preallocates for appends.
    pub fn make_writable(&mut self) -> Result<()> {
        self.inner.make_writable()
    }

    /// Shrinks the file to its entries.
    pub fn trim(&mut self) -> Result<()> {
        self.inner.trim()
    }

    /// Writes the mapped pages to disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Renames the file.
    pub fn rename(&mut self, to: &Path) -> Result<()> {
        self.inner.rename(to)
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// The sparse time index of a segment: 12-byte entries (timestamp i64, relative offset u32)
/// with growing timestamps.
#[derive(Debug)]
pub struct TimeIndex {
    inner: MmapIndex,
    base_offset: i64,
}

impl TimeIndex {
    /// Opens or creates the index file.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Self> {
        Ok(TimeIndex {
            inner: MmapIndex::open(path, 12, max_bytes)?,
            base_offset,
        })
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.inner.entries
    }

    /// True if the file was found untrimmed: its segment must be recovered.
    pub fn was_untrimmed(&self) -> bool {
        self.inner.untrimmed
    }

    /// Entry `n` as (timestamp, absolute offset).
    pub fn entry(&self, n: usize) -> (i64, i64) {
        let e = self.inner.entry(n);
        (i64_at(e, 0), self.base_offset + u32_at(e, 8) as i64)
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.inner.entries.checked_sub(1).map(|n| self.entry(n))
    }

    /// True when no entry can be added.
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// Adds an entry if `timestamp` is larger than the last one.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> Result<()> {
        if let Some((ts, o)) = self.last_entry() {
            if timestamp <= ts || offset < o {
                return Ok(());
            }
        }
        let mut e = [0u8; 12];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        self.inner.push(&e)
    }

    /// The entry with the largest timestamp <= `timestamp`, as (timestamp, offset), or the base offset.
    pub fn lookup(&self, timestamp: i64) -> (i64, i64) {
        let (mut lo, mut hi) = (0usize, self.inner.entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 <= timestamp {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            (-1, self.base_offset)
        } else {
            self.entry(lo - 1)
        }
    }

    /// Drops entries with offsets at or past `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        let mut n = self.inner.entries;
        while n > 0 && self.entry(n - 1).1 >= offset {
            n -= 1;
        }
        self.inner.truncate_entries(n);
    }

    /// Drops all entries (to be rebuilt from the log).
    pub fn reset(&mut self) {
        self.inner.truncate_entries(0);
        self.inner.untrimmed = false;
    }

    /// Checks timestamps and offsets grow and offsets stay below `next_offset`.
    pub fn sanity_check(&self, next_offset: i64) -> bool {
        let mut prev: Option<(i64, i64)> = None;
        for n in 0..self.inner.entries {
            let (t, o) = self.entry(n);
            if o < self.base_offset || o >= next_offset.max(self.base_offset + 1) {
                return false;
            }
            if let Some((pt, po)) = prev {
                if t <= pt || o < po {
                    return false;
                }
            }
            prev = Some((t, o));
        }
        true
    }

    /// Preallocates for appends.
    pub fn make_writable(&mut self) -> Result<()> {
        self.inner.make_writable()
    }

    /// Shrinks the file to its entries.
    pub fn trim(&mut self) -> Result<()> {
        self.inner.trim()
    }

    /// Writes the mapped pages to disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Renames the file.
    pub fn rename(&mut self, to: &Path) -> Result<()> {
        self.inner.rename(to)
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.inner.path
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
