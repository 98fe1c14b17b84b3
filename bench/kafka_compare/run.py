#!/usr/bin/env python3
"""Tern against a real Apache Kafka on this machine, with Apache Kafka's own perf tools (issue 5).

ProducerPerformance and ConsumerPerformance of one Kafka version (default 4.4.0) run with the same
settings against a `tern` and a real Apache Kafka broker (tests/harness/kafka_peer.py), both started
by this script on loopback ports with fresh data dirs, in one run: every cell runs against both
brokers back to back, the order alternating from round to round.  Per cell and broker: MB/s,
records/s, the producer's p50/p99/p99.9 latency, the broker's peak RSS while the cell ran (VmRSS
polled every 50 ms) and the broker's CPU time (utime+stime from /proc) per second of the run.

Cells: 1 KiB records; 1 and 8 partitions; acks=1 and acks=all; compression none and lz4.  Each
producer cell writes its own new topic; the consumer cells (per partitions and compression) read
the acks=1 topic of their round from the start with a fresh group.  The brokers are started anew
(fresh data dirs) every round.

    python bench/kafka_compare/run.py [--records 500000] [--rounds 2] [--write-results]

Needs: java (17), mvn (first run resolves the jars into $TERN_CACHE/kafka), the tern binary
($TERN_BIN, default /work/target/release/tern, build: `CARGO_TARGET_DIR=/work/target cargo build
--release -p tern-broker --bin tern`) and confluent-kafka (topic creation) in the venv.
Not a test: nothing here asserts.
"""

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
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
from tern_process import Tern  # noqa: E402

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_JVM = ["-Xmx512m"]
RECORD_SIZE = 1024
RAW = []  # the per-run lines, for RESULTS.md


# The settings the Kafka peer gets from tests/harness/kafka_peer.py that tern also reads.
SAME_AS_KAFKA = ["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1", "num.partitions=1"]


def start_tern(binary, data_dir):
    """The tern under test (tests/harness/tern_process.py's Tern), once it serves."""
    return Tern(data_dir, extra=SAME_AS_KAFKA, binary=binary).start(serving=True)


class ProcWatch:
    """Peak VmRSS (polled) and CPU seconds of a process while a cell runs."""

    def __init__(self, pid):
        self.pid = pid
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def cpu(self):
        try:
            fields = open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    def _run(self):
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, self._rss())
            self._stop.wait(0.05)

    def __enter__(self):
        self.cpu0 = self.cpu()
        self.t0 = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_kib = max(self.peak_kib, self._rss())
        self.cpu_s = self.cpu() - self.cpu0
        self.wall_s = time.time() - self.t0


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic]
    fut.result(timeout=30)
    # wait until the metadata shows every partition with a leader
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} has no leaders")


PRODUCER_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def produce(jars, bootstrap, topic, records, acks, compression, throughput=-1):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
            "--record-size", RECORD_SIZE, "--throughput", throughput,
            "--command-property", f"acks={acks}", f"compression.type={compression}"]
    out = jars.run(PRODUCER, *args, jvm_opts=TOOL_JVM, timeout=600)
    m = None
    for line in out.stdout.splitlines():
        m = PRODUCER_RE.search(line) or m
    if out.returncode != 0 or not m:
        raise RuntimeError(f"ProducerPerformance failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return {"records": int(m.group(1)), "rec_s": float(m.group(2)), "mb_s": float(m.group(3)),
            "p50": float(m.group(6)), "p99": float(m.group(8)), "p999": float(m.group(9)),
            "cmd": "ProducerPerformance " + " ".join(map(str, args))}


def consume(jars, bootstrap, topic, records, group):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
            "--group", group, "--timeout", 30000]
    out = jars.run(CONSUMER, *args, jvm_opts=TOOL_JVM, timeout=600)
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    header_i = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
    if out.returncode != 0 or header_i is None or header_i + 1 >= len(lines):
        raise RuntimeError(f"ConsumerPerformance failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    cols = [c.strip() for c in lines[header_i].split(",")]
    vals = [v.strip() for v in lines[header_i + 1].split(",")]
    row = dict(zip(cols, vals))
    n = int(row["data.consumed.in.nMsg"])
    if n < records:
        raise RuntimeError(f"ConsumerPerformance read {n} of {records}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return {"records": n, "mb_s": float(row["fetch.MB.sec"]), "rec_s": float(row["fetch.nMsg.sec"]),
            "total_mb_s": float(row["MB.sec"]), "rebalance_ms": float(row["rebalance.time.ms"]),
            "cmd": "ConsumerPerformance " + " ".join(map(str, args))}


RATE = 0  # records/s of the fixed-rate latency cell (--rate), 0: none


def cells(partitions_list):
    for partitions in partitions_list:
        for compression in ("none", "lz4"):
            for acks in ("1", "all"):
                yield ("produce", partitions, acks, compression)
            yield ("consume", partitions, "1", compression)
    if RATE:
        # Unthrottled producers queue in their own buffer, so their latency is mostly queueing:
        # one cell at a rate both brokers sustain shows the latency of the broker itself.
        yield ("rate", partitions_list[0], "all", "none")


def cell_name(kind, partitions, acks, compression):
    if kind == "produce":
        return f"produce p={partitions} acks={acks} {compression}"
    if kind == "rate":
        return f"produce p={partitions} acks={acks} {compression} at {RATE} rec/s"
    return f"consume p={partitions} {compression}"


def run(args):
    jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
    work = Path(tempfile.mkdtemp(prefix="tern-vs-kafka-"))
    results = {}  # (cell, broker) -> [dicts]
    commands = {}
    started = time.time()
    try:
        for rnd in range(args.rounds):
            brokers = {
                "tern": start_tern(args.tern, work / f"r{rnd}-tern"),
                "kafka": kafka_peer.KafkaPeer(args.kafka_version, work / f"r{rnd}-kafka").start(),
            }
            order = ["tern", "kafka"] if rnd % 2 == 0 else ["kafka", "tern"]
            commands.setdefault("tern", " ".join(map(shlex.quote, brokers["tern"].command())))
            commands.setdefault("kafka", " ".join(map(shlex.quote, brokers["kafka"].jars.command(
                "kafka.Kafka", "server.properties", jvm_opts=brokers["kafka"].jvm_opts)))
                .replace(jars.classpath(), f"<{jars.libs}/*.jar>"))
            commands.setdefault("kafka-props", (brokers["kafka"].data_dir / "server.properties").read_text())
            try:
                for cell in cells(args.partitions):
                    kind, partitions, acks, compression = cell
                    name = cell_name(*cell)
                    for b in order:
                        broker = brokers[b]
                        topic = f"p{partitions}-acks{acks}-{compression}" + ("-rate" if kind == "rate" else "")
                        if kind in ("produce", "rate"):
                            create_topic(broker.bootstrap, topic, partitions)
                        time.sleep(args.settle)
                        with ProcWatch(broker.pid) as w:
                            if kind == "produce":
                                r = produce(jars, broker.bootstrap, topic, args.records, acks, compression)
                            elif kind == "rate":
                                r = produce(jars, broker.bootstrap, topic, RATE * args.rate_seconds, acks,
                                            compression, throughput=RATE)
                            else:
                                r = consume(jars, broker.bootstrap, topic.replace("acksall", "acks1"),
                                            args.records, f"perf-{rnd}-{partitions}-{compression}")
                        r["rss_mib"] = w.peak_kib / 1024
                        r["cpu_pct"] = 100 * w.cpu_s / max(w.wall_s, 1e-9)
                        r["cpu_s_per_gb"] = w.cpu_s / (r["records"] * RECORD_SIZE / 1e9)
                        commands.setdefault(kind, r["cmd"].replace(broker.bootstrap, "<bootstrap>"))
                        results.setdefault((name, b), []).append(r)
                        line = (f"[{time.time() - started:6.0f}s] round {rnd} {name:32s} {b:5s} "
                              f"{r['mb_s']:8.1f} MB/s {r['rec_s']:10.0f} rec/s "
                              + (f"p50 {r['p50']:.0f} p99 {r['p99']:.0f} p99.9 {r['p999']:.0f} ms "
                                 if kind != "consume" else f"rebalance {r['rebalance_ms']:.0f} ms ")
                              + f"rss {r['rss_mib']:.0f} MiB cpu {r['cpu_pct']:.0f}%")
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
    return results, commands, time.time() - started


def fmt_ratio(t, k):
    return f"{t / k:.2f}" if k else "-"


def table(results, partitions):
    """Markdown, one row per cell: each metric as `tern / kafka (tern/kafka)`, medians over the rounds."""
    metrics = [("MB/s", "mb_s", "{:.1f}"), ("records/s", "rec_s", "{:.0f}"), ("p50 ms", "p50", "{:.0f}"),
               ("p99 ms", "p99", "{:.0f}"), ("p99.9 ms", "p999", "{:.0f}"),
               ("group join ms", "rebalance_ms", "{:.0f}"),
               ("peak RSS MiB", "rss_mib", "{:.0f}"), ("broker CPU %", "cpu_pct", "{:.0f}")]
    rows = ["| cell (tern / kafka (ratio)) | " + " | ".join(m[0] for m in metrics) + " |",
            "|---|" + "---:|" * len(metrics)]
    for cell in cells(partitions):
        name = cell_name(*cell)
        t, k = results.get((name, "tern")), results.get((name, "kafka"))
        if not t or not k:
            continue
        cols = []
        for label, key, f in metrics:
            if key not in t[0]:
                cols.append("")
                continue
            tv = statistics.median(r[key] for r in t)
            kv = statistics.median(r[key] for r in k)
            cols.append(f"{f.format(tv)} / {f.format(kv)} ({fmt_ratio(tv, kv)})")
        rows.append(f"| {name} | " + " | ".join(cols) + " |")
    return "\n".join(rows)


def machine():
    cores = os.cpu_count()
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except StopIteration:
        pass
    return f"{cores} cores ({model}), {mem:.0f} GiB memory, {platform.system()} {platform.release()}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--tern", default=os.environ.get("TERN_BIN", "/work/target/release/tern"))
    ap.add_argument("--tern-commit", help="the commit the tern binary was built from (default: HEAD)")
    ap.add_argument("--rate", type=int, default=10_000,
                    help="records/s of the fixed-rate latency cell (0: no such cell)")
    ap.add_argument("--rate-seconds", type=int, default=15)
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of quiet before each run")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--write-results", action="store_true", help="append a section to bench/RESULTS.md")
    ap.add_argument("--section-out", help="also write the RESULTS.md section to this file")
    ap.add_argument("--note", default="", help="text for the RESULTS.md section (e.g. the load)")
    args = ap.parse_args(argv)
    global RATE
    RATE = args.rate

    load_before = open("/proc/loadavg").read().split()[:3]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    results, commands, secs = run(args)
    load_after = open("/proc/loadavg").read().split()[:3]
    out = table(results, args.partitions)
    print()
    print(out)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    tern_version = args.tern_commit or subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    section = f"""
## Tern vs Apache Kafka {args.kafka_version} (ProducerPerformance / ConsumerPerformance), {when}

Machine: {machine()}; {java}.  Load average before the run {' '.join(load_before)}, after
{' '.join(load_after)}; the run took {secs / 60:.1f} min.  {args.rounds} rounds, {args.records} records of
{RECORD_SIZE} B per cell and broker; the figures are medians over the rounds.  Both brokers single
node, on loopback, fresh data dirs every round; the cells alternate tern/kafka, the order swapping each round.
{args.note}

{out}

- MB/s and records/s: ProducerPerformance's final line; for consumers ConsumerPerformance's
  `fetch.MB.sec` / `fetch.nMsg.sec` (the group join excluded).  Latency: ProducerPerformance's
  percentiles (send to acknowledgement, as the client sees it).
- peak RSS: the broker's VmRSS polled every 50 ms during the cell.  Kafka runs with
  kafka-server-start.sh's default heap (`-Xmx1G -Xms1G`, G1).
- broker CPU %: the broker's utime+stime over the cell's wall time, JVM start of the tool included
  (200% = both cores).  The Java tool shares the two cores with the broker, so a broker that needs
  less CPU leaves more to the client.

Commands (`python bench/kafka_compare/run.py {' '.join(map(shlex.quote, argv))}`):

```
tern:  {commands.get('tern')}   (tern built from {tern_version}: CARGO_TARGET_DIR=/work/target cargo build --release -p tern-broker --bin tern)
kafka: {commands.get('kafka')}
kafka server.properties (ports vary):
{commands.get('kafka-props', '').rstrip()}
producer: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{commands.get('produce')}
fixed rate: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{commands.get('rate')}
consumer: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{commands.get('consume')}
topics: created with confluent-kafka's AdminClient (replication factor 1) before each producer cell
```

Every run (elapsed time, round, cell, broker):

```text
{chr(10).join(RAW)}
```
"""
    if args.section_out:
        Path(args.section_out).write_text(section)
    if args.write_results:
        path = ROOT / "bench" / "RESULTS.md"
        existing = path.read_text() if path.exists() else "# Benchmark results\n"
        path.write_text(existing.rstrip("\n") + "\n" + section)
        print(f"appended to {path}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
