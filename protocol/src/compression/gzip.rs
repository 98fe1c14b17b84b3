//! gzip (RFC 1952) through flate2; concatenated members are read like Java's GZIPInputStream.

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use std::io::Write;

use super::{read_bounded, CompressionError};
use crate::record_batch::Compression;

const CODEC: Compression = Compression::Gzip;
/// Java's `Deflater.DEFAULT_COMPRESSION` maps to zlib level 6.
const DEFAULT_LEVEL: u32 = 6;

pub(super) fn decompress(input: &[u8], max_output: usize) -> Result<Vec<u8>, CompressionError> {
    read_bounded(CODEC, MultiGzDecoder::new(input), max_output)
}

pub(super) fn compress(input: &[u8], level: Option<i32>) -> Result<Vec<u8>, CompressionError> {
    let level = match level {
        None => DEFAULT_LEVEL,
        Some(l @ 1..=9) => l as u32,
        Some(level) => {
            return Err(CompressionError::InvalidLevel {
                codec: CODEC,
                level,
            })
        }
    };
    let encode_err = |e: std::io::Error| CompressionError::Encode {
        codec: CODEC,
        detail: e.to_string(),
    };
    let mut enc = GzEncoder::new(
        Vec::with_capacity(input.len() / 2 + 32),
        flate2::Compression::new(level),
    );
    enc.write_all(input).map_err(encode_err)?;
    enc.finish().map_err(encode_err)
}
