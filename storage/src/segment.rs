//! [`LogSegment`]: one `.log` file of whole batches plus its offset, time and transaction
//! indexes, all named by the 20-digit base offset.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tern_protocol::record_batch::{
    validate_batch, BatchError, Compression, RecordBatchHeader, RECORD_BATCH_OVERHEAD,
};

use crate::error::{IoContext, Result, StorageError};
use crate::file_slice::FileSlice;
use crate::index::{OffsetIndex, TimeIndex};
use crate::record::{control_marker, parse_records};
use crate::txn_index::{AbortedTxn, TransactionIndex};

/// Suffix of segment data files.
pub(crate) const LOG_SUFFIX: &str = "log";
/// Suffix of offset index files.
pub(crate) const INDEX_SUFFIX: &str = "index";
/// Suffix of time index files.
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";
/// Suffix of transaction index files.
pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";
/// Extra suffix of files scheduled for deletion.
pub(crate) const DELETED_SUFFIX: &str = "deleted";
/// Extra suffix of files written by the cleaner, not yet committed.
pub(crate) const CLEANED_SUFFIX: &str = "cleaned";
/// Extra suffix of cleaned files committed to replace a segment.
pub(crate) const SWAP_SUFFIX: &str = "swap";

const SCAN_CHUNK: usize = 1 << 20;

/// File name of a segment file: 20-digit zero-padded base offset and suffix.
pub(crate) fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

struct Indexes {
    offset: OffsetIndex,
    time: TimeIndex,
    bytes_since_last_entry: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
}

impl Indexes {
    /// Notes the batch at `position` (appended or recovered): tracks the max timestamp and adds
    /// index entries once `index_interval_bytes` have passed since the last ones.
    fn index_batch(
        &mut self,
        h: &RecordBatchHeader,
        position: u64,
        index_interval_bytes: u64,
    ) -> Result<()> {
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        // Indexes are sparse: a full one just stops taking entries until the roll.
        if self.bytes_since_last_entry > index_interval_bytes
            && !self.offset.is_full()
            && !self.time.is_full()
        {
            self.offset.append(h.last_offset(), position as u32)?;
            self.time
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp)?;
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += h.size() as u64;
        Ok(())
    }

    /// Drops every entry and the max timestamp (before a rebuild, or for an emptied segment).
    fn reset(&mut self, base_offset: i64) {
        self.offset.reset();
        self.time.reset();
        self.bytes_since_last_entry = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = base_offset;
    }
}

/// One segment of a partition log. Appends come from the log's single writer; reads may run
/// concurrently and see only bytes below `size`, which is published after each append.
pub struct LogSegment {
    base_offset: i64,
    dir: PathBuf,
    /// Shared with the [`FileSlice`]s reads hand out, which keep it open while a response is
    /// being sent.
    file: Arc<File>,
    size: AtomicU64,
    indexes: RwLock<Indexes>,
    txn: Mutex<TransactionIndex>,
    /// Wall-clock time of the first append, for `segment.ms` (-1 while empty).
    first_append_ms: AtomicI64,
}

impl std::fmt::Debug for LogSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSegment")
            .field("base_offset", &self.base_offset)
            .field("size", &self.size())
            .finish()
    }
}

/// How a scan over a segment ended.
#[derive(Debug)]
pub struct ScanEnd {
    /// Byte position after the last good batch.
    pub valid_bytes: u64,
    /// Next offset after the last good batch, if any batch was seen.
    pub next_offset: Option<i64>,
    /// Why the scan stopped early, if it did.
    pub error: Option<BatchError>,
}

/// Outcome of reading from one segment: batches in memory (`Bytes`) or as a range of the
/// file (`FileSlice`).
#[derive(Debug)]
pub(crate) enum SegmentRead<T> {
    /// No batch at or past the requested offset in this segment.
    NotHere,
    /// Batches (possibly none when bounded), with the base offset of the first one.
    Data(T, i64),
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl LogSegment {
    /// Opens (or creates) the files of the segment at `base_offset` in `dir`.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_max_bytes: u64,
        preallocate_bytes: Option<u64>,
    ) -> Result<Self> {
        let log_path = dir.join(file_name(base_offset, LOG_SUFFIX));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .ctx(&log_path)?;
        let mut size = file.metadata().ctx(&log_path)?.len();
        if let Some(bytes) = preallocate_bytes {
            if size == 0 {
                file.set_len(bytes).ctx(&log_path)?;
                size = 0;
            }
        }
        let offset = OffsetIndex::open(
            &dir.join(file_name(base_offset, INDEX_SUFFIX)),
            base_offset,
            index_max_bytes,
        )?;
        let time = TimeIndex::open(
            &dir.join(file_name(base_offset, TIME_INDEX_SUFFIX)),
            base_offset,
            index_max_bytes,
        )?;
        let (max_timestamp, offset_of_max_timestamp) =
            time.last_entry().unwrap_or((-1, base_offset));
        let txn = TransactionIndex::open(&dir.join(file_name(base_offset, TXN_INDEX_SUFFIX)))?;
        let first_append_ms = if size > 0 {
            file.metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(now_ms, |d| d.as_millis() as i64)
        } else {
            -1
        };
        Ok(LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            size: AtomicU64::new(size),
            indexes: RwLock::new(Indexes {
                offset,
                time,
                bytes_since_last_entry: 0,
                max_timestamp,
                offset_of_max_timestamp,
            }),
            txn: Mutex::new(txn),
            first_append_ms: AtomicI64::new(first_append_ms),
        })
    }

    /// First offset the segment may hold.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Bytes of whole batches in the `.log` file.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, LOG_SUFFIX))
    }

    /// Wall-clock ms of the first append, -1 while empty.
    pub fn first_append_ms(&self) -> i64 {
        self.first_append_ms.load(Ordering::Relaxed)
    }

    /// Largest record timestamp in the segment, or the file's mtime if none is known (Kafka's rule).
    pub fn largest_timestamp(&self) -> i64 {
        let ts = self.indexes.read().max_timestamp;
        if ts > 0 {
            return ts;
        }
        self.file
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    }

    /// The max timestamp of the segment's first batch (Kafka's first batch timestamp), if it
    /// has a batch and it can be read.
    pub(crate) fn first_batch_timestamp(&self) -> Option<i64> {
        let end = self.size();
        let (_, h) = self.translate_offset(self.base_offset(), end).ok()??;
        Some(h.max_timestamp)
    }

    /// (max timestamp, offset of it) seen so far.
    pub fn max_timestamp_and_offset(&self) -> (i64, i64) {
        let i = self.indexes.read();
        (i.max_timestamp, i.offset_of_max_timestamp)
    }

    /// True if an index cannot take another entry.
    pub fn indexes_full(&self) -> bool {
        let i = self.indexes.read();
        i.offset.is_full() || i.time.is_full()
    }

    /// Appends `buf` (whole batches with final offsets; `batches` gives each one's position in
    /// `buf` and header) at the end of the file and indexes it.
    pub fn append(
        &self,
        buf: &[u8],
        batches: &[(usize, RecordBatchHeader)],
        index_interval_bytes: u64,
    ) -> Result<()> {
        let start = self.size();
        if let Err(e) = crate::fault::write_all_at(&self.file, &self.dir, buf, start) {
            // Leave no partial batch behind for readers or recovery to trip over.
            let _ = self.file.set_len(start);
            return Err(e).ctx(&self.log_path());
        }
        {
            let mut i = self.indexes.write();
            for (pos, h) in batches {
                i.index_batch(h, start + *pos as u64, index_interval_bytes)?;
            }
        }
        if self.first_append_ms() < 0 {
            self.first_append_ms.store(now_ms(), Ordering::Relaxed);
        }
        // Publish: readers only look below `size`.
        self.size.store(start + buf.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Records an aborted transaction whose marker is in this segment.
    pub(crate) fn append_aborted_txn(&self, txn: AbortedTxn) -> Result<()> {
        self.txn.lock().append(txn)
    }

    /// Drops the transaction index entries (before they are rebuilt).
    pub(crate) fn reset_txn_index(&self) -> Result<()> {
        self.txn.lock().reset()
    }

    /// Aborted transactions overlapping `[start, upper)`.
    pub(crate) fn collect_aborted(&self, start: i64, upper: i64, out: &mut Vec<AbortedTxn>) {
        self.txn.lock().collect(start, upper, out)
    }

    fn read_header_at(&self, pos: u64, end: u64) -> Result<Option<RecordBatchHeader>> {
        if pos + RECORD_BATCH_OVERHEAD as u64 > end {
            return Ok(None);
        }
        let mut b = [0u8; RECORD_BATCH_OVERHEAD];
        self.file.read_exact_at(&mut b, pos).ctx(&self.log_path())?;
        match RecordBatchHeader::parse(&b) {
            Ok(h) if pos + h.size() as u64 <= end => Ok(Some(h)),
            _ => Ok(None),
        }
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    fn translate_offset(&self, offset: i64, end: u64) -> Result<Option<(u64, RecordBatchHeader)>> {
        let mut pos = self.indexes.read().offset.lookup(offset).1 as u64;
        while let Some(h) = self.read_header_at(pos, end)? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.size() as u64;
        }
        Ok(None)
    }

    /// Reads whole batches starting with the one holding `offset`: at most `max_bytes` (but
    /// the first batch whole if `min_one_batch`), only batches ending below `max_offset`.
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<SegmentRead<Bytes>> {
        let end = self.size();
        let Some((pos, first)) = self.translate_offset(offset, end)? else {
            return Ok(SegmentRead::NotHere);
        };
        let below_max = |h: &RecordBatchHeader| max_offset.is_none_or(|m| h.last_offset() < m);
        if !below_max(&first) {
            return Ok(SegmentRead::Data(Bytes::new(), first.base_offset));
        }
        let available = (end - pos) as usize;
        let mut len = max_bytes.min(available);
        if first.size() > len {
            if !min_one_batch {
                return Ok(SegmentRead::Data(Bytes::new(), first.base_offset));
            }
            len = first.size();
        }
        let mut buf = self.read_uninit(pos, len)?;
        // Cut at the last whole batch that fits and ends below max_offset.
        // Offsets must grow inside a segment; a header that says otherwise is damaged data
        // (e.g. a flipped bit below the recovery point) and is not served.
        let mut cut = 0usize;
        let mut min_base = self.base_offset;
        while cut + RECORD_BATCH_OVERHEAD <= buf.len() {
            let Ok(h) = RecordBatchHeader::parse(&buf[cut..]) else {
                break;
            };
            if cut + h.size() > buf.len() || !below_max(&h) || h.base_offset < min_base {
                break;
            }
            min_base = h.next_offset();
            cut += h.size();
        }
        if cut == 0 && first.base_offset >= self.base_offset {
            // The first header parsed in translate_offset; failing here means it changed.
            return Ok(SegmentRead::Data(Bytes::new(), first.base_offset));
        }
        if cut == 0 {
            return Err(StorageError::Corrupt {
                path: self.log_path(),
                reason: format!(
                    "batch at position {pos} has base offset {} below the segment base",
                    first.base_offset
                ),
            });
        }
        buf.truncate(cut);
        Ok(SegmentRead::Data(Bytes::from(buf), first.base_offset))
    }

    /// The file range a fetch sends, as Kafka's `LogSegment.read` bounds it: from the batch
    /// holding `offset`, at most `max_bytes` (the first batch whole if `min_one_batch`), and
    /// nothing from the first batch that reaches `max_offset` on. Unlike [`Self::read`] the
    /// range may end inside a batch (clients drop a partial batch at the end); in return the
    /// bytes are never read here.
    pub(crate) fn read_slice(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<SegmentRead<FileSlice>> {
        crate::fault::before_read(&self.dir).ctx(&self.log_path())?;
        let end = self.size();
        let Some((pos, first)) = self.translate_offset(offset, end)? else {
            return Ok(SegmentRead::NotHere);
        };
        let empty = Ok(SegmentRead::Data(
            FileSlice::new(self.file.clone(), pos, 0),
            first.base_offset,
        ));
        let stop = match max_offset {
            Some(m) if first.last_offset() >= m => return empty,
            // The first batch reaching max_offset starts where the readable range ends; the
            // high watermark and last stable offset fall between batches.
            Some(m) => self.translate_offset(m, end)?.map_or(end, |(p, _)| p),
            None => end,
        };
        let available = (stop - pos) as usize;
        let mut len = max_bytes.min(available);
        if first.size() > len {
            if !min_one_batch {
                return empty;
            }
            len = first.size();
        }
        Ok(SegmentRead::Data(
            FileSlice::new(self.file.clone(), pos, len),
            first.base_offset,
        ))
    }

    /// Reads `len` bytes at `pos` into a fresh buffer without zero-filling it first (on warm
    /// reads that memset costs a sizeable share of the copy itself).
    #[allow(unsafe_code)]
    fn read_uninit(&self, pos: u64, len: usize) -> Result<Vec<u8>> {
        use std::os::fd::AsRawFd;
        crate::fault::before_read(&self.dir).ctx(&self.log_path())?;
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        while buf.len() < len {
            let done = buf.len();
            let spare = buf.spare_capacity_mut();
            // SAFETY: the pointer and length describe the vector's unused capacity (at least
            // `len - done` bytes); pread writes at most that many bytes there and touches no
            // other memory. The fd stays open for the call because `self.file` is borrowed.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    spare.as_mut_ptr().cast::<libc::c_void>(),
                    len - done,
                    (pos + done as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).ctx(&self.log_path());
            }
            if n == 0 {
                let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                return Err(e).ctx(&self.log_path());
            }
            // SAFETY: pread initialised exactly `n` more bytes right after the first `done`.
            unsafe { buf.set_len(done + n as usize) };
        }
        Ok(buf)
    }

    /// Visits every batch from byte `from` to `end`, reading in large chunks. With `validate`
    /// the CRC of each batch is checked. Stops at the first bad batch and reports it.
    pub fn scan(
        &self,
        from: u64,
        end: u64,
        validate: bool,
        mut f: impl FnMut(u64, &RecordBatchHeader, &[u8]) -> Result<()>,
    ) -> Result<ScanEnd> {
        let mut pos = from;
        let mut next_offset = None;
        let mut chunk: Vec<u8> = Vec::new();
        let mut chunk_start = 0u64;
        let stopped = |pos, next_offset, e| {
            Ok(ScanEnd {
                valid_bytes: pos,
                next_offset,
                error: Some(e),
            })
        };
        while pos < end {
            // Make sure the header, then the whole batch, is in the chunk.
            let need_header = RECORD_BATCH_OVERHEAD.min((end - pos) as usize);
            if pos < chunk_start || pos + need_header as u64 > chunk_start + chunk.len() as u64 {
                let len = (SCAN_CHUNK as u64).min(end - pos) as usize;
                chunk_start = self.read_chunk(&mut chunk, pos, len)?;
            }
            let at = (pos - chunk_start) as usize;
            let header = match RecordBatchHeader::parse(&chunk[at..]) {
                Ok(h) => h,
                Err(e) => return stopped(pos, next_offset, e),
            };
            let size = header.size();
            if pos + size as u64 > end {
                let available = (end - pos) as usize;
                let e = BatchError::Truncated {
                    needed: size,
                    available,
                };
                return stopped(pos, next_offset, e);
            }
            if at + size > chunk.len() {
                let len = size.max(SCAN_CHUNK).min((end - pos) as usize);
                chunk_start = self.read_chunk(&mut chunk, pos, len)?;
            }
            let at = (pos - chunk_start) as usize;
            let batch = &chunk[at..at + size];
            if validate {
                if let Err(e) = validate_batch(batch) {
                    return stopped(pos, next_offset, e);
                }
                if header.base_offset < self.base_offset
                    || next_offset.is_some_and(|n| header.base_offset < n)
                    || header.last_offset() - self.base_offset > u32::MAX as i64
                {
                    let e = BatchError::Inconsistent("offsets do not increase");
                    return stopped(pos, next_offset, e);
                }
            }
            f(pos, &header, batch)?;
            next_offset = Some(header.next_offset());
            pos += size as u64;
        }
        Ok(ScanEnd {
            valid_bytes: pos,
            next_offset,
            error: None,
        })
    }

    /// Fills `chunk` with the `len` bytes of the log at `pos`; returns `pos`.
    fn read_chunk(&self, chunk: &mut Vec<u8>, pos: u64, len: usize) -> Result<u64> {
        chunk.resize(len, 0);
        self.file.read_exact_at(chunk, pos).ctx(&self.log_path())?;
        Ok(pos)
    }

    /// Validates every batch, rebuilds the offset and time indexes, and truncates the file at
    /// the first invalid batch. Calls `f` for each valid batch. Returns the scan outcome.
    pub fn recover(
        &self,
        index_interval_bytes: u64,
        mut f: impl FnMut(&RecordBatchHeader, &[u8]) -> Result<()>,
    ) -> Result<ScanEnd> {
        let file_len = self.file.metadata().ctx(&self.log_path())?.len();
        let mut i = self.indexes.write();
        i.reset(self.base_offset);
        i.offset.make_writable()?;
        i.time.make_writable()?;
        let end = self.scan(0, file_len, true, |pos, h, batch| {
            i.index_batch(h, pos, index_interval_bytes)?;
            f(h, batch)
        })?;
        if end.valid_bytes != file_len {
            if let Some(e) = &end.error {
                tracing::warn!(segment = %self.log_path().display(), position = end.valid_bytes, error = %e,
                    "truncating invalid bytes at the end of the segment");
            }
            self.file.set_len(end.valid_bytes).ctx(&self.log_path())?;
        }
        self.size.store(end.valid_bytes, Ordering::Release);
        Ok(end)
    }

    /// Checks the loaded indexes against the log; false means they must be rebuilt.
    pub fn sanity_check(&self, next_offset: i64) -> bool {
        let i = self.indexes.read();
        !i.offset.was_untrimmed()
            && !i.time.was_untrimmed()
            && i.offset.sanity_check(self.size())
            && i.time.sanity_check(next_offset)
    }

    /// Next offset after the last batch, or the base offset if empty (reads from the last
    /// index entry on).
    pub fn next_offset(&self) -> Result<i64> {
        let end = self.size();
        let from = self
            .indexes
            .read()
            .offset
            .last_entry()
            .map_or(0, |e| e.1 as u64);
        let r = self.scan(from, end, false, |_, _, _| Ok(()))?;
        match r.error {
            Some(e) => Err(StorageError::Corrupt {
                path: self.log_path(),
                reason: format!("bad batch at position {}: {e}", r.valid_bytes),
            }),
            None => Ok(r.next_offset.unwrap_or(self.base_offset)),
        }
    }

    /// Removes the batch holding `offset` and everything after it. Returns bytes removed.
    pub fn truncate_to(&self, offset: i64) -> Result<u64> {
        let end = self.size();
        let Some((pos, _)) = self.translate_offset(offset, end)? else {
            // No batch to remove; still drop index entries that point past the data.
            let mut i = self.indexes.write();
            i.offset.truncate_to_position(end as u32);
            i.time.truncate_to_offset(offset);
            return Ok(0);
        };
        self.file.set_len(pos).ctx(&self.log_path())?;
        self.size.store(pos, Ordering::Release);
        {
            let mut i = self.indexes.write();
            i.offset.truncate_to_position(pos as u32);
            i.time.truncate_to_offset(offset);
            let (ts, off) = i.time.last_entry().unwrap_or((-1, self.base_offset));
            i.max_timestamp = ts;
            i.offset_of_max_timestamp = off;
            // Forces an index entry at the next append.
            i.bytes_since_last_entry = u64::MAX / 2;
            if pos == 0 {
                i.bytes_since_last_entry = 0;
            }
        }
        self.txn.lock().truncate_to(offset)?;
        if pos == 0 {
            self.first_append_ms.store(-1, Ordering::Relaxed);
        }
        Ok(end - pos)
    }

    /// Empties the segment: log file, indexes and transaction index (a fresh start at the
    /// same base offset).
    pub(crate) fn clear(&self) -> Result<()> {
        self.file.set_len(0).ctx(&self.log_path())?;
        self.size.store(0, Ordering::Release);
        {
            self.indexes.write().reset(self.base_offset);
        }
        self.txn.lock().reset()?;
        self.first_append_ms.store(-1, Ordering::Relaxed);
        Ok(())
    }

    /// Prepares the indexes for appends (the segment became the active one).
    pub fn make_active(&self) -> Result<()> {
        let mut i = self.indexes.write();
        i.offset.make_writable()?;
        i.time.make_writable()
    }

    /// The segment stops being active: final time index entry, trim index files and a
    /// preallocated log file.
    pub fn make_inactive(&self) -> Result<()> {
        let mut i = self.indexes.write();
        let (ts, off) = (i.max_timestamp, i.offset_of_max_timestamp);
        if ts >= 0 && !i.time.is_full() {
            i.time.maybe_append(ts, off)?;
        }
        i.offset.trim()?;
        i.time.trim()?;
        let size = self.size();
        let path = self.log_path();
        if self.file.metadata().ctx(&path)?.len() != size {
            self.file.set_len(size).ctx(&path)?;
        }
        Ok(())
    }

    /// fsyncs the log file and its indexes.
    pub fn flush(&self) -> Result<()> {
        crate::fault::sync_data(&self.file, &self.dir).ctx(&self.log_path())?;
        {
            let i = self.indexes.read();
            i.offset.flush()?;
            i.time.flush()?;
        }
        self.txn.lock().flush()
    }

    /// Renames every file to `<name>.deleted` and removes it. Open handles (readers) keep
    /// working until dropped.
    pub fn delete_files(&self) -> Result<()> {
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            let path = self.dir.join(file_name(self.base_offset, suffix));
            let deleted = self.dir.join(format!(
                "{}.{DELETED_SUFFIX}",
                file_name(self.base_offset, suffix)
            ));
            match crate::fault::rename(&path, &deleted) {
                Ok(()) => std::fs::remove_file(&deleted).ctx(&deleted)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx(&path),
            }
        }
        Ok(())
    }

    /// First offset whose timestamp is >= `timestamp`, searching from `start_offset`.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp: i64,
        start_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        let end = self.size();
        let from_offset = self
            .indexes
            .read()
            .time
            .lookup(timestamp)
            .1
            .max(start_offset);
        let Some((pos, _)) = self.translate_offset(from_offset, end)? else {
            return Ok(None);
        };
        let mut found = None;
        let r = self.scan(pos, end, false, |_, h, batch| {
            if found.is_some() || h.max_timestamp < timestamp {
                return Ok(());
            }
            // Uncompressed CreateTime batches give the exact record; otherwise the batch start.
            let mut hit = (h.max_timestamp, h.base_offset.max(start_offset));
            if h.compression() == Ok(Compression::None)
                && h.timestamp_type() == tern_protocol::record_batch::TimestampType::CreateTime
            {
                if let Some(recs) =
                    parse_records(&batch[RECORD_BATCH_OVERHEAD..], h.records_count as usize)
                {
                    if let Some(r) = recs.iter().find(|r| {
                        h.base_timestamp + r.timestamp_delta >= timestamp
                            && h.base_offset + r.offset_delta as i64 >= start_offset
                    }) {
                        hit = (
                            h.base_timestamp + r.timestamp_delta,
                            h.base_offset + r.offset_delta as i64,
                        );
                    }
                }
            }
            found = Some(hit);
            Ok(())
        })?;
        let _ = r;
        Ok(found)
    }
}

/// Reads whether a control batch commits (`Some((true, _))`) or aborts, and the coordinator
/// epoch it carries.
pub(crate) fn control_of(h: &RecordBatchHeader, batch: &[u8]) -> Option<(bool, i32)> {
    if h.is_control() {
        control_marker(batch)
    } else {
        None
    }
}
