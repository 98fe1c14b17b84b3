"""Mirroring from a three-broker Apache Kafka survives its partition leader being killed and moved.

The source is a real Apache Kafka 4.4.0 cluster of three combined broker+controller nodes
(tests/harness/kafka_peer.py KafkaCluster).  A topic with 3 partitions, replication factor 3 and
min.insync.replicas=2 is mirrored into a real tern while an idempotent acks=all producer writes
unique sequential values into it.  Meanwhile:

  1. the leader of partition 0 is killed with SIGKILL: tern's fetcher for it fails, the partition
     goes FAILED and is re-assigned to the new leader after a metadata refresh; the test waits
     until tern holds records the source acknowledged after the new leader was elected;
  2. the killed broker is restarted, rejoins the ISR of partition 0 and gets its leadership back
     with kafka-leader-election (PREFERRED): the new leader refuses the mirror's Fetch
     (NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH) and the partition moves to the restarted
     broker's fetcher; again the test waits for records acknowledged after the move.

Then production stops, `tern mirrors --describe --json` must show lag 0 for every partition, and
every partition of tern must equal the source's: the same (offset, timestamp, key, value) read
with read_committed consumers (nothing missing, nothing doubled), and the same record-batch bytes
from a raw Fetch v4, the partition leader epoch (bytes 12..16 of each batch) included.  The source
itself must hold every acknowledged value exactly once.

On failure (or with TERN_E2E_KEEP=1) the data dirs (tern/tern.log, kafka/node-*/kafka.log) are
kept and named in the output.
"""

import gc
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_peer
from kafka_wire import Connection, Reader, int32, string
from processes import free_port
from tern_process import TERN_BIN, Tern

VERSION = os.environ.get("TERN_MIRROR_CLUSTER_VERSION", "4.4.0")
TOPIC = "orders"
MIRROR = "dr"
PARTITIONS = 3
RATE = 600  # records per second, spread over the partitions


def _require_tools():
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: the Apache Kafka source cluster needs Maven and a JDK")
    if not os.path.isfile(TERN_BIN):
        pytest.skip(f"no tern binary at {TERN_BIN} (set TERN_BIN)")
    try:
        kafka_peer.KafkaJars(VERSION).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {VERSION} from Maven: {str(e).splitlines()[0]}")


def wait_for(what, predicate, timeout, interval=0.25, diag=lambda: ""):
    """Polls predicate() until it returns something truthy; fails with `what` after timeout."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})\n{diag()}")


# -- the source's metadata and the producer ---------------------------------------------------------

def partition_info(admin, topic):
    """{partition: (leader, replicas, isr)} from the source's Metadata."""
    md = admin.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in t.partitions.items()}


class ContinuousProducer(threading.Thread):
    """An idempotent acks=all producer writing value-<i> (key key-<i>) to partition i % 3 at
    about RATE records a second until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "log.connection.close": False,
        })
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}  # value -> (partition, offset)
        self.errors = []
        self.sent = 0
        self.fatal = None

    def _on_delivery(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.value()] = (msg.partition(), msg.offset())

    def max_acked_offset(self, partition):
        with self.lock:
            offsets = [o for p, o in self.acked.values() if p == partition]
        return max(offsets) if offsets else -1

    def run(self):
        i = 0
        step = 0.02
        per_step = max(1, int(RATE * step))
        try:
            while not self.stop_flag.is_set():
                t0 = time.time()
                for _ in range(per_step):
                    while True:
                        try:
                            self.producer.produce(TOPIC, key=b"key-%d" % i, value=b"value-%08d" % i,
                                                  partition=i % PARTITIONS, on_delivery=self._on_delivery)
                            break
                        except BufferError:
                            self.producer.poll(0.05)
                    i += 1
                self.sent = i
                self.producer.poll(0)
                time.sleep(max(0.0, step - (time.time() - t0)))
        except KafkaException as e:  # a fatal idempotence error: reported by the test
            self.fatal = e

    def finish(self, timeout=90):
        self.stop_flag.set()
        self.join(timeout=10)
        return self.producer.flush(timeout)


# -- tern's mirror CLI ------------------------------------------------------------------------------

def mirrors(tern, *args, check=True):
    out = subprocess.run([TERN_BIN, "mirrors", "--bootstrap-server", tern.bootstrap, *args],
                         capture_output=True, text=True, timeout=60)
    if check and out.returncode != 0:
        pytest.fail(f"tern mirrors {' '.join(args)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return out


def describe(tern):
    """{partition: row} of `tern mirrors --describe --json` for the mirrored topic."""
    out = mirrors(tern, "--describe", "--mirror", MIRROR, "--json", check=False)
    if out.returncode != 0:
        return {}
    try:
        rows = json.loads(out.stdout)
    except ValueError:
        return {}
    return {r["partition"]: r for r in rows if r["topic"] == TOPIC}


def plain_log(tern):
    """tern.log without its colour escapes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", Path(tern.log_path).read_text(errors="replace"))


def mirror_log_lines(tern, n=60):
    """The mirror-related lines of tern.log (the last n)."""
    try:
        lines = plain_log(tern).splitlines()
    except OSError:
        return ""
    keep = [l for l in lines if "mirror" in l.lower()]
    return "\n".join(keep[-n:])


# -- reading partitions back ------------------------------------------------------------------------

def read_records(bootstrap, partition, end, timeout=60):
    """(offset, timestamp, key, value) of every record of TOPIC/partition below `end`,
    read_committed from offset 0."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"mirror-cluster-check-{partition}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    })
    out = []
    try:
        c.assign([TopicPartition(TOPIC, partition, 0)])
        deadline = time.time() + timeout
        while (not out or out[-1][0] < end - 1) and time.time() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                if m.offset() < end:
                    out.append((m.offset(), m.timestamp()[1], m.key(), m.value()))
    finally:
        c.close()
    return out


def fetch_v4(conn, topic, partition, offset, max_bytes):
    """One raw Fetch v4 (read_committed) on a kafka_wire.Connection; returns (error,
    high_watermark, records bytes)."""
    body = struct.pack(">iiiib", -1, 100, 1, max_bytes, 1)
    body += int32(1) + string(topic)
    body += struct.pack(">iiqi", 1, partition, offset, max_bytes)
    r = Reader(conn.request(1, 4, body))
    r.int32()  # throttle time
    assert r.int32() == 1  # topics
    r.string()
    assert r.int32() == 1  # partitions
    _p, error, hw, _lso, aborted = r.take(">ihqqi")
    r.pos += 16 * max(aborted, 0)
    return error, hw, r.bytes_() or b""


def raw_batches(address, partition, end):
    """[(base offset, batch bytes)] of TOPIC/partition below `end`, by raw Fetch v4 from `address`."""
    batches = []
    offset = 0
    max_bytes = 1 << 20
    empty = 0
    with Connection(address, timeout=10) as conn:
        for _ in range(1, 100000):
            if offset >= end:
                break
            error, hw, records = fetch_v4(conn, TOPIC, partition, offset, max_bytes)
            assert error == 0, f"Fetch v4 {address} {TOPIC}-{partition}@{offset}: error {error}"
            pos = 0
            got = False
            while pos + 12 <= len(records):
                base, length = struct.unpack_from(">qi", records, pos)
                size = 12 + length
                if pos + size > len(records):
                    break
                batch = records[pos: pos + size]
                assert batch[16] == 2, f"magic {batch[16]} at {base}"
                (last_delta,) = struct.unpack_from(">i", batch, 23)
                if base + last_delta >= offset:
                    batches.append((base, batch))
                    offset = base + last_delta + 1
                    got = True
                pos += size
            if not got:
                empty += 1
                assert empty < 50, f"{address} {TOPIC}-{partition}: no batch at {offset} (hw {hw})"
    return batches


# -- the test ---------------------------------------------------------------------------------------

def test_mirror_survives_source_leader_kill_and_move():
    _require_tools()
    t_begin = time.time()
    work = Path(tempfile.mkdtemp(prefix="tern-mirror-cluster-"))
    (work / "tern").mkdir()
    cluster = kafka_peer.KafkaCluster(VERSION, work / "kafka", brokers=3)
    tern = Tern(str(work / "tern"), free_port(), extra=[
        "mirror.failed.retry.initial.backoff.ms=200",
        "mirror.failed.retry.max.backoff.ms=2000",
    ])
    producer = None
    passed = False
    timeline = []

    def mark(event):
        timeline.append(f"{time.time() - t_begin:6.1f}s {event}")

    def diag():
        try:
            source = partition_info(admin, TOPIC)
        except Exception as e:  # noqa: BLE001 -- diagnostics only
            source = repr(e)
        return ("timeline:\n" + "\n".join(timeline) +
                f"\ndescribe: {json.dumps(describe(tern), indent=None)}"
                f"\nsource partitions (leader, replicas, isr): {source}"
                f"\ntern.log (mirror lines):\n{mirror_log_lines(tern)}\n(data kept in {work})")

    try:
        cluster.start()
        mark(f"source cluster up: {cluster.bootstrap}")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log.connection.close": False})
        fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])
        fs[TOPIC].result(timeout=30)
        wait_for("the topic's leaders and full ISRs", lambda: (
            (info := partition_info(admin, TOPIC)) and len(info) == PARTITIONS and
            all(leader >= 0 and len(isr) == 3 for leader, _, isr in info.values())), 30)

        tern.start()
        conf = work / "mirror.properties"
        conf.write_text(f"bootstrap.servers={cluster.bootstrap}\nmirror.fetch.wait.max.ms=200\n")
        mirrors(tern, "--create", "--mirror", MIRROR, "--mirror-config", str(conf))
        mirrors(tern, "--start", "--mirror", MIRROR, "--topics", TOPIC)
        mark("mirror started")

        producer = ContinuousProducer(cluster.bootstrap)
        producer.start()
        wait_for("tern to mirror records of every partition", lambda: (
            (d := describe(tern)) and len(d) == PARTITIONS and
            all(r["destinationOffset"] > 50 for r in d.values())), 60, diag=diag)
        mark(f"mirroring: {[(p, r['destinationOffset']) for p, r in sorted(describe(tern).items())]}")

        # 1. kill -9 the leader of partition 0.
        victim, replicas, _ = partition_info(admin, TOPIC)[0]
        cluster.kill(victim)
        mark(f"killed node {victim} (leader of partition 0; replicas {replicas})")
        admin = AdminClient({"bootstrap.servers": ",".join(cluster.address(n) for n in cluster.running()),
                             "log.connection.close": False})
        new_leader = wait_for("a new leader of partition 0", lambda: (
            (info := partition_info(admin, TOPIC).get(0)) and info[0] not in (-1, victim) and info[0]), 30,
            diag=diag)
        mark(f"partition 0 now led by node {new_leader}")
        at_election = producer.max_acked_offset(0)
        target = wait_for(f"records acknowledged by node {new_leader} on partition 0", lambda: (
            (o := producer.max_acked_offset(0)) > at_election and o), 30, diag=diag)
        wait_for(f"tern to mirror partition 0 past offset {target} from node {new_leader} "
                 f"while node {victim} is down",
                 lambda: describe(tern).get(0, {}).get("destinationOffset", -1) > target, 45, diag=diag)
        mark(f"tern mirrored partition 0 past {target} from the new leader: {describe(tern).get(0)}")

        # 2. restart it and move partition 0's leadership back (preferred leader election).
        cluster.start_node(victim)
        mark(f"node {victim} restarted")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log.connection.close": False})
        wait_for(f"node {victim} back in the ISR of partition 0",
                 lambda: victim in partition_info(admin, TOPIC).get(0, (0, [], []))[2], 60, diag=diag)
        mark(f"node {victim} in the ISR of partition 0")
        if replicas[0] != victim:
            # Leadership moved before the kill (a slow heartbeat): make the victim the preferred
            # replica first, a reorder that moves no data.
            plan = work / "reorder.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [{
                "topic": TOPIC, "partition": 0, "replicas": [victim] + [r for r in replicas if r != victim]}]}))
            reorder = cluster.jars.run(
                "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server",
                cluster.bootstrap, "--reassignment-json-file", str(plan), "--execute",
                java=cluster.java, timeout=120, jvm_opts=("-Xmx256m", "-XX:TieredStopAtLevel=1"))
            assert reorder.returncode == 0, f"kafka-reassign-partitions failed:\n{reorder.stdout}{reorder.stderr}"
            wait_for(f"node {victim} first among the replicas of partition 0",
                     lambda: partition_info(admin, TOPIC).get(0, (0, [0]))[1][0] == victim, 30, diag=diag)
            mark(f"replicas of partition 0 reordered: {partition_info(admin, TOPIC).get(0)}")
        election = cluster.jars.run(
            "org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", cluster.bootstrap,
            "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0",
            java=cluster.java, timeout=120, jvm_opts=("-Xmx256m", "-XX:TieredStopAtLevel=1"))
        assert election.returncode == 0, f"kafka-leader-election failed:\n{election.stdout}{election.stderr}"
        wait_for(f"node {victim} leading partition 0 again",
                 lambda: partition_info(admin, TOPIC).get(0, (-1,))[0] == victim, 30, diag=diag)
        mark(f"partition 0 moved back to node {victim}: {election.stdout.strip()}")
        at_move = producer.max_acked_offset(0)
        target = wait_for(f"records acknowledged by node {victim} on partition 0", lambda: (
            (o := producer.max_acked_offset(0)) > at_move and o), 30, diag=diag)
        wait_for(f"tern to mirror partition 0 past offset {target} from node {victim} after the move",
                 lambda: describe(tern).get(0, {}).get("destinationOffset", -1) > target, 45, diag=diag)
        mark(f"tern mirrored partition 0 past {target} after the move: {describe(tern).get(0)}")

        # 3. stop producing; tern catches up.
        unflushed = producer.finish()
        mark(f"producer stopped: {producer.sent} sent, {len(producer.acked)} acked, "
             f"{len(producer.errors)} failed, {unflushed} unflushed")
        assert producer.fatal is None, f"fatal producer error: {producer.fatal}"
        assert unflushed == 0, f"{unflushed} records still in flight after 90 s"

        probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "mirror-cluster-probe",
                          "isolation.level": "read_committed"})
        try:
            ends = {p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                    for p in range(PARTITIONS)}
        finally:
            probe.close()
        mark(f"source end offsets {ends}")
        final = wait_for("lag 0 on every partition at the source's end offsets", lambda: (
            (d := describe(tern)) and len(d) == PARTITIONS and
            all(d[p]["lag"] == 0 and d[p]["destinationOffset"] == ends[p] and d[p]["sourceOffset"] == ends[p]
                and d[p]["state"] == "MIRRORING" for p in range(PARTITIONS)) and d), 90, interval=0.5,
            diag=diag)
        mark(f"caught up: {final}")
        log = plain_log(tern)
        failures = [l for l in log.splitlines() if "mirror partition failed" in l]
        attempts = sorted({int(a) for l in failures for a in re.findall(r" attempt=(-?\d+)", l)})
        mark(f"tern.log: {len(failures)} FAILED transitions (retry attempts {attempts}), "
             f"{log.count('needs its source leader again')} leader look-ups")

        # 4. the same records at the same offsets.
        info = partition_info(admin, TOPIC)
        acked_values = set(producer.acked)
        source_values = []
        for p in range(PARTITIONS):
            src = read_records(cluster.bootstrap, p, ends[p])
            dst = read_records(tern.bootstrap, p, ends[p])
            assert [r[0] for r in src] == list(range(ends[p])), f"source partition {p} has offset gaps"
            if dst != src:
                src_offsets = {r[0] for r in src}
                dst_offsets = [r[0] for r in dst]
                missing = sorted(src_offsets - set(dst_offsets))
                doubled = len(dst_offsets) - len(set(dst_offsets))
                first_diff = next((i for i, (a, b) in enumerate(zip(src, dst)) if a != b), None)
                pytest.fail(
                    f"partition {p}: tern has {len(dst)} records, the source {len(src)}; "
                    f"missing offsets {missing[:20]}, doubled {doubled}, first difference at index "
                    f"{first_diff}: source {src[first_diff] if first_diff is not None else None} vs "
                    f"tern {dst[first_diff] if first_diff is not None else None}\n{diag()}")
            source_values += [r[3] for r in src]

            # 5. the same batch bytes, the partition leader epoch included.
            leader = info[p][0]
            src_batches = raw_batches(cluster.address(leader), p, ends[p])
            dst_batches = raw_batches(tern.bootstrap, p, ends[p])
            assert [b for b, _ in dst_batches] == [b for b, _ in src_batches], \
                f"partition {p}: batch base offsets differ"
            for (base, a), (_, b) in zip(src_batches, dst_batches):
                assert a == b, (f"partition {p}: batch at {base} differs (leader epochs "
                                f"{struct.unpack_from('>i', a, 12)[0]}/{struct.unpack_from('>i', b, 12)[0]})")
            epochs = sorted({struct.unpack_from(">i", a, 12)[0] for _, a in src_batches})
            mark(f"partition {p}: {ends[p]} records, {len(src_batches)} batches identical "
                 f"(source leader epochs {epochs})")

        assert len(source_values) == len(set(source_values)), "the source holds a value twice"
        assert acked_values <= set(source_values), \
            f"{len(acked_values - set(source_values))} acknowledged values missing from the source"
        mark(f"{len(source_values)} records equal on both sides")
        print("\n".join(timeline))
        passed = True
    finally:
        if producer is not None and producer.is_alive():
            producer.stop_flag.set()
            producer.join(timeout=10)
        # Let go of the clients before their brokers stop (else librdkafka reconnects noisily).
        producer = admin = None
        gc.collect()
        tern.stop()
        cluster.stop(timeout=20)
        if passed and not os.environ.get("TERN_E2E_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        elif passed:
            print(f"data kept in {work}")
        else:
            print(f"\ndata kept in {work}\n" + "\n".join(timeline))
