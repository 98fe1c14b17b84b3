//! Writing response frames. A frame is encoded bytes, and for Fetch also ranges of log files
//! spliced in between them. On a plain TCP socket the ranges go out with `sendfile`, so record
//! bytes never enter user space (Kafka's zero-copy fetch); through TLS they are read in bounded
//! chunks and encrypted, one copy each, so a connection holds at most one chunk whatever
//! `fetch.max.bytes` its client asks for.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use bytes::{Bytes, BytesMut};
use tern_protocol::fetch_response::SplicedBody;
use tern_storage::FileSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use crate::blocking::disk_io;

/// The bytes of a file range a TLS connection reads and encrypts at a time.
const COPY_CHUNK: usize = 64 * 1024;

/// One response frame body: bytes, with file ranges to send at given offsets of them.
pub(crate) struct ResponseFrame {
    body: Bytes,
    /// (offset in `body`, range), offsets ascending.
    splices: Vec<(usize, FileSlice)>,
}

impl ResponseFrame {
    /// A frame of encoded bytes only.
    pub(crate) fn bytes(body: BytesMut) -> Self {
        Self {
            body: body.freeze(),
            splices: Vec::new(),
        }
    }

    /// A frame whose holes are filled with `slices`, in order.
    pub(crate) fn spliced(body: SplicedBody, slices: Vec<FileSlice>) -> Self {
        Self {
            body: body.bytes.freeze(),
            splices: body.holes.into_iter().zip(slices).collect(),
        }
    }

    /// Bytes of the frame body, file ranges included.
    fn len(&self) -> usize {
        self.body.len() + self.splices.iter().map(|(_, s)| s.len()).sum::<usize>()
    }

    /// The body in order: bytes, then a range, then bytes, ...; the last part is bytes.
    fn parts(&self) -> impl Iterator<Item = (Bytes, Option<&FileSlice>)> {
        let mut at = 0;
        let mut splices = self.splices.iter();
        std::iter::from_fn(move || {
            if at > self.body.len() {
                return None;
            }
            match splices.next() {
                Some((hole, slice)) => {
                    let part = self.body.slice(at..*hole);
                    at = *hole;
                    Some((part, Some(slice)))
                }
                None => {
                    let part = self.body.slice(at..);
                    at = self.body.len() + 1;
                    Some((part, None))
                }
            }
        })
    }
}

/// The write side of a connection.
pub(crate) enum ResponseWriter {
    /// A plain TCP socket: file ranges are sent with `sendfile`.
    Plain(BufWriter<OwnedWriteHalf>),
    /// Any other stream (TLS): file ranges are copied through a buffer of [`COPY_CHUNK`].
    Copying {
        out: BufWriter<Box<dyn AsyncWrite + Send + Unpin>>,
        /// Allocated on the first file range.
        scratch: Vec<u8>,
    },
}

impl ResponseWriter {
    /// The writer of a plain TCP connection.
    pub(crate) fn plain(half: OwnedWriteHalf) -> Self {
        Self::Plain(BufWriter::new(half))
    }

    /// The writer of a stream that cannot take `sendfile` (TLS).
    pub(crate) fn copying(out: impl AsyncWrite + Send + Unpin + 'static) -> Self {
        Self::Copying {
            out: BufWriter::new(Box::new(out)),
            scratch: Vec::new(),
        }
    }

    /// Writes one frame (size prefix, then body) and flushes it.
    pub(crate) async fn write(&mut self, frame: &ResponseFrame) -> io::Result<()> {
        let size = i32::try_from(frame.len())
            .map_err(|_| io::Error::other("response frame larger than 2 GiB"))?
            .to_be_bytes();
        match self {
            Self::Plain(out) if frame.splices.is_empty() => {
                out.write_all(&size).await?;
                out.write_all(&frame.body).await?;
                out.flush().await
            }
            Self::Plain(out) => {
                out.flush().await?;
                let tcp: &TcpStream = out.get_ref().as_ref();
                for (i, (bytes, slice)) in frame.parts().enumerate() {
                    let last = slice.is_none();
                    if i == 0 {
                        let mut first = BytesMut::with_capacity(4 + bytes.len());
                        first.extend_from_slice(&size);
                        first.extend_from_slice(&bytes);
                        send_all(tcp, &first, !last).await?;
                    } else if !bytes.is_empty() {
                        send_all(tcp, &bytes, !last).await?;
                    }
                    if let Some(slice) = slice {
                        sendfile_all(tcp, slice).await?;
                    }
                }
                Ok(())
            }
            Self::Copying { out, scratch } => {
                out.write_all(&size).await?;
                for (bytes, slice) in frame.parts() {
                    out.write_all(&bytes).await?;
                    if let Some(slice) = slice {
                        copy_slice(out, scratch, slice).await?;
                    }
                }
                out.flush().await
            }
        }
    }
}

/// Reads `slice` a chunk at a time (off the async workers) and writes each chunk.
async fn copy_slice(
    out: &mut BufWriter<Box<dyn AsyncWrite + Send + Unpin>>,
    scratch: &mut Vec<u8>,
    slice: &FileSlice,
) -> io::Result<()> {
    if scratch.is_empty() {
        scratch.resize(COPY_CHUNK, 0);
    }
    let mut from = 0;
    while from < slice.len() {
        let n = disk_io(|| slice.read_at(from, scratch))?;
        out.write_all(&scratch[..n]).await?;
        from += n;
    }
    Ok(())
}

/// Sends all of `buf`; with `more`, tells the kernel more of the frame follows at once
/// (MSG_MORE) so a small header and the file range after it share packets.
async fn send_all(tcp: &TcpStream, buf: &[u8], more: bool) -> io::Result<()> {
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    let mut done = 0;
    while done < buf.len() {
        tcp.writable().await?;
        let rest = &buf[done..];
        match tcp.try_io(Interest::WRITABLE, || send(tcp, rest, flags)) {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends the file range with `sendfile`. A file that ends before the range (truncated since
/// the read) fails the write, and the connection closes, as in Kafka: the frame's size is
/// already on the wire. A chunk whose first and last pages are in the page cache is sent on
/// this worker; one that would make the kernel read the disk is sent off the async workers
/// (`disk_io`), so a cold read does not stall the other connections of this worker.
async fn sendfile_all(tcp: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let mut offset = slice.position() as i64;
    let end = offset + slice.len() as i64;
    while offset < end {
        tcp.writable().await?;
        let want = ((end - offset) as usize).min(SENDFILE_CHUNK);
        let cached = page_cached(slice, offset) && page_cached(slice, offset + want as i64 - 1);
        match tcp.try_io(Interest::WRITABLE, || {
            if cached {
                sendfile(tcp, slice, &mut offset, want)
            } else {
                disk_io(|| sendfile(tcp, slice, &mut offset, want))
            }
        }) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "log file truncated while its range was being sent",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The most one `sendfile` call is asked to send, so that the page-cache probe before it
/// speaks for the whole range the call reads.
const SENDFILE_CHUNK: usize = 256 * 1024;

/// Whether the byte at `offset` of the slice's file is in the page cache: a one-byte
/// `preadv2` with RWF_NOWAIT, which fails with EAGAIN rather than read the disk. A file system
/// that cannot answer counts as not cached.
#[allow(unsafe_code)]
fn page_cached(slice: &FileSlice, offset: i64) -> bool {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast::<libc::c_void>(),
        iov_len: 1,
    };
    // SAFETY: the fd is held open by `slice`; `iov` describes one writable byte that lives for
    // the call.
    let n = unsafe { libc::preadv2(slice.as_fd().as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
    n == 1
}

/// One `send(2)` on the socket.
#[allow(unsafe_code)]
fn send(tcp: &TcpStream, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the fd is the live socket borrowed from `tcp`; the pointer and length describe
    // `buf`, which send only reads.
    let n = unsafe {
        libc::send(
            tcp.as_raw_fd(),
            buf.as_ptr().cast::<libc::c_void>(),
            buf.len(),
            flags,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One `sendfile(2)` from the slice's file at `*offset`, which it advances.
#[allow(unsafe_code)]
fn sendfile(
    tcp: &TcpStream,
    slice: &FileSlice,
    offset: &mut i64,
    count: usize,
) -> io::Result<usize> {
    // Linux transfers at most this much per call.
    let count = count.min(0x7fff_f000);
    let mut off: libc::off_t = *offset;
    // SAFETY: both fds are live for the call (the socket borrowed from `tcp`, the file held
    // open by `slice`), and `off` is a valid off_t that sendfile updates in place.
    let n = unsafe { libc::sendfile(tcp.as_raw_fd(), slice.as_fd().as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off;
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    /// A frame `head | file[2..7] | mid | file[10..20] | tail` over a file of 0, 1, 2, ...
    fn frame() -> (ResponseFrame, Vec<u8>) {
        let mut f = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..32).collect();
        f.write_all(&content).unwrap();
        let file = Arc::new(f);
        let body = b"head-mid-tail";
        let spliced = SplicedBody {
            bytes: BytesMut::from(&body[..]),
            holes: vec![5, 9],
        };
        let slices = vec![
            FileSlice::new(file.clone(), 2, 5),
            FileSlice::new(file, 10, 10),
        ];
        let mut expected = b"head-".to_vec();
        expected.extend_from_slice(&content[2..7]);
        expected.extend_from_slice(b"mid-");
        expected.extend_from_slice(&content[10..20]);
        expected.extend_from_slice(b"tail");
        let mut framed = (expected.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(&expected);
        (ResponseFrame::spliced(spliced, slices), framed)
    }

    #[test]
    fn parts_alternate_bytes_and_ranges_and_end_with_bytes() {
        let f = ResponseFrame::bytes(BytesMut::from(&b"abc"[..]));
        let parts: Vec<_> = f.parts().map(|(b, s)| (b, s.is_some())).collect();
        assert_eq!(parts, vec![(Bytes::from_static(b"abc"), false)]);
        let (f, framed) = frame();
        assert_eq!(f.len(), framed.len() - 4);
        let parts: Vec<_> = f.parts().map(|(b, s)| (b, s.map(FileSlice::len))).collect();
        assert_eq!(
            parts,
            vec![
                (Bytes::from_static(b"head-"), Some(5)),
                (Bytes::from_static(b"mid-"), Some(10)),
                (Bytes::from_static(b"tail"), None),
            ]
        );
    }

    #[tokio::test]
    async fn sendfile_and_copying_writers_send_the_same_bytes() {
        let (f, framed) = frame();
        // Plain TCP: sendfile.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_r, w) = server.into_split();
        let mut writer = ResponseWriter::plain(w);
        writer.write(&f).await.unwrap();
        writer.write(&f).await.unwrap();
        drop(writer);
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, [framed.clone(), framed.clone()].concat());
        // Any other stream: copies.
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut writer = ResponseWriter::copying(a);
        writer.write(&f).await.unwrap();
        drop(writer);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, framed);
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_range_fails_the_write() {
        let file = Arc::new(tempfile::tempfile().unwrap());
        let slice = FileSlice::new(file, 0, 100);
        let f = ResponseFrame::spliced(
            SplicedBody {
                bytes: BytesMut::from(&b"ab"[..]),
                holes: vec![1],
            },
            vec![slice],
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_r, w) = server.into_split();
        let err = ResponseWriter::plain(w).write(&f).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let (a, _b) = tokio::io::duplex(1 << 16);
        let err = ResponseWriter::copying(a).write(&f).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    #[allow(unsafe_code)]
    fn the_page_cache_probe_tells_cached_pages_from_evicted_ones() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let mut f = std::fs::File::create(dir.path().join("probe")).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let file = Arc::new(std::fs::File::open(dir.path().join("probe")).unwrap());
        let slice = FileSlice::new(file.clone(), 0, 1 << 20);
        if !page_cached(&slice, 0) {
            // This file system cannot answer RWF_NOWAIT reads; the probe says "not cached",
            // which sends through disk_io, the safe side.
            eprintln!("skipped: the file system of the temp dir does not take RWF_NOWAIT");
            return;
        }
        assert!(page_cached(&slice, (1 << 20) - 1));
        // DONTNEED drops clean (synced) pages, but the kernel skips pages still queued on
        // another CPU's LRU list, which a busy machine leaves there for a moment: ask again.
        let mut evicted = false;
        for _ in 0..50 {
            // SAFETY: a live fd; the call only advises the kernel about its pages.
            let rc =
                unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(rc, 0);
            if !page_cached(&slice, 512 * 1024) {
                evicted = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(evicted, "an evicted page is not cached");
    }
}
