#!/usr/bin/env python3
"""Broker CPU per GB, throughput and latency: Tern against Apache Kafka on this machine (issue 16).

Every cell runs against a `tern` and a real Apache Kafka (tests/harness/kafka_peer.py), both started
by this script on loopback ports with fresh data dirs every round, back to back, the order swapping
from round to round (round 0 tern first, round 1 Kafka first, ...).  Per cell and broker: MB/s, the
broker's CPU seconds (utime+stime from /proc/<pid>/stat, over the client's run) per GB moved, the
client's own CPU seconds (rusage of the client process, so a client that saturates a core shows)
and, where the cell has them, latency percentiles.  1 KiB records throughout; the table shows
medians over the rounds as `tern / kafka (tern/kafka)`.

Cells (ids for --cells, which takes fnmatch patterns; default all):

    consume-rdk-p1, consume-rdk-p8       librdkafka rdkafka_performance -G (balanced consumer, fresh group)
    consume-java-p1, consume-java-p8     Kafka's ConsumerPerformance (fresh group)
    consume-rdk-p8-x3                    3 rdkafka_performance at once, 3 groups, the same 8-partition topic
    produce-rdk-p{1,8}-acks{1,all}       rdkafka_performance -P, unthrottled
    produce-java-p{1,8}-acks{1,all}      ProducerPerformance --throughput -1
    rate-java-p1-acks{1,all}             ProducerPerformance --throughput --rate (send-to-ack percentiles)
    e2e-<rate>                           produce-to-consume latency on 1 partition at <rate> records/s
                                         (--e2e-rates): a confluent-kafka producer process that stamps
                                         time.monotonic_ns() into each value and a consumer process
                                         (assign, no group) that reads it back

The consume cells read topics written (acks=1, by rdkafka_performance, not measured) at the start of
each round: `c1` (1 partition) and `c8` (8 partitions) of --records records; every produce cell
writes a new topic of --records records.  `sync` runs before every measured client (not measured),
so one broker's dirty pages are not written back during the other's cell.

    ~/.cache/tern/venv/bin/python bench/fetch_cpu/run.py --tern /tmp/tern-bench [--records 300000]
        [--rounds 2] [--cells 'consume-*' e2e-*] [--section-out /tmp/section.md]

Quick smoke run (~2 min): --records 20000 --rounds 1 --rate-seconds 3 --e2e-seconds 3.

Needs: rdkafka_performance (bench/fetch_cpu/build_rdkafka_perf.sh; --rdkafka-perf), java 17 and the
Kafka jars (kafka_peer.KafkaJars().ensure(), mvn on first use), the tern binary (--tern / $TERN_BIN)
and confluent-kafka in the venv that runs this script.  Not a test: nothing here asserts.
"""

import argparse
import datetime
import fnmatch
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "harness"))

RECORD_SIZE = 1024
PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_JVM = ["-Xmx512m"]
# The settings the Kafka peer gets from tests/harness/kafka_peer.py that tern also reads (as
# bench/kafka_compare/run.py).
SAME_AS_KAFKA = ["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1", "num.partitions=1"]
CACHE = Path(os.environ.get("TERN_CACHE") or Path.home() / ".cache" / "tern")
RDK_DEFAULT = CACHE / "librdkafka-src" / "examples" / "rdkafka_performance"
RAW = []  # the per-run lines
IDLE = {}  # broker -> [idle CPU % per round]


# -- processes and CPU -------------------------------------------------------------------------------

def proc_cpu(pid):
    """utime+stime of a process, in seconds."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


class Client:
    """A client process (output to a file): its CPU time from its rusage when it exits, and sampled
    from /proc while it runs, so that the CPU of its busy part can be told from its start-up."""

    def __init__(self, argv, log_path):
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.log = open(self.log_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.samples = [(self.t0, 0.0)]  # (monotonic time, CPU seconds so far)
        self.cpu_s = None
        self.wall_s = None
        self.t_exit = None

    def poll(self):
        """Samples the CPU time; True once the process has exited (and is reaped)."""
        if self.t_exit is not None:
            return True
        # WNOWAIT: a process that has exited stays a zombie (its pid not reused) until wait4 below
        if os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            self.samples.append((time.monotonic(), proc_cpu(self.proc.pid)))
            return False
        _, status, ru = os.wait4(self.proc.pid, 0)
        self.t_exit = time.monotonic()
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = ru.ru_utime + ru.ru_stime
        self.wall_s = self.t_exit - self.t0
        self.samples.append((self.t_exit, self.cpu_s))
        self.log.close()
        return True

    def wait(self, timeout):
        run_until_exit([self], timeout)
        return self.output()

    def kill(self):
        if self.t_exit is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.poll()
            if self.t_exit is None:
                try:
                    _, status, _ = os.wait4(self.proc.pid, 0)
                    self.proc.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    pass
                self.t_exit = time.monotonic()
                self.log.close()

    def output(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def busy_cpu_pct(self, active_s):
        """CPU % over the last `active_s` seconds before the exit (the part the tool reports as its
        transfer; its close is included), from the samples (linear between them)."""
        active_s = max(min(active_s, self.wall_s), 0.05)
        t = self.t_exit - active_s
        cpu_at = 0.0
        for (t1, c1), (t2, c2) in zip(self.samples, self.samples[1:]):
            if t1 <= t <= t2:
                cpu_at = c1 + (c2 - c1) * ((t - t1) / (t2 - t1) if t2 > t1 else 1.0)
                break
        return 100 * (self.cpu_s - cpu_at) / active_s


def run_until_exit(clients, timeout):
    deadline = time.monotonic() + timeout
    while True:
        if all([c.poll() for c in clients]):
            return
        if time.monotonic() > deadline:
            for c in clients:
                c.kill()
            raise RuntimeError(f"timed out after {timeout}s: " + "\n".join(
                " ".join(c.argv) + "\n" + c.output()[-2000:] for c in clients))
        time.sleep(0.02)


def run_clients(argvs, logs, timeout):
    """Starts the clients at once and waits for all; returns the Clients (raises if one failed)."""
    clients = [Client(a, l) for a, l in zip(argvs, logs)]
    try:
        run_until_exit(clients, timeout)
    finally:
        for c in clients:
            c.kill()
    for c in clients:
        if c.proc.returncode != 0:
            raise RuntimeError(f"exit {c.proc.returncode}: {' '.join(c.argv)}\n{c.output()[-3000:]}")
    return clients


def sync(enabled):
    if enabled:
        subprocess.run(["sync"], timeout=300)


# -- topics --------------------------------------------------------------------------------------------

def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} has no leaders on {bootstrap}")


# -- the clients -----------------------------------------------------------------------------------------

RDK_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s")
RDK_PRODUCED = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered .* in (\d+)ms: (\d+) msgs/s")
JAVA_PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


RDK_CONSUME_PROPS = []  # --rdk-consume-props
RDK_PRODUCE_PROPS = []  # --rdk-produce-props


def xprops(props):
    return [a for p in props for a in ("-X", p)]


def rdk_consume_argv(rdk, bootstrap, topic, records, group):
    return [rdk, "-G", group, "-t", topic, "-b", bootstrap, "-c", records,
            "-X", "auto.offset.reset=earliest", *xprops(RDK_CONSUME_PROPS)]


def rdk_consumed(out, records, argv):
    m = None
    for line in out.splitlines():
        m = RDK_CONSUMED.search(line) or m
    if not m or int(m.group(1)) < records:
        raise RuntimeError(f"rdkafka_performance read {m.group(1) if m else 0} of {records}: {' '.join(argv)}\n{out[-3000:]}")
    return {"records": int(m.group(1)), "rec_s": float(m.group(4)), "active_s": int(m.group(3)) / 1000}


def rdk_produce_argv(rdk, bootstrap, topic, records, acks, partition=None):
    argv = [rdk, "-P", "-t", topic, "-b", bootstrap, "-s", RECORD_SIZE, "-c", records,
            "-a", "-1" if acks == "all" else acks, *xprops(RDK_PRODUCE_PROPS)]
    if partition is not None:
        argv += ["-p", partition]
    return argv


def rdk_produced(out, records, argv):
    m = None
    for line in out.splitlines():
        m = RDK_PRODUCED.search(line) or m
    if not m or int(m.group(3)) < records:
        raise RuntimeError(f"rdkafka_performance delivered {m.group(3) if m else 0} of {records}: {' '.join(argv)}\n{out[-3000:]}")
    return {"records": int(m.group(3)), "rec_s": float(m.group(5)), "active_s": int(m.group(4)) / 1000}


def java_consumed(out, records, argv):
    lines = [l for l in out.splitlines() if l.strip()]
    hi = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
    if hi is None or hi + 1 >= len(lines):
        raise RuntimeError(f"ConsumerPerformance printed no result: {' '.join(argv[-12:])}\n{out[-3000:]}")
    row = dict(zip([c.strip() for c in lines[hi].split(",")], [v.strip() for v in lines[hi + 1].split(",")]))
    n = int(row["data.consumed.in.nMsg"])
    if n < records:
        raise RuntimeError(f"ConsumerPerformance read {n} of {records}\n{out[-3000:]}")
    return {"records": n, "rec_s": float(row["fetch.nMsg.sec"]), "rebalance_ms": float(row["rebalance.time.ms"]),
            "active_s": float(row["fetch.time.ms"]) / 1000}


def java_produced(out, records, argv):
    m = None
    for line in out.splitlines():
        m = JAVA_PRODUCED.search(line) or m
    if not m or int(m.group(1)) < records:
        raise RuntimeError(f"ProducerPerformance failed: {' '.join(argv[-14:])}\n{out[-3000:]}")
    return {"records": int(m.group(1)), "rec_s": float(m.group(2)), "active_s": int(m.group(1)) / float(m.group(2)),
            "p50": float(m.group(6)), "p99": float(m.group(8)), "p999": float(m.group(9))}


# -- the end-to-end latency pair (run as `run.py _e2e-producer ...` / `_e2e-consumer ...`) -----------

def e2e_producer(argv):
    """Paced producer: every ~0.5 ms, produce() what is due at `rate` records/s since the start; each
    value starts with time.monotonic_ns() (8 bytes) and the sequence number (8 bytes)."""
    bootstrap, topic, rate, seconds, linger = argv[0], argv[1], int(argv[2]), float(argv[3]), argv[4]
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger,
                  "enable.idempotence": False})
    total = int(rate * seconds)
    pad = b"x" * (RECORD_SIZE - 16)
    errors = []

    def dr(err, _msg):
        if err is not None:
            errors.append(str(err))

    t0 = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - t0) * rate) + 1)
        while sent < due:
            value = time.monotonic_ns().to_bytes(8, "big") + sent.to_bytes(8, "big") + pad
            while True:
                try:
                    p.produce(topic, value, partition=0, on_delivery=dr)
                    break
                except BufferError:
                    p.poll(0.001)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    elapsed = time.monotonic() - t0
    left = p.flush(30)
    print(json.dumps({"sent": sent, "seconds": elapsed, "rate": sent / elapsed, "unflushed": left,
                      "errors": errors[:5], "error_count": len(errors)}), flush=True)
    return 0 if not errors and not left else 1


def e2e_consumer(argv):
    """Reads partition 0 from the start (assign, no group) until `total` records came or `timeout`
    passed; latency = monotonic_ns() at delivery to the application minus the stamp.  Prints
    percentiles (records with sequence < `skip` left out: the warm-up)."""
    bootstrap, topic, total, skip, timeout, ready = argv[0], argv[1], int(argv[2]), int(argv[3]), float(argv[4]), argv[5]
    rate = int(argv[6])
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{os.getpid()}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    lat = []
    per_second = {}  # second of the run (sequence // rate) -> max latency, warm-up included
    seen = 0
    deadline = time.monotonic() + timeout
    # one empty poll first, so the fetcher runs before the producer starts
    c.poll(0.5)
    Path(ready).write_text("ready")
    while seen < total and time.monotonic() < deadline:
        # poll(), not consume(num_messages=...): that one waits for the batch to fill or time out
        m = c.poll(0.1)
        if m is None:
            continue
        now = time.monotonic_ns()
        if m.error():
            continue
        v = m.value()
        seen += 1
        ms = (now - int.from_bytes(v[:8], "big")) / 1e6
        seq = int.from_bytes(v[8:16], "big")
        per_second[seq // rate] = max(per_second.get(seq // rate, 0.0), ms)
        if seq >= skip:
            lat.append(ms)
    c.close()
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    print(json.dumps({"seen": seen, "measured": len(lat), "p50": pct(0.50), "p99": pct(0.99),
                      "p999": pct(0.999), "max": lat[-1] if lat else float("nan"),
                      "max_per_second": [round(per_second[k], 1) for k in sorted(per_second)]}), flush=True)
    return 0 if seen >= total else 1


# -- cells -----------------------------------------------------------------------------------------------

def all_cells(args):
    cells = []
    for p in (1, 8):
        cells.append((f"consume-rdk-p{p}", f"consume p={p} rdkafka_performance"))
        cells.append((f"consume-java-p{p}", f"consume p={p} ConsumerPerformance"))
    cells.append(("consume-rdk-p8-x3", "consume p=8 3x rdkafka_performance"))
    for p in (1, 8):
        for acks in ("1", "all"):
            cells.append((f"produce-rdk-p{p}-acks{acks}", f"produce p={p} acks={acks} rdkafka_performance"))
            cells.append((f"produce-java-p{p}-acks{acks}", f"produce p={p} acks={acks} ProducerPerformance"))
    if args.rate:
        for acks in ("1", "all"):
            cells.append((f"rate-java-p1-acks{acks}",
                          f"produce p=1 acks={acks} at {args.rate} rec/s ProducerPerformance"))
    for r in args.e2e_rates:
        cells.append((f"e2e-{r}", f"end-to-end p=1 acks=all at {r} rec/s (confluent-kafka)"))
    return [c for c in cells if any(fnmatch.fnmatch(c[0], pat) for pat in args.cells)]


def run_cell(cid, broker, bootstrap, args, jars, work, tag):
    """Runs one cell against one broker; returns the result dict (without broker CPU)."""
    rdk = str(args.rdkafka_perf)
    logs = work / "logs"
    n = args.records
    if cid.startswith("consume-rdk"):
        procs = 3 if cid.endswith("-x3") else 1
        topic = "c8" if "-p8" in cid else "c1"
        argvs = [rdk_consume_argv(rdk, bootstrap, topic, n, f"{tag}-{i}") for i in range(procs)]
        clients = run_clients(argvs, [logs / f"{tag}-{i}.log" for i in range(procs)], args.timeout)
        rs = [rdk_consumed(c.output(), n, c.argv) for c in clients]
        return {"records": sum(r["records"] for r in rs), "rec_s": sum(r["rec_s"] for r in rs),
                "clients": clients, "active": [r["active_s"] for r in rs], "cmd": argvs[0]}
    if cid.startswith("consume-java"):
        topic = "c8" if "-p8" in cid else "c1"
        argv = jars.tool_command(CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
                                 "--num-records", n, "--group", tag, "--timeout", 30000, jvm_opts=TOOL_JVM)
        clients = run_clients([argv], [logs / f"{tag}.log"], args.timeout)
        r = java_consumed(clients[0].output(), n, argv)
        return {**r, "clients": clients, "cmd": argv}
    if cid.startswith(("produce-", "rate-")):
        p = 8 if "-p8" in cid else 1
        acks = cid.rsplit("acks", 1)[1]
        topic = tag
        create_topic(bootstrap, topic, p)
        sync(args.sync)
        time.sleep(args.settle)
        if "-rdk-" in cid:
            argv = rdk_produce_argv(rdk, bootstrap, topic, n, acks)
            clients = run_clients([argv], [logs / f"{tag}.log"], args.timeout)
            r = rdk_produced(clients[0].output(), n, argv)
        else:
            count, throughput = (args.rate * args.rate_seconds, args.rate) if cid.startswith("rate-") else (n, -1)
            argv = jars.tool_command(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
                                     "--num-records", count, "--record-size", RECORD_SIZE,
                                     "--throughput", throughput, "--command-property", f"acks={acks}",
                                     jvm_opts=TOOL_JVM)
            clients = run_clients([argv], [logs / f"{tag}.log"], args.timeout)
            r = java_produced(clients[0].output(), count, argv)
        return {**r, "clients": clients, "cmd": argv}
    if cid.startswith("e2e-"):
        rate = int(cid.split("-", 1)[1])
        topic = tag
        create_topic(bootstrap, topic, 1)
        # the producer runs warm-up + measured seconds; the warm-up's records are left out
        total = int(rate * (args.e2e_warmup + args.e2e_seconds))
        skip = int(rate * args.e2e_warmup)
        ready = work / f"{tag}.ready"
        me = [sys.executable, str(Path(__file__).resolve())]
        cons_argv = me + ["_e2e-consumer", bootstrap, topic, total, skip, args.e2e_warmup + args.e2e_seconds + 60, ready, rate]
        prod_argv = me + ["_e2e-producer", bootstrap, topic, rate, args.e2e_warmup + args.e2e_seconds, args.e2e_linger_ms]
        sync(args.sync)
        time.sleep(args.settle)
        cons = Client(cons_argv, logs / f"{tag}-consumer.log")
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                if cons.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"e2e consumer did not start:\n{cons.output()[-3000:]}")
                time.sleep(0.05)
            prod = Client(prod_argv, logs / f"{tag}-producer.log")
            try:
                prod.wait(args.e2e_warmup + args.e2e_seconds + args.timeout)
            finally:
                prod.kill()
            cons.wait(args.timeout)
        finally:
            cons.kill()
        if prod.proc.returncode != 0 or cons.proc.returncode != 0:
            raise RuntimeError(f"e2e pair failed:\n{prod.output()[-2000:]}\n{cons.output()[-2000:]}")
        pj = json.loads(prod.output().strip().splitlines()[-1])
        cj = json.loads(cons.output().strip().splitlines()[-1])
        return {"records": pj["sent"], "rec_s": pj["rate"], "p50": cj["p50"], "p99": cj["p99"],
                "p999": cj["p999"], "max": cj["max"], "max_per_second": cj["max_per_second"],
                "clients": [prod, cons], "active": [prod.wall_s, cons.wall_s],
                "cmd": prod_argv + ["&"] + cons_argv}
    raise ValueError(cid)


def fill(bootstrap, args, work, needs):
    """The consume cells' topics: c1 (partition 0) and c8 (random partitioner), --records each."""
    rdk = str(args.rdkafka_perf)
    for topic, p in (("c1", 1), ("c8", 8)):
        if topic not in needs:
            continue
        create_topic(bootstrap, topic, p)
        argv = rdk_produce_argv(rdk, bootstrap, topic, args.records, "1", partition=0 if p == 1 else None)
        c = run_clients([argv], [work / "logs" / f"fill-{topic}-{bootstrap.rsplit(':', 1)[1]}.log"], args.timeout)[0]
        rdk_produced(c.output(), args.records, argv)


def run(args):
    import kafka_peer
    from tern_process import Tern

    jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
    cells = all_cells(args)
    if not cells:
        raise SystemExit(f"no cell matches {args.cells}")
    work = Path(tempfile.mkdtemp(prefix="tern-fetch-cpu-"))
    (work / "logs").mkdir()
    results = {}   # (cell id, broker) -> [dict]
    commands = {}
    started = time.time()
    needs = {("c8" if "-p8" in cid else "c1") for cid, _ in cells if cid.startswith("consume-")}
    try:
        for rnd in range(args.rounds):
            brokers = {}
            try:
                brokers["tern"] = Tern(work / f"r{rnd}-tern", extra=SAME_AS_KAFKA, binary=args.tern).start(serving=True)
                brokers["kafka"] = kafka_peer.KafkaPeer(args.kafka_version, work / f"r{rnd}-kafka").start()
                order = ["tern", "kafka"] if rnd % 2 == 0 else ["kafka", "tern"]
                commands.setdefault("tern", " ".join(map(shlex.quote, brokers["tern"].command())))
                commands.setdefault("kafka-props", (brokers["kafka"].data_dir / "server.properties").read_text())
                for b in order:
                    fill(brokers[b].bootstrap, args, work, needs)
                # what each broker burns doing nothing, for reading the CPU columns
                sync(args.sync)
                time.sleep(args.settle)
                idle0 = {b: proc_cpu(brokers[b].pid) for b in order}
                time.sleep(args.idle_seconds)
                for b in order:
                    pct = 100 * (proc_cpu(brokers[b].pid) - idle0[b]) / args.idle_seconds
                    IDLE.setdefault(b, []).append(pct)
                    RAW.append(f"[{time.time() - started:6.0f}s] round {rnd} idle for {args.idle_seconds:g} s {' ' * 33} {b:5s} broker CPU {pct:.1f}%")
                    print(RAW[-1], flush=True)
                for cid, name in cells:
                    for b in order:
                        broker = brokers[b]
                        tag = f"{cid}-r{rnd}-{b}"
                        if not cid.startswith(("produce-", "rate-", "e2e-")):
                            sync(args.sync)
                            time.sleep(args.settle)
                        cpu0 = proc_cpu(broker.pid)
                        t0 = time.monotonic()
                        r = run_cell(cid, b, broker.bootstrap, args, jars, work, tag)
                        cpu_s = proc_cpu(broker.pid) - cpu0
                        wall = time.monotonic() - t0
                        clients = r.pop("clients")
                        active = r.pop("active", None) or [r.pop("active_s")]
                        gb = r["records"] * RECORD_SIZE / 1e9
                        r.update({
                            "mb_s": r["rec_s"] * RECORD_SIZE / 1e6,
                            "broker_cpu_s": cpu_s,
                            "broker_cpu_per_gb": cpu_s / gb,
                            "broker_cpu_pct": 100 * cpu_s / wall,
                            "client_cpu_s": sum(c.cpu_s for c in clients),
                            "client_cpu_pct": max(c.busy_cpu_pct(a) for c, a in zip(clients, active)),
                        })
                        cmd = " ".join(map(str, r.pop("cmd"))).replace(broker.bootstrap, "<bootstrap>")
                        if jars.classpath() in cmd:
                            cmd = cmd.replace(jars.classpath(), f"<kafka {args.kafka_version} jars>")
                        commands.setdefault(cid, re.sub(r"-r\d+-(tern|kafka)", "-r<round>-<broker>", cmd))
                        results.setdefault((cid, b), []).append(r)
                        lat = (f" p50 {r['p50']:.1f} p99 {r['p99']:.1f} p99.9 {r['p999']:.1f} ms" if "p50" in r else "")
                        line = (f"[{time.time() - started:6.0f}s] round {rnd} {name:52s} {b:5s} {r['mb_s']:7.1f} MB/s "
                                f"broker {cpu_s:5.2f} s ({r['broker_cpu_per_gb']:5.2f} s/GB, {r['broker_cpu_pct']:3.0f}%) "
                                f"client {r['client_cpu_s']:5.2f} s (busy {r['client_cpu_pct']:3.0f}%)" + lat)
                        print(line, flush=True)
                        RAW.append(line)
            finally:
                for b in brokers.values():
                    b.stop()
                if not args.keep:
                    for b in brokers.values():
                        shutil.rmtree(b.data_dir, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return results, commands, time.time() - started


METRICS = [("MB/s", "mb_s", "{:.1f}"), ("broker CPU s/GB", "broker_cpu_per_gb", "{:.2f}"),
           ("broker CPU %", "broker_cpu_pct", "{:.0f}"), ("client CPU s", "client_cpu_s", "{:.2f}"),
           ("client CPU % busy", "client_cpu_pct", "{:.0f}"),
           ("p50 ms", "p50", "{:.1f}"), ("p99 ms", "p99", "{:.1f}"), ("p99.9 ms", "p999", "{:.1f}")]


def table(results, cells):
    rows = ["| cell (tern / kafka (ratio)) | " + " | ".join(m[0] for m in METRICS) + " |",
            "|---|" + "---:|" * len(METRICS)]
    for cid, name in cells:
        t, k = results.get((cid, "tern")), results.get((cid, "kafka"))
        if not t or not k:
            continue
        cols = []
        for _, key, f in METRICS:
            if key not in t[0]:
                cols.append("")
                continue
            tv = statistics.median(r[key] for r in t)
            kv = statistics.median(r[key] for r in k)
            cols.append(f"{f.format(tv)} / {f.format(kv)} ({tv / kv:.2f})" if kv else f"{f.format(tv)} / {f.format(kv)}")
        rows.append(f"| {name} | " + " | ".join(cols) + " |")
    return "\n".join(rows)


def machine():
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:")) / 1024 / 1024
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    return f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB memory, {platform.system()} {platform.release()}"


def main(argv):
    if argv[:1] == ["_e2e-producer"]:
        return e2e_producer(argv[1:])
    if argv[:1] == ["_e2e-consumer"]:
        return e2e_consumer(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, help="records per consume topic and produce cell")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cells", nargs="+", default=["*"], help="cell ids or fnmatch patterns (see above)")
    ap.add_argument("--rate", type=int, default=10_000, help="records/s of the rate-* cells (0: none)")
    ap.add_argument("--rate-seconds", type=int, default=10)
    ap.add_argument("--e2e-rates", type=int, nargs="*", default=[1000, 10_000])
    ap.add_argument("--e2e-seconds", type=float, default=10.0, help="measured seconds of each e2e cell")
    ap.add_argument("--e2e-warmup", type=float, default=2.0,
                    help="seconds the e2e producer runs before the measured ones (left out of the percentiles)")
    ap.add_argument("--e2e-linger-ms", default="0", help="linger.ms of the e2e producer")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of quiet before each client")
    ap.add_argument("--no-sync", dest="sync", action="store_false", help="no `sync` before each client")
    ap.add_argument("--idle-seconds", type=float, default=5.0,
                    help="seconds over which each round measures the brokers' idle CPU")
    ap.add_argument("--timeout", type=int, default=300, help="seconds any one client may take")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--tern", default=os.environ.get("TERN_BIN", str(ROOT / "target" / "release" / "tern")))
    ap.add_argument("--tern-commit", help="the commit the tern binary was built from (default: HEAD)")
    ap.add_argument("--rdkafka-perf", type=Path, default=RDK_DEFAULT)
    ap.add_argument("--rdk-produce-props", nargs="*", default=[], metavar="PROP=VALUE",
                    help="librdkafka properties (-X) for every rdkafka_performance producer (default: none, "
                         "librdkafka's defaults, linger.ms=5)")
    ap.add_argument("--rdk-consume-props", nargs="*", default=[], metavar="PROP=VALUE",
                    help="librdkafka properties (-X) for every rdkafka_performance consumer")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and client logs")
    ap.add_argument("--section-out", help="write the markdown section to this file")
    ap.add_argument("--note", default="", help="text for the section (e.g. the load)")
    args = ap.parse_args(argv)
    RDK_PRODUCE_PROPS[:] = args.rdk_produce_props
    RDK_CONSUME_PROPS[:] = args.rdk_consume_props
    if not os.access(args.rdkafka_perf, os.X_OK):
        raise SystemExit(f"{args.rdkafka_perf} missing: run bench/fetch_cpu/build_rdkafka_perf.sh")

    load_before = " ".join(open("/proc/loadavg").read().split()[:3])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results, commands, secs = run(args)
    load_after = " ".join(open("/proc/loadavg").read().split()[:3])
    out = table(results, all_cells(args))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr.splitlines()[0]
    usage = subprocess.run([str(args.rdkafka_perf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    rdk_version = next((l.strip() for l in usage.stdout.splitlines() if "version" in l), "librdkafka version ?")
    tern_version = args.tern_commit or subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30).stdout.strip()
    cmd_lines = "\n".join(f"{k}: {v}" for k, v in commands.items() if k not in ("tern", "kafka-props"))
    section = f"""
## Tern vs Apache Kafka {args.kafka_version}: broker CPU per GB, throughput and latency (issue 16), {when}

Machine: {machine()}; {java}; {rdk_version}.  Load average before the run {load_before}, after
{load_after}; the run took {secs / 60:.1f} min.  {args.rounds} rounds, {args.records} records of {RECORD_SIZE} B per
consume topic and produce cell; the figures are medians over the rounds.  Both brokers single node,
on loopback, fresh data dirs every round; the cells alternate tern/kafka, the order swapping each
round; `sync` and {args.settle:g} s of quiet before every measured client.  Tern: {args.tern} (built from {tern_version}).
{args.note}

{out}

Idle brokers (after the fill, over {args.idle_seconds:g} s, median over the rounds): tern {statistics.median(IDLE.get('tern', [0])):.1f}% CPU,
Kafka {statistics.median(IDLE.get('kafka', [0])):.1f}% CPU; a cell's broker CPU includes that much per second of its wall time.

- MB/s: records/s as the client reports it (rdkafka_performance's summary line, ConsumerPerformance's
  `fetch.nMsg.sec` (group join excluded), ProducerPerformance's final line; for the 3-consumer cell
  the sum of the three) x 1024 B / 10^6.  GB = 10^9 B of record values.
- broker CPU s/GB: the broker process's utime+stime (/proc/<pid>/stat) from just before the client
  starts to just after it exits (JVM start of the Java tools and the group join included; the topic
  creation of produce cells not), per GB the cell moved (3 x the topic for the 3-consumer cell).
  broker CPU %: the same over the cell's wall time (200% = both cores).
- client CPU s: utime+stime of the client process(es) from their rusage (summed for the
  3-consumer cell and the e2e producer+consumer pair; a Java tool's JVM start and JIT included,
  typically 1-3 CPU-s).  client CPU % busy: the client process's CPU over the span the tool reports
  as its transfer (sampled from /proc every ~20 ms; the busiest process of the 3-consumer cell);
  100% is one core: a client near or above it sets the pace, not the broker (librdkafka and the JVM
  use several threads, so it can exceed 100%).
- rdkafka_performance -P runs with librdkafka's defaults unless --rdk-produce-props says otherwise
  (linger.ms=5, batch.size 1 MB); its time runs from the first produce() to the last delivery
  report, and with these defaults its last partial batches can wait ~0.5 s for librdkafka's broker
  thread to wake up (seen against both brokers), so at a few hundred MB per cell its MB/s is partly
  the client's own.
- Latency: rate-* cells, ProducerPerformance's send-to-acknowledgement percentiles at a fixed
  rate; e2e-* cells, the time from the producer's produce() call to the consumer application
  receiving the record (time.monotonic_ns() stamped into the value, same machine) over
  {args.e2e_seconds:g} s after {args.e2e_warmup:g} s of warm-up (left out; a fresh Kafka's first seconds reach hundreds of ms); producer acks=all linger.ms={args.e2e_linger_ms}, consumer defaults
  (fetch.wait.max.ms=500, fetch.min.bytes=1), confluent-kafka (librdkafka) in Python processes.

Commands (`python bench/fetch_cpu/run.py {' '.join(map(shlex.quote, argv))}`):

```
tern:  {commands.get('tern')}
kafka: KafkaPeer from tests/harness/kafka_peer.py (kafka-server-start.sh's JVM options, -Xmx1G -Xms1G G1); server.properties (ports vary):
{commands.get('kafka-props', '').rstrip()}
consume topics c1 / c8: created with confluent-kafka's AdminClient, then rdkafka_performance -P -t c1 -p 0 (c8: no -p, random partitioner) -s 1024 -c <records> -a 1
{cmd_lines}
```

Every run (elapsed time, round, cell, broker):

```text
{chr(10).join(RAW)}
```
"""
    print(section)
    if args.section_out:
        Path(args.section_out).write_text(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
