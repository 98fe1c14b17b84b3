#!/usr/bin/env python3
"""Mirroring: Tern's built-in cluster mirroring against MirrorMaker 2 (issue 6's benchmark).

One run of this script:

1. starts a real Apache Kafka (default 4.4.0, tests/harness/kafka_peer.py's KafkaPeer) as the
   source and fills it once: two topics of 8 partitions, `mm-lz4` and `mm-zstd`, 1 KiB records,
   written by Kafka's ProducerPerformance with compression.type=lz4 / zstd (acks=all, producer
   defaults otherwise); together --gb GiB of record payload;
2. (consumer) the plain-consumer baseline: Kafka's ConsumerPerformance reads both source topics
   (`--include`) from the start, one consumer, fresh group; its fetch.MB.sec is the rate;
3. (tern) a fresh `tern server` mirrors both topics: `tern mirrors --create` (bootstrap.servers =
   the source), then the clock starts and `tern mirrors --start --topics mm-lz4,mm-zstd`; it stops
   at the first `tern mirrors --describe --json` (polled every 0.5 s) where every partition's
   destinationOffset has reached the source's end offset (known from ListOffsets on the source);
   CPU: the tern process's utime+stime (/proc/<pid>/stat) over that interval;
4. (mm2) MirrorMaker 2 (the harness's MirrorMaker2: dedicated mode, connect-mirror 4.3.1, its
   defaults, topics = the two) from the same source into a fresh Apache Kafka target; the clock
   starts at the MM2 JVM's launch and stops at the first poll (ListOffsets on the target every
   0.5 s) where the target's `source.mm-lz4` / `source.mm-zstd` hold as many records as the
   source topics (sum of end offsets); CPU: the MM2 JVM's utime+stime from its launch.

Every process runs on loopback, with fresh data dirs; all are stopped at the end (also on failure
or Ctrl-C).  MB = 2^20 B and GB = 2^30 B of record payload (records x 1024 B, the unit of Kafka's
perf tools), whatever the compressed size on disk.

    ~/.cache/tern/venv/bin/python bench/mirror_compare/run.py [--gb 1] [--wait-load 1.5]
        [--write-results] [--perf-tern]

Needs: java 17, mvn (first run resolves the jars), confluent-kafka (topic creation and
ListOffsets), the tern binary (default ~/.cache/tern/target/release/tern; built with
`CARGO_TARGET_DIR=~/.cache/tern/target cargo build --release -p tern-broker` if missing), and for
--perf-tern, `perf`.  Not a test: nothing here asserts.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
import kafka_peer  # noqa: E402
from tern_process import Tern  # noqa: E402

PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
TOOL_JVM = ["-Xmx512m"]
RECORD_SIZE = 1024
MB = 1 << 20
GB = 1 << 30
TOPICS = {"mm-lz4": "lz4", "mm-zstd": "zstd"}
MIRROR_NAME = "bench"
MM2_ALIAS = "source"  # MirrorMaker2's source cluster alias: target topics are `source.<topic>`
POLL_S = 0.5
CLK = os.sysconf("SC_CLK_TCK")
LOG = []  # progress lines, for RESULTS.md
STARTED = time.time()


def say(msg, keep=True):
    line = f"[{time.time() - STARTED:6.0f}s] {msg}"
    print(line, flush=True)
    if keep:
        LOG.append(line)


def cpu_s(pid):
    """utime+stime of a process, in seconds (0 once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK
    except (OSError, IndexError):
        return 0.0


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def threads_cpu(pid):
    """{thread name: CPU seconds} summed over the threads of a process."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK
    return out


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def wait_for_load(limit, max_minutes):
    """Waits (checking every 30 s, at most max_minutes) until the 1-minute load is below limit."""
    deadline = time.time() + max_minutes * 60
    first = True
    while True:
        load = float(loadavg()[0])
        if load < limit:
            say(f"load average {' '.join(loadavg())}: below {limit}, starting")
            return True
        if time.time() >= deadline:
            say(f"load average {' '.join(loadavg())}: still not below {limit} after {max_minutes} min, running anyway")
            return False
        say(f"load average {' '.join(loadavg())}: waiting for < {limit}", keep=first)
        first = False
        time.sleep(30)


# -- processes -------------------------------------------------------------------------------------

RUNNING = []  # everything started, stopped in reverse order by cleanup()


def cleanup():
    while RUNNING:
        thing = RUNNING.pop()
        try:
            thing.stop()
        except Exception as e:  # noqa: BLE001 -- keep stopping the others
            print(f"stopping {thing}: {e}", file=sys.stderr)


class MirroringTern(Tern):
    """The tern under test (tests/harness/tern_process.py's Tern, with the settings the Kafka peer
    gets from kafka_peer.py that tern also reads), registered for cleanup(), and `tern mirrors`
    against it."""

    def __init__(self, binary, data_dir):
        super().__init__(data_dir, binary=binary,
                         extra=["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1"])

    def start(self, serving=True):
        if self not in RUNNING:
            RUNNING.append(self)
        return super().start(serving=serving)

    def mirrors(self, *args, check=True):
        cmd = [self.binary, "mirrors", "--bootstrap-server", self.bootstrap, *map(str, args)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
        return out

    def __str__(self):
        return f"tern {self.bootstrap}"


class Perf:
    """`perf record --call-graph dwarf` attached to a pid (tern's release build has no frame pointers)."""

    def __init__(self, pid, out):
        self.out = Path(out)
        self.proc = subprocess.Popen(["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", str(self.out)],
                                     stdout=subprocess.DEVNULL, stderr=open(str(self.out) + ".log", "w"),
                                     stdin=subprocess.DEVNULL)
        RUNNING.append(self)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def report(self, top=25):
        """Samples by leaf symbol and by the innermost tern/kafka_protocol frame that led to it."""
        out = subprocess.run(["perf", "script", "-i", str(self.out), "-F", "ip,sym"],
                             capture_output=True, text=True, timeout=1800)
        samples, cur = [], []
        for line in out.stdout.splitlines():
            if not line.strip():
                if cur:
                    samples.append(cur)
                cur = []
            else:
                cur.append(re.sub(r"^\s*[0-9a-f]+\s+", "", line.strip()))
        if cur:
            samples.append(cur)
        if not samples:
            return "(no samples)"
        owned = re.compile(r"<?(tern_|kafka_protocol)")
        by_owner, by_pair = Counter(), Counter()
        for frames in samples:
            owner = next((f for f in frames if owned.match(f)), "?")
            owner = re.sub(r"::\{\{closure\}\}.*|\s+\(inlined\)", "", owner)
            by_owner[owner] += 1
            by_pair[(frames[0][:48], owner)] += 1
        n = len(samples)
        rows = [f"{n} samples at 499 Hz; by the innermost tern frame:"]
        rows += [f"  {100 * c / n:5.1f} %  {o}" for o, c in by_owner.most_common(12)]
        rows.append("by leaf symbol <- innermost tern frame:")
        rows += [f"  {100 * c / n:5.1f} %  {leaf:48s} <- {o}" for (leaf, o), c in by_pair.most_common(top)]
        return "\n".join(rows)

    def __str__(self):
        return "perf record"


class Stoppable:
    """Wraps a harness object (KafkaPeer, MirrorMaker2) for cleanup()."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def stop(self):
        self.obj.stop()

    def __str__(self):
        return self.name


# -- Kafka clients ---------------------------------------------------------------------------------

def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)
    a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline:
        md = a.list_topics(topic=topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} has no leaders")


class EndOffsets:
    """Latest offsets of topics' partitions through one AdminClient (one ListOffsets per poll)."""

    def __init__(self, bootstrap):
        self.admin = admin(bootstrap)

    def get(self, topic_partitions):
        """{(topic, partition): end offset}; partitions that do not exist (yet) are left out."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        try:
            md = self.admin.list_topics(timeout=5).topics
        except Exception:  # noqa: BLE001 -- try again at the next poll
            return {}
        req = {TopicPartition(t, p): OffsetSpec.latest() for t, p in topic_partitions
               if t in md and md[t].error is None and p in md[t].partitions}
        if not req:
            return {}
        out = {}
        for tp, fut in self.admin.list_offsets(req, request_timeout=5).items():
            try:
                out[(tp.topic, tp.partition)] = fut.result().offset
            except Exception:  # noqa: BLE001
                pass
        return out


def produce(jars, bootstrap, topic, records, compression):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
            "--record-size", RECORD_SIZE, "--throughput", -1,
            "--command-property", "acks=all", f"compression.type={compression}"]
    t0 = time.time()
    out = jars.run(PRODUCER, *args, jvm_opts=TOOL_JVM, timeout=3600)
    last = [l for l in out.stdout.splitlines() if "records sent" in l]
    if out.returncode != 0 or not last:
        raise RuntimeError(f"ProducerPerformance failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    say(f"produced {topic}: {last[-1].strip()} ({time.time() - t0:.0f} s with JVM start)")
    return "ProducerPerformance " + " ".join(map(str, args))


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- the three measurements --------------------------------------------------------------------------

def run_consumer(jars, source, total_records):
    args = ["--bootstrap-server", source.bootstrap, "--include", "^mm-(lz4|zstd)$",
            "--num-records", total_records, "--group", f"bench-baseline-{os.getpid()}", "--timeout", 30000]
    src0, child0, t0 = cpu_s(source.pid), children_cpu(), time.time()
    out = jars.run(CONSUMER, *args, jvm_opts=TOOL_JVM, timeout=3600)
    wall = time.time() - t0
    src_cpu, tool_cpu = cpu_s(source.pid) - src0, children_cpu() - child0
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    hi = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
    if out.returncode != 0 or hi is None or hi + 1 >= len(lines):
        raise RuntimeError(f"ConsumerPerformance failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    row = dict(zip([c.strip() for c in lines[hi].split(",")], [v.strip() for v in lines[hi + 1].split(",")]))
    n = int(row["data.consumed.in.nMsg"])
    if n < total_records:
        raise RuntimeError(f"ConsumerPerformance read {n} of {total_records}")
    fetch_s = float(row["fetch.time.ms"]) / 1000
    r = {"records": n, "mb": float(row["data.consumed.in.MB"]), "secs": fetch_s,
         "rec_s": float(row["fetch.nMsg.sec"]), "mb_s": float(row["fetch.MB.sec"]),
         "total_mb_s": float(row["MB.sec"]), "rebalance_ms": float(row["rebalance.time.ms"]),
         "wall_s": wall, "cpu_s": tool_cpu, "source_cpu_s": src_cpu,
         "cmd": "ConsumerPerformance " + " ".join(map(shlex.quote, map(str, args)))}
    say(f"consumer: {n} records {r['mb']:.0f} MB in {fetch_s:.1f} s fetch time: {r['mb_s']:.1f} MB/s "
        f"{r['rec_s']:.0f} rec/s (with group join {r['total_mb_s']:.1f} MB/s); JVM CPU {tool_cpu:.1f} s "
        f"(JVM start included), source broker CPU {src_cpu:.1f} s")
    return r


class Progress:
    """Per-poll samples of (seconds since start, records mirrored, CPU seconds...)."""

    def __init__(self):
        self.samples = []
        self.first_data = None

    def add(self, t, records, **cpus):
        self.samples.append((t, records, cpus))
        if self.first_data is None and records > 0:
            self.first_data = (t, cpus)


def run_tern(args, work, source, source_ends, total_records, payload_bytes):
    tern = MirroringTern(args.tern, work / "tern").start()
    cfg = work / "tern-mirror.properties"
    cfg.write_text(f"bootstrap.servers={source.bootstrap}\n")
    tern.mirrors("--create", "--mirror", MIRROR_NAME, "--mirror-config", cfg)
    time.sleep(args.settle)
    perf = Perf(tern.pid, work / "tern-perf.data") if args.perf_tern else None
    if perf:
        time.sleep(1)
    threads0 = threads_cpu(tern.pid)
    prog = Progress()
    cpu0, src0 = cpu_s(tern.pid), cpu_s(source.pid)
    t0 = time.time()
    tern.mirrors("--start", "--mirror", MIRROR_NAME, "--topics", ",".join(TOPICS))
    deadline = t0 + args.phase_timeout
    done_t = None
    peak_rss = 0.0
    last_rows = []
    polls = 0
    next_poll = t0
    while time.time() < deadline:
        out = tern.mirrors("--describe", "--mirror", MIRROR_NAME, "--json", check=False)
        polls += 1
        now = time.time() - t0
        peak_rss = max(peak_rss, rss_mib(tern.pid))
        if tern.proc.poll() is not None:
            raise RuntimeError(f"tern exited {tern.proc.returncode}: {tern.log_path.read_text()[-3000:]}")
        try:
            rows = json.loads(out.stdout) if out.returncode == 0 else []
        except json.JSONDecodeError:
            rows = []
        if rows:
            last_rows = rows
        dest = {(r["topic"], r["partition"]): r["destinationOffset"] for r in rows}
        mirrored = sum(max(0, v) for v in dest.values())
        prog.add(now, mirrored, tern=cpu_s(tern.pid) - cpu0, source=cpu_s(source.pid) - src0)
        failed = [r for r in rows if r["state"] == "FAILED"]
        if failed:
            raise RuntimeError(f"mirror partitions failed: {failed}")
        if len(dest) == len(source_ends) and all(dest.get(tp, -1) >= end for tp, end in source_ends.items()):
            done_t = now
            break
        if polls % 10 == 0:
            say(f"tern: {now:5.1f} s {mirrored}/{total_records} records, tern CPU {cpu_s(tern.pid) - cpu0:.1f} s")
        next_poll += POLL_S
        time.sleep(max(0.0, next_poll - time.time()))
    cpu = cpu_s(tern.pid) - cpu0
    src_cpu = cpu_s(source.pid) - src0
    threads1 = threads_cpu(tern.pid)
    if perf:
        perf.stop()
    if done_t is None:
        raise RuntimeError(f"tern did not catch up in {args.phase_timeout} s: {last_rows}")
    # Cross-check through ListOffsets on tern: its high watermarks equal the source's.
    ends = EndOffsets(tern.bootstrap).get(list(source_ends))
    mismatched = {tp: (ends.get(tp), e) for tp, e in source_ends.items() if ends.get(tp) != e}
    thread_delta = sorted(((n, threads1.get(n, 0) - threads0.get(n, 0)) for n in threads1), key=lambda x: -x[1])
    r = result("tern", done_t, cpu, prog, "tern", total_records, payload_bytes)
    r.update(source_cpu_s=src_cpu, peak_rss_mib=peak_rss, threads=[t for t in thread_delta if t[1] >= 0.05],
             hw_mismatch=mismatched, describe=last_rows,
             command=" ".join(map(shlex.quote, tern.command())),
             disk_bytes=du(work / "tern" / "logs", TOPICS))
    if perf:
        r["perf"] = perf.report()
    say(f"tern: caught up in {done_t:.1f} s, {r['mb_s']:.1f} MB/s {r['rec_s']:.0f} rec/s, CPU {cpu:.1f} s "
        f"({r['cpu_per_gb']:.2f} s/GB), source broker CPU {src_cpu:.1f} s, peak RSS {peak_rss:.0f} MiB"
        + (f"; HW MISMATCH {mismatched}" if mismatched else "; high watermarks equal the source's"))
    say("tern threads (CPU s during the mirror): " + ", ".join(f"{n} {c:.1f}" for n, c in r["threads"][:8]))
    say("tern progress (s: records mirrored, tern CPU s): " + ", ".join(
        f"{t:.1f}: {n} ({c['tern']:.2f})" for t, n, c in prog.samples))
    tern.stop()
    return r


def run_mm2(args, work, source, source_ends, total_records, payload_bytes):
    target = kafka_peer.KafkaPeer(args.kafka_version, work / "target")
    RUNNING.append(Stoppable(target, "kafka target"))
    target.start()
    time.sleep(args.settle)
    extra = dict(kv.split("=", 1) for kv in args.mm2_property)
    mm = kafka_peer.MirrorMaker2(source.bootstrap, target.bootstrap, work / "mm2", version=args.mirror_version,
                                 topics="|".join(TOPICS), extra=extra)
    target_parts = {(f"{MM2_ALIAS}.{t}", p): end for (t, p), end in source_ends.items()}
    per_topic = {}
    for (t, _), end in source_ends.items():
        per_topic[t] = per_topic.get(t, 0) + end
    ends = EndOffsets(target.bootstrap)
    prog = Progress()
    src0, tgt0 = cpu_s(source.pid), cpu_s(target.pid)
    t0 = time.time()
    RUNNING.append(Stoppable(mm, "MirrorMaker 2"))
    mm.start()
    pid = mm.proc.pid
    deadline = t0 + args.phase_timeout
    done_t = None
    peak_rss = 0.0
    polls = 0
    got = {}
    next_poll = t0
    while time.time() < deadline:
        got = ends.get(list(target_parts))
        polls += 1
        now = time.time() - t0
        peak_rss = max(peak_rss, rss_mib(pid))
        if mm.proc.poll() is not None:
            raise RuntimeError(f"MirrorMaker 2 exited {mm.proc.returncode}:\n{mm.tail()}")
        mirrored = sum(got.values())
        prog.add(now, mirrored, mm2=cpu_s(pid), target=cpu_s(target.pid) - tgt0, source=cpu_s(source.pid) - src0)
        sums = {t: sum(v for (tt, _), v in got.items() if tt == f"{MM2_ALIAS}.{t}") for t in TOPICS}
        if all(sums[t] >= per_topic[t] for t in TOPICS):
            done_t = now
            break
        if polls % 10 == 0:
            say(f"mm2: {now:5.1f} s {mirrored}/{total_records} records, MM2 CPU {cpu_s(pid):.1f} s")
        next_poll += POLL_S
        time.sleep(max(0.0, next_poll - time.time()))
    cpu, tgt_cpu, src_cpu = cpu_s(pid), cpu_s(target.pid) - tgt0, cpu_s(source.pid) - src0
    if done_t is None:
        raise RuntimeError(f"MirrorMaker 2 did not catch up in {args.phase_timeout} s: {got}\n{mm.tail()}")
    mismatched = {tp: (got.get(tp), e) for tp, e in target_parts.items() if got.get(tp) != e}
    r = result("mm2", done_t, cpu, prog, "mm2", total_records, payload_bytes)
    r.update(source_cpu_s=src_cpu, target_cpu_s=tgt_cpu, peak_rss_mib=peak_rss, hw_mismatch=mismatched,
             command=" ".join(map(shlex.quote, mm.jars.command(
                 "org.apache.kafka.connect.mirror.MirrorMaker", "mm2.properties", jvm_opts=["-Xmx512m"])))
             .replace(mm.jars.classpath(), f"<{mm.jars.libs}/*.jar>"),
             props=(work / "mm2" / "mm2.properties").read_text(),
             target_props=(work / "target" / "server.properties").read_text(),
             disk_bytes=du(work / "target" / "logs", {f"{MM2_ALIAS}.{t}": c for t, c in TOPICS.items()}))
    say(f"mm2: caught up in {done_t:.1f} s (JVM launch included), {r['mb_s']:.1f} MB/s {r['rec_s']:.0f} rec/s, "
        f"MM2 CPU {cpu:.1f} s ({r['cpu_per_gb']:.2f} s/GB), target broker CPU {tgt_cpu:.1f} s, "
        f"source broker CPU {src_cpu:.1f} s, peak RSS {peak_rss:.0f} MiB"
        + (f"; per-partition end offsets differ from the source's: {mismatched}" if mismatched else
           "; per-partition end offsets equal the source's"))
    mm.stop()
    target.stop()
    return r


def result(name, secs, cpu, prog, cpu_key, total_records, payload_bytes):
    """Rates over the whole interval and over the data phase (first mirrored record to the end)."""
    r = {"secs": secs, "records": total_records, "rec_s": total_records / secs,
         "mb_s": payload_bytes / MB / secs, "cpu_s": cpu, "cpu_per_gb": cpu / (payload_bytes / GB)}
    if prog.first_data:
        t1, cpus1 = prog.first_data
        first_records = next(s[1] for s in prog.samples if s[1] > 0)
        span = secs - t1
        rest = total_records - first_records
        if span > 0:
            r["data_secs"] = span
            r["data_rec_s"] = rest / span
            r["data_mb_s"] = rest * RECORD_SIZE / MB / span
            r["data_cpu_per_gb"] = (cpu - cpus1[cpu_key]) / (rest * RECORD_SIZE / GB)
        r["first_data_s"] = t1
    r["samples"] = prog.samples
    return r


def du(logs, topics):
    """On-disk bytes of the topics' .log segment files."""
    total = 0
    for t in topics:
        for d in Path(logs).glob(f"{t}-*"):
            total += sum(f.stat().st_size for f in d.glob("*.log"))
    return total


# -- report ------------------------------------------------------------------------------------------

def machine():
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) / 1024 / 1024
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    return f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB memory, {platform.system()} {platform.release()}"


def table(res, total_records, payload_bytes):
    c, t, m = res.get("consumer"), res.get("tern"), res.get("mm2")

    def f(v, fmt):
        return fmt.format(v) if v is not None else "-"

    rows = ["| | time s | records/s | MB/s | CPU s | CPU s per GB | data phase: time s / MB/s / CPU s per GB | "
            "other CPU s (not counted) |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    if t:
        rows.append(f"| Tern mirror | {t['secs']:.1f} | {t['rec_s']:.0f} | {t['mb_s']:.1f} | {t['cpu_s']:.1f} | "
                    f"{t['cpu_per_gb']:.2f} | {f(t.get('data_secs'), '{:.1f}')} / {f(t.get('data_mb_s'), '{:.1f}')} / "
                    f"{f(t.get('data_cpu_per_gb'), '{:.2f}')} | source broker {t['source_cpu_s']:.1f} |")
    if m:
        rows.append(f"| MirrorMaker 2 | {m['secs']:.1f} | {m['rec_s']:.0f} | {m['mb_s']:.1f} | {m['cpu_s']:.1f} | "
                    f"{m['cpu_per_gb']:.2f} | {f(m.get('data_secs'), '{:.1f}')} / {f(m.get('data_mb_s'), '{:.1f}')} / "
                    f"{f(m.get('data_cpu_per_gb'), '{:.2f}')} | target broker {m['target_cpu_s']:.1f}, "
                    f"source broker {m['source_cpu_s']:.1f} |")
    if c:
        rows.append(f"| plain consumer (ConsumerPerformance) | {c['secs']:.1f} | {c['rec_s']:.0f} | {c['mb_s']:.1f} | "
                    f"{c['cpu_s']:.1f} | {c['cpu_s'] / (payload_bytes / GB):.2f} | - | source broker "
                    f"{c['source_cpu_s']:.1f} |")
    lines = ["\n".join(rows), ""]
    if t and m:
        lines.append(f"- Tern / MM2 throughput: **{t['mb_s'] / m['mb_s']:.2f}x** (goal >= 3x); data phases only "
                     f"{t['data_mb_s'] / m['data_mb_s']:.2f}x." if t.get("data_mb_s") and m.get("data_mb_s") else
                     f"- Tern / MM2 throughput: **{t['mb_s'] / m['mb_s']:.2f}x** (goal >= 3x).")
        lines.append(f"- Tern / MM2 CPU per GB: **{t['cpu_per_gb'] / m['cpu_per_gb']:.2f}** (goal <= 0.20); "
                     f"against MM2 + the target broker (which does the appends Tern's figure includes): "
                     f"{t['cpu_per_gb'] / ((m['cpu_s'] + m['target_cpu_s']) / (payload_bytes / GB)):.2f}"
                     + (f"; data phases only {t['data_cpu_per_gb'] / m['data_cpu_per_gb']:.2f}."
                        if t.get("data_cpu_per_gb") and m.get("data_cpu_per_gb") else "."))
    if t and c:
        lines.append(f"- Tern / plain consumer rate: **{100 * t['mb_s'] / c['mb_s']:.0f} %** (goal >= 80 %)"
                     + (f"; data phase {100 * t['data_mb_s'] / c['mb_s']:.0f} %." if t.get("data_mb_s") else "."))
    return "\n".join(lines)


def verdict(res):
    t, m, c = res.get("tern"), res.get("mm2"), res.get("consumer")
    if not (t and m and c):
        return "incomplete run"
    def judge(mb, cpu, label):
        if not (t.get(mb) and m.get(mb) and t.get(cpu) and m.get(cpu)):
            return f"{label}: not measured"
        goals = [(f"throughput {t[mb] / m[mb]:.1f}x MM2 (>= 3x)", t[mb] / m[mb] >= 3),
                 (f"CPU per GB {t[cpu] / m[cpu]:.3f} of MM2's (<= 0.2)", t[cpu] / m[cpu] <= 0.2),
                 (f"{100 * t[mb] / c['mb_s']:.0f} % of the plain consumer's rate (>= 80 %)", t[mb] / c["mb_s"] >= 0.8)]
        return f"{label}: " + ", ".join(f"{g} {'met' if ok else 'NOT met'}" for g, ok in goals)
    return judge("mb_s", "cpu_per_gb", "end to end") + "; " + judge("data_mb_s", "data_cpu_per_gb", "data phases only")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="GiB of record payload in total (both topics)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--mirror-version", default=kafka_peer.MIRROR_VERSION, help="connect-mirror version for MM2")
    ap.add_argument("--mm2-property", action="append", default=[], metavar="K=V",
                    help="extra mm2.properties setting (default: the harness's MirrorMaker2 config)")
    ap.add_argument("--tern", default=str(Path.home() / ".cache/tern/target/release/tern"))
    ap.add_argument("--order", default="consumer,tern,mm2", help="which measurements, in which order")
    ap.add_argument("--phase-timeout", type=float, default=None, help="seconds per mirror (default 600 per GB, min 300)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet before each measurement")
    ap.add_argument("--wait-load", type=float, default=0, help="first wait until the 1-min load average is below this")
    ap.add_argument("--wait-max-min", type=float, default=45)
    ap.add_argument("--perf-tern", action="store_true", help="perf record the tern process while it mirrors")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--write-results", action="store_true", help="append a section to bench/RESULTS.md")
    ap.add_argument("--section-out", help="also write the RESULTS.md section to this file")
    ap.add_argument("--json-out", help="write all measurements (with the poll samples) to this file")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if args.phase_timeout is None:
        args.phase_timeout = max(300.0, 600.0 * args.gb)
    order = [x.strip() for x in args.order.split(",") if x.strip()]

    if not Path(args.tern).is_file():
        say(f"{args.tern} missing: building it")
        subprocess.run(["cargo", "build", "--release", "-p", "tern-broker"], cwd=ROOT, check=True,
                       env={**os.environ, "CARGO_TARGET_DIR": str(Path(args.tern).parents[1])})

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)

    load_waited = None
    if args.wait_load:
        load_waited = wait_for_load(args.wait_load, args.wait_max_min)
    load_before = loadavg()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total_records = int(args.gb * GB / RECORD_SIZE)
    per_topic = total_records // len(TOPICS)
    total_records = per_topic * len(TOPICS)
    payload_bytes = total_records * RECORD_SIZE
    work = Path(tempfile.mkdtemp(prefix="tern-mirror-bench-"))
    # A private copy of the binary: a rebuild of the shared target dir during the run cannot
    # change what is measured.
    tern_src = Path(args.tern)
    tern_built = datetime.datetime.fromtimestamp(tern_src.stat().st_mtime, datetime.timezone.utc)
    res, cmds = {}, {}
    t_start = time.time()
    try:
        (work / "bin").mkdir()
        args.tern = str(work / "bin" / "tern")
        shutil.copy2(tern_src, args.tern)
        tern_sha = hashlib.sha256(Path(args.tern).read_bytes()).hexdigest()[:16]
        jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
        kafka_peer.KafkaJars(args.mirror_version, mirror=True).ensure()
        source = kafka_peer.KafkaPeer(args.kafka_version, work / "source")
        RUNNING.append(Stoppable(source, "kafka source"))
        source.start()
        say(f"source: Apache Kafka {args.kafka_version} on {source.bootstrap}; work dir {work}")
        for topic, compression in TOPICS.items():
            create_topic(source.bootstrap, topic, args.partitions)
            cmds.setdefault("produce", []).append(produce(jars, source.bootstrap, topic, per_topic, compression)
                                                  .replace(source.bootstrap, "<source>"))
        source_ends = EndOffsets(source.bootstrap).get([(t, p) for t in TOPICS for p in range(args.partitions)])
        if len(source_ends) != len(TOPICS) * args.partitions or sum(source_ends.values()) != total_records:
            raise RuntimeError(f"source end offsets {source_ends} do not add up to {total_records}")
        source_disk = du(work / "source" / "logs", TOPICS)
        say(f"source: {total_records} records, {payload_bytes / MB:.0f} MB payload, {source_disk / MB:.0f} MB on disk")
        cmds["kafka"] = " ".join(map(shlex.quote, source.jars.command(
            "kafka.Kafka", "server.properties", jvm_opts=source.jvm_opts))).replace(jars.classpath(), f"<{jars.libs}/*.jar>")
        cmds["source-props"] = (work / "source" / "server.properties").read_text()
        for what in order:
            time.sleep(args.settle)
            say(f"-- {what} (load average {' '.join(loadavg())})")
            if what == "consumer":
                res["consumer"] = run_consumer(jars, source, total_records)
            elif what == "tern":
                res["tern"] = run_tern(args, work, source, source_ends, total_records, payload_bytes)
            elif what == "mm2":
                res["mm2"] = run_mm2(args, work, source, source_ends, total_records, payload_bytes)
            else:
                raise SystemExit(f"unknown measurement {what}")
    finally:
        cleanup()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    load_after = loadavg()
    secs = time.time() - t_start

    out = table(res, total_records, payload_bytes)
    print()
    print(out)
    print()
    print("verdict:", verdict(res))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"results": res, "commands": cmds, "log": LOG}, indent=1, default=str))
    if "tern" in res and "perf" in res["tern"]:
        print("\nperf (tern while mirroring):\n" + res["tern"]["perf"])

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = [l[3:] for l in subprocess.run(["git", "-C", str(ROOT), "status", "--short", "--untracked-files=no"],
                                           capture_output=True, text=True).stdout.splitlines()]
    if dirty:
        head += f" with uncommitted changes to {', '.join(dirty)}"
    t, m = res.get("tern", {}), res.get("mm2", {})
    load_note = "" if load_waited is None else (
        f" (waited for a 1-minute load below {args.wait_load}: {'reached' if load_waited else 'not reached, ran anyway'})")
    section = f"""
## Mirroring: Tern vs MirrorMaker 2, {when}

Machine: {machine()}; {java}.  Load average before the run {' '.join(load_before)}{load_note},
after {' '.join(load_after)}; the whole run (start-up, producing, the three measurements) took {secs / 60:.1f} min.
{args.note}

Source: one Apache Kafka {args.kafka_version} (KafkaPeer, KRaft, single node, default 1 GiB heap) with
{len(TOPICS)} topics of {args.partitions} partitions, `mm-lz4` and `mm-zstd`, filled once by
ProducerPerformance (acks=all, compression.type lz4 / zstd, producer defaults otherwise):
{total_records} records of {RECORD_SIZE} B = {payload_bytes / GB:.2f} GB of payload, {source_disk / MB:.0f} MB on disk
(compressed).  The three measurements read the same data, in this order: {', '.join(order)}; all of it
is in the page cache (24 GiB memory).  Everything on loopback, one machine, fresh data dirs.

{out}

Verdict against the issue's goals (throughput >= 3x MM2, CPU per GB <= 1/5 of MM2's, >= 80 % of a
plain consumer): {verdict(res)}.

- **time**: Tern, from `tern mirrors --start` to the first `--describe --json` (polled every 0.5 s)
  where every partition's destinationOffset equals the source's end offset; MM2, from launching its
  JVM to the first poll (ListOffsets on the target every 0.5 s) where `source.mm-lz4` and
  `source.mm-zstd` hold all the source's records (so MM2's time includes its JVM and Connect start,
  {m.get('first_data_s', 0):.1f} s to its first mirrored record; Tern's first record came after
  {t.get('first_data_s', 0):.1f} s).  The "data phase" columns start at the first poll that saw a
  mirrored record.  The consumer: ConsumerPerformance's fetch.time.ms (group join excluded).
- **MB** = 2^20 B and **GB** = 2^30 B of record payload (records x {RECORD_SIZE} B, as Kafka's perf tools
  count), not of compressed bytes.
- **CPU s**: utime+stime from /proc/<pid>/stat.  Tern: the whole tern process over the interval, so it
  includes its own appends, index writes and metadata; it excludes the source broker's CPU for serving
  the fetches (the "other" column) and the `tern mirrors --describe` polling processes.  MM2: its
  whole JVM from launch (JVM start, Connect start-up, JIT included), excluding the target broker that
  does the appends (the "other" column; the second ratio counts it) and the source broker.  The
  consumer: ConsumerPerformance's JVM (getrusage of the child, JVM start included); it decompresses
  and iterates every record, which Tern never does (it appends the fetched batches as bytes).
- MM2 runs with the harness's configuration (dedicated mode, `tasks.max` 1, producer defaults: the
  target topics are written uncompressed, {m.get('disk_bytes', 0) / MB:.0f} MB on disk against Tern's
  {t.get('disk_bytes', 0) / MB:.0f} MB, which keeps the source's batches).  connect-mirror
  {args.mirror_version} is the newest the Maven mirror here serves; the target is Apache Kafka {args.kafka_version}.
- Peak RSS: Tern {t.get('peak_rss_mib', 0):.0f} MiB, MM2 {m.get('peak_rss_mib', 0):.0f} MiB (polled every 0.5 s).

Commands (`{sys.executable} bench/mirror_compare/run.py {' '.join(map(shlex.quote, argv))}`; tern: a copy
of {tern_src} (built {tern_built:%Y-%m-%d %H:%M} UTC, sha256 {tern_sha}...; HEAD was {head}), by
`CARGO_TARGET_DIR=~/.cache/tern/target cargo build --release -p tern-broker`):

```
source: {cmds.get('kafka')}
source server.properties (ports vary):
{cmds.get('source-props', '').rstrip()}
producer (per topic): java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{(chr(10) + '  ').join(cmds.get('produce', []))}
consumer: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{re.sub(r'127[.]0[.]0[.]1:[0-9]+', '<source>', res.get('consumer', {}).get('cmd', ''))}
tern: {t.get('command', '').replace(str(work), '<work>')}
  tern mirrors --bootstrap-server <tern> --create --mirror {MIRROR_NAME} --mirror-config FILE   (FILE: bootstrap.servers=<source>)
  tern mirrors --bootstrap-server <tern> --start --mirror {MIRROR_NAME} --topics {','.join(TOPICS)}
  tern mirrors --bootstrap-server <tern> --describe --mirror {MIRROR_NAME} --json   (every 0.5 s)
mm2: {m.get('command', '')}
mm2.properties:
{m.get('props', '').rstrip()}
target: the same Kafka command and properties as the source (its own ports and dirs)
```

Progress (elapsed time since the script started):

```text
{chr(10).join(LOG)}
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
