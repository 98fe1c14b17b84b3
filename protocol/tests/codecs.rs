//! Codec round trips, output bounds, corrupt input, and the byte formats the Java client
//! expects to read.

use proptest::prelude::*;
use tern_protocol::compression::{compress, decompress, CompressionError};
use tern_protocol::record_batch::Compression;

const ALL: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const REAL: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

fn too_large(r: Result<Vec<u8>, CompressionError>, limit: usize) -> bool {
    matches!(r, Err(CompressionError::OutputTooLarge { limit: l, .. }) if l == limit)
}

/// Random bytes, or compressible runs drawn from a small alphabet (so that matches,
/// long literals and multi-block streams all occur).
fn data() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..5_000),
        prop::collection::vec(any::<u8>(), 0..100_000),
        (prop::collection::vec(0u8..4, 0..3_000), 1usize..100)
            .prop_map(|(v, r)| v.iter().flat_map(|&b| std::iter::repeat_n(b, r)).collect()),
    ]
}

fn codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(ALL.to_vec())
}

fn real_codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(REAL.to_vec())
}

/// `PROPTEST_CASES` from the environment (for long fuzzing runs), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(96)))]

    #[test]
    fn round_trips(codec in codec(), input in data()) {
        let compressed = compress(codec, &input, None).unwrap();
        prop_assert_eq!(&decompress(codec, &compressed, input.len()).unwrap(), &input);
        if !input.is_empty() {
            prop_assert!(too_large(decompress(codec, &compressed, input.len() - 1), input.len() - 1));
        }
    }

    #[test]
    fn round_trips_at_levels(level in 1i32..=9, zlevel in -5i32..=19, input in data()) {
        let gz = compress(Compression::Gzip, &input, Some(level)).unwrap();
        prop_assert_eq!(&decompress(Compression::Gzip, &gz, usize::MAX).unwrap(), &input);
        let zs = compress(Compression::Zstd, &input, Some(zlevel)).unwrap();
        prop_assert_eq!(&decompress(Compression::Zstd, &zs, usize::MAX).unwrap(), &input);
        let lz = compress(Compression::Lz4, &input, Some(level)).unwrap();
        prop_assert_eq!(&decompress(Compression::Lz4, &lz, usize::MAX).unwrap(), &input);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic(codec in codec(), input in prop::collection::vec(any::<u8>(), 0..2_000)) {
        let _ = decompress(codec, &input, 1 << 20);
    }

    #[test]
    fn garbage_after_a_valid_prefix_is_not_a_panic(
        codec in real_codec(),
        garbage in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        // Valid headers followed by garbage reach deeper into each decoder than pure noise.
        let mut input = compress(codec, b"", None).unwrap();
        let keep = input.len().min(match codec {
            Compression::Lz4 => 7,
            Compression::Snappy => 16,
            _ => input.len() / 2,
        });
        input.truncate(keep);
        input.extend_from_slice(&garbage);
        let _ = decompress(codec, &input, 1 << 20);
    }

    #[test]
    fn flipped_bytes_are_an_error_or_a_bounded_output(
        codec in real_codec(),
        input in data(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let mut compressed = compress(codec, &input, None).unwrap();
        for (at, x) in flips {
            let i = at.index(compressed.len());
            compressed[i] ^= x;
        }
        let limit = input.len() + 100;
        if let Ok(out) = decompress(codec, &compressed, limit) {
            prop_assert!(out.len() <= limit);
        }
    }

    #[test]
    fn truncated_streams_are_errors(codec in real_codec(), input in data(), cut in any::<prop::sample::Index>()) {
        let compressed = compress(codec, &input, None).unwrap();
        let cut = cut.index(compressed.len());
        let r = decompress(codec, &compressed[..cut], usize::MAX);
        if codec == Compression::Snappy {
            // A xerial stream cut at a block boundary is a valid shorter stream.
            prop_assert!(r.map_or(true, |out| out.len() < input.len()));
        } else {
            prop_assert!(r.is_err(), "{:?} prefix of {} of {} bytes decoded", codec, cut, compressed.len());
        }
    }
}

#[test]
fn empty_input_round_trips_and_empty_stream_is_an_error() {
    for codec in ALL {
        let c = compress(codec, b"", None).unwrap();
        assert_eq!(decompress(codec, &c, 0).unwrap(), b"", "{codec:?}");
    }
    for codec in REAL {
        assert!(decompress(codec, b"", 100).is_err(), "{codec:?}");
    }
    assert_eq!(decompress(Compression::None, b"", 0).unwrap(), b"");
}

#[test]
fn decompression_bombs_stop_at_the_bound() {
    let zeros = vec![0u8; 32 << 20];
    for codec in REAL {
        let bomb = compress(codec, &zeros, None).unwrap();
        assert!(bomb.len() < 2 << 20, "{codec:?} {}", bomb.len());
        assert!(
            too_large(decompress(codec, &bomb, 1 << 20), 1 << 20),
            "{codec:?}"
        );
        assert!(too_large(decompress(codec, &bomb, 0), 0), "{codec:?}");
    }
    assert!(too_large(decompress(Compression::None, &zeros, 100), 100));
}

#[test]
fn declared_sizes_are_checked_before_allocating() {
    // Raw snappy claiming 4 GiB - 1 of output in a 5-byte varint.
    let raw = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    assert!(too_large(
        decompress(Compression::Snappy, &raw, 1 << 20),
        1 << 20
    ));
    // The same block inside xerial framing.
    let mut xerial = compress(Compression::Snappy, b"", None).unwrap();
    xerial.extend_from_slice(&(raw.len() as i32).to_be_bytes());
    xerial.extend_from_slice(&raw);
    assert!(too_large(
        decompress(Compression::Snappy, &xerial, 1 << 20),
        1 << 20
    ));
    // An LZ4 frame declaring a 2^60-byte content size.
    let mut lz4 = vec![0x04, 0x22, 0x4D, 0x18, 0x68, 0x40];
    lz4.extend_from_slice(&(1u64 << 60).to_le_bytes());
    lz4.push(xxh32_hc(&lz4[4..]));
    lz4.extend_from_slice(&[0, 0, 0, 0]);
    assert!(too_large(
        decompress(Compression::Lz4, &lz4, 1 << 20),
        1 << 20
    ));
}

/// The LZ4 header checksum byte for a frame descriptor, found by trying all 256 values
/// against the decoder (so the test does not reuse the codec's own xxhash).
fn xxh32_hc(descriptor: &[u8]) -> u8 {
    for hc in 0..=255u8 {
        let mut frame = vec![0x04, 0x22, 0x4D, 0x18];
        frame.extend_from_slice(descriptor);
        frame.push(hc);
        frame.extend_from_slice(&[0, 0, 0, 0]);
        match decompress(Compression::Lz4, &frame, usize::MAX) {
            Err(CompressionError::Corrupt { detail, .. })
                if detail.contains("descriptor checksum") => {}
            _ => return hc,
        }
    }
    panic!("no header checksum matched")
}

#[test]
fn snappy_writes_xerial_framing_with_32k_blocks() {
    let input: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let c = compress(Compression::Snappy, &input, None).unwrap();
    assert_eq!(&c[..8], &XERIAL_MAGIC);
    assert_eq!(&c[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
    let mut rest = &c[16..];
    let mut sizes = Vec::new();
    while !rest.is_empty() {
        let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let block = &rest[4..4 + len];
        sizes.push(snap::raw::decompress_len(block).unwrap());
        rest = &rest[4 + len..];
    }
    assert_eq!(sizes, [32768, 32768, 32768, 100_000 - 3 * 32768]);
    assert_eq!(
        compress(Compression::Snappy, b"", None).unwrap(),
        [&XERIAL_MAGIC[..], &[0, 0, 0, 1, 0, 0, 0, 1]].concat()
    );
}

#[test]
fn snappy_reads_raw_blocks_and_odd_xerial_versions() {
    let input = b"raw snappy raw snappy raw snappy, as some producers write it".repeat(20);
    let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
    assert_eq!(
        decompress(Compression::Snappy, &raw, usize::MAX).unwrap(),
        input
    );
    // Little-endian version fields (some writers), ignored like kafka-python does.
    let mut c = compress(Compression::Snappy, &input, None).unwrap();
    c[8..16].copy_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(
        decompress(Compression::Snappy, &c, usize::MAX).unwrap(),
        input
    );
    // A negative block length and a short header are errors.
    let mut bad = c[..16].to_vec();
    bad.extend_from_slice(&(-1i32).to_be_bytes());
    assert!(decompress(Compression::Snappy, &bad, usize::MAX).is_err());
    assert!(decompress(Compression::Snappy, &c[..12], usize::MAX).is_err());
}

#[test]
fn lz4_writes_what_kafka_java_writes() {
    let input: Vec<u8> = (0..200_000u32).map(|i| (i / 7 % 13) as u8).collect();
    let c = compress(Compression::Lz4, &input, None).unwrap();
    // Magic, FLG 0x60 (v1, independent blocks, no checksums, no size), BD 0x40 (64 KiB), HC.
    assert_eq!(&c[..7], &[0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82]);
    let mut rest = &c[7..];
    let mut blocks = 0;
    loop {
        let h = u32::from_le_bytes(rest[..4].try_into().unwrap());
        rest = &rest[4..];
        if h == 0 {
            break;
        }
        let len = (h & 0x7fff_ffff) as usize;
        assert!(len <= 64 * 1024);
        rest = &rest[len..];
        blocks += 1;
    }
    assert_eq!(blocks, 4, "200 000 bytes in 64 KiB blocks");
    assert!(rest.is_empty(), "no content checksum after the end mark");
}

#[test]
fn lz4_frame_rules() {
    let input = b"lz4 frame rules ".repeat(1000);
    let c = compress(Compression::Lz4, &input, None).unwrap();
    // Two frames back to back decode to both contents (lz4 CLI semantics).
    let two = [c.clone(), c.clone()].concat();
    assert_eq!(
        decompress(Compression::Lz4, &two, usize::MAX).unwrap(),
        [input.clone(), input.clone()].concat()
    );
    // A skippable frame is ignored.
    let mut skip = vec![0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9];
    skip.extend_from_slice(&c);
    assert_eq!(
        decompress(Compression::Lz4, &skip, usize::MAX).unwrap(),
        input
    );
    // Trailing garbage, a missing end mark, a wrong header checksum are errors.
    let mut trailing = c.clone();
    trailing.push(1);
    assert!(decompress(Compression::Lz4, &trailing, usize::MAX).is_err());
    assert!(decompress(Compression::Lz4, &c[..c.len() - 4], usize::MAX).is_err());
    let mut bad_hc = c.clone();
    bad_hc[6] ^= 1;
    assert!(decompress(Compression::Lz4, &bad_hc, usize::MAX).is_err());
    // Only the block mode differs: FLG 0x40 (linked blocks) with independent data still decodes.
    let mut linked = c.clone();
    linked[4] = 0x40;
    linked[6] = xxh32_hc(&[0x40, 0x40]);
    assert_eq!(
        decompress(Compression::Lz4, &linked, usize::MAX).unwrap(),
        input
    );
}

#[test]
fn concatenated_gzip_members_and_zstd_frames() {
    let a = b"first part ".repeat(50);
    let b = b"second part ".repeat(50);
    for codec in [Compression::Gzip, Compression::Zstd] {
        let two = [
            compress(codec, &a, None).unwrap(),
            compress(codec, &b, None).unwrap(),
        ]
        .concat();
        assert_eq!(
            decompress(codec, &two, usize::MAX).unwrap(),
            [a.clone(), b.clone()].concat(),
            "{codec:?}"
        );
        let mut trailing = compress(codec, &a, None).unwrap();
        trailing.extend_from_slice(b"junk");
        assert!(
            decompress(codec, &trailing, usize::MAX).is_err(),
            "{codec:?}"
        );
    }
    assert_eq!(
        &compress(Compression::Gzip, b"x", None).unwrap()[..2],
        &[0x1f, 0x8b]
    );
}

#[test]
fn levels_are_checked() {
    let bad = |codec, level| {
        matches!(
            compress(codec, b"x", Some(level)),
            Err(CompressionError::InvalidLevel { .. })
        )
    };
    assert!(bad(Compression::Gzip, 0));
    assert!(bad(Compression::Gzip, 10));
    assert!(bad(Compression::Lz4, 0));
    assert!(bad(Compression::Lz4, 18));
    assert!(bad(Compression::Zstd, 23));
    assert!(compress(Compression::Zstd, b"x", Some(22)).is_ok());
    assert!(compress(Compression::Snappy, b"x", Some(99)).is_ok());
}
