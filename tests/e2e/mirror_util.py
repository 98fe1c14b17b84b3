"""Helpers for test_mirror_kafka.py.

RawKafka: a raw-socket Kafka client (a kafka_wire.Connection) that speaks just enough of the
protocol (Fetch v4, ListOffsets v1, both non-flexible and served by every broker from Kafka 1.0 to
4.x and by Tern) to read a partition's record batches as the broker stores them, so that the bytes
of a source partition and of its mirror can be compared batch by batch.  Kafka before 4.0 refuses zstd
batches to Fetch below v10 (UNSUPPORTED_COMPRESSION_TYPE); the client then uses Fetch v10.

Record batch (magic 2) layout, as walked here:

    0  baseOffset int64       8  batchLength int32     12 partitionLeaderEpoch int32
    16 magic int8             17 crc uint32            21 attributes int16
    23 lastOffsetDelta int32  27 firstTimestamp int64  35 maxTimestamp int64
    43 producerId int64       51 producerEpoch int16   53 baseSequence int32
    57 recordCount int32      61 records...

`mirrors(...)` runs `tern mirrors` and returns the finished process.
"""

import json
import os
import struct
import subprocess
import time
from dataclasses import dataclass

import tern_process
from kafka_wire import Connection, Reader
from kafka_wire import string as _str

EARLIEST = -2
LATEST = -1
UNSUPPORTED_COMPRESSION_TYPE = 76


class KafkaProtocolError(Exception):
    def __init__(self, what, code):
        super().__init__(f"{what}: error code {code}")
        self.code = code


@dataclass
class Batch:
    base_offset: int
    data: bytes

    @property
    def last_offset(self):
        return self.base_offset + struct.unpack_from(">i", self.data, 23)[0]

    @property
    def leader_epoch(self):
        return struct.unpack_from(">i", self.data, 12)[0]

    @property
    def attributes(self):
        return struct.unpack_from(">h", self.data, 21)[0]

    @property
    def is_control(self):
        return bool(self.attributes & 0x20)

    @property
    def is_transactional(self):
        return bool(self.attributes & 0x10)

    @property
    def codec(self):
        return self.attributes & 0x07

    @property
    def producer_id(self):
        return struct.unpack_from(">q", self.data, 43)[0]

    @property
    def record_count(self):
        return struct.unpack_from(">i", self.data, 57)[0]


@dataclass
class FetchedPartition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    aborted: list
    records: bytes


def split_batches(records):
    """Whole record batches in a Fetch response's records bytes (a partial last batch, cut by
    the size limit, is dropped)."""
    out = []
    pos = 0
    while pos + 17 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        size = 12 + length
        if pos + size > len(records):
            break
        magic = records[pos + 16]
        if magic != 2:
            raise AssertionError(f"batch at offset {base} has magic {magic}, expected 2")
        out.append(Batch(base, bytes(records[pos:pos + size])))
        pos += size
    return out


class RawKafka(Connection):
    """One connection (kafka_wire.Connection) to one broker (a single-node cluster: it leads
    every partition)."""

    def __init__(self, bootstrap, timeout=15):
        super().__init__(bootstrap, timeout)
        self.bootstrap = bootstrap
        # Fetch v4 unless the broker refuses zstd batches to it (UNSUPPORTED_COMPRESSION_TYPE:
        # Kafka before 4.0 serves zstd from Fetch v10 on); then Fetch v10.
        self.fetch_version = 4

    def list_offsets(self, topic, partitions, timestamp):
        """ListOffsets v1 (read_uncommitted: LATEST is the high watermark): {partition: offset}."""
        body = struct.pack(">i", -1) + struct.pack(">i", 1) + _str(topic) + struct.pack(">i", len(partitions))
        for p in partitions:
            body += struct.pack(">iq", p, timestamp)
        r = Reader(self.request(2, 1, body))
        out = {}
        for _ in range(r.take(">i")):
            r.string()
            for _ in range(r.take(">i")):
                p, err, _ts, offset = r.take(">ihqq")
                if err:
                    raise KafkaProtocolError(f"ListOffsets {topic}-{p}", err)
                out[p] = offset
        return out

    def earliest(self, topic, partition):
        return self.list_offsets(topic, [partition], EARLIEST)[partition]

    def latest(self, topic, partition):
        return self.list_offsets(topic, [partition], LATEST)[partition]

    def fetch(self, topic, partition, offset, max_bytes=256 * 1024, isolation=0, max_wait_ms=0):
        """Fetch v4 (or v10, see fetch_version) of one partition."""
        f = self._fetch(self.fetch_version, topic, partition, offset, max_bytes, isolation, max_wait_ms)
        if f.error_code == UNSUPPORTED_COMPRESSION_TYPE and self.fetch_version < 10:
            self.fetch_version = 10
            f = self._fetch(10, topic, partition, offset, max_bytes, isolation, max_wait_ms)
        return f

    def _fetch(self, version, topic, partition, offset, max_bytes, isolation, max_wait_ms):
        body = struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, isolation)
        if version >= 7:
            body += struct.pack(">ii", 0, -1)  # no fetch session
        body += struct.pack(">i", 1) + _str(topic) + struct.pack(">i", 1)
        if version >= 10:
            body += struct.pack(">iiqqi", partition, -1, offset, -1, max_bytes)
            body += struct.pack(">i", 0)  # forgotten topics
        else:
            body += struct.pack(">iqi", partition, offset, max_bytes)
        r = Reader(self.request(1, version, body))
        r.take(">i")  # throttle_time_ms
        if version >= 7:
            err, _session = r.take(">hi")
            if err:
                raise KafkaProtocolError(f"Fetch v{version}", err)
        result = None
        for _ in range(r.take(">i")):
            r.string()
            for _ in range(r.take(">i")):
                p, err, hw, lso = r.take(">ihqq")
                if version >= 5:
                    r.take(">q")  # log_start_offset
                n = r.take(">i")
                aborted = [r.take(">qq") for _ in range(max(n, 0))]
                records = r.bytes_() or b""
                if p == partition:
                    result = FetchedPartition(err, hw, lso, aborted, records)
        if result is None:
            raise AssertionError(f"no {topic}-{partition} in the Fetch response")
        return result

    def read_batches(self, topic, partition, start=None, end=None, timeout=30):
        """Every batch from `start` (default: the log start) to `end` (default: the high
        watermark), by repeated Fetch v4 read_uncommitted; batches wholly below the position
        a fetch asked for are dropped (a broker may return them from the segment it reads)."""
        if start is None:
            start = self.earliest(topic, partition)
        if end is None:
            end = self.latest(topic, partition)
        batches = []
        pos = start
        deadline = time.time() + timeout
        while pos < end:
            if time.time() > deadline:
                raise AssertionError(f"{self.bootstrap} {topic}-{partition}: stuck reading at {pos} (end {end})")
            f = self.fetch(topic, partition, pos)
            if f.error_code:
                raise KafkaProtocolError(f"Fetch {topic}-{partition} at {pos} from {self.bootstrap}", f.error_code)
            got = [b for b in split_batches(f.records) if b.last_offset >= pos]
            if not got:
                if f.high_watermark <= pos:
                    break
                time.sleep(0.05)
                continue
            batches.extend(got)
            pos = got[-1].last_offset + 1
        return batches


def describe_batches(batches, limit=6):
    return ", ".join(f"[{b.base_offset}..{b.last_offset} codec={b.codec} attrs={b.attributes:#x} "
                     f"{len(b.data)}B]" for b in batches[:limit]) + (" ..." if len(batches) > limit else "")


def assert_same_batches(source_batches, mirror_batches, what):
    """Same offsets and the same bytes, batch by batch, the partition leader epoch included."""
    src = [(b.base_offset, b.last_offset) for b in source_batches]
    dst = [(b.base_offset, b.last_offset) for b in mirror_batches]
    if src != dst:
        i = next((i for i, (a, b) in enumerate(zip(src, dst)) if a != b), min(len(src), len(dst)))
        raise AssertionError(
            f"{what}: batch offsets differ at batch #{i}: source {src[i:i + 5]} vs mirror {dst[i:i + 5]} "
            f"({len(src)} source batches, {len(dst)} mirror batches)")
    for s, d in zip(source_batches, mirror_batches):
        if s.data != d.data:
            diff = [i for i in range(min(len(s.data), len(d.data))) if s.data[i] != d.data[i]]
            raise AssertionError(
                f"{what}: batch at offset {s.base_offset} differs (leader epochs "
                f"{s.leader_epoch}/{d.leader_epoch}): "
                f"sizes {len(s.data)}/{len(d.data)}, differing byte positions {diff[:20]}")


def compare_partition(source_bootstrap, tern_bootstrap, topic, partition, what=None):
    """Reads the whole partition (log start to high watermark) on both sides; requires the same
    log start, end and batches.  Returns the batches read from the source."""
    what = what or f"{topic}-{partition}"
    with RawKafka(source_bootstrap) as s, RawKafka(tern_bootstrap) as t:
        s_start, t_start = s.earliest(topic, partition), t.earliest(topic, partition)
        s_end, t_end = s.latest(topic, partition), t.latest(topic, partition)
        assert (t_start, t_end) == (s_start, s_end), \
            f"{what}: mirror log spans [{t_start}, {t_end}), source [{s_start}, {s_end})"
        src = s.read_batches(topic, partition, s_start, s_end)
        dst = t.read_batches(topic, partition, t_start, t_end)
    assert_same_batches(src, dst, what)
    return src


# -- tern mirrors ---------------------------------------------------------------------------------

def mirrors(bootstrap, *args, check=True, timeout=90):
    """Runs `tern mirrors --bootstrap-server <bootstrap> args...`."""
    cmd = [tern_process.TERN_BIN, "mirrors", "--bootstrap-server", bootstrap, *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[1:])} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def create_mirror(bootstrap, name, source_bootstrap, work_dir, **extra):
    path = os.path.join(work_dir, f"mirror-{name}.properties")
    props = {"bootstrap.servers": source_bootstrap, "mirror.fetch.wait.max.ms": "200",
             "mirror.fetch.backoff.ms": "200"}
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    with open(path, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return mirrors(bootstrap, "--create", "--mirror", name, "--mirror-config", path)


def describe(bootstrap, mirror=None):
    args = ["--describe", "--json"] + (["--mirror", mirror] if mirror else [])
    return json.loads(mirrors(bootstrap, *args).stdout)


def wait_mirrored(tern_bootstrap, mirror, source_bootstrap, topics, timeout=60):
    """Waits until every partition of `topics` is MIRRORING with lag 0 and destinationOffset ==
    sourceOffset == the source's high watermark (asked of the source directly).  Returns the
    describe rows."""
    deadline = time.time() + timeout
    last = None
    while True:
        rows = [r for r in describe(tern_bootstrap, mirror) if r["topic"] in topics]
        ok = bool(rows) and {r["topic"] for r in rows} == set(topics)
        if ok:
            with RawKafka(source_bootstrap) as s:
                for r in rows:
                    hw = s.latest(r["topic"], r["partition"])
                    r["sourceHW"] = hw
                    if not (r["state"] == "MIRRORING" and r["lag"] == 0
                            and r["destinationOffset"] == hw and r["sourceOffset"] == hw):
                        ok = False
        if ok:
            return rows
        last = rows
        if time.time() > deadline:
            raise AssertionError(f"mirror {mirror} did not catch up in {timeout}s: {last}")
        time.sleep(0.3)
