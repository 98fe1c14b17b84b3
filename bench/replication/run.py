#!/usr/bin/env python3
"""Replication: a three-broker Tern against a three-broker Apache Kafka (KRaft) on this machine.

Both clusters are three combined broker+controller nodes on loopback ports with their own data
dirs, started by this script once and running side by side for the whole run; each is first
warmed up (unmeasured: librdkafka and ProducerPerformance runs, so that Kafka's JIT has compiled
its hot paths).  Every cell writes a new topic with replication factor 3 and
min.insync.replicas=2 (1 KiB records, acks=all, no compression) and runs against both clusters
back to back, the order alternating from cell to cell and from round to round.  Cells, per
partition count (default 3, then 1):

  - java: Apache Kafka's ProducerPerformance (kafka-producer-perf-test), --throughput -1,
    `--records` records: MB/s, records/s and its p50/p99/p99.9 (mostly queueing when unthrottled);
  - c: librdkafka (confluent-kafka's Producer, driven from a Python child process: see
    `c_producer`), as fast as it goes, `--c-records` records: MB/s, records/s, p50/p99/p99.9 of
    librdkafka's own produce()-to-acknowledgement time (Message.latency(), every 16th message);
  - rate: ProducerPerformance at `--rate` records/s for `--rate-seconds` s: the latency of a
    cluster that keeps up (p50/p99/p99.9 as the tool reports them).

Per cell and cluster: the three brokers' utime+stime (/proc/<pid>/stat, before and after the
client's run, client JVM start included) summed, per GB of payload (records x 1024 bytes, counted
once, not once per replica); the client's CPU (getrusage of the finished child) likewise; the
brokers' CPU while the cluster sat idle just before the cell; the JVMs' JIT compiler threads' CPU
(part of the brokers'); the summed peak RSS of the three.
After every producer cell the partitions' high watermarks must add up to exactly the number of
records the client reports acknowledged and every ISR must be back to 3 replicas; a broker that
exits, a client error, a timeout or a missing record stops the run (data dirs and node logs kept).
Each topic is deleted after its check (DeleteTopics), so the disk holds about one cell's data.
Before every measured run: sync(2), then both clusters' files dropped from the page cache
(posix_fadvise DONTNEED; see flush_page_cache), then `--settle` seconds of idle CPU measured.
After a run that went through, the data dirs are removed and the node logs kept (the path is
printed); the section for bench/RESULTS.md counts ISR changes, truncations, warnings and errors
in them.

    python bench/replication/run.py [--records 300000] [--c-records 1000000] [--partitions 3 1] [--rounds 2]
        [--rate 5000 --rate-seconds 30] [--tern /tmp/tern-bench-bin] [--write-results]

Needs: java 17, the Apache Kafka jars (tests/harness/kafka_peer.py resolves them into
$TERN_CACHE/kafka/<version> with mvn on first use), a tern binary (--tern; copy it somewhere first
if it may be rebuilt during the run) and confluent-kafka in the venv running this script.
Not a test: nothing here asserts about the figures.
"""

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
import kafka_peer  # noqa: E402
from kafka_wire import metadata_brokers  # noqa: E402
from processes import free_port  # noqa: E402

# PRODUCER_RE (ProducerPerformance's final line) and machine() from the single-broker comparison.
_spec = importlib.util.spec_from_file_location("kafka_compare_run", ROOT / "bench" / "kafka_compare" / "run.py")
kafka_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kafka_compare)

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
TOOL_JVM = ["-Xmx512m"]
RECORD_SIZE = 1024
REPLICATION_FACTOR = 3
MIN_ISR = 2
RAW = []  # the per-run lines, for RESULTS.md


class BenchFailure(RuntimeError):
    """Something in a cluster went wrong (a broker exited, a client failed, records missing)."""


# -- clusters ----------------------------------------------------------------------------------------


class TernCluster:
    """Three combined `tern server` nodes (node ids 0..2), as tests/e2e/test_cluster.py starts them:
    node.id, process.roles=broker,controller, PLAINTEXT and CONTROLLER listeners on loopback,
    controller.quorum.voters, log.dirs; everything else at tern's defaults (which are Kafka's for
    replica.*).  Logs in <dir>/node-<id>/tern.log."""

    name = "tern"

    def __init__(self, binary, data_dir, nodes=3):
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.node_ids = list(range(nodes))
        self.ports = {n: free_port() for n in self.node_ids}
        self.controller_ports = {n: free_port() for n in self.node_ids}
        self.voters = ",".join(f"{n}@127.0.0.1:{self.controller_ports[n]}" for n in self.node_ids)
        self.procs = {}

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in self.node_ids)

    def log_path(self, n):
        return self.data_dir / f"node-{n}" / "tern.log"

    def command(self, n):
        return [self.binary, "server",
                "--override", f"node.id={n}",
                "--override", "process.roles=broker,controller",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.ports[n]},"
                              f"CONTROLLER://127.0.0.1:{self.controller_ports[n]}",
                "--override", f"controller.quorum.voters={self.voters}",
                "--override", f"log.dirs={self.data_dir / f'node-{n}' / 'data'}"]

    def start(self, timeout=90):
        for n in self.node_ids:
            (self.data_dir / f"node-{n}").mkdir(parents=True, exist_ok=True)
            with open(self.log_path(n), "ab") as log:
                self.procs[n] = subprocess.Popen(self.command(n), stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        want = set(self.node_ids)
        while time.time() < deadline:
            self.check_alive("start")
            if all(want <= (metadata_brokers("127.0.0.1", self.ports[n]) or set())
                   for n in self.node_ids):
                return self
            time.sleep(0.2)
        raise BenchFailure(f"tern cluster did not come up in {timeout}s:\n{self.tails()}")

    def pids(self):
        return [p.pid for p in self.procs.values()]

    def check_alive(self, what):
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        if dead:
            raise BenchFailure(f"tern node(s) exited during {what}: {dead}\n{self.tails()}")

    def stop(self, timeout=30):
        """SIGTERM to all, SIGKILL after timeout; returns the nodes that needed SIGKILL."""
        live = {n: p for n, p in self.procs.items() if p.poll() is None}
        for p in live.values():
            p.send_signal(signal.SIGTERM)
        unclean = []
        deadline = time.time() + timeout
        for n, p in live.items():
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                unclean.append(n)
                p.kill()
                p.wait()
        return unclean

    def tails(self, lines=40):
        out = []
        for n in self.node_ids:
            try:
                text = self.log_path(n).read_text(errors="replace")
            except OSError:
                text = ""
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)
            out.append(f"----- {self.log_path(n)} (last {lines} lines) -----\n"
                       + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out)

    def describe(self):
        return "\n".join(" ".join(map(shlex.quote, self.command(n))) for n in self.node_ids)

    def log_paths(self):
        return [self.log_path(n) for n in self.node_ids]

    def data_dirs(self):
        return [self.data_dir / f"node-{n}" / "data" for n in self.node_ids]

    # Log lines worth counting: ISR changes (a follower that fell behind for replica.lag.time.max.ms),
    # truncations, warnings and errors.
    LOG_EVENTS = {"ISR changed": r"ISR changed|ISR change refused", "truncations": r"truncating",
                  "WARN": r" WARN ", "ERROR": r" ERROR "}


class KafkaCluster3:
    """Three combined Apache Kafka KRaft nodes (node ids 1..3): tests/harness/kafka_peer.py's
    KafkaCluster, with kafka-server-start.sh's JVM options (G1, -Xms/-Xmx `heap`) and its thread
    and heartbeat settings put back to Kafka's defaults (the harness shrinks them for tests)."""

    name = "kafka"

    # Kafka's defaults for what KafkaCluster._properties tunes down for tests.
    DEFAULTS = {
        "num.network.threads": "3",
        "num.io.threads": "8",
        "background.threads": "10",
        "broker.heartbeat.interval.ms": "2000",
        "broker.session.timeout.ms": "9000",
        "log.cleaner.dedupe.buffer.size": str(128 * 1024 * 1024),
        "offsets.topic.num.partitions": "50",
        "transaction.state.log.num.partitions": "50",
    }

    def __init__(self, version, data_dir, heap):
        jvm = [o for o in kafka_peer.SERVER_JVM_OPTS if not o.startswith(("-Xmx", "-Xms"))]
        self.cluster = kafka_peer.KafkaCluster(version, data_dir, brokers=3,
                                               jvm_opts=[f"-Xmx{heap}", f"-Xms{heap}", *jvm],
                                               overrides=self.DEFAULTS)
        self.data_dir = Path(data_dir)

    @property
    def bootstrap(self):
        return self.cluster.bootstrap

    def start(self):
        try:
            self.cluster.start(timeout=180)
        except RuntimeError as e:
            raise BenchFailure(str(e)) from e
        return self

    def pids(self):
        return [p.pid for p in self.cluster.procs.values()]

    def check_alive(self, what):
        dead = {n: p.returncode for n, p in self.cluster.procs.items() if p.poll() is not None}
        if dead:
            raise BenchFailure(f"kafka node(s) exited during {what}: {dead}\n{self.tails()}")

    def stop(self):
        self.cluster.stop()
        return []

    def tails(self, lines=40):
        return "\n".join(f"----- {self.cluster.log_path(n)} -----\n{self.cluster.tail(n, lines)}"
                         for n in self.cluster.node_ids)

    def log_paths(self):
        return [self.cluster.log_path(n) for n in self.cluster.node_ids]

    def data_dirs(self):
        return [self.cluster.node_dir(n) / "logs" for n in self.cluster.node_ids]

    # (a new follower's "Truncating ... to local high watermark 0" is no event)
    LOG_EVENTS = {"ISR changed": r"Shrinking ISR|Expanding ISR|ISR updated to",
                  "truncations": r"Truncating.* to (offset|local high watermark) [1-9]",
                  "WARN": r"\] WARN ", "ERROR": r"\] ERROR "}

    def describe(self):
        jars = self.cluster.jars
        cmd = " ".join(map(shlex.quote, jars.command("kafka.Kafka", "node-<id>/server.properties",
                                                     jvm_opts=self.cluster.jvm_opts)))
        return (cmd.replace(jars.classpath(), f"<{jars.libs}/*.jar>")
                + "\nnode-1/server.properties (ports vary):\n"
                + (self.data_dir / "node-1" / "server.properties").read_text().rstrip())


def log_events(cluster):
    """{event: count} over the cluster's node logs so far (see LOG_EVENTS)."""
    counts = {k: 0 for k in cluster.LOG_EVENTS}
    for path in cluster.log_paths():
        try:
            text = re.sub(r"\x1b\[[0-9;]*m", "", Path(path).read_text(errors="replace"))
        except OSError:
            continue
        for line in text.splitlines():
            for k, rx in cluster.LOG_EVENTS.items():
                if re.search(rx, line):
                    counts[k] += 1
    return counts


# -- measuring ---------------------------------------------------------------------------------------


def proc_cpu(pid):
    """utime+stime of a process (all its threads), in seconds."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def proc_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def jit_cpu(pids):
    """CPU seconds of the JVMs' JIT compiler threads ("C1/C2 CompilerThreN"; 0 for tern).  Approximate:
    a compiler thread that exits (JDK 17 starts and stops them on demand) takes its time with it."""
    total = 0.0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                if "CompilerThre" not in open(f"/proc/{pid}/task/{tid}/comm").read():
                    continue
                fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                pass
    return total


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Watch:
    """CPU seconds of some processes (and of this script's finished children: the client) over a
    block, and the peak of their summed VmRSS (polled every 200 ms)."""

    def __init__(self, pids, other_pids=()):
        self.pids = list(pids)
        self.other_pids = list(other_pids)
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, sum(proc_rss_kib(p) for p in self.pids))
            self._stop.wait(0.2)

    def __enter__(self):
        self.cpu0 = sum(proc_cpu(p) for p in self.pids)
        self.jit0 = jit_cpu(self.pids)
        self.other0 = sum(proc_cpu(p) for p in self.other_pids)
        self.client0 = children_cpu()
        self.t0 = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.wall_s = time.time() - self.t0
        self.cpu_s = sum(proc_cpu(p) for p in self.pids) - self.cpu0
        self.jit_s = max(0.0, jit_cpu(self.pids) - self.jit0)
        self.other_s = sum(proc_cpu(p) for p in self.other_pids) - self.other0
        self.client_s = children_cpu() - self.client0


def meminfo_mib(*keys):
    with open("/proc/meminfo") as f:
        return sum(int(l.split()[1]) for l in f if l.split(":")[0] in keys) / 1024


def flush_page_cache(dirs):
    """Before a measured run: sync(2), so that no run starts with the run before's dirty pages
    still to be written back, then posix_fadvise(DONTNEED) on every file under `dirs` (both
    clusters' data), so that no run has to reclaim the page cache the runs before filled.  Without
    the second step the runs were bistable: once free memory was used up, a librdkafka run paid for
    reclaiming pages as it wrote (system time ~50 % instead of ~33 %, half the MB/s, twice the CPU
    per GB, client included); and since Kafka keeps a deleted topic's files for 60 s
    (file.delete.delay.ms) while tern frees them at once, it was mostly the run right after a Kafka
    run that paid.  Only this benchmark's files are dropped; the rest of the page cache is left alone.
    Returns (dirty + writeback MiB before, free MiB after, seconds taken)."""
    before = meminfo_mib("Dirty", "Writeback")
    t0 = time.time()
    os.sync()
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in files:
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError:
                    pass
                finally:
                    os.close(fd)
    return before, meminfo_mib("MemFree"), time.time() - t0


def idle_cpu_pct(pids, seconds):
    """The brokers' summed CPU while nobody produces, in % of one core."""
    c0 = sum(proc_cpu(p) for p in pids)
    time.sleep(seconds)
    return 100 * (sum(proc_cpu(p) for p in pids) - c0) / seconds


# -- topics and their contents -------------------------------------------------------------------------


def create_topic(cluster, topic, partitions):
    """Replication factor 3, min.insync.replicas=2; returns once every broker reports every
    partition with a leader and 3 replicas in its ISR.  Returns {partition: leader}."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                        replication_factor=REPLICATION_FACTOR,
                                        config={"min.insync.replicas": str(MIN_ISR)})],
                              operation_timeout=30)[topic]
    try:
        fut.result(timeout=60)
    except Exception as e:  # noqa: BLE001
        raise BenchFailure(f"{cluster.name}: CreateTopics {topic} failed: {e}\n{cluster.tails()}") from e
    return wait_full_isr(cluster, topic, partitions, 60, f"creation of {topic}")


def delete_topic(cluster, topic):
    """Deletes a cell's topic once it has been checked, so that a run's disk use stays at about
    one cell's (3 replicas x up to 1 GB per cluster)."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    except Exception as e:  # noqa: BLE001
        raise BenchFailure(f"{cluster.name}: DeleteTopics {topic} failed: {e}\n{cluster.tails()}") from e


def partition_view(address, topic):
    """{partition: (leader, replicas, isr)} of `topic` as a broker of `address` (librdkafka picks one) reports it."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": address})
    md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return None
    return {p: (pm.leader, tuple(sorted(pm.replicas)), tuple(sorted(pm.isrs)))
            for p, pm in md.partitions.items()}


def wait_full_isr(cluster, topic, partitions, timeout, what):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        cluster.check_alive(what)
        try:
            last = partition_view(cluster.bootstrap, topic)
        except Exception as e:  # noqa: BLE001
            last = repr(e)
        if isinstance(last, dict) and len(last) == partitions and all(
                leader >= 0 and len(replicas) == REPLICATION_FACTOR and len(isr) == REPLICATION_FACTOR
                for leader, replicas, isr in last.values()):
            return {p: v[0] for p, v in sorted(last.items())}
        time.sleep(0.2)
    raise BenchFailure(f"{cluster.name}: {topic} has no full ISR {timeout}s after {what} "
                       f"(last view: {last})\n{cluster.tails()}")


def high_watermarks(cluster, topic, partitions):
    """{partition: (log start, high watermark)} through ListOffsets (earliest / latest, as a
    consumer asks: the latest is the high watermark), which needs no consumer group, so that
    neither cluster creates __consumer_offsets during the run."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    out = {}
    for spec, i in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        futs = admin.list_offsets({TopicPartition(topic, p): spec for p in range(partitions)},
                                  request_timeout=30)
        for tp, fut in futs.items():
            out.setdefault(tp.partition, [None, None])[i] = fut.result(timeout=60).offset
    return {p: tuple(v) for p, v in sorted(out.items())}


def check_contents(cluster, topic, partitions, acked):
    """Every acknowledged record is below the high watermark, nothing else is; the ISR is whole."""
    leaders = wait_full_isr(cluster, topic, partitions, 30, f"producing to {topic}")
    marks = high_watermarks(cluster, topic, partitions)
    total = sum(hi - lo for lo, hi in marks.values())
    if total != acked:
        raise BenchFailure(f"{cluster.name}: {topic} holds {total} records below its high watermarks "
                           f"{marks}, the client had {acked} acknowledged\n{cluster.tails()}")
    return leaders, marks


# -- clients -------------------------------------------------------------------------------------------


def java_produce(jars, bootstrap, topic, records, throughput, timeout):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
            "--record-size", RECORD_SIZE, "--throughput", throughput,
            "--command-property", "acks=all", "compression.type=none"]
    try:
        out = jars.run(PRODUCER, *args, jvm_opts=TOOL_JVM, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchFailure(f"ProducerPerformance did not finish in {timeout}s:\n"
                           f"{(e.stdout or b'')[-2000:]}\n{(e.stderr or b'')[-3000:]}") from e
    m = None
    for line in out.stdout.splitlines():
        m = kafka_compare.PRODUCER_RE.search(line) or m
    if out.returncode != 0 or not m or "Exception" in out.stderr:
        raise BenchFailure(f"ProducerPerformance failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                           f"{out.stderr[-3000:]}")
    return {"records": int(m.group(1)), "rec_s": float(m.group(2)), "mb_s": float(m.group(3)),
            "p50": float(m.group(6)), "p99": float(m.group(8)), "p999": float(m.group(9)),
            "cmd": "ProducerPerformance " + " ".join(map(str, args))}


C_CONFIG = {"acks": "all", "enable.idempotence": True, "compression.type": "none", "linger.ms": 5}


def c_produce(bootstrap, topic, records, timeout):
    """Runs c_producer in a child process (so that its CPU is the client's) and returns its result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--c-producer", bootstrap, topic, str(records)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise BenchFailure(f"the librdkafka producer did not finish in {timeout}s:\n"
                           f"{(e.stdout or '')[-2000:]}\n{(e.stderr or '')[-3000:]}") from e
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        raise BenchFailure(f"the librdkafka producer failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                           f"{out.stderr[-3000:]}")
    r = json.loads(lines[-1])
    if r["errors"] or r["unflushed"] or r["acked"] != records:
        raise BenchFailure(f"the librdkafka producer: {r['acked']} of {records} acknowledged, "
                           f"{r['unflushed']} still queued, {r['errors']} delivery errors in the sample "
                           f"(first: {r['first_error']})")
    r["cmd"] = " ".join(["bench/replication/run.py", *cmd[2:]]).replace(bootstrap, "<bootstrap>")
    return r


LATENCY_SAMPLE = 16  # every 16th message carries a delivery callback (its produce()-to-ack time)


def c_producer(bootstrap, topic, records):
    """The C client's producer loop: librdkafka through confluent-kafka, one 1 KiB value of random
    A-Z bytes (as ProducerPerformance makes them) sent `records` times with no key, then flush().
    Only every LATENCY_SAMPLE-th message has a delivery callback (the Python callback per message
    would cost the loop about as much as produce() itself): its error, if any, and its
    produce()-to-ack time; that nothing else was lost the caller checks against the high
    watermarks.  Prints one JSON line: MB/s (MiB, like ProducerPerformance) and records/s from
    the first produce() to the end of flush(), and the sampled latency percentiles."""
    from confluent_kafka import Producer
    client_errors = []
    p = Producer({"bootstrap.servers": bootstrap, **C_CONFIG,
                  "error_cb": lambda e: client_errors.append(str(e))})
    p.list_topics(topic, timeout=30)
    payload = bytes(random.randint(65, 90) for _ in range(RECORD_SIZE))
    lat = []
    state = {"errors": 0, "first_error": None}

    def delivered(err, msg):
        if err is not None:
            state["errors"] += 1
            state["first_error"] = state["first_error"] or str(err)
        else:
            lat.append(msg.latency())

    produce = p.produce
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                if i % LATENCY_SAMPLE == 0:
                    produce(topic, payload, on_delivery=delivered)
                else:
                    produce(topic, payload)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    secs = time.perf_counter() - t0
    lat.sort()

    def pct(q):
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    acked = records - left if not state["errors"] else len(lat) * LATENCY_SAMPLE
    print(json.dumps({"records": records, "acked": acked, "unflushed": left, "errors": state["errors"],
                      "first_error": state["first_error"] or (client_errors[0] if client_errors else None),
                      "client_errors": len(client_errors), "secs": secs,
                      "rec_s": acked / secs, "mb_s": acked * RECORD_SIZE / secs / 1024 / 1024,
                      "p50": pct(0.5), "p99": pct(0.99), "p999": pct(0.999)}), flush=True)


# -- the run -------------------------------------------------------------------------------------------


def cells(args):
    for partitions in args.partitions:
        yield ("java", partitions)
        yield ("c", partitions)
        if args.rate:
            yield ("rate", partitions)


def cell_name(args, kind, partitions):
    return {"java": f"p={partitions} ProducerPerformance, max rate",
            "c": f"p={partitions} librdkafka, max rate",
            "rate": f"p={partitions} ProducerPerformance at {args.rate} rec/s"}[kind]


def run_cell(args, jars, cluster, other, kind, partitions, topic):
    leaders_before = create_topic(cluster, topic, partitions)
    dirty_mib, free_mib, sync_s = flush_page_cache(cluster.data_dirs() + other.data_dirs())
    idle = idle_cpu_pct(cluster.pids(), args.settle)
    load = open("/proc/loadavg").read().split()[0]
    timeout = args.cell_timeout
    with Watch(cluster.pids(), other.pids()) as w:
        if kind == "java":
            r = java_produce(jars, cluster.bootstrap, topic, args.records, -1, timeout)
        elif kind == "rate":
            r = java_produce(jars, cluster.bootstrap, topic, args.rate * args.rate_seconds, args.rate, timeout)
        else:
            r = c_produce(cluster.bootstrap, topic, args.c_records, timeout)
    cluster.check_alive(f"{kind} p={partitions}")
    leaders, marks = check_contents(cluster, topic, partitions, r["records"] if kind != "c" else r["acked"])
    if not args.keep:
        delete_topic(cluster, topic)
    gb = r["records"] * RECORD_SIZE / 1e9
    r.update({"broker_cpu_s": w.cpu_s, "jit_s": w.jit_s, "client_cpu_s": w.client_s, "other_cpu_s": w.other_s,
              "wall_s": w.wall_s, "broker_s_per_gb": w.cpu_s / gb, "client_s_per_gb": w.client_s / gb,
              "broker_pct": 100 * w.cpu_s / w.wall_s, "client_pct": 100 * w.client_s / w.wall_s,
              "idle_pct": idle, "dirty_mib": dirty_mib, "free_mib": free_mib, "sync_s": sync_s, "rss_mib": w.peak_kib / 1024, "load": load,
              "leaders": leaders, "leaders_before": leaders_before,
              "hw": {p: hi for p, (lo, hi) in marks.items()}})
    return r


WARMUP_JIT_QUIET_S = 1.0  # JIT compiler threads' CPU seconds per warm-up step that count as quiet
WARMUP_EXTRA_STEPS = 4


def warm_up(args, jars, cluster, dirs, started):
    """Unmeasured runs that make the JVMs compile their hot paths before anything is measured:
    librdkafka, then ProducerPerformance on 3 and on 1 partition(s), then more ProducerPerformance
    steps on 3 partitions (up to WARMUP_EXTRA_STEPS, half as many records) while the brokers' JIT
    compiler threads still took more than WARMUP_JIT_QUIET_S in the step before.  (A Kafka cell
    after a librdkafka-only warm-up spent ~40 % of its CPU in C2 compiler threads, and one after
    the three fixed steps still ~35 %.)  Tern, which compiles nothing, gets the three fixed steps."""
    steps = [("c", 3, args.warmup), ("java", 3, args.warmup), ("java", 1, args.warmup // 2)]
    i = 0
    while i < len(steps):
        client, partitions, records = steps[i]
        topic = f"warmup-{i}-p{partitions}-{client}"
        create_topic(cluster, topic, partitions)
        jit0 = jit_cpu(cluster.pids())
        if client == "c":
            r = c_produce(cluster.bootstrap, topic, records, args.cell_timeout)
            acked = r["acked"]
        else:
            r = java_produce(jars, cluster.bootstrap, topic, records, -1, args.cell_timeout)
            acked = r["records"]
        jit = max(0.0, jit_cpu(cluster.pids()) - jit0)
        check_contents(cluster, topic, partitions, acked)
        if not args.keep:
            delete_topic(cluster, topic)
        flush_page_cache(dirs)
        line = (f"[{time.time() - started:5.0f}s] warm-up {cluster.name}: {records} records, p={partitions}, "
                f"{'librdkafka' if client == 'c' else 'ProducerPerformance'}: {r['mb_s']:.1f} MB/s, "
                f"JIT threads {jit:.1f} s (not counted)")
        print(line, flush=True)
        RAW.append(line)
        i += 1
        if i == len(steps) and jit > WARMUP_JIT_QUIET_S and len(steps) < 3 + WARMUP_EXTRA_STEPS:
            steps.append(("java", 3, args.warmup // 2))


def run(args):
    jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
    work = Path(tempfile.mkdtemp(prefix="tern-replication-bench-"))
    results = {}  # (cell name, cluster) -> [result]
    info = {}
    started = time.time()
    failed = False
    clusters = {}
    all_clusters = []
    try:
        # One pair of clusters for the whole run: Kafka's JIT gets all of the warm-up and every
        # round; each cell writes its own topic.
        t0 = time.time()
        clusters["tern"] = TernCluster(args.tern, work / "tern").start()
        t1 = time.time()
        clusters["kafka"] = KafkaCluster3(args.kafka_version, work / "kafka", args.kafka_heap).start()
        t2 = time.time()
        all_clusters = list(clusters.values())
        print(f"tern cluster up in {t1 - t0:.1f}s, kafka cluster up in {t2 - t1:.1f}s ({work})", flush=True)
        info["tern"] = clusters["tern"].describe()
        info["kafka"] = clusters["kafka"].describe()
        if args.warmup:
            for b in ("tern", "kafka"):
                warm_up(args, jars, clusters[b], [d for c in all_clusters for d in c.data_dirs()], started)
        for rnd in range(args.rounds):
            for i, (kind, partitions) in enumerate(cells(args)):
                name = cell_name(args, kind, partitions)
                order = ["tern", "kafka"] if (rnd + i) % 2 == 0 else ["kafka", "tern"]
                for b in order:
                    other = clusters["kafka" if b == "tern" else "tern"]
                    topic = f"r{rnd}-p{partitions}-{kind}"
                    r = run_cell(args, jars, clusters[b], other, kind, partitions, topic)
                    info.setdefault(kind, r["cmd"].replace(clusters[b].bootstrap, "<bootstrap>"))
                    results.setdefault((name, b), []).append(r)
                    line = (f"[{time.time() - started:5.0f}s] r{rnd} {name:40s} {b:5s} "
                            f"{r['mb_s']:6.1f} MB/s {r['rec_s']:7.0f} rec/s "
                            f"p50/p99/p99.9 {r['p50']:.0f}/{r['p99']:.0f}/{r['p999']:.0f} ms | "
                            f"brokers {r['broker_cpu_s']:.1f} cpu-s ({r['broker_pct']:.0f}%, "
                            f"{r['broker_s_per_gb']:.0f} s/GB, JIT threads {r['jit_s']:.1f} s, "
                            f"idle before {r['idle_pct']:.0f}%) "
                            f"dirty before {r['dirty_mib']:.0f} MiB, free after drop {r['free_mib'] / 1024:.1f} GiB "
                            f"({r['sync_s']:.1f}s) "
                            f"client {r['client_cpu_s']:.1f} cpu-s ({r['client_pct']:.0f}%) "
                            f"other cluster {r['other_cpu_s']:.1f} cpu-s | wall {r['wall_s']:.1f}s "
                            f"rss {r['rss_mib']:.0f} MiB load {r['load']} leaders {list(r['leaders'].values())}")
                    print(line, flush=True)
                    RAW.append(line)
        for b, c in clusters.items():
            # Before the stop: shutting down logs warnings of its own (Kafka's raft client).
            info[f"events-{b}"] = log_events(c)
        for c in list(clusters.values()):
            unclean = c.stop()
            if unclean:
                raise BenchFailure(f"{c.name} nodes {unclean} did not exit within 30 s of SIGTERM\n{c.tails()}")
        clusters = {}
    except BaseException:
        failed = True
        print(f"\nFAILED; data dirs and node logs kept in {work}", file=sys.stderr, flush=True)
        raise
    finally:
        for c in clusters.values():
            try:
                c.stop()
            except Exception:  # noqa: BLE001
                pass
        if not failed and not args.keep:
            # The node logs stay (small); the data goes.
            for c in all_clusters:
                for d in c.data_dirs():
                    shutil.rmtree(d, ignore_errors=True)
            print(f"node logs kept in {work}", flush=True)
    return results, info, time.time() - started


def table(args, results):
    """One row per cell: each metric as `tern / kafka (tern/kafka)`, medians over the rounds."""
    metrics = [("MB/s", "mb_s", "{:.1f}"), ("records/s", "rec_s", "{:.0f}"),
               ("p50 ms", "p50", "{:.0f}"), ("p99 ms", "p99", "{:.0f}"), ("p99.9 ms", "p999", "{:.0f}"),
               ("broker CPU s/GB", "broker_s_per_gb", "{:.0f}"), ("broker CPU %", "broker_pct", "{:.0f}"),
               ("client CPU s/GB", "client_s_per_gb", "{:.0f}"), ("client CPU %", "client_pct", "{:.0f}"),
               ("brokers' peak RSS MiB", "rss_mib", "{:.0f}")]
    rows = ["| cell: tern / kafka (ratio) | " + " | ".join(m[0] for m in metrics) + " |",
            "|---|" + "---:|" * len(metrics)]
    for kind, partitions in cells(args):
        name = cell_name(args, kind, partitions)
        t, k = results.get((name, "tern")), results.get((name, "kafka"))
        if not t or not k:
            continue
        cols = []
        for _, key, f in metrics:
            tv = statistics.median(r[key] for r in t)
            kv = statistics.median(r[key] for r in k)
            ratio = f"{tv / kv:.2f}" if kv else "-"
            cols.append(f"{f.format(tv)} / {f.format(kv)} ({ratio})")
        rows.append(f"| {name} | " + " | ".join(cols) + " |")
    return "\n".join(rows)


def main(argv):
    if argv[:1] == ["--c-producer"]:
        c_producer(argv[1], argv[2], int(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, help="records per max-rate ProducerPerformance cell")
    ap.add_argument("--c-records", type=int, default=1_000_000, help="records per librdkafka cell")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, nargs="+", default=[3, 1])
    ap.add_argument("--rate", type=int, default=5_000, help="records/s of the latency cell (0: none)")
    ap.add_argument("--rate-seconds", type=int, default=30)
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--kafka-heap", default="1g", help="-Xms and -Xmx of each Kafka node")
    ap.add_argument("--tern", default="/tmp/tern-bench-bin")
    ap.add_argument("--tern-commit", help="the commit the tern binary was built from (for the record)")
    ap.add_argument("--warmup", type=int, default=300_000,
                    help="records of the unmeasured warm-up runs per cluster (librdkafka and ProducerPerformance on 3 "
                         "partitions, ProducerPerformance on 1 with half as many)")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds of quiet before each cell (the brokers' idle CPU is measured then)")
    ap.add_argument("--cell-timeout", type=int, default=240, help="seconds before a client run counts as hung")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--write-results", action="store_true", help="append a section to bench/RESULTS.md")
    ap.add_argument("--section-out", help="also write the RESULTS.md section to this file")
    ap.add_argument("--note", default="", help="text for the RESULTS.md section")
    args = ap.parse_args(argv)

    load_before = open("/proc/loadavg").read().split()[:3]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        results, info, secs = run(args)
    except BenchFailure as e:
        print(f"\nBENCH FAILURE:\n{e}", file=sys.stderr)
        return 1
    load_after = open("/proc/loadavg").read().split()[:3]
    out = table(args, results)
    print()
    print(out)
    import confluent_kafka
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    binary = Path(args.tern)
    sha = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    tern_from = args.tern_commit or "(commit not given)"
    minor = ".".join(args.kafka_version.split(".")[:2])
    section = f"""
## Replication (RF=3, acks=all): Tern vs Apache Kafka {minor}

{when}, Apache Kafka {args.kafka_version}, `bench/replication/run.py`.
Machine: {kafka_compare.machine()}; {java}.  **Two cores shared by everything**: six brokers
(both clusters run side by side for the whole run; the idle one's CPU is in the raw lines as
"other cluster"), the client, and another engineer's end-to-end tests.  Load average before the
run {' '.join(load_before)}, after {' '.join(load_after)} (1-min load at each cell's start in the raw
lines); the run took {secs / 60:.1f} min.  {args.rounds} round(s); the figures are medians over the rounds
(with two rounds: their mean; every single run is in the raw lines at the end).
{args.note}

Each cluster: three combined broker+controller nodes on loopback, fresh data dirs, started once
for the whole run and warmed up first, unmeasured: {args.warmup} records with the librdkafka producer and
{args.warmup} with ProducerPerformance on 3 partitions, {args.warmup // 2} with ProducerPerformance on 1, then
(Kafka) up to {WARMUP_EXTRA_STEPS} more ProducerPerformance runs of {args.warmup // 2} on 3 partitions while the JVMs'
JIT compiler threads still took more than {WARMUP_JIT_QUIET_S:.0f} s per run (the warm-up lines are in the raw lines).  Each cell writes a new topic: {REPLICATION_FACTOR} replicas,
min.insync.replicas={MIN_ISR}, 1 KiB records, acks=all, no compression; tern and kafka back to
back, the order alternating from cell to cell and from round to round.  After every cell the high
watermarks add up to exactly the acknowledged records and every ISR is back to 3 (checked; the
run stops otherwise).

{out}

Node log lines during the cells and warm-up (before the stop): tern {info.get('events-tern')};
kafka {info.get('events-kafka')} (ISR changes: Kafka's "Shrinking/Expanding ISR", tern's "ISR changed").

- MB/s are MiB/s (ProducerPerformance's unit; the librdkafka cell uses the same).  Max-rate cells:
  {args.records} records (ProducerPerformance), {args.c_records} (librdkafka); the latency cell:
  {args.rate * args.rate_seconds} records at {args.rate}/s.  Each cell's topic is deleted after its check.
- ProducerPerformance: Java client defaults (idempotent, linger.ms=5, batch.size=16384, sticky
  partitioner); its latency is send() to acknowledgement, so unthrottled it is mostly time queued in
  the client.  librdkafka (confluent-kafka {confluent_kafka.version()}, librdkafka
  {confluent_kafka.libversion()[0]}) with {C_CONFIG} and otherwise its defaults, driven by a Python
  loop in a child process (rdkafka_performance could not be built: no librdkafka source on this
  machine); its percentiles are librdkafka's produce()-to-ack time of every {LATENCY_SAMPLE}th message (the
  others carry no delivery callback; the high-watermark check covers them).
- broker CPU: the three brokers' utime+stime summed over the client's run (JVM start of the Java
  tool included), per GB of payload counted once (records x 1024 B / 1e9, not x 3 replicas); % is of
  one core (200% = the whole machine).  client CPU: the client process's own, likewise.  A client
  near 100% or the two together near 200% means the machine, not the broker, set the rate.
- Raw lines: "idle before" is the brokers' CPU in the {args.settle:.0f} s before the run (nobody producing);
  "JIT threads" the JVMs' C1/C2 compiler threads' share of the brokers' CPU; "other cluster" the
  idle cluster's CPU during the run; "dirty before" the page cache's dirty + writeback MiB before
  the sync(2) that precedes every run, "free after drop" the free memory after both clusters'
  files were then dropped from the page cache (posix_fadvise DONTNEED): every run starts with its
  gigabytes neither still to be written back nor to be reclaimed (without the drop, runs that had
  to reclaim page cache as they wrote took twice the CPU per GB, client included, at half the
  MB/s, and it was mostly the run after a Kafka run, since Kafka keeps deleted topics' files
  for 60 s and tern does not).
- Kafka: kafka-server-start.sh's JVM options with -Xms{args.kafka_heap} -Xmx{args.kafka_heap} per node (so its RSS is
  mostly heap it was told to take; plus the harness's class-data-sharing archive for start-up);
  thread counts, heartbeat/session and internal topic partitions at Kafka's defaults.  Tern: its
  defaults (which are Kafka's for replica.*) except the cluster keys.

This run: `{Path(sys.executable).name} bench/replication/run.py {' '.join(map(shlex.quote, argv))}`
(tern binary sha256 {sha}…: {tern_from}).  To repeat (the defaults are this run's, but for
`--tern`): `cp <tern binary> /tmp/tern-bench-bin && ~/.cache/tern/venv/bin/python bench/replication/run.py
--tern /tmp/tern-bench-bin --write-results`.  What it ran:

```
tern nodes:
{info.get('tern')}
kafka nodes:
{info.get('kafka')}
max rate, Java: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{info.get('java')}
max rate, librdkafka: python {info.get('c')}
fixed rate: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{info.get('rate')}
topics: confluent-kafka AdminClient, NewTopic(name, partitions, replication_factor=3, config={{"min.insync.replicas": "2"}})
```

Every run (elapsed time, round, cell, cluster):

```text
{chr(10).join(RAW)}
```
"""
    if args.section_out:
        Path(args.section_out).write_text(section)
    if args.write_results:
        path = ROOT / "bench" / "RESULTS.md"
        path.write_text(path.read_text().rstrip("\n") + "\n" + section)
        print(f"appended to {path}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
