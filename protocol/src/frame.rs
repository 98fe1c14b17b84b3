//! Length-prefixed Kafka frames: a big-endian i32 size, then that many bytes.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer declared a frame larger than `socket.request.max.bytes` (or a negative size).
    #[error("frame size {size} outside 0..={max}")]
    InvalidSize {
        /// Declared size.
        size: i32,
        /// Configured bound.
        max: usize,
    },
    /// The connection closed in the middle of a frame.
    #[error("connection closed mid-frame")]
    Truncated,
    /// Any other I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one frame. `Ok(None)` is a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_size: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut size_buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = reader.read(&mut size_buf[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        got += n;
    }
    let size = i32::from_be_bytes(size_buf);
    if size < 0 || size as usize > max_size {
        return Err(FrameError::InvalidSize {
            size,
            max: max_size,
        });
    }
    let mut body = BytesMut::new();
    read_body(reader, size as usize, &mut body).await?;
    Ok(Some(body.freeze()))
}

/// Reads `size` bytes into `body`. Memory is reserved as the bytes arrive, not as declared: a
/// peer that announces a frame of socket.request.max.bytes and sends a few bytes of it holds a
/// few bytes, not 100 MB.
async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    size: usize,
    body: &mut BytesMut,
) -> Result<(), FrameError> {
    body.reserve(size.min(FIRST_RESERVE));
    while body.len() < size {
        if body.len() == body.capacity() {
            body.reserve(body.len().min(size - body.len()));
        }
        let room = (size - body.len()).min(body.capacity() - body.len());
        let n = (&mut *reader).take(room as u64).read_buf(body).await?;
        if n == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(())
}

/// The memory first reserved for a frame body; it then doubles as the bytes arrive.
const FIRST_RESERVE: usize = 64 * 1024;

/// Writes one frame whose body is given in parts (header, then payload), with one size prefix.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let size: usize = parts.iter().map(|p| p.len()).sum();
    let size = i32::try_from(size)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too large"))?;
    writer.write_all(&size.to_be_bytes()).await?;
    for part in parts {
        writer.write_all(part).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_frames_and_clean_eof() {
        let mut data = Vec::new();
        data.extend_from_slice(&3i32.to_be_bytes());
        data.extend_from_slice(b"abc");
        let mut r = &data[..];
        assert_eq!(read_frame(&mut r, 10).await.unwrap().unwrap(), &b"abc"[..]);
        assert!(read_frame(&mut r, 10).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn reads_a_large_frame_arriving_in_pieces() {
        let body: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let (mut client, mut server) = tokio::io::duplex(4096);
        let sent = body.clone();
        let writer = tokio::spawn(async move {
            write_frame(&mut client, &[&sent[..10], &sent[10..]])
                .await
                .unwrap();
        });
        let got = read_frame(&mut server, 2_000_000).await.unwrap().unwrap();
        writer.await.unwrap();
        assert_eq!(got.len(), body.len());
        assert!(got[..] == body[..]);
    }

    #[tokio::test]
    async fn a_declared_size_reserves_only_what_arrived() {
        let sent = [7u8; 1000];
        let mut body = BytesMut::new();
        assert!(matches!(
            read_body(&mut &sent[..], 100_000_000, &mut body).await,
            Err(FrameError::Truncated)
        ));
        assert_eq!(body.len(), 1000);
        assert!(body.capacity() < 1 << 20, "reserved {}", body.capacity());
    }

    #[tokio::test]
    async fn rejects_oversized_negative_and_truncated_frames() {
        let big = 11i32.to_be_bytes();
        assert!(matches!(
            read_frame(&mut &big[..], 10).await,
            Err(FrameError::InvalidSize { size: 11, .. })
        ));
        let neg = (-1i32).to_be_bytes();
        assert!(matches!(
            read_frame(&mut &neg[..], 10).await,
            Err(FrameError::InvalidSize { .. })
        ));
        let mut partial = 5i32.to_be_bytes().to_vec();
        partial.extend_from_slice(b"ab");
        assert!(matches!(
            read_frame(&mut &partial[..], 10).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read_frame(&mut &[0u8, 0][..], 10).await,
            Err(FrameError::Truncated)
        ));
    }
}
