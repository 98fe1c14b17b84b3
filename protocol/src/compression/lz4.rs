//! LZ4 frame format (v1.6), as Kafka uses it from message format v1 on (correct header
//! checksum). The Java client writes one frame: FLG 0x60 (version 1, independent blocks, no
//! block or content checksum, no content size), BD 0x40 (64 KiB blocks). librdkafka and
//! python-lz4 may add a content size or checksums, which are verified.
//!
//! The frame layer is parsed here (not by `lz4_flex::frame`) so that a stream cut at a block
//! boundary is an error, as in Java's `Lz4BlockInputStream`, and so the output stays within
//! the caller's bound; blocks are decoded by `lz4_flex::block`.

use std::io::Write;

use lz4_flex::block::DecompressError;
use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};

use super::CompressionError;
use crate::record_batch::Compression;

const CODEC: Compression = Compression::Lz4;
const FRAME_MAGIC: u32 = 0x184D_2204;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;
const UNCOMPRESSED_BLOCK_BIT: u32 = 0x8000_0000;
/// How far back a linked block may reference earlier output.
const WINDOW_SIZE: usize = 64 * 1024;

const FLG_VERSION_MASK: u8 = 0xC0;
const FLG_VERSION_01: u8 = 0x40;
const FLG_BLOCK_INDEPENDENCE: u8 = 0x20;
const FLG_BLOCK_CHECKSUM: u8 = 0x10;
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_CONTENT_CHECKSUM: u8 = 0x04;
const FLG_RESERVED: u8 = 0x02;
const FLG_DICT_ID: u8 = 0x01;
const BD_RESERVED: u8 = 0x8F;

fn corrupt(detail: &str) -> CompressionError {
    CompressionError::corrupt(CODEC, detail)
}

fn too_large(max_output: usize) -> CompressionError {
    CompressionError::OutputTooLarge {
        codec: CODEC,
        limit: max_output,
    }
}

/// Splits `n` bytes off the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], CompressionError> {
    if rest.len() < n {
        return Err(corrupt(what));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn take_u32_le(rest: &mut &[u8], what: &str) -> Result<u32, CompressionError> {
    let b = take(rest, 4, what)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(super) fn decompress(input: &[u8], max_output: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let mut rest = input;
    let mut frames = 0usize;
    while !rest.is_empty() {
        let magic = take_u32_le(&mut rest, "truncated frame magic")?;
        if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
            let size = take_u32_le(&mut rest, "truncated skippable frame")? as usize;
            take(&mut rest, size, "truncated skippable frame")?;
            continue;
        }
        if magic != FRAME_MAGIC {
            return Err(corrupt("bad frame magic"));
        }
        decode_frame(&mut rest, &mut out, max_output)?;
        frames += 1;
    }
    if frames == 0 {
        return Err(corrupt("no lz4 frame"));
    }
    Ok(out)
}

/// Decodes one frame (after its magic) from `rest`, appending to `out`.
fn decode_frame(
    rest: &mut &[u8],
    out: &mut Vec<u8>,
    max_output: usize,
) -> Result<(), CompressionError> {
    let descriptor = *rest;
    let flg_bd = take(rest, 2, "truncated frame descriptor")?;
    let (flg, bd) = (flg_bd[0], flg_bd[1]);
    if flg & FLG_VERSION_MASK != FLG_VERSION_01 {
        return Err(corrupt("unsupported frame version"));
    }
    if flg & FLG_RESERVED != 0 || bd & BD_RESERVED != 0 {
        return Err(corrupt("reserved frame descriptor bits set"));
    }
    let block_max = match (bd >> 4) & 0x07 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => 4 * 1024 * 1024,
        _ => return Err(corrupt("invalid block maximum size")),
    };
    let content_size = if flg & FLG_CONTENT_SIZE != 0 {
        let b = take(rest, 8, "truncated frame descriptor")?;
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        Some(u64::from_le_bytes(le))
    } else {
        None
    };
    if flg & FLG_DICT_ID != 0 {
        return Err(corrupt("preset dictionaries are not supported"));
    }
    let descriptor_len = descriptor.len() - rest.len();
    let hc = take(rest, 1, "truncated frame descriptor")?[0];
    if hc != (xxh32(&descriptor[..descriptor_len], 0) >> 8) as u8 {
        return Err(corrupt("frame descriptor checksum mismatch"));
    }
    let frame_start = out.len();
    if let Some(size) = content_size {
        if size > (max_output - frame_start) as u64 {
            return Err(too_large(max_output));
        }
    }
    let independent = flg & FLG_BLOCK_INDEPENDENCE != 0;
    loop {
        let block_header = take_u32_le(rest, "missing end mark")?;
        if block_header == 0 {
            break;
        }
        let size = (block_header & !UNCOMPRESSED_BLOCK_BIT) as usize;
        if size > block_max {
            return Err(corrupt("block larger than the frame's maximum"));
        }
        let data = take(rest, size, "truncated block")?;
        if flg & FLG_BLOCK_CHECKSUM != 0 {
            let stored = take_u32_le(rest, "truncated block checksum")?;
            if stored != xxh32(data, 0) {
                return Err(corrupt("block checksum mismatch"));
            }
        }
        let pos = out.len();
        if block_header & UNCOMPRESSED_BLOCK_BIT != 0 {
            if size > max_output - pos {
                return Err(too_large(max_output));
            }
            out.extend_from_slice(data);
            continue;
        }
        let room = block_max.min(max_output - pos);
        out.resize(pos + room, 0);
        let (prev, dst) = out.split_at_mut(pos);
        let result = if independent {
            lz4_flex::block::decompress_into(data, dst)
        } else {
            let dict_start = pos.saturating_sub(WINDOW_SIZE).max(frame_start);
            lz4_flex::block::decompress_into_with_dict(data, dst, &prev[dict_start..])
        };
        match result {
            Ok(n) => out.truncate(pos + n),
            Err(DecompressError::OutputTooSmall { .. }) if room < block_max => {
                return Err(too_large(max_output))
            }
            Err(e) => return Err(CompressionError::corrupt(CODEC, e.to_string())),
        }
    }
    if flg & FLG_CONTENT_CHECKSUM != 0 {
        let stored = take_u32_le(rest, "truncated content checksum")?;
        if stored != xxh32(&out[frame_start..], 0) {
            return Err(corrupt("content checksum mismatch"));
        }
    }
    if let Some(size) = content_size {
        if (out.len() - frame_start) as u64 != size {
            return Err(corrupt("content size mismatch"));
        }
    }
    Ok(())
}

pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(BlockMode::Independent)
        .block_checksums(false)
        .content_checksum(false);
    let encode_err = |detail: String| CompressionError::Encode {
        codec: CODEC,
        detail,
    };
    let mut enc = FrameEncoder::with_frame_info(info, Vec::with_capacity(input.len() / 2 + 16));
    enc.write_all(input)
        .map_err(|e| encode_err(e.to_string()))?;
    enc.finish().map_err(|e| encode_err(e.to_string()))
}

const PRIME32_1: u32 = 0x9E37_79B1;
const PRIME32_2: u32 = 0x85EB_CA77;
const PRIME32_3: u32 = 0xC2B2_AE3D;
const PRIME32_4: u32 = 0x27D4_EB2F;
const PRIME32_5: u32 = 0x1656_67B1;

fn read_u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn xxh32_round(acc: u32, lane: u32) -> u32 {
    acc.wrapping_add(lane.wrapping_mul(PRIME32_2))
        .rotate_left(13)
        .wrapping_mul(PRIME32_1)
}

/// XXH32, the checksum of the LZ4 frame format.
pub(super) fn xxh32(data: &[u8], seed: u32) -> u32 {
    let mut rest = data;
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(PRIME32_1).wrapping_add(PRIME32_2),
            seed.wrapping_add(PRIME32_2),
            seed,
            seed.wrapping_sub(PRIME32_1),
        ];
        let mut stripes = data.chunks_exact(16);
        for stripe in &mut stripes {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = xxh32_round(*acc, read_u32_le(&stripe[i * 4..]));
            }
        }
        rest = stripes.remainder();
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(PRIME32_5)
    };
    h = h.wrapping_add(data.len() as u32);
    let mut words = rest.chunks_exact(4);
    for word in &mut words {
        h = h
            .wrapping_add(read_u32_le(word).wrapping_mul(PRIME32_3))
            .rotate_left(17)
            .wrapping_mul(PRIME32_4);
    }
    for &byte in words.remainder() {
        h = h
            .wrapping_add(u32::from(byte).wrapping_mul(PRIME32_5))
            .rotate_left(11)
            .wrapping_mul(PRIME32_1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(PRIME32_2);
    h ^= h >> 13;
    h = h.wrapping_mul(PRIME32_3);
    h ^= h >> 16;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh32_matches_reference_vectors() {
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xE229_3B2F
        );
    }

    #[test]
    fn writes_the_java_client_frame_header() {
        let frame = compress(b"hello hello hello hello").unwrap();
        // Magic, FLG 0x60, BD 0x40, HC 0x82: what Kafka's Lz4BlockOutputStream writes.
        assert_eq!(&frame[..7], &[0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82]);
        assert_eq!(&frame[frame.len() - 4..], &[0, 0, 0, 0]);
    }
}
