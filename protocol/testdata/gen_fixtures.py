#!/usr/bin/env python3
"""Record-batch fixtures for tern-protocol, made and checked with kafka-python.

  gen     write kafka_python/<name>.bin (batches built by kafka-python's own
          DefaultRecordBatchBuilder and codecs) and <name>.expected (the records that
          were appended, in the line format below); Rust tests decode the .bin files.
  verify  decode tern_built/<name>.bin (written by our RecordBatchBuilder, see
          protocol/tests/fixtures.rs; regenerate with TERN_REGEN_FIXTURES=1) with
          kafka-python and compare every field with tern_built/<name>.expected.

Setup:  python3 -m venv /work/venv-codec
        /work/venv-codec/bin/pip install kafka-python lz4 python-snappy zstandard cramjam
Run:    /work/venv-codec/bin/python protocol/testdata/gen_fixtures.py gen|verify

.expected format (one item per line; bytes as "null", lowercase hex when at most 64 bytes
long, else "#<length>:<crc32c in 8 hex digits>"):
  header base_offset=.. partition_leader_epoch=.. attributes=.. last_offset_delta=..
         base_timestamp=.. max_timestamp=.. producer_id=.. producer_epoch=..
         base_sequence=.. records_count=..
  record offset=.. timestamp=.. key=<hex|null> value=<hex|null> headers=<k:v,k:v>
"""

import io
import gzip
import os
import struct
import sys

import lz4.frame
import snappy
import zstandard

import kafka
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

HERE = os.path.dirname(os.path.abspath(__file__))
KP_DIR = os.path.join(HERE, "kafka_python")
TERN_DIR = os.path.join(HERE, "tern_built")

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
HEADER_LEN = 61
BIG = b"tern-mirror keeps offsets " * 100  # compressible, so kafka-python keeps the codec


def standard_records():
    """(offset_delta, timestamp, key, value, headers): keys, null keys, null values, headers."""
    return [
        (0, 1700000000000, b"key-0", b"value-0 " + BIG,
         [("trace-id", b"abc123"), ("empty", b""), ("null", None)]),
        (1, 1700000000005, None, b"value with a null key", []),
        (2, 1699999999990, b"tombstone-key", None, []),  # earlier than the first: negative delta
        (3, 1700000001000, b"", b"", [("\u043a\u043b\u044e\u0447", b"\x00\x01\xff")]),
        (4, 1700000000500, b"k4", BIG, []),
        (5, 1700000000600, None, None, [("h", None)]),
    ]


def large_records():
    """More than 64 KiB uncompressed, so LZ4 and snappy write several blocks."""
    out = []
    for i in range(40):
        value = (("record %d " % i).encode() + BIG)[:4000] + bytes([i]) * 100
        out.append((i, 1700000000000 + i, ("key-%d" % i).encode(), value, []))
    return out


def build(codec, records, producer=None, base_offset=1000, leader_epoch=7):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    if producer is not None:
        b.set_producer_state(*producer)
    for offset, ts, key, value, headers in records:
        assert b.append(offset, ts, key, value, headers) is not None
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)  # outside the CRC
    struct.pack_into(">i", buf, 12, leader_epoch)
    return bytes(buf)


def recompress(batch, codec, compress):
    """Re-encodes the records of an uncompressed kafka-python batch with another encoder."""
    body = compress(batch[HEADER_LEN:])
    buf = bytearray(batch[:HEADER_LEN]) + body
    attrs = struct.unpack_from(">h", buf, 21)[0]
    assert attrs & 7 == NONE
    struct.pack_into(">h", buf, 21, attrs | codec)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def hexn(b):
    """null, lowercase hex up to 64 bytes, else #<length>:<crc32c as 8 hex digits>."""
    if b is None:
        return "null"
    if len(b) <= 64:
        return bytes(b).hex()
    return "#%d:%08x" % (len(b), calc_crc32c(bytes(b)))


def header_line(batch):
    return ("header base_offset=%d partition_leader_epoch=%d attributes=%d last_offset_delta=%d"
            " base_timestamp=%d max_timestamp=%d producer_id=%d producer_epoch=%d"
            " base_sequence=%d records_count=%d"
            % (struct.unpack_from(">q", batch, 0) + struct.unpack_from(">i", batch, 12)
               + struct.unpack_from(">hiqqqhii", batch, 21)))


def expected_text(batch, records, base_offset):
    """Expected records from what was appended (not from a decoder)."""
    lines = [header_line(batch)]
    attrs = struct.unpack_from(">h", batch, 21)[0]
    max_ts = struct.unpack_from(">q", batch, 35)[0]
    for offset, ts, key, value, headers in records:
        if attrs & 0x08:
            ts = max_ts
        hs = ",".join("%s:%s" % (k.encode("utf-8").hex(), hexn(v)) for k, v in headers)
        lines.append("record offset=%d timestamp=%d key=%s value=%s headers=%s"
                     % (base_offset + offset, ts, hexn(key), hexn(value), hs))
    return "\n".join(lines) + "\n"


def kafka_python_decode(batch):
    """Decodes with kafka-python; returns (header line, record lines) in the .expected format."""
    b = DefaultRecordBatch(bytearray(batch))
    assert b.validate_crc(), "kafka-python: CRC mismatch"
    assert len(batch) == b.size_in_bytes, "kafka-python: size mismatch"
    lines = [header_line(batch)]
    count = 0
    for r in b:
        count += 1
        hs = ",".join("%s:%s" % (k.encode("utf-8").hex(), hexn(v)) for k, v in r.headers)
        lines.append("record offset=%d timestamp=%d key=%s value=%s headers=%s"
                     % (r.offset, r.timestamp, hexn(r.key), hexn(r.value), hs))
    assert count == b.records_count, "kafka-python: record count mismatch"
    return "\n".join(lines) + "\n", b


def gen():
    os.makedirs(KP_DIR, exist_ok=True)
    std = standard_records()
    gaps = [(0, 1700000000000, b"a", b"1", []), (3, 1700000000001, b"b", b"2", []),
            (7, 1700000000002, b"c", None, [])]
    fixtures = {
        "none": (build(NONE, std), std, NONE),
        "gzip": (build(GZIP, std), std, GZIP),
        "snappy": (build(SNAPPY, std), std, SNAPPY),
        "lz4": (build(LZ4, std), std, LZ4),
        "zstd": (build(ZSTD, std, producer=(4242, 3, 17, False)), std, ZSTD),
        "gzip_transactional": (build(GZIP, std, producer=(77, 1, 0, True)), std, GZIP),
        "none_offset_gaps": (build(NONE, gaps), gaps, NONE),
        "snappy_large": (build(SNAPPY, large_records()), large_records(), SNAPPY),
        "lz4_large": (build(LZ4, large_records()), large_records(), LZ4),
        # Raw (unframed) snappy, as some non-Java producers write it.
        "snappy_raw": (recompress(build(NONE, std), SNAPPY, snappy.compress), std, SNAPPY),
        # LZ4 with content size, block and content checksums and linked blocks.
        "lz4_checksums_linked": (recompress(build(NONE, large_records()), LZ4, lambda d: lz4.frame.compress(
            d, block_linked=True, block_checksum=True, content_checksum=True, store_size=True)),
            large_records(), LZ4),
        # zstd as a streaming writer makes it: no content size, with a checksum, level 19.
        "zstd_stream": (recompress(build(NONE, std), ZSTD, lambda d: zstd_stream(d)), std, ZSTD),
        # Two gzip members back to back.
        "gzip_multimember": (recompress(build(NONE, std), GZIP, lambda d: gzip.compress(
            d[:100], mtime=0) + gzip.compress(d[100:], mtime=0)), std, GZIP),
    }
    for name, (batch, records, codec) in sorted(fixtures.items()):
        attrs = struct.unpack_from(">h", batch, 21)[0]
        assert attrs & 7 == codec, "%s: kafka-python fell back to codec %d" % (name, attrs & 7)
        expected = expected_text(batch, records, 1000)
        decoded, _ = kafka_python_decode(batch)
        assert decoded == expected, "%s: kafka-python does not read its own batch back" % name
        with open(os.path.join(KP_DIR, name + ".bin"), "wb") as f:
            f.write(batch)
        with open(os.path.join(KP_DIR, name + ".expected"), "w") as f:
            f.write(expected)
        print("wrote %-24s %6d bytes codec %d" % (name, len(batch), codec))


def zstd_stream(data):
    out = io.BytesIO()
    cctx = zstandard.ZstdCompressor(level=19, write_checksum=True, write_content_size=False)
    with cctx.stream_writer(out, closefd=False) as w:
        w.write(data)
    return out.getvalue()


def verify():
    names = sorted(n[:-4] for n in os.listdir(TERN_DIR) if n.endswith(".bin"))
    assert names, "no batches in " + TERN_DIR
    for name in names:
        with open(os.path.join(TERN_DIR, name + ".bin"), "rb") as f:
            batch = f.read()
        with open(os.path.join(TERN_DIR, name + ".expected")) as f:
            expected = f.read()
        decoded, b = kafka_python_decode(batch)
        if decoded != expected:
            print("MISMATCH %s\n--- kafka-python:\n%s--- expected:\n%s" % (name, decoded, expected))
            sys.exit(1)
        extra = ""
        if b.is_control_batch:
            r = next(iter(DefaultRecordBatch(bytearray(batch))))
            extra = " control type=%d version=%d" % (r.type, r.version)
        print("ok %-20s codec %d, %d records%s" % (name, b.compression_type, b.records_count, extra))
    print("kafka-python %s decoded all %d tern-built batches" % (kafka.__version__, len(names)))


if __name__ == "__main__":
    {"gen": gen, "verify": verify}[sys.argv[1] if len(sys.argv) > 1 else "gen"]()
