//! [`FileSlice`]: a byte range of a segment file that a fetch sends as it lies on disk, with
//! `sendfile` on a plain socket or in bounded chunks through TLS, so the bytes need not be read
//! into memory when the response is built.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

/// A range of a segment's `.log` file. It holds the file open, so a segment deleted or
/// replaced by the cleaner after the read still serves the bytes the read saw; a truncation of
/// the same file (a follower's, after the read) makes the range come up short instead.
#[derive(Clone)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl std::fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSlice")
            .field("position", &self.position)
            .field("len", &self.len)
            .finish()
    }
}

impl FileSlice {
    /// The `len` bytes of `file` from `position`.
    pub fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        Self {
            file,
            position,
            len,
        }
    }

    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte position of the range in its file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Reads up to `buf.len()` bytes starting `from` bytes into the range; fewer only at the
    /// range's end. A file that ends before the range does is an `UnexpectedEof` error.
    pub fn read_at(&self, from: usize, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(self.len.saturating_sub(from));
        let buf = &mut buf[..want];
        self.file
            .read_exact_at(buf, self.position + from as u64)
            .map(|()| want)
    }

    /// The range's bytes in memory (for callers that cannot send a file, and for tests).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        let mut buf = vec![0u8; self.len];
        self.read_at(0, &mut buf)?;
        Ok(Bytes::from(buf))
    }
}

impl AsFd for FileSlice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
