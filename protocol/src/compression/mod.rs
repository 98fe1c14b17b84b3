//! Kafka's compression codecs for the records section of a v2 record batch.
//!
//! Every decoder is bounded: it never produces more than `max_output` bytes, and returns an
//! error rather than panicking on corrupt input. Working memory besides the output is small
//! (a 32 KiB gzip window, one snappy or LZ4 block) except for zstd, where libzstd allocates the
//! window the frame declares, up to 128 MiB (the Java client at level 22 declares that much;
//! Kafka's own broker has the same cost). Encoders write what
//! the Java client writes: gzip members, snappy in xerial framing with 32 KiB blocks, LZ4
//! frames with independent 64 KiB blocks and no checksums, and plain zstd frames.

mod gzip;
mod lz4;
mod snappy;
mod zstd;

use std::io::Read;

use crate::record_batch::Compression;

/// Why data could not be compressed or decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// Decompressed data would exceed the caller's bound.
    #[error("{} output exceeds the limit of {limit} bytes", .codec.name())]
    OutputTooLarge {
        /// Codec being decoded.
        codec: Compression,
        /// The bound that was exceeded.
        limit: usize,
    },
    /// The input is not valid data for the codec.
    #[error("corrupt {} data: {detail}", .codec.name())]
    Corrupt {
        /// Codec being decoded.
        codec: Compression,
        /// What was wrong.
        detail: String,
    },
    /// A compression level outside the codec's range.
    #[error("invalid {} compression level {level}", .codec.name())]
    InvalidLevel {
        /// Codec being encoded.
        codec: Compression,
        /// The level asked for.
        level: i32,
    },
    /// The encoder failed (should not happen with in-memory buffers).
    #[error("{} compression failed: {detail}", .codec.name())]
    Encode {
        /// Codec being encoded.
        codec: Compression,
        /// The encoder's error.
        detail: String,
    },
}

impl CompressionError {
    pub(crate) fn corrupt(codec: Compression, detail: impl Into<String>) -> Self {
        CompressionError::Corrupt {
            codec,
            detail: detail.into(),
        }
    }
}

/// Decompresses `input` written with `codec`, failing if the output would exceed `max_output`.
///
/// `Compression::None` returns a copy of the input. Empty input is an error for every real
/// codec: each encoder writes at least a header even for empty data.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    max_output: usize,
) -> Result<Vec<u8>, CompressionError> {
    if codec != Compression::None && input.is_empty() {
        return Err(CompressionError::corrupt(codec, "empty input"));
    }
    match codec {
        Compression::None => {
            if input.len() > max_output {
                return Err(CompressionError::OutputTooLarge {
                    codec,
                    limit: max_output,
                });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => gzip::decompress(input, max_output),
        Compression::Snappy => snappy::decompress(input, max_output),
        Compression::Lz4 => lz4::decompress(input, max_output),
        Compression::Zstd => zstd::decompress(input, max_output),
    }
}

/// Compresses `input` with `codec` as the Java client would.
///
/// `level` is Kafka's `compression.<codec>.level`: gzip 1..=9 (default 6), zstd any level the
/// linked libzstd accepts (default 3), lz4 1..=17 (accepted for compatibility but ignored:
/// the encoder has one level). Snappy and `None` ignore it.
pub fn compress(
    codec: Compression,
    input: &[u8],
    level: Option<i32>,
) -> Result<Vec<u8>, CompressionError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => gzip::compress(input, level),
        Compression::Snappy => snappy::compress(input),
        Compression::Lz4 => {
            if let Some(level) = level {
                if !(1..=17).contains(&level) {
                    return Err(CompressionError::InvalidLevel { codec, level });
                }
            }
            lz4::compress(input)
        }
        Compression::Zstd => zstd::compress(input, level),
    }
}

/// Reads all of `reader` into a vector of at most `max_output` bytes.
fn read_bounded<R: Read>(
    codec: Compression,
    reader: R,
    max_output: usize,
) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let limit = (max_output as u64).saturating_add(1);
    match reader.take(limit).read_to_end(&mut out) {
        Ok(_) if out.len() > max_output => Err(CompressionError::OutputTooLarge {
            codec,
            limit: max_output,
        }),
        Ok(_) => Ok(out),
        Err(e) => Err(CompressionError::corrupt(codec, e.to_string())),
    }
}
