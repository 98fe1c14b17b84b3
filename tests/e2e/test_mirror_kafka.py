"""Cluster mirroring from a real Apache Kafka into a real tern process.

A real single-node Apache Kafka (tests/harness/kafka_peer.py; 4.4.0, 3.9.1 and the oldest 2.x
that the mirror supports, MIRROR_OLD_KAFKA, default 2.1.1) is the source; `tern mirrors` creates
a mirror on a fresh tern per test and starts topics.  The checks read both logs with a raw Fetch
client (tests/e2e/mirror_util.py) and require, for every partition, the same log start, the
same high watermark and the same batches byte for byte except the 4-byte partitionLeaderEpoch:

1. every codec (none, gzip, snappy, lz4, zstd, and a topic the source recompresses), per source
   version; topic ids and configs taken over;
2. a compacted source topic (offset gaps, tombstones);
3. log start moved by DeleteRecords before, while mirroring, while paused past the mirror's end,
   and up to the end;
4. transactions (committed, aborted, interleaved with plain writes, some mirrored live): the
   mirror never holds an open transaction; read_committed and read_uncommitted consumers and the
   aborted-transaction lists agree on both sides, control batches included;
5. produce to a mirror topic fails with READ_ONLY_TOPIC (134) and appends nothing; after --stop
   produce continues at the last mirrored offset, also after a restart;
6. kill -9 of tern while the source is being written: no gap, no duplicate, same bytes;
   6b. a source restart (new source leader epoch): tern's batches keep the source's epochs, and
       tern's own partition leader epoch is raised to at least the highest of them;
7. consumer-group offsets (and topic configs, partition counts) synced from the source, resumed
   on tern after --stop, no longer synced after it;
8. `tern mirrors` refuses bad input with the error's name and a non-zero exit code, promptly;
9. a source topic deleted and recreated under the same name (another topic id) while paused;
12. `--start --wait` on a rate-limited mirror prints its progress and returns only once every
    partition is MIRRORING with lag 0 at the source's end.
11. the failover report of `--stop --json`: a paused mirror left behind by 30 records per
    partition reports its last mirrored offsets, the source's high watermarks, 30 records not
    mirrored and their age, and how long the topic took to become writable.
10. `tern mirrors --verify`: equal on a healthy mirror (exit 0; a compacted topic compared by
    the records compaction keeps); after a failover followed by writes on both sides, partition 0 differs at
    its last mirrored offset, partition 1 (written on tern only) where the source ends, partition
    2 (written on neither) stays equal (exit 2); an unknown mirror or topic exits 1.

Sources start once per module (4.4.0 serves tests 2-9); loads are a few thousand records.
"""

import json
import os
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                  NewTopic)

import kafka_peer
import mirror_util as mu
from processes import free_port
from replication_util import metadata_v7
from tern_process import Tern

MAIN_VERSION = "4.4.0"
OLD_VERSION = os.environ.get("MIRROR_OLD_KAFKA", "2.1.1")
VERSIONS = [MAIN_VERSION, "3.9.1", OLD_VERSION]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

SOURCE_OVERRIDES = {
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "300",
    "log.cleaner.dedupe.buffer.size": "16777216",
    "log.cleaner.threads": "1",
}
SOURCE_JVM = ["-Xmx512m", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
              "-Djava.awt.headless=true"]
TERN_OVERRIDES = [
    "mirror.metadata.refresh.interval.ms=2000",
    "mirror.failed.retry.initial.backoff.ms=200",
    "mirror.failed.retry.max.backoff.ms=2000",
]


# -- fixtures --------------------------------------------------------------------------------------

class Sources:
    """Apache Kafka sources, started on first use and kept for the module."""

    def __init__(self, root):
        self.root = root
        self.peers = {}

    def get(self, version):
        if version not in self.peers:
            try:
                kafka_peer.KafkaJars(version).ensure()
            except RuntimeError as e:
                pytest.skip(f"cannot resolve Apache Kafka {version}: {str(e).splitlines()[0]}")
            peer = kafka_peer.KafkaPeer(version, self.root / f"kafka-{version}",
                                        overrides=SOURCE_OVERRIDES, jvm_opts=SOURCE_JVM)
            peer.start(timeout=120)
            print(f"Apache Kafka {version} {peer.bootstrap}, log {peer.log_path}")
            self.peers[version] = peer
        return self.peers[version]

    def stop(self, version):
        peer = self.peers.pop(version, None)
        if peer:
            peer.stop()

    def stop_all(self):
        for v in list(self.peers):
            self.stop(v)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    s = Sources(tmp_path_factory.mktemp("mirror-sources"))
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def kafka(sources):
    return sources.get(MAIN_VERSION)


@pytest.fixture
def tern(tmp_path):
    d = tmp_path / "tern"
    d.mkdir()
    t = Tern(str(d), free_port(), TERN_OVERRIDES).start()
    print(f"tern {t.bootstrap}, log {t.log_path}")
    try:
        yield t
    finally:
        t.stop()


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# -- client helpers --------------------------------------------------------------------------------

def create_topics(bootstrap, specs):
    """specs: {name: (partitions, config)}."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(n, p, 1, config=c or {}) for n, (p, c) in specs.items()],
                             operation_timeout=30)
    for f in fs.values():
        f.result(timeout=60)
    # Wait until the broker serves every partition (KRaft and ZooKeeper brokers learn of new
    # topics asynchronously).
    deadline = time.time() + 30
    for name, (parts, _) in specs.items():
        while True:
            try:
                with mu.RawKafka(bootstrap) as r:
                    r.list_offsets(name, list(range(parts)), mu.LATEST)
                break
            except mu.KafkaProtocolError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)


def record(i, tag="v"):
    key = None if i % 13 == 5 else f"key-{i}".encode()
    value = None if i % 29 == 7 else (f"{tag}-{i}-" + "abcdefgh" * (i % 17)).encode()
    headers = [("idx", str(i).encode()), ("empty", b"")] if i % 3 else []
    return key, value, headers


class Acks:
    def __init__(self):
        self.offsets = []
        self.errors = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.offsets.append((msg.partition(), msg.offset()))


def producer(bootstrap, **conf):
    base = {"bootstrap.servers": bootstrap, "linger.ms": 10, "batch.num.messages": 40,
            "acks": "all", "enable.idempotence": False}
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(base)


def produce(bootstrap, topic, n, partitions, start=0, tag="v", codec="none", **conf):
    """n records round-robin over `partitions` partitions; returns the acks (all must succeed)."""
    p = producer(bootstrap, compression_type=codec, **conf)
    acks = Acks()
    for i in range(start, start + n):
        key, value, headers = record(i, tag)
        p.produce(topic, key=key, value=value, headers=headers, partition=i % partitions,
                  on_delivery=acks)
        p.poll(0)
    assert p.flush(60) == 0, "producer did not flush"
    assert not acks.errors, acks.errors[:3]
    assert len(acks.offsets) == n
    return acks


def consume_all(bootstrap, topic, partitions, isolation="read_uncommitted", timeout=30):
    """Every record of the partitions from the beginning to the end: (partition, offset, key,
    value, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        out = []
        eof = set()
        deadline = time.time() + timeout
        while len(eof) < partitions:
            if time.time() > deadline:
                raise AssertionError(f"{bootstrap} {topic}: no end of partitions {set(range(partitions)) - eof}")
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise AssertionError(f"{bootstrap} {topic}: {msg.error()}")
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                        tuple(msg.headers() or ())))
        return sorted(out)
    finally:
        c.close()


def start_mirror(tern, kafka, mirror, topics, tmp_path):
    mu.create_mirror(tern.bootstrap, mirror, kafka.bootstrap, str(tmp_path))
    out = mu.mirrors(tern.bootstrap, "--start", "--mirror", mirror, "--topics", ",".join(topics))
    assert "Started" in out.stdout, out.stdout


def compare_topic(kafka, tern, topic, partitions):
    return {p: mu.compare_partition(kafka.bootstrap, tern.bootstrap, topic, p) for p in range(partitions)}


def topic_config(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(timeout=30)
    return {k: v.value for k, v in configs.items()}


def partitions_of(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = md.topics[topic]
    assert t.error is None, t.error
    return len(t.partitions)


def topic_id(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30).topic_id)


def produce_refused(bootstrap, topic, partitions, idempotent=False):
    """Produces one record per partition to tern; returns the delivery error codes (no record
    may be acknowledged)."""
    p = producer(bootstrap, enable_idempotence=idempotent, retries=1 if idempotent else 0,
                 message_timeout_ms=10000, linger_ms=0)
    acks = Acks()
    for part in range(partitions):
        p.produce(topic, key=b"nope", value=b"must not land", partition=part, on_delivery=acks)
    p.flush(20)
    assert not acks.offsets, f"produce to mirror topic {topic} succeeded at {acks.offsets}"
    return {e.code() for e in acks.errors}


def high_watermarks(bootstrap, topic, partitions):
    with mu.RawKafka(bootstrap) as r:
        return r.list_offsets(topic, list(range(partitions)), mu.LATEST)


# -- 1. every codec, per source version ------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_codecs_mirrored_byte_for_byte(sources, tern, tmp_path, version):
    kafka = sources.get(version)
    tag = version.replace(".", "")
    specs = {f"codec-{c}-{tag}": (3 if i % 2 == 0 else 2, None) for i, c in enumerate(CODECS)}
    # The source recompresses what it is sent (topic compression.type zstd, producer none):
    # the mirror must hold the source's zstd batches and take over the config.
    recompressed = f"codec-recompressed-{tag}"
    specs[recompressed] = (2, {"compression.type": "zstd", "max.message.bytes": "500000"})
    create_topics(kafka.bootstrap, specs)
    for c in CODECS:
        t = f"codec-{c}-{tag}"
        produce(kafka.bootstrap, t, 400, specs[t][0], codec=c, tag=c)
    produce(kafka.bootstrap, recompressed, 300, 2, codec="none", tag="re")

    topics = list(specs)
    mirror = f"m-codecs-{tag}"
    # 4.4.0 starts the topics by name, the other versions by a regex.
    start_mirror(tern, kafka, mirror, topics if version == MAIN_VERSION else [f"codec-.*-{tag}"], tmp_path)
    rows = mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, topics, timeout=90)
    for t, (parts, _) in specs.items():
        assert sorted(r["partition"] for r in rows if r["topic"] == t) == list(range(parts)), rows
        assert partitions_of(tern.bootstrap, t) == parts
    for t, (parts, _) in specs.items():
        batches = compare_topic(kafka, tern, t, parts)
        codec_ids = {b.codec for bs in batches.values() for b in bs}
        want = CODEC_IDS["zstd"] if t == recompressed else CODEC_IDS[t.split("-")[1]]
        assert codec_ids == {want}, f"{t}: source batches use codecs {codec_ids}"
        assert sum(b.record_count for bs in batches.values() for b in bs) == (300 if t == recompressed else 400)
    if kafka_peer.vtuple(version) >= (2, 8):
        # Kafka 2.8+ has topic ids: the mirror topic keeps the source's.
        for t in topics:
            assert topic_id(tern.bootstrap, t) == topic_id(kafka.bootstrap, t), t
    cfg = topic_config(tern.bootstrap, recompressed)
    assert cfg.get("compression.type") == "zstd", cfg
    assert cfg.get("max.message.bytes") == "500000", cfg
    assert cfg.get("mirror.name") == mirror, cfg
    # A real client reads the same records back from tern.
    t = f"codec-zstd-{tag}"
    assert consume_all(tern.bootstrap, t, 3) == consume_all(kafka.bootstrap, t, 3)
    if version != MAIN_VERSION:
        sources.stop(version)


# -- 2. compacted topic ----------------------------------------------------------------------------

def _source_compacted(kafka, topic, partitions, produced):
    """Whether every partition's live records are fewer than its offsets (the cleaner ran)."""
    with mu.RawKafka(kafka.bootstrap) as r:
        for p in range(partitions):
            bs = r.read_batches(topic, p)
            if sum(b.record_count for b in bs) >= produced[p]:
                return False
    return True


def _source_snapshot(kafka, topic, partitions):
    with mu.RawKafka(kafka.bootstrap) as r:
        return [[(b.base_offset, b.data) for b in r.read_batches(topic, p)] for p in range(partitions)]


def test_compacted_topic_keeps_offset_gaps(kafka, tern, tmp_path):
    topic = unique("compacted")
    create_topics(kafka.bootstrap, {topic: (2, {
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"})})
    p = producer(kafka.bootstrap, compression_type="lz4")
    produced = {0: 0, 1: 0}
    for rnd in range(12):
        for i in range(40):
            key = f"k{i % 20}".encode()
            value = None if (rnd == 9 and i % 5 == 0) else f"r{rnd}-{i}".encode() * 3
            part = i % 2
            p.produce(topic, key=key, value=value, partition=part, headers=[("round", str(rnd).encode())])
            produced[part] += 1
        p.flush(30)
        time.sleep(0.15)  # segment.ms=100: the next round rolls a new segment
    # One more record per partition rolls the last round's segment so it can be cleaned.
    for part in (0, 1):
        p.produce(topic, key=b"roll", value=b"roll", partition=part)
        produced[part] += 1
    assert p.flush(30) == 0

    deadline = time.time() + 40
    while not _source_compacted(kafka, topic, 2, produced):
        if time.time() > deadline:
            pytest.fail("Apache Kafka did not compact the source topic within 40 s "
                        f"(log: {kafka.log_path})")
        time.sleep(0.5)
    # Let the cleaner finish: the same bytes twice, a second apart.
    snap = _source_snapshot(kafka, topic, 2)
    for _ in range(20):
        time.sleep(1.0)
        again = _source_snapshot(kafka, topic, 2)
        if again == snap:
            break
        snap = again

    mirror = "m-compacted"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    batches = compare_topic(kafka, tern, topic, 2)
    gaps = 0
    for bs in batches.values():
        covered = sum(b.last_offset - b.base_offset + 1 for b in bs)
        live = sum(b.record_count for b in bs)
        gaps += covered - live
        gaps += sum(1 for a, b in zip(bs, bs[1:]) if b.base_offset != a.last_offset + 1)
    assert gaps > 0, "the compacted source shows no offset gaps: the test did not test gaps"
    # Consumers agree too (offsets with gaps, tombstones as null values).
    assert consume_all(tern.bootstrap, topic, 2) == consume_all(kafka.bootstrap, topic, 2)
    assert topic_config(tern.bootstrap, topic).get("cleanup.policy") == "compact"
    # --verify compares what compaction keeps: every shared offset's record and each key's
    # latest record (10 keys k0..k18 of one parity and "roll" per partition).
    code, rows, err = verify(tern, mirror)
    assert code == 0, (code, rows, err)
    for part in (0, 1):
        r = rows[(topic, part)]
        assert r["result"] == "EQUAL" and r["compacted"] is True and r["keys"] == 11 \
            and r["sharedOffsets"] > 0, r


# -- 3. log start moved by DeleteRecords -----------------------------------------------------------

def delete_records(bootstrap, topic, offsets):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()],
                              request_timeout=30)
    for f in fs.values():
        f.result(timeout=30)


def wait_log_start(tern, kafka, topic, partitions, timeout=30):
    deadline = time.time() + timeout
    while True:
        with mu.RawKafka(kafka.bootstrap) as s, mu.RawKafka(tern.bootstrap) as t:
            src = s.list_offsets(topic, list(range(partitions)), mu.EARLIEST)
            dst = t.list_offsets(topic, list(range(partitions)), mu.EARLIEST)
        if src == dst:
            return src
        if time.time() > deadline:
            raise AssertionError(f"{topic}: log start on tern {dst}, on the source {src}")
        time.sleep(0.3)


def test_log_start_follows_delete_records(kafka, tern, tmp_path):
    topic = unique("logstart")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 600, 2, codec="snappy")  # 300 per partition, ~20 per batch
    delete_records(kafka.bootstrap, topic, {0: 101})  # mid-batch

    mirror = "m-logstart"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    assert wait_log_start(tern, kafka, topic, 2) == {0: 101, 1: 0}
    compare_topic(kafka, tern, topic, 2)

    # While mirroring: followed without new data, then with.
    delete_records(kafka.bootstrap, topic, {0: 205, 1: 57})
    assert wait_log_start(tern, kafka, topic, 2) == {0: 205, 1: 57}
    produce(kafka.bootstrap, topic, 100, 2, start=600, codec="snappy")
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    assert wait_log_start(tern, kafka, topic, 2) == {0: 205, 1: 57}
    compare_topic(kafka, tern, topic, 2)

    # While paused, past everything tern holds: tern must restart its log at the source's start.
    mu.mirrors(tern.bootstrap, "--pause", "--mirror", mirror, "--topics", topic)
    tern_end = high_watermarks(tern.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, 400, 2, start=700, codec="snappy")
    beyond = tern_end[1] + 111
    assert beyond < high_watermarks(kafka.bootstrap, topic, 2)[1]
    delete_records(kafka.bootstrap, topic, {1: beyond})
    assert produce_refused(tern.bootstrap, topic, 2) == {134}, "a paused mirror topic must stay read-only"
    assert high_watermarks(tern.bootstrap, topic, 2) == tern_end, "a paused mirror appended"
    mu.mirrors(tern.bootstrap, "--resume", "--mirror", mirror, "--topics", topic)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    assert wait_log_start(tern, kafka, topic, 2)[1] == beyond
    compare_topic(kafka, tern, topic, 2)

    # Everything deleted: the log is empty at its end on both sides, and grows from there.
    end = high_watermarks(kafka.bootstrap, topic, 2)
    delete_records(kafka.bootstrap, topic, {0: end[0]})
    assert wait_log_start(tern, kafka, topic, 2)[0] == end[0]
    assert high_watermarks(tern.bootstrap, topic, 2)[0] == end[0]
    produce(kafka.bootstrap, topic, 40, 2, start=1100, codec="snappy")
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    compare_topic(kafka, tern, topic, 2)


# -- 4. transactions -------------------------------------------------------------------------------

def wait_mirrored_to_lso(tern, kafka, mirror, topic, partitions, timeout=20):
    deadline = time.time() + timeout
    while True:
        with mu.RawKafka(kafka.bootstrap) as s:
            stable = {p: s.fetch(topic, p, 0, max_bytes=1, isolation=1) for p in range(partitions)}
        lso = {p: f.last_stable_offset for p, f in stable.items()}
        hw = {p: f.high_watermark for p, f in stable.items()}
        assert all(lso[p] < hw[p] for p in lso), f"no open transaction: lso {lso}, hw {hw}"
        rows = {r["partition"]: r for r in mu.describe(tern.bootstrap, mirror) if r["topic"] == topic}
        dest = {p: rows[p]["destinationOffset"] for p in rows}
        assert all(dest[p] <= lso[p] for p in dest), \
            f"tern holds records of an open transaction: tern log end {dest}, source lso {lso}, hw {hw}"
        if dest == lso and all(rows[p]["sourceOffset"] == hw[p] for p in rows):
            assert all(rows[p]["lag"] == hw[p] - lso[p] for p in rows), (rows, lso, hw)
            # And stays there.
            time.sleep(0.6)
            rows = {r["partition"]: r for r in mu.describe(tern.bootstrap, mirror) if r["topic"] == topic}
            assert {p: rows[p]["destinationOffset"] for p in rows} == lso, (rows, lso)
            return
        if time.time() > deadline:
            raise AssertionError(f"tern log end {dest} did not reach the source lso {lso} (hw {hw})")
        time.sleep(0.3)


def test_transactions_mirrored(kafka, tern, tmp_path):
    topic = unique("txn")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    plain = producer(kafka.bootstrap, linger_ms=0)
    tx = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": unique("tx"),
                   "linger.ms": 5, "compression.type": "gzip"})
    tx.init_transactions(30)
    n = [0]
    aborted = [0]

    def send(p, tag, count):
        for _ in range(count):
            i = n[0]
            n[0] += 1
            p.produce(topic, key=f"key-{i}".encode(), value=f"{tag}-{i}".encode(), partition=i % 2,
                      headers=[("tag", tag.encode())])
        if p is plain:
            assert plain.flush(30) == 0

    mirror = "m-txn"
    send(plain, "plain", 20)
    for step, outcome in enumerate(["commit", "abort", "commit", "abort", "abort", "commit"]):
        if step == 2:
            # The first transactions are mirrored from the log, the others as they happen.
            start_mirror(tern, kafka, mirror, [topic], tmp_path)
        tx.begin_transaction()
        send(tx, outcome, 15 + step)
        tx.flush(30)
        send(plain, "plain", 7)  # plain writes inside the transaction's offset range
        send(tx, outcome, 5)
        tx.flush(30)  # written before the marker (abort_transaction purges unsent records)
        if step == 3:
            # While a transaction is open the mirror (a read_committed fetcher) holds the
            # source's log up to its last stable offset, not beyond.
            wait_mirrored_to_lso(tern, kafka, mirror, topic, 2)
        if outcome == "abort":
            aborted[0] += 15 + step + 5
        if outcome == "commit":
            tx.commit_transaction(30)
        else:
            tx.abort_transaction(30)
        send(plain, "plain", 3)

    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    batches = compare_topic(kafka, tern, topic, 2)
    controls = [b for bs in batches.values() for b in bs if b.is_control]
    assert len(controls) >= 12, "expected a commit/abort marker per transaction and partition"

    committed_src = consume_all(kafka.bootstrap, topic, 2, "read_committed")
    committed_dst = consume_all(tern.bootstrap, topic, 2, "read_committed")
    assert [r[3] for r in committed_src if r[3].startswith(b"abort")] == []
    assert committed_dst == committed_src
    assert len(committed_src) == n[0] - aborted[0]
    all_src = consume_all(kafka.bootstrap, topic, 2, "read_uncommitted")
    all_dst = consume_all(tern.bootstrap, topic, 2, "read_uncommitted")
    assert all_dst == all_src
    assert len(all_src) == n[0]

    # Tern serves the aborted transactions list of a read_committed fetch like the source.
    with mu.RawKafka(kafka.bootstrap) as s, mu.RawKafka(tern.bootstrap) as t:
        for p in range(2):
            fs = s.fetch(topic, p, 0, max_bytes=10 << 20, isolation=1)
            ft = t.fetch(topic, p, 0, max_bytes=10 << 20, isolation=1)
            assert (ft.error_code, ft.high_watermark, ft.last_stable_offset) == \
                (fs.error_code, fs.high_watermark, fs.last_stable_offset)
            assert sorted(ft.aborted) == sorted(fs.aborted), (p, ft.aborted, fs.aborted)
            assert len(fs.aborted) == 3


# -- 5. read-only until stopped, then writable at the last mirrored offset -----------------------

def test_read_only_then_failover(kafka, tern, tmp_path):
    topic = unique("failover")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 300, 2, enable_idempotence=True)
    mirror = "m-failover"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    before = high_watermarks(tern.bootstrap, topic, 2)

    for idempotent in (False, True):
        codes = produce_refused(tern.bootstrap, topic, 2, idempotent)
        assert codes == {134}, f"idempotent={idempotent}: expected READ_ONLY_TOPIC (134), got {codes}"
    assert high_watermarks(tern.bootstrap, topic, 2) == before
    rows = mu.describe(tern.bootstrap, mirror)
    assert {r["partition"]: r["destinationOffset"] for r in rows} == before

    # The mirror keeps going after refused produces.
    produce(kafka.bootstrap, topic, 50, 2, start=300, enable_idempotence=True)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    hw = high_watermarks(kafka.bootstrap, topic, 2)
    out = mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic)
    assert "Stopped" in out.stdout
    rows = mu.describe(tern.bootstrap, mirror)
    assert {r["state"] for r in rows if r["topic"] == topic} == {"STOPPED"}, rows
    assert {r["partition"]: r["destinationOffset"] for r in rows} == hw

    # Source writes after the stop stay on the source.
    produce(kafka.bootstrap, topic, 10, 2, start=350, enable_idempotence=True)
    p = producer(tern.bootstrap, enable_idempotence=True, linger_ms=0)
    acks = Acks()
    for part in (0, 1):
        p.produce(topic, key=b"after", value=f"failover-{part}".encode(), partition=part, on_delivery=acks)
    assert p.flush(30) == 0
    assert not acks.errors, acks.errors
    assert sorted(acks.offsets) == [(0, hw[0]), (1, hw[1])]
    time.sleep(1.0)
    assert high_watermarks(tern.bootstrap, topic, 2) == {0: hw[0] + 1, 1: hw[1] + 1}

    mirrored = consume_all(kafka.bootstrap, topic, 2)
    mirrored = [r for r in mirrored if r[1] < hw[r[0]]]
    got = consume_all(tern.bootstrap, topic, 2)
    assert got[:hw[0]] + got[hw[0] + 1:-1] == mirrored
    assert [(r[0], r[1], r[3]) for r in got if r[2] == b"after"] == \
        [(0, hw[0], b"failover-0"), (1, hw[1], b"failover-1")]
    assert topic_config(tern.bootstrap, topic).get("mirror.name") != mirror

    # The failover survives a restart: still STOPPED, still writable, nothing re-mirrored.
    tern.restart()
    rows = mu.describe(tern.bootstrap, mirror)
    assert {r["state"] for r in rows if r["topic"] == topic} == {"STOPPED"}, rows
    acks = produce(tern.bootstrap, topic, 2, 2, start=1000, enable_idempotence=True)
    assert sorted(acks.offsets) == [(0, hw[0] + 1), (1, hw[1] + 1)]
    time.sleep(1.0)
    assert high_watermarks(tern.bootstrap, topic, 2) == {0: hw[0] + 2, 1: hw[1] + 2}


# -- 6. kill -9 while mirroring a busy source -----------------------------------------------------

def test_kill9_while_mirroring(kafka, tern, tmp_path):
    topic = unique("kill9")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 200, 2, codec="lz4")
    done = threading.Event()
    failure = []

    def background():
        try:
            for rnd in range(40):
                produce(kafka.bootstrap, topic, 60, 2, start=200 + rnd * 60, codec="lz4", linger_ms=2)
                time.sleep(0.08)
        except Exception as e:  # noqa: BLE001 -- reported below
            failure.append(e)
        finally:
            done.set()

    mirror = "m-kill9"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    thread = threading.Thread(target=background, daemon=True)
    thread.start()
    for pause in (1.0, 1.3):
        time.sleep(pause)
        tern.kill9()
        time.sleep(0.3)
        tern.start()
    thread.join(60)
    assert done.is_set() and not failure, failure
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic], timeout=60)
    batches = compare_topic(kafka, tern, topic, 2)
    assert sum(b.record_count for bs in batches.values() for b in bs) == 200 + 40 * 60


# -- 6b. a source restart: new source leader epoch, same bytes ---------------------------------

def test_source_restart_new_leader_epoch(kafka, tern, tmp_path):
    """Restarting the single-node source bumps its partition leader epoch: the mirror rides
    through the outage, its batches keep the source's epochs (byte for byte), and tern raises
    its own partition leader epoch to at least the highest of them, so its epochs stay
    monotonic once the topic takes writes."""
    topic = unique("epoch")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 200, 2, codec="gzip")
    mirror = "m-epoch"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    kafka.stop()
    time.sleep(1.0)
    kafka.start(timeout=120)
    produce(kafka.bootstrap, topic, 200, 2, start=200, codec="gzip")
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic], timeout=60)
    batches = compare_topic(kafka, tern, topic, 2)
    src_epochs = {b.leader_epoch for bs in batches.values() for b in bs}
    assert len(src_epochs) > 1, f"the source restart did not change the leader epoch: {src_epochs}"
    with mu.RawKafka(tern.bootstrap) as t:
        dst_epochs = {b.leader_epoch for p in range(2) for b in t.read_batches(topic, p)}
    assert dst_epochs == src_epochs, f"tern's batch epochs {dst_epochs}, the source's {src_epochs}"
    parts = metadata_v7(tern.bootstrap, [topic]).topics[topic].partitions
    assert all(parts[p].epoch >= max(src_epochs) for p in range(2)), \
        f"tern's partition leader epochs {[parts[p].epoch for p in range(2)]} are below the " \
        f"source's batch epochs {sorted(src_epochs)}"


# -- 7. consumer-group offsets -------------------------------------------------------------------

def committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)}
    finally:
        c.close()


def wait_committed(bootstrap, group, topic, want, timeout=20):
    deadline = time.time() + timeout
    while True:
        got = committed(bootstrap, group, topic, len(want))
        if got == want:
            return
        if time.time() > deadline:
            raise AssertionError(f"group {group} on tern has {got}, the source {want}")
        time.sleep(0.5)


def resume(bootstrap, conf, topic, partitions, timeout=40):
    """A group member subscribing to `topic` reads to the end of every partition: ({partition:
    the first offset it got}, {partition: how many records})."""
    c = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **conf, "enable.partition.eof": True})
    c.subscribe([topic])
    first, count, eof = {}, {p: 0 for p in range(partitions)}, set()
    deadline = time.time() + timeout
    try:
        while len(eof) < partitions and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            first.setdefault(m.partition(), m.offset())
            count[m.partition()] += 1
    finally:
        c.close()
    return first, count


def test_group_offsets_synced_and_resumed(kafka, tern, tmp_path):
    topic = unique("groups")
    group = unique("g")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 400, 2)
    mirror = "m-groups"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])

    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = 0
    deadline = time.time() + 30
    while seen < 150 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    assert seen >= 150
    c.commit(offsets=[TopicPartition(topic, 0, 77), TopicPartition(topic, 1, 123)], asynchronous=False)
    c.close()
    assert committed(kafka.bootstrap, group, topic, 2) == {0: 77, 1: 123}
    wait_committed(tern.bootstrap, group, topic, {0: 77, 1: 123})

    # A later commit on the source is synced as well.
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 150), TopicPartition(topic, 1, 123)], asynchronous=False)
    c.close()
    wait_committed(tern.bootstrap, group, topic, {0: 150, 1: 123})

    # Topic config changes and new partitions on the source are synced too.
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "86400123", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)
    for f in admin.create_partitions([NewPartitions(topic, 3)]).values():
        f.result(timeout=30)
    produce(kafka.bootstrap, topic, 30, 3, start=400)
    deadline = time.time() + 20
    while topic_config(tern.bootstrap, topic).get("retention.ms") != "86400123":
        assert time.time() < deadline, f"retention.ms not synced: {topic_config(tern.bootstrap, topic)}"
        time.sleep(0.5)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic], timeout=30)
    assert partitions_of(tern.bootstrap, topic) == 3
    compare_topic(kafka, tern, topic, 3)

    mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic)
    first, count = resume(tern.bootstrap, {"group.id": group}, topic, 3)
    # Partition 2 has no committed offset: auto.offset.reset=earliest.
    assert first == {0: 150, 1: 123, 2: 0}, f"resumed at {first}"
    assert count == {0: 210 - 150, 1: 210 - 123, 2: 10}

    # After the failover, the group belongs to tern: source commits are no longer synced.
    c = Consumer({"bootstrap.servers": tern.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 190), TopicPartition(topic, 1, 191)], asynchronous=False)
    c.close()
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 6)], asynchronous=False)
    c.close()
    time.sleep(5)  # two refresh intervals
    assert committed(tern.bootstrap, group, topic, 2) == {0: 190, 1: 191}


def test_consumer_protocol_group_offsets_synced_and_resumed(kafka, tern, tmp_path):
    """A KIP-848 group (group.protocol=consumer) on the Kafka 4 source commits while its member
    is still in the group; the sync carries its offsets to tern, and after the failover a
    KIP-848 consumer on tern resumes exactly there."""
    topic = unique("groups848")
    group = unique("g848")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 100, 2)  # 50 records per partition
    mirror = "m-groups848"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    conf = {"group.id": group, "group.protocol": "consumer", "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    c = Consumer({"bootstrap.servers": kafka.bootstrap, **conf})
    c.subscribe([topic])
    try:
        deadline = time.time() + 30
        while len(c.assignment()) < 2 and time.time() < deadline:
            c.poll(0.2)
        assert len(c.assignment()) == 2
        c.commit(offsets=[TopicPartition(topic, 0, 41), TopicPartition(topic, 1, 29)],
                 asynchronous=False)
        wait_committed(tern.bootstrap, group, topic, {0: 41, 1: 29})
    finally:
        c.close()

    mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic)
    first, count = resume(tern.bootstrap, conf, topic, 2)
    assert first == {0: 41, 1: 29}, f"resumed at {first}"
    assert count == {0: 50 - 41, 1: 50 - 29}


def share_offsets(bootstrap, group):
    """A share group's start offsets as `kafka-share-groups.sh --describe --offsets` prints
    them: {partition: start offset}, {} when the group is not there."""
    p = kafka_peer.KafkaJars(MAIN_VERSION).run(
        "kafka-share-groups", "--bootstrap-server", bootstrap, "--describe", "--offsets", "--group", group)
    rows = [l.split() for l in p.stdout.splitlines() if l.startswith(group + " ")]
    return {int(r[2]): int(r[3]) for r in rows}


def reset_share_offsets(bootstrap, group, topic, offset):
    kafka_peer.KafkaJars(MAIN_VERSION).run(
        "kafka-share-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
        "--topic", topic, "--to-offset", str(offset), "--execute", check=True)


def test_share_group_offsets_synced(kafka, tern, tmp_path):
    """A share group (KIP-932) of the Kafka 4.4 source, its start offsets set with Kafka's own
    `kafka-share-groups.sh --reset-offsets`: the sync creates it on tern with the same start
    offsets, follows a second reset, and after the failover `kafka-share-groups.sh` shows them
    on tern."""
    topic = unique("shared")
    group = unique("sg")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 100, 2)  # 50 records per partition
    reset_share_offsets(kafka.bootstrap, group, topic, 12)
    assert share_offsets(kafka.bootstrap, group) == {0: 12, 1: 12}
    mirror = "m-share"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    deadline = time.time() + 30
    while share_offsets(tern.bootstrap, group) != {0: 12, 1: 12} and time.time() < deadline:
        time.sleep(1)
    assert share_offsets(tern.bootstrap, group) == {0: 12, 1: 12}

    reset_share_offsets(kafka.bootstrap, group, topic, 40)
    deadline = time.time() + 30
    while share_offsets(tern.bootstrap, group) != {0: 40, 1: 40} and time.time() < deadline:
        time.sleep(1)
    assert share_offsets(tern.bootstrap, group) == {0: 40, 1: 40}
    mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic)
    assert share_offsets(tern.bootstrap, group) == {0: 40, 1: 40}


# -- 8. bad input via the CLI ----------------------------------------------------------------------

SLOW = []  # (args, seconds) of refused commands that took long


def expect_error(tern, *args, name, also=()):
    t0 = time.time()
    p = mu.mirrors(tern.bootstrap, *args, check=False)
    took = time.time() - t0
    if took > 10:
        SLOW.append((" ".join(map(str, args)), round(took, 1)))
    out = p.stdout + p.stderr
    assert p.returncode != 0, f"{args} succeeded: {out}"
    assert name in p.stderr, f"{args}: expected {name} on stderr: {out}"
    for word in also:
        assert word in out, f"{args}: expected {word!r} in: {out}"
    return p


def test_cli_refuses_bad_input(kafka, tern, tmp_path):
    SLOW.clear()
    src_topic = unique("cli-src")
    clash = unique("cli-local")
    create_topics(kafka.bootstrap, {src_topic: (2, None), clash: (3, None)})
    produce(kafka.bootstrap, src_topic, 20, 2)
    mirror = "m-cli"

    no_bootstrap = tmp_path / "no-bootstrap.properties"
    no_bootstrap.write_text("mirror.fetch.wait.max.ms=200\n")
    expect_error(tern, "--create", "--mirror", mirror, "--mirror-config", no_bootstrap,
                 name="INVALID_CONFIG", also=["bootstrap.servers"])
    unknown_key = tmp_path / "unknown-key.properties"
    unknown_key.write_text(f"bootstrap.servers={kafka.bootstrap}\nno.such.key=1\n")
    expect_error(tern, "--create", "--mirror", mirror, "--mirror-config", unknown_key,
                 name="INVALID_CONFIG", also=["no.such.key"])
    assert "No mirrors found" in mu.mirrors(tern.bootstrap, "--list").stdout

    mu.create_mirror(tern.bootstrap, mirror, kafka.bootstrap, str(tmp_path))
    expect_error(tern, "--create", "--mirror", mirror, "--mirror-config",
                 tmp_path / f"mirror-{mirror}.properties", name="CLUSTER_MIRROR_ALREADY_EXISTS")
    expect_error(tern, "--start", "--mirror", "no-such-mirror", "--topics", src_topic,
                 name="UNKNOWN_CLUSTER_MIRROR")

    missing = unique("missing-on-source")
    expect_error(tern, "--start", "--mirror", mirror, "--topics", missing,
                 name="UNKNOWN_TOPIC_OR_PARTITION", also=[missing])
    assert missing not in AdminClient({"bootstrap.servers": tern.bootstrap}).list_topics(timeout=10).topics

    # A normal tern topic with the name of a source topic is left alone.
    create_topics(tern.bootstrap, {clash: (1, None)})
    produce(tern.bootstrap, clash, 5, 1)
    expect_error(tern, "--start", "--mirror", mirror, "--topics", clash,
                 name="TOPIC_ALREADY_EXISTS", also=[clash])
    assert partitions_of(tern.bootstrap, clash) == 1
    assert not topic_config(tern.bootstrap, clash).get("mirror.name")
    assert high_watermarks(tern.bootstrap, clash, 1) == {0: 5}
    acks = produce(tern.bootstrap, clash, 1, 1, start=5)
    assert acks.offsets == [(0, 5)]

    out = mu.mirrors(tern.bootstrap, "--start", "--mirror", mirror, "--topics", src_topic)
    assert src_topic in out.stdout
    expect_error(tern, "--start", "--mirror", mirror, "--topics", src_topic,
                 name="TOPIC_ALREADY_IN_CLUSTER_MIRROR")
    expect_error(tern, "--stop", "--mirror", mirror, "--topics", clash,
                 name="TOPIC_NOT_IN_CLUSTER_MIRROR", also=[clash])
    expect_error(tern, "--delete", "--mirror", mirror, name="CLUSTER_MIRROR_NOT_EMPTY")

    mu.mirrors(tern.bootstrap, "--pause", "--mirror", mirror, "--topics", src_topic)
    assert {r["state"] for r in mu.describe(tern.bootstrap, mirror)} == {"PAUSED"}
    expect_error(tern, "--pause", "--mirror", mirror, "--topics", src_topic,
                 name="MIRROR_TOPIC_ALREADY_PAUSED")
    mu.mirrors(tern.bootstrap, "--resume", "--mirror", mirror, "--topics", src_topic)
    expect_error(tern, "--resume", "--mirror", mirror, "--topics", src_topic,
                 name="MIRROR_TOPIC_NOT_PAUSED")
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [src_topic])

    listed = mu.mirrors(tern.bootstrap, "--list").stdout
    assert mirror in listed and kafka.bootstrap in listed, listed
    expect_error(tern, "--describe", "--mirror", "no-such-mirror", name="UNKNOWN_CLUSTER_MIRROR")
    expect_error(tern, "--delete", "--mirror", "no-such-mirror", name="UNKNOWN_CLUSTER_MIRROR")

    # Once its topics are stopped the mirror can be deleted.
    mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", src_topic)
    mu.mirrors(tern.bootstrap, "--delete", "--mirror", mirror)
    assert "No mirrors found" in mu.mirrors(tern.bootstrap, "--list").stdout
    # A refused command answers at once (checked last so that the checks above all run).
    assert not SLOW, f"refused commands that took more than 10 s: {SLOW}"


# -- 9. a source topic deleted and recreated under the same name ----------------------------------

def test_source_topic_recreated_is_not_mixed_in(kafka, tern, tmp_path):
    """The spec stops a mirror topic when its source topic is deleted.  A source topic deleted
    and created again under the same name is another topic (another topic id): its records must
    neither replace nor follow the mirror of the old one.  The mirror is paused meanwhile, so
    that tern cannot see the name missing in between and only the topic id tells.  Two cases:
    the new topic is shorter than the mirror (the fetch offset is out of range) or longer."""
    shorter, longer = unique("recreated-short"), unique("recreated-long")
    create_topics(kafka.bootstrap, {shorter: (1, None), longer: (1, None)})
    for t in (shorter, longer):
        produce(kafka.bootstrap, t, 100, 1, tag="old")
    mirror = "m-recreated"
    start_mirror(tern, kafka, mirror, [shorter, longer], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [shorter, longer])
    old = {t: consume_all(tern.bootstrap, t, 1) for t in (shorter, longer)}
    old_ids = {t: topic_id(tern.bootstrap, t) for t in (shorter, longer)}
    assert old_ids == {t: topic_id(kafka.bootstrap, t) for t in (shorter, longer)}

    mu.mirrors(tern.bootstrap, "--pause", "--mirror", mirror, "--topics", f"{shorter},{longer}")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for f in admin.delete_topics([shorter, longer]).values():
        f.result(timeout=30)
    deadline = time.time() + 30
    for t in (shorter, longer):
        while True:
            try:
                create_topics(kafka.bootstrap, {t: (1, None)})
                break
            except Exception:  # noqa: BLE001 -- the deletion is still in progress
                assert time.time() < deadline, f"cannot recreate source topic {t}"
                time.sleep(0.2)
        assert topic_id(kafka.bootstrap, t) != old_ids[t]
    produce(kafka.bootstrap, shorter, 30, 1, tag="new")
    produce(kafka.bootstrap, longer, 130, 1, tag="new")
    mu.mirrors(tern.bootstrap, "--resume", "--mirror", mirror, "--topics", f"{shorter},{longer}")
    time.sleep(3)
    produce(kafka.bootstrap, shorter, 30, 1, start=30, tag="new")
    time.sleep(3)

    rows = {r["topic"]: r for r in mu.describe(tern.bootstrap, mirror)}
    problems = []
    for t in (shorter, longer):
        got = consume_all(tern.bootstrap, t, 1)
        mixed_in = [r[1] for r in got if r[3] and r[3].startswith(b"new-")]
        kept = sum(1 for r in got if r[3] and r[3].startswith(b"old-"))
        if mixed_in or got[:100] != old[t]:
            problems.append(
                f"{t}: records of the recreated source topic (another topic id) in the mirror of "
                f"the old one at offsets {mixed_in[:3]}..{mixed_in[-1:]}; {kept} of its 100 old "
                f"records left; state {rows[t]['state']}")
        elif rows[t]["state"] != "STOPPED":
            problems.append(f"{t}: old records kept, but the mirror partition is {rows[t]['state']} "
                            f"(retry {rows[t]['retryAttempt']}: {rows[t]['errorMessage']}), not STOPPED")
    assert not problems, "\n".join(problems)


# -- 10. tern mirrors --verify ---------------------------------------------------------------------

def verify(tern, mirror, *args):
    """`tern mirrors --verify --json`: (exit status, {(topic, partition): row}, stderr)."""
    p = mu.mirrors(tern.bootstrap, "--verify", "--mirror", mirror, "--json", *args, check=False)
    if p.returncode not in (0, 2):
        return p.returncode, {}, p.stderr
    out = json.loads(p.stdout)
    return p.returncode, {(r["topic"], r["partition"]): r for r in out["partitions"]}, p.stderr


def test_verify_equal_then_divergent_after_failover(kafka, tern, tmp_path):
    topic, compacted = unique("verify"), unique("verify-compacted")
    create_topics(kafka.bootstrap, {topic: (3, None), compacted: (1, {"cleanup.policy": "compact"})})
    produce(kafka.bootstrap, topic, 600, 3, codec="lz4", enable_idempotence=True)
    p = producer(kafka.bootstrap)
    for i in range(50):
        p.produce(compacted, key=b"k-%d" % (i % 7), value=b"v-%d" % i, partition=0)
    assert p.flush(30) == 0
    mirror = "m-verify"
    start_mirror(tern, kafka, mirror, [topic, compacted], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic, compacted])

    code, rows, err = verify(tern, mirror)
    assert code == 0, f"verify of a healthy mirror exited {code}: {rows} {err}"
    for p in range(3):
        r = rows[(topic, p)]
        assert r["result"] == "EQUAL" and r["batches"] > 0 and r["startOffset"] == 0 \
            and r["endOffset"] == 200, r
    # The compacted topic is compared by what compaction keeps: all 50 offsets, 7 keys.
    r = rows[(compacted, 0)]
    assert r["result"] == "EQUAL" and r.get("compacted") is True and r["sharedOffsets"] == 50 \
        and r["keys"] == 7, r
    table = mu.mirrors(tern.bootstrap, "--verify", "--mirror", mirror, "--topics", topic).stdout
    assert "3 partitions: 3 equal, 0 differ" in table, table

    # Failover (nothing left unmirrored); then writes on both sides of partition 0, on tern only
    # in partition 1.
    out = mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic).stdout
    assert "Stopped mirroring for 1 topic(s)" in out and "; 0 source record(s) not mirrored" in out, out
    hw = high_watermarks(tern.bootstrap, topic, 3)
    for bootstrap, parts in ((kafka.bootstrap, [0]), (tern.bootstrap, [0, 1])):
        p = producer(bootstrap, linger_ms=0)
        for part in parts:
            p.produce(topic, key=b"after", value=b"written after the failover", partition=part)
        assert p.flush(30) == 0
    code, rows, err = verify(tern, mirror, "--topics", topic)
    assert code == 2, f"verify after divergent writes exited {code}: {rows} {err}"
    assert rows[(topic, 0)]["result"] == "DIFFERS" and rows[(topic, 0)]["firstDivergentOffset"] == hw[0], rows
    assert rows[(topic, 1)]["result"] == "DIFFERS" and rows[(topic, 1)]["firstDivergentOffset"] == hw[1], rows
    assert "source has no batch" in rows[(topic, 1)]["detail"], rows[(topic, 1)]
    assert rows[(topic, 2)]["result"] == "EQUAL", rows[(topic, 2)]

    code, _, err = verify(tern, "no-such-mirror")
    assert code == 1 and "UNKNOWN_CLUSTER_MIRROR" in err, (code, err)
    code, _, err = verify(tern, mirror, "--topics", "not-mirrored")
    assert code == 1 and "not mirrored" in err, (code, err)


# -- 11. the failover report -----------------------------------------------------------------------

def test_failover_report_names_what_the_failover_leaves_behind(kafka, tern, tmp_path):
    topic = unique("report")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    produce(kafka.bootstrap, topic, 200, 2)
    mirror = "m-report"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic])
    mu.mirrors(tern.bootstrap, "--pause", "--mirror", mirror, "--topics", topic)
    before = high_watermarks(tern.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, 60, 2, start=200)
    source = high_watermarks(kafka.bootstrap, topic, 2)
    assert source == {0: before[0] + 30, 1: before[1] + 30}, (before, source)
    time.sleep(1.5)

    out = mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic, "--json").stdout
    report = json.loads(out)
    assert report["mirror"] == mirror and 0 <= report["writableAfterMs"] < 30000, report
    rows = {r["partition"]: r for r in report["partitions"]}
    assert sorted(rows) == [0, 1], report
    for p in (0, 1):
        r = rows[p]
        assert r["topic"] == topic and r["lastMirroredOffset"] == before[p], r
        assert r["sourceHighWatermark"] == source[p] and r["recordsNotMirrored"] == 30, r
        assert 1.4 <= r["lagSeconds"] < 60, r
    # Writable at the last mirrored offset, as the report says.
    acks = produce(tern.bootstrap, topic, 2, 2, start=5000)
    assert sorted(acks.offsets) == [(0, before[0]), (1, before[1])]


# -- 12. --start --wait -----------------------------------------------------------------------------

def test_start_wait_follows_the_copy_until_it_is_caught_up(kafka, tern, tmp_path):
    topic = unique("wait")
    create_topics(kafka.bootstrap, {topic: (2, None)})
    p = producer(kafka.bootstrap)
    for i in range(600):
        p.produce(topic, value=bytes(1000), partition=i % 2)
    assert p.flush(30) == 0
    source = high_watermarks(kafka.bootstrap, topic, 2)
    mirror = "m-wait"
    # About 600 KB at 100 KB/s: a copy of several seconds to follow.
    mu.create_mirror(tern.bootstrap, mirror, kafka.bootstrap, str(tmp_path),
                     mirror_fetch_rate_max_bytes="100000")
    # While --wait follows the copy, --describe measures the same copy: the share mirrored and
    # the time left at the rate it sees.
    copying = []

    def describe_during_copy():
        deadline = time.time() + 60
        while time.time() < deadline and not copying:
            rows = [r for r in mu.describe(tern.bootstrap, mirror) if r["topic"] == topic]
            lagging = [r for r in rows if r["lag"] > 0 and r["state"] == "MIRRORING"]
            if any(r["secondsLeft"] is not None for r in lagging):
                copying.append((lagging, mu.mirrors(tern.bootstrap, "--describe", "--mirror",
                                                    mirror).stdout))
            time.sleep(0.2)

    watcher = threading.Thread(target=describe_during_copy)
    watcher.start()
    out = mu.mirrors(tern.bootstrap, "--start", "--wait", "--mirror", mirror, "--topics", topic,
                     timeout=120).stdout
    watcher.join()
    lines = out.strip().splitlines()
    assert lines[0].startswith("Started 1 mirror topic(s)"), out
    assert "records mirrored" in lines[1] and lines[1].startswith("["), out
    assert lines[-1].startswith("[" + "#" * 30 + "] 100.0% 600 of 600 records mirrored, 0 to go, "
                                "caught up"), out
    assert copying, "--describe never saw the copy under way with a time left"
    lagging, table = copying[0]
    for r in lagging:
        expected = 100.0 * r["destinationOffset"] / r["sourceOffset"]
        assert abs(r["percentMirrored"] - expected) < 0.01 and r["percentMirrored"] < 100, r
        assert r["secondsLeft"] is None or r["secondsLeft"] > 0, r
    header = table.splitlines()[0].split()
    assert header[-2:] == ["MIRRORED", "TIME-LEFT"], table
    assert any(line.split()[-2].endswith("%") and line.split()[-1].endswith("s")
               for line in table.splitlines()[1:]), table
    rows = {r["partition"]: r for r in mu.describe(tern.bootstrap, mirror) if r["topic"] == topic}
    assert all(rows[q]["state"] == "MIRRORING" and rows[q]["lag"] == 0
               and rows[q]["destinationOffset"] == source[q] for q in (0, 1)), rows
    bad = mu.mirrors(tern.bootstrap, "--describe", "--wait", check=False)
    assert bad.returncode == 1 and "--wait is only valid with --start" in bad.stderr, bad.stderr
