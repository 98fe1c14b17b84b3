//! Snappy. The Java client (snappy-java's `SnappyOutputStream`) writes the xerial block framing:
//!
//! ```text
//! header: 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00, version i32 BE (1), compatible version i32 BE (1)
//! then blocks: length i32 BE, raw snappy block (each of at most 32 KiB uncompressed)
//! ```
//!
//! librdkafka's producer writes one raw snappy block with no framing (its message-set writer
//! calls `rd_kafka_snappy_compress_iov`); decoding accepts both, telling them apart by the
//! magic as snappy-java and kafka-python do. The version fields are ignored, as kafka-python
//! does (some writers get their byte order wrong). Encoding writes xerial framing.

use super::CompressionError;
use crate::record_batch::Compression;

const CODEC: Compression = Compression::Snappy;
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_VERSION: i32 = 1;
const XERIAL_COMPATIBLE_VERSION: i32 = 1;
/// snappy-java's default block size, used by Kafka's `SnappyOutputStream`.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

pub(super) fn decompress(input: &[u8], max_output: usize) -> Result<Vec<u8>, CompressionError> {
    if input.len() >= XERIAL_MAGIC.len() && input[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
        decompress_xerial(input, max_output)
    } else {
        let mut out = Vec::new();
        decompress_block(input, &mut out, max_output)?;
        Ok(out)
    }
}

fn decompress_xerial(input: &[u8], max_output: usize) -> Result<Vec<u8>, CompressionError> {
    if input.len() < XERIAL_HEADER_LEN {
        return Err(CompressionError::corrupt(CODEC, "truncated xerial header"));
    }
    let mut out = Vec::new();
    let mut rest = &input[XERIAL_HEADER_LEN..];
    while !rest.is_empty() {
        let Some((len_bytes, after)) = rest.split_first_chunk::<4>() else {
            return Err(CompressionError::corrupt(
                CODEC,
                "truncated xerial block length",
            ));
        };
        let len = i32::from_be_bytes(*len_bytes);
        let len = usize::try_from(len)
            .map_err(|_| CompressionError::corrupt(CODEC, "negative xerial block length"))?;
        if after.len() < len {
            return Err(CompressionError::corrupt(CODEC, "truncated xerial block"));
        }
        let (block, after) = after.split_at(len);
        decompress_block(block, &mut out, max_output)?;
        rest = after;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, keeping `out` within `max_output`.
fn decompress_block(
    block: &[u8],
    out: &mut Vec<u8>,
    max_output: usize,
) -> Result<(), CompressionError> {
    let corrupt = |e: snap::Error| CompressionError::corrupt(CODEC, e.to_string());
    let len = snap::raw::decompress_len(block).map_err(corrupt)?;
    let start = out.len();
    if len > max_output - start {
        return Err(CompressionError::OutputTooLarge {
            codec: CODEC,
            limit: max_output,
        });
    }
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(corrupt)?;
    if written != len {
        return Err(CompressionError::corrupt(
            CODEC,
            "snappy block shorter than its declared length",
        ));
    }
    Ok(())
}

pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + snap::raw::max_compress_len(input.len()));
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(XERIAL_BLOCK_SIZE) {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(chunk.len()), 0);
        let written =
            encoder
                .compress(chunk, &mut out[start..])
                .map_err(|e| CompressionError::Encode {
                    codec: CODEC,
                    detail: e.to_string(),
                })?;
        out.truncate(start + written);
        // A block is at most max_compress_len(32 KiB) bytes, far below i32::MAX.
        out[len_at..start].copy_from_slice(&(written as i32).to_be_bytes());
    }
    Ok(out)
}
