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
    let mut body = BytesMut::zeroed(size as usize);
    match reader.read_exact(&mut body).await {
        Ok(_) => Ok(Some(body.freeze())),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(FrameError::Truncated),
        Err(e) => Err(e.into()),
    }
}

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
