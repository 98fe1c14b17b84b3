//! Zstandard through the zstd crate, decoded as a stream so the output stays bounded.

use super::{read_bounded, CompressionError};
use crate::record_batch::Compression;

const CODEC: Compression = Compression::Zstd;
/// Kafka's default `compression.zstd.level`.
const DEFAULT_LEVEL: i32 = 3;
/// Largest window a frame may ask for (libzstd's default limit, 128 MiB). Level 22 streaming
/// frames from the Java client declare this window, so a lower limit would reject them.
const WINDOW_LOG_MAX: u32 = 27;

pub(super) fn decompress(input: &[u8], max_output: usize) -> Result<Vec<u8>, CompressionError> {
    let corrupt = |e: std::io::Error| CompressionError::corrupt(CODEC, e.to_string());
    let mut decoder = ::zstd::stream::read::Decoder::with_buffer(input).map_err(corrupt)?;
    decoder.window_log_max(WINDOW_LOG_MAX).map_err(corrupt)?;
    read_bounded(CODEC, decoder, max_output)
}

pub(super) fn compress(input: &[u8], level: Option<i32>) -> Result<Vec<u8>, CompressionError> {
    let level = level.unwrap_or(DEFAULT_LEVEL);
    if !::zstd::compression_level_range().contains(&level) {
        return Err(CompressionError::InvalidLevel {
            codec: CODEC,
            level,
        });
    }
    ::zstd::bulk::compress(input, level).map_err(|e| CompressionError::Encode {
        codec: CODEC,
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    /// Every level Kafka's `compression.zstd.level` accepts (-131072 to 22) the linked
    /// libzstd compresses at, so a topic config that validated never fails a produce.
    #[test]
    fn libzstd_takes_every_level_kafka_accepts() {
        assert_eq!(::zstd::compression_level_range(), -131_072..=22);
        for level in [-131_072, -1, 1, 22] {
            super::compress(b"some bytes", Some(level)).unwrap();
        }
    }
}
