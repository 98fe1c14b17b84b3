#!/usr/bin/env python3
"""Mirroring: Tern's built-in cluster mirroring against MirrorMaker 2 and plain consumers (issues 6, 16).

One run of this script:

1. starts a real Apache Kafka (default 4.4.0, tests/harness/kafka_peer.py's KafkaPeer) as the
   source and fills it once: two topics of 8 partitions, `mm-lz4` and `mm-zstd`, 1 KiB records,
   written by Kafka's ProducerPerformance with compression.type=lz4 / zstd (acks=all, producer
   defaults otherwise); together --gb GiB of record payload;
2. runs the measurements of --order, in that order, on that same data:
   - `rdk-consumer`: librdkafka's rdkafka_performance as one balanced consumer (-G, fresh group)
     subscribed to both source topics (-t mm-lz4 -t mm-zstd), auto.offset.reset=earliest, -c all the
     records, librdkafka defaults otherwise; it keeps nothing (reads each message into memory and
     drops it).  Rate: the payload bytes it reports (sum of the messages' value lengths) / its own
     time from the first message to the last (rdkafka_performance's "consumed in N ms": rd_clock()
     at the first message to rd_clock() after the -c-th, group join and close excluded).  CPU: the
     process's rusage (utime+stime, whole life: start, group join, consume, close);
   - `consumer`: Kafka's ConsumerPerformance reads both source topics (`--include`) from the start,
     one consumer, fresh group; its fetch.MB.sec is the rate (group join excluded); CPU: the JVM's
     rusage (JVM start included);
   - `tern` / `tern:NAME`: a fresh `tern server` (--tern, or the binary of --tern-variant NAME=...)
     mirrors both topics: `tern mirrors --create` (mirror config: bootstrap.servers = the source,
     plus the variant's settings), then the clock starts and `tern mirrors --start --topics
     mm-lz4,mm-zstd`; it stops at the first poll (ListOffsets on tern every --poll s) where every
     partition's end offset has reached the source's (`tern mirrors --describe --json` at the end,
     and during the mirror only after 5 s without progress, to catch failed partitions: a process of
     its own, it can block the polling for a second); CPU: the tern process's utime+stime
     (/proc/<pid>/stat) over that interval;
   - `mm2`: MirrorMaker 2 (the harness's MirrorMaker2: dedicated mode, connect-mirror 4.3.1, its
     defaults, topics = the two) from the same source into a fresh Apache Kafka target; the clock
     starts at the MM2 JVM's launch and stops at the first poll (ListOffsets on the target every
     --poll s) where the target's `source.mm-lz4` / `source.mm-zstd` hold as many records as the
     source topics (sum of end offsets); CPU: the MM2 JVM's utime+stime from its launch.

A measurement may appear more than once in --order (results `NAME#2`, ...).  --tern-variant
NAME=PATH[,KEY=VALUE...] (repeatable) names a tern binary and extra mirror configs (written into the
--mirror-config file after bootstrap.servers), e.g.

    --tern-variant base=/tmp/tern-old --tern-variant new2=/tmp/tern-new,mirror.fetch.connections=2
    --order rdk-consumer,consumer,tern:base,tern:new2,mm2

Every process runs on loopback, with fresh data dirs; all are stopped at the end (also on failure
or Ctrl-C).  MB = 2^20 B and GB = 2^30 B of record payload (records x 1024 B, the unit of Kafka's
perf tools), whatever the compressed size on disk.

    ~/.cache/tern/venv/bin/python bench/mirror_compare/run.py [--gb 1] [--wait-load 1.5]
        [--wait-procs cargo rustc ...] [--tern-variant NAME=PATH[,K=V...]] [--order ...]
        [--write-results] [--perf-tern]

Needs: java 17, mvn (first run resolves the jars), confluent-kafka (topic creation and
ListOffsets), the tern binary (default ~/.cache/tern/target/release/tern; built with
`CARGO_TARGET_DIR=~/.cache/tern/target cargo build --release -p tern-broker` if missing and plain
`tern` is in --order), for rdk-consumer rdkafka_performance (bench/fetch_cpu/build_rdkafka_perf.sh;
--rdkafka-perf), and for --perf-tern, `perf`.  Not a test: nothing here asserts.
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
STALL_DESCRIBE_S = 5.0  # tern mirrors --describe (failed partitions) once progress stalls this long
SAY_EVERY_S = 2.0
CACHE = Path(os.environ.get("TERN_CACHE") or Path.home() / ".cache" / "tern")
RDK_DEFAULT = CACHE / "librdkafka-src" / "examples" / "rdkafka_performance"
RDK_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s")
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


def busy_processes(patterns):
    """Processes (other than this one and its ancestors) one of whose first three argv words matches
    one of the regexes (re.search): `cargo`, `pytest` match `cargo test`, `python -m pytest`, and not
    a process that merely mentions the word deep in its arguments or environment."""
    mine, pid = set(), os.getpid()
    while pid > 1 and pid not in mine:
        mine.add(pid)
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    regexes = [re.compile(p) for p in patterns]
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in mine:
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")[:3]
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if any(r.search(w) for r in regexes for w in words):
            found.append(f"{d.name} {' '.join(words)[:80]}")
    return found


def wait_for_quiet(patterns, max_minutes):
    """Waits (checking every 30 s, at most max_minutes) until no process matches busy_processes()."""
    deadline = time.time() + max_minutes * 60
    t0 = time.time()
    first = True
    while True:
        busy = busy_processes(patterns)
        if not busy:
            say(f"no {' / '.join(patterns)} process running after {(time.time() - t0) / 60:.1f} min of waiting "
                f"(load average {' '.join(loadavg())}), starting")
            return True
        if time.time() >= deadline:
            say(f"still busy after {max_minutes} min, running anyway: {'; '.join(busy[:6])}")
            return False
        say(f"waiting: {len(busy)} busy processes, e.g. {'; '.join(busy[:3])}", keep=first)
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

def admin(bootstrap, quiet=False):
    from confluent_kafka.admin import AdminClient
    # quiet: no librdkafka log lines (a poller's client may outlive the broker it polled and would
    # log every reconnect attempt until it is collected).
    return AdminClient({"bootstrap.servers": bootstrap, **({"log_level": 0} if quiet else {})})


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
        self.admin = admin(bootstrap, quiet=True)

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
    r["cpu_per_gb"] = tool_cpu / (r["records"] * RECORD_SIZE / GB)
    return r


def run_rdk_consumer(args, work, source, total_records, key):
    """rdkafka_performance as one balanced consumer of both source topics (see the module doc)."""
    group = f"bench-rdk-{os.getpid()}-{re.sub(r'[^A-Za-z0-9]', '-', key)}"
    argv = [str(args.rdkafka_perf), "-G", group, *[a for t in TOPICS for a in ("-t", t)], "-b", source.bootstrap,
            "-c", str(total_records), "-X", "auto.offset.reset=earliest",
            *[a for p in args.rdk_consume_props for a in ("-X", p)]]
    log_path = work / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', key)}.log"
    samples = []  # (monotonic s, CPU s)
    peak_rss = 0.0
    with open(log_path, "wb") as log:
        src0, t0 = cpu_s(source.pid), time.monotonic()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        RUNNING.append(Killable(proc, "rdkafka_performance"))
        deadline = t0 + args.phase_timeout
        while True:
            # WNOWAIT: an exited process stays a zombie (its pid not reused) until wait4 below
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            samples.append((time.monotonic(), cpu_s(proc.pid)))
            peak_rss = max(peak_rss, rss_mib(proc.pid))
            if time.monotonic() > deadline:
                raise RuntimeError(f"rdkafka_performance did not finish in {args.phase_timeout} s:\n"
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.02)
        _, status, ru = os.wait4(proc.pid, 0)
        t_exit = time.monotonic()
        proc.returncode = os.waitstatus_to_exitcode(status)
    src_cpu = cpu_s(source.pid) - src0
    cpu = ru.ru_utime + ru.ru_stime
    out = log_path.read_text(errors="replace")
    m = None
    for line in out.splitlines():
        m = RDK_CONSUMED.search(line) or m
    if proc.returncode != 0 or not m or int(m.group(1)) < total_records:
        raise RuntimeError(f"rdkafka_performance exited {proc.returncode}, read {m.group(1) if m else 0} of "
                           f"{total_records}: {' '.join(argv)}\n{out[-3000:]}")
    n, nbytes, active_s = int(m.group(1)), int(m.group(2)), int(m.group(3)) / 1000
    wall = t_exit - t0
    # CPU over the consuming span: the last active_s seconds before the exit (its close included),
    # from the /proc samples, linear between them.
    t_from = t_exit - active_s
    samples.append((t_exit, cpu))
    cpu_from = 0.0
    for (t1, c1), (t2, c2) in zip(samples, samples[1:]):
        if t1 <= t_from <= t2:
            cpu_from = c1 + (c2 - c1) * ((t_from - t1) / (t2 - t1) if t2 > t1 else 1.0)
            break
    r = {"records": n, "bytes": nbytes, "mb": nbytes / MB, "secs": active_s, "rec_s": n / active_s,
         "mb_s": nbytes / MB / active_s, "wall_s": wall, "wall_mb_s": nbytes / MB / wall,
         "cpu_s": cpu, "cpu_per_gb": cpu / (nbytes / GB), "busy_cpu_pct": 100 * (cpu - cpu_from) / active_s,
         "source_cpu_s": src_cpu, "peak_rss_mib": peak_rss,
         "cmd": " ".join(map(shlex.quote, argv)).replace(source.bootstrap, "<source>"),
         "summary": m.group(0)}
    say(f"{key}: {n} records {r['mb']:.0f} MB in {active_s:.2f} s first to last message: {r['mb_s']:.1f} MB/s "
        f"{r['rec_s']:.0f} rec/s (process wall {wall:.2f} s: {r['wall_mb_s']:.1f} MB/s); CPU {cpu:.2f} s "
        f"({r['cpu_per_gb']:.2f} s/GB, {r['busy_cpu_pct']:.0f} % of a core while consuming), source broker CPU "
        f"{src_cpu:.1f} s, peak RSS {peak_rss:.0f} MiB")
    return r


class Killable:
    """A Popen for cleanup(): SIGKILL to its process group if it still runs."""

    def __init__(self, proc, name):
        self.proc, self.name = proc, name

    def stop(self):
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass

    def __str__(self):
        return self.name


class Progress:
    """Per-poll samples of (seconds since start, records mirrored, CPU seconds...)."""

    def __init__(self):
        self.samples = []
        self.first_data = None

    def add(self, t, records, **cpus):
        self.samples.append((t, records, cpus))
        if self.first_data is None and records > 0:
            self.first_data = (t, cpus)


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def run_tern(args, work, source, source_ends, total_records, payload_bytes, key, variant):
    """One tern mirror of both topics; `variant`: {"bin": path, "configs": [(k, v)...]}."""
    d = work / safe(key)
    tern = MirroringTern(variant["bin"], d).start()
    cfg = work / f"{safe(key)}-mirror.properties"
    cfg.write_text(f"bootstrap.servers={source.bootstrap}\n" + "".join(f"{k}={v}\n" for k, v in variant["configs"]))
    tern.mirrors("--create", "--mirror", MIRROR_NAME, "--mirror-config", cfg)
    ends = EndOffsets(tern.bootstrap)
    time.sleep(args.settle)
    perf = Perf(tern.pid, work / f"{safe(key)}-perf.data") if args.perf_tern else None
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
    next_poll = t0
    next_say = t0 + SAY_EVERY_S
    last_change, last_mirrored = t0, -1
    got = {}
    while time.time() < deadline:
        got = ends.get(list(source_ends))
        now = time.time() - t0
        peak_rss = max(peak_rss, rss_mib(tern.pid))
        if tern.proc.poll() is not None:
            raise RuntimeError(f"tern exited {tern.proc.returncode}: {tern.log_path.read_text()[-3000:]}")
        mirrored = sum(max(0, v) for v in got.values())
        prog.add(now, mirrored, tern=cpu_s(tern.pid) - cpu0, source=cpu_s(source.pid) - src0)
        if len(got) == len(source_ends) and all(got.get(tp, -1) >= end for tp, end in source_ends.items()):
            done_t = now
            break
        if mirrored != last_mirrored:
            last_change, last_mirrored = time.time(), mirrored
        if time.time() >= next_say:
            next_say += SAY_EVERY_S
            say(f"{key}: {now:5.1f} s {mirrored}/{total_records} records, tern CPU {cpu_s(tern.pid) - cpu0:.1f} s")
        # `tern mirrors --describe` is a process of its own that takes up to a second on a busy
        # machine: it runs only when the mirror has made no progress for a while (failed partitions?).
        if time.time() - last_change >= STALL_DESCRIBE_S:
            last_change = time.time()
            out = tern.mirrors("--describe", "--mirror", MIRROR_NAME, "--json", check=False)
            try:
                rows = json.loads(out.stdout) if out.returncode == 0 else []
            except json.JSONDecodeError:
                rows = []
            last_rows = rows or last_rows
            failed = [r for r in rows if r["state"] == "FAILED"]
            if failed:
                raise RuntimeError(f"mirror partitions failed: {failed}")
            say(f"{key}: no progress for {STALL_DESCRIBE_S:.0f} s at {mirrored}/{total_records} records; "
                f"--describe: {[(r['topic'], r['partition'], r['state'], r['destinationOffset']) for r in rows][:16]}")
        next_poll += args.poll
        time.sleep(max(0.0, next_poll - time.time()))
    cpu = cpu_s(tern.pid) - cpu0
    src_cpu = cpu_s(source.pid) - src0
    threads1 = threads_cpu(tern.pid)
    if perf:
        perf.stop()
    if done_t is None:
        raise RuntimeError(f"{key} did not catch up in {args.phase_timeout} s: {got} {last_rows}")
    # Cross-check through `tern mirrors --describe`: every partition's destinationOffset is the source's.
    out = tern.mirrors("--describe", "--mirror", MIRROR_NAME, "--json", check=False)
    try:
        last_rows = json.loads(out.stdout) if out.returncode == 0 else last_rows
    except json.JSONDecodeError:
        pass
    dest = {(r["topic"], r["partition"]): r["destinationOffset"] for r in last_rows}
    mismatched = {tp: (dest.get(tp), e) for tp, e in source_ends.items() if dest.get(tp) != e}
    thread_delta = sorted(((n, threads1.get(n, 0) - threads0.get(n, 0)) for n in threads1), key=lambda x: -x[1])
    r = result(key, done_t, cpu, prog, "tern", total_records, payload_bytes)
    r.update(source_cpu_s=src_cpu, peak_rss_mib=peak_rss, threads=[t for t in thread_delta if t[1] >= 0.05],
             dest_mismatch=mismatched, describe=last_rows, binary=variant["bin"], configs=variant["configs"],
             command=" ".join(map(shlex.quote, tern.command())),
             disk_bytes=du(d / "logs", TOPICS))
    if perf:
        r["perf"] = perf.report()
    say(f"{key}: caught up in {done_t:.2f} s, {r['mb_s']:.1f} MB/s {r['rec_s']:.0f} rec/s, CPU {cpu:.2f} s "
        f"({r['cpu_per_gb']:.2f} s/GB), source broker CPU {src_cpu:.1f} s, peak RSS {peak_rss:.0f} MiB"
        + (f"; DESTINATION OFFSETS DIFFER {mismatched}" if mismatched else
           "; high watermarks and destinationOffsets equal the source's"))
    say(f"{key} threads (CPU s during the mirror): " + ", ".join(f"{n} {c:.1f}" for n, c in r["threads"][:8]))
    say(f"{key} progress (s: records mirrored, tern CPU s): " + ", ".join(
        f"{t:.2f}: {n} ({c['tern']:.2f})" for t, n, c in thin(prog.samples, 0.25)))
    tern.stop()
    return r


def thin(samples, step):
    """The samples at least `step` s apart, and the last one."""
    out, last = [], None
    for smp in samples:
        if last is None or smp[0] - last >= step - 1e-9:
            out.append(smp)
            last = smp[0]
    if samples and out[-1] is not samples[-1]:
        out.append(samples[-1])
    return out


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
    got = {}
    next_poll = t0
    next_say = t0 + 5
    while time.time() < deadline:
        got = ends.get(list(target_parts))
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
        if time.time() >= next_say:
            next_say += 5
            say(f"mm2: {now:5.1f} s {mirrored}/{total_records} records, MM2 CPU {cpu_s(pid):.1f} s")
        next_poll += args.poll
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


def kind(key):
    base = key.split("#")[0]
    if base == "rdk-consumer":
        return "rdk"
    if base == "consumer":
        return "java"
    if base == "mm2":
        return "mm2"
    return "tern"


def label(key):
    base, _, rep = key.partition("#")
    name = {"rdk-consumer": "librdkafka consumer (`rdkafka_performance -G`)",
            "consumer": "Java consumer (ConsumerPerformance)", "mm2": "MirrorMaker 2",
            "tern": "Tern mirror"}.get(base) or f"Tern mirror `{base.split(':', 1)[1]}`"
    return name + (f" (run {rep})" if rep else "")


def refs(res):
    """The first result of each reference kind: (rdk consumer, Java consumer, MM2)."""
    first = {}
    for k, r in res.items():
        first.setdefault(kind(k), r)
    return first.get("rdk"), first.get("java"), first.get("mm2")


def table(res, total_records, payload_bytes):
    rdk, java, mm = refs(res)

    def f(v, fmt="{:.1f}"):
        return fmt.format(v) if v is not None else "-"

    def ratio(a, b, fmt="{:.2f}x"):
        return fmt.format(a / b) if a is not None and b else "-"

    rows = ["| | MB/s | vs rdk consumer | vs Java consumer | time s | CPU s | CPU s per GB | CPU per GB vs MM2 | "
            "data phase: time s / MB/s / CPU s per GB | peak RSS MiB | other CPU s (not counted) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for k, r in res.items():
        kd = kind(k)
        if kd == "mm2":
            other = f"target broker {r['target_cpu_s']:.1f}, source broker {r['source_cpu_s']:.1f}"
        else:
            other = f"source broker {r['source_cpu_s']:.1f}"
        data = "-" if kd in ("rdk", "java") else (
            f"{f(r.get('data_secs'), '{:.2f}')} / {f(r.get('data_mb_s'))} / {f(r.get('data_cpu_per_gb'), '{:.2f}')}")
        rows.append(f"| {label(k)} | {r['mb_s']:.1f} | {ratio(r['mb_s'], rdk and rdk['mb_s'])} | "
                    f"{ratio(r['mb_s'], java and java['mb_s'])} | {r['secs']:.2f} | {r['cpu_s']:.2f} | "
                    f"{r['cpu_per_gb']:.2f} | {ratio(r['cpu_per_gb'], mm and mm['cpu_per_gb'], '{:.3f}')} | {data} | "
                    f"{f(r.get('peak_rss_mib'), '{:.0f}')} | {other} |")
    lines = ["\n".join(rows), ""]
    terns = [(k, r) for k, r in res.items() if kind(k) == "tern"]
    first_tern = terns[0] if terns else None
    for k, r in terns:
        parts = []
        if rdk:
            parts.append(f"**{r['mb_s'] / rdk['mb_s']:.2f}x** the librdkafka consumer's rate (goal >= 1.5x: "
                         f"{'met' if r['mb_s'] / rdk['mb_s'] >= 1.5 else 'NOT met'}"
                         + (f"; data phase {r['data_mb_s'] / rdk['mb_s']:.2f}x" if r.get("data_mb_s") else "") + ")")
        if mm:
            q = r["cpu_per_gb"] / mm["cpu_per_gb"]
            parts.append(f"CPU per GB **{q:.3f}** of MM2's (goal <= 0.2: {'met' if q <= 0.2 else 'NOT met'}; "
                         f"against MM2 + its target broker "
                         f"{r['cpu_per_gb'] / ((mm['cpu_s'] + mm['target_cpu_s']) / (payload_bytes / GB)):.3f})")
            parts.append(f"{r['mb_s'] / mm['mb_s']:.1f}x MM2's rate")
        if java:
            parts.append(f"{100 * r['mb_s'] / java['mb_s']:.0f} % of the Java consumer's rate")
        if first_tern and first_tern[0] != k:
            b = first_tern[1]
            parts.append(f"against `{first_tern[0]}`: {r['mb_s'] / b['mb_s']:.2f}x the rate, "
                         f"{r['cpu_per_gb'] / b['cpu_per_gb']:.2f}x the CPU per GB"
                         + (f" (data phases {r['data_mb_s'] / b['data_mb_s']:.2f}x / "
                            f"{r['data_cpu_per_gb'] / b['data_cpu_per_gb']:.2f}x)"
                            if r.get("data_mb_s") and b.get("data_mb_s") and b.get("data_cpu_per_gb") else ""))
        lines.append(f"- {label(k)}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def verdict(res):
    rdk, _, mm = refs(res)
    out = []
    for k, r in res.items():
        if kind(k) != "tern":
            continue
        goals = []
        if rdk:
            goals.append(f"{r['mb_s'] / rdk['mb_s']:.2f}x the librdkafka consumer (>= 1.5x) "
                         + ("met" if r["mb_s"] / rdk["mb_s"] >= 1.5 else "NOT met"))
        if mm:
            goals.append(f"CPU per GB {r['cpu_per_gb'] / mm['cpu_per_gb']:.3f} of MM2's (<= 0.2) "
                         + ("met" if r["cpu_per_gb"] / mm["cpu_per_gb"] <= 0.2 else "NOT met"))
        out.append(f"{k}: " + (", ".join(goals) if goals else "no reference measured"))
    return "; ".join(out) if out else "no tern measurement"


def parse_variant(spec):
    """NAME=PATH[,KEY=VALUE...] -> (NAME, {"bin": PATH, "configs": [(KEY, VALUE)...]})."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise SystemExit(f"--tern-variant {spec!r}: expected NAME=PATH[,KEY=VALUE...]")
    path, *kvs = rest.split(",")
    configs = []
    for kv in kvs:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise SystemExit(f"--tern-variant {spec!r}: {kv!r} is not KEY=VALUE")
        configs.append((k.strip(), v.strip()))
    return name, {"bin": path, "configs": configs}


def git_out(*args):
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="GiB of record payload in total (both topics)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--mirror-version", default=kafka_peer.MIRROR_VERSION, help="connect-mirror version for MM2")
    ap.add_argument("--mm2-property", action="append", default=[], metavar="K=V",
                    help="extra mm2.properties setting (default: the harness's MirrorMaker2 config)")
    ap.add_argument("--tern", default=str(Path.home() / ".cache/tern/target/release/tern"),
                    help="the binary of the plain `tern` measurement")
    ap.add_argument("--tern-variant", action="append", default=[], metavar="NAME=PATH[,KEY=VALUE...]",
                    help="a tern binary and extra mirror configs, measured by `tern:NAME` in --order (repeatable)")
    ap.add_argument("--rdkafka-perf", type=Path, default=RDK_DEFAULT, help="rdkafka_performance (rdk-consumer)")
    ap.add_argument("--rdk-consume-props", nargs="*", default=[], metavar="PROP=VALUE",
                    help="librdkafka properties (-X) for the rdk-consumer (default: librdkafka's defaults)")
    ap.add_argument("--order", default="consumer,tern,mm2",
                    help="which measurements, in which order: rdk-consumer, consumer, tern, tern:NAME, mm2")
    ap.add_argument("--poll", type=float, default=0.05, help="seconds between the end-offset polls of tern and MM2")
    ap.add_argument("--phase-timeout", type=float, default=None, help="seconds per measurement (default 600 per GB, min 300)")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet before each measurement")
    ap.add_argument("--wait-load", type=float, default=0, help="first wait until the 1-min load average is below this")
    ap.add_argument("--wait-procs", nargs="*", default=[], metavar="REGEX",
                    help="first wait until no process has one of these in its first three argv words")
    ap.add_argument("--wait-max-min", type=float, default=45, help="at most this long for each wait")
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
    variants = dict(parse_variant(v) for v in args.tern_variant)
    if "tern" in order:
        variants["tern"] = {"bin": args.tern, "configs": []}
    for what in order:
        if what.startswith("tern:") and what[5:] not in variants:
            raise SystemExit(f"{what} in --order but no --tern-variant {what[5:]}=PATH")
        if what not in ("rdk-consumer", "consumer", "tern", "mm2") and not what.startswith("tern:"):
            raise SystemExit(f"unknown measurement {what}")
    used = {("tern" if w == "tern" else w[5:]) for w in order if w == "tern" or w.startswith("tern:")}
    variants = {n: v for n, v in variants.items() if n in used}
    if "rdk-consumer" in order:
        if not os.access(args.rdkafka_perf, os.X_OK):
            raise SystemExit(f"{args.rdkafka_perf} missing: run bench/fetch_cpu/build_rdkafka_perf.sh")
        # mm-zstd needs a librdkafka built with zstd (configure finds libzstd through pkg-config).
        dump = subprocess.run([str(args.rdkafka_perf), "-C", "-t", "x", "-X", "dump"], capture_output=True,
                              text=True, timeout=30, stdin=subprocess.DEVNULL).stdout
        features = next((l.split("=", 1)[1].strip() for l in dump.splitlines() if l.startswith("builtin.features")), "")
        if "zstd" not in features.split(","):
            raise SystemExit(f"{args.rdkafka_perf} has no zstd (builtin.features = {features}): install libzstd-dev "
                             f"and build it again (bench/fetch_cpu/build_rdkafka_perf.sh --rebuild)")
    if "tern" in variants and not Path(args.tern).is_file():
        say(f"{args.tern} missing: building it")
        subprocess.run(["cargo", "build", "--release", "-p", "tern-broker"], cwd=ROOT, check=True, timeout=7200,
                       env={**os.environ, "CARGO_TARGET_DIR": str(Path(args.tern).parents[1])})
    for n, v in variants.items():
        if not Path(v["bin"]).is_file():
            raise SystemExit(f"tern variant {n}: {v['bin']} missing")

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)

    waits = []
    if args.wait_procs:
        quiet = wait_for_quiet(args.wait_procs, args.wait_max_min)
        waits.append(f"waited until no {' / '.join(f'`{p}`' for p in args.wait_procs)} process ran: "
                     f"{'reached' if quiet else f'not within {args.wait_max_min:.0f} min, ran anyway'}")
    if args.wait_load:
        low = wait_for_load(args.wait_load, args.wait_max_min)
        waits.append(f"waited for a 1-minute load below {args.wait_load}: {'reached' if low else 'not reached, ran anyway'}")
    load_before = loadavg()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total_records = int(args.gb * GB / RECORD_SIZE)
    per_topic = total_records // len(TOPICS)
    total_records = per_topic * len(TOPICS)
    payload_bytes = total_records * RECORD_SIZE
    work = Path(tempfile.mkdtemp(prefix="tern-mirror-bench-"))
    res, cmds = {}, {}
    t_start = time.time()
    busy_during = []
    try:
        # Private copies of the binaries: a rebuild elsewhere during the run cannot change what is measured.
        (work / "bin").mkdir()
        for n, v in variants.items():
            src = Path(v["bin"])
            v["source"] = str(src)
            v["built"] = datetime.datetime.fromtimestamp(src.stat().st_mtime, datetime.timezone.utc)
            (work / "bin" / safe(n)).mkdir()
            v["bin"] = str(work / "bin" / safe(n) / "tern")
            shutil.copy2(src, v["bin"])
            v["sha"] = hashlib.sha256(Path(v["bin"]).read_bytes()).hexdigest()[:16]
        jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
        if "mm2" in order:
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
            key, i = what, 1
            while key in res:
                i += 1
                key = f"{what}#{i}"
            busy = busy_processes(args.wait_procs) if args.wait_procs else []
            if busy:
                busy_during.append(f"{key}: {'; '.join(busy[:4])}")
            say(f"-- {key} (load average {' '.join(loadavg())}"
                + (f"; busy: {'; '.join(busy[:3])}" if busy else "") + ")")
            if what == "rdk-consumer":
                res[key] = run_rdk_consumer(args, work, source, total_records, key)
            elif what == "consumer":
                res[key] = run_consumer(jars, source, total_records)
            elif what == "mm2":
                res[key] = run_mm2(args, work, source, source_ends, total_records, payload_bytes)
            else:
                name = "tern" if what == "tern" else what[5:]
                res[key] = run_tern(args, work, source, source_ends, total_records, payload_bytes, key, variants[name])
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
        Path(args.json_out).write_text(json.dumps({"results": res, "commands": cmds, "log": LOG,
                                                   "variants": variants}, indent=1, default=str))
    for k, r in res.items():
        if "perf" in r:
            print(f"\nperf ({k} while mirroring):\n" + r["perf"])

    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        java = "java ?"
    rdk_version = ""
    if "rdk-consumer" in order:
        try:
            rdk_version = next((l.strip() for l in subprocess.run(
                [str(args.rdkafka_perf)], capture_output=True, text=True, timeout=30).stdout.splitlines()
                if "librdkafka version" in l), "")
        except (OSError, subprocess.TimeoutExpired):
            pass
    head = git_out("rev-parse", "--short", "HEAD").strip()
    dirty = [l[3:] for l in git_out("status", "--short", "--untracked-files=no").splitlines()]
    if dirty:
        head += f" with uncommitted changes to {', '.join(dirty)}"
    rdk, java_c, mm = refs(res)
    terns = [(k, r) for k, r in res.items() if kind(k) == "tern"]
    wait_note = f" ({'; '.join(waits)})" if waits else ""
    busy_note = ("\nProcesses matching --wait-procs seen at the start of a measurement: " + " | ".join(busy_during) + "."
                 if busy_during else ("\nNo process matching --wait-procs was running at the start of any measurement."
                                      if args.wait_procs else ""))
    variant_lines = "\n".join(
        f"- `{n}`: a copy of {v['source']} (built {v['built']:%Y-%m-%d %H:%M} UTC, sha256 {v['sha']}...)"
        + (", mirror config " + ", ".join(f"`{k}={val}`" for k, val in v["configs"]) if v["configs"] else
           ", mirror config: bootstrap.servers only")
        for n, v in variants.items())
    tern_facts = "\n".join(
        f"- {label(k)}: first mirrored record after {r.get('first_data_s', 0):.2f} s; peak RSS "
        f"{r['peak_rss_mib']:.0f} MiB; {r['disk_bytes'] / MB:.0f} MB on disk; threads (CPU s) "
        + ", ".join(f"{n} {c:.2f}" for n, c in r["threads"][:4])
        + ("; DESTINATION OFFSETS DIFFER" if r["dest_mismatch"] else "; destinationOffsets equal the source's")
        for k, r in terns)
    section = f"""
## Mirroring: Tern vs MirrorMaker 2 and plain consumers, {when}

Machine: {machine()}; {java}{'; ' + rdk_version if rdk_version else ''}.  Load average before the run
{' '.join(load_before)}{wait_note}, after {' '.join(load_after)}; the whole run (start-up, producing, the
measurements) took {secs / 60:.1f} min.{busy_note}
{args.note}

Source: one Apache Kafka {args.kafka_version} (KafkaPeer, KRaft, single node, default 1 GiB heap) with
{len(TOPICS)} topics of {args.partitions} partitions, `mm-lz4` and `mm-zstd`, filled once by
ProducerPerformance (acks=all, compression.type lz4 / zstd, producer defaults otherwise):
{total_records} records of {RECORD_SIZE} B = {payload_bytes / GB:.2f} GB of payload, {source_disk / MB:.0f} MB on disk
(compressed).  The measurements read the same data, in this order: {', '.join(order)}; all of it
is in the page cache.  Everything on loopback, one machine, fresh data dirs.

Tern binaries:
{variant_lines or '- (none)'}

{out}

Verdict against issue 16's goals (>= 1.5x a plain librdkafka consumer's rate, CPU per GB <= 0.2x
MM2's): {verdict(res)}.

- **MB/s** = MB of record payload / time; **MB** = 2^20 B and **GB** = 2^30 B of record payload
  (records x {RECORD_SIZE} B, as Kafka's perf tools count), not of compressed bytes.
- **librdkafka consumer**: `rdkafka_performance -G <fresh group> -t mm-lz4 -t mm-zstd -c {total_records}
  -X auto.offset.reset=earliest` (one process, one balanced consumer subscribed to both topics,
  librdkafka defaults otherwise{(', -X ' + ' -X '.join(args.rdk_consume_props)) if args.rdk_consume_props else ''}).  time = its
  "consumed in N ms": from rd_clock() when the first message reached the application to rd_clock()
  after the {total_records}th (group join, start and close excluded); MB = its byte count (the sum of
  the messages' value lengths = records x {RECORD_SIZE}).  It decompresses every batch and hands each
  message to the application, which drops it.{f" Its CPU over the consuming span was {rdk['busy_cpu_pct']:.0f} % of a core; process wall time {rdk['wall_s']:.2f} s ({rdk['wall_mb_s']:.1f} MB/s with start, join and close)." if rdk else ''}
- **Java consumer**: ConsumerPerformance's fetch.time.ms (group join excluded); it decompresses and
  iterates every record.
- **Tern**: from `tern mirrors --start` (the command launched) to the first ListOffsets poll of the
  tern (every {args.poll} s) where every partition's end offset equals the source's; so it includes the
  `--start` command, the mirror's start-up and its first metadata round trips.  The "data phase"
  columns start at the first poll that saw a mirrored record.  Tern appends the fetched batches as
  they are (no decompression).
- **MM2**: from launching its JVM to the first poll (ListOffsets on the target every {args.poll} s) where
  `source.mm-lz4` and `source.mm-zstd` hold all the source's records (JVM and Connect start
  included{f"; {mm.get('first_data_s', 0):.1f} s to its first mirrored record" if mm else ''}).
- **CPU s**: utime+stime.  Consumers: the client process's rusage over its whole life (the JVM's start
  included for the Java consumer).  Tern: /proc/<pid>/stat of the tern process over its interval (its
  own appends, index writes and metadata; not the source broker's CPU for serving the fetches, the
  "other" column, nor the polling).  MM2: its whole JVM from launch, excluding the target broker that
  does its appends (the "other" column) and the source broker.  "CPU per GB vs MM2" is CPU s per GB
  divided by MM2's.
{tern_facts}

Commands (`{sys.executable} bench/mirror_compare/run.py {' '.join(map(shlex.quote, argv))}`; HEAD was {head}):

```
source: {cmds.get('kafka')}
source server.properties (ports vary):
{cmds.get('source-props', '').rstrip()}
producer (per topic): java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{(chr(10) + '  ').join(cmds.get('produce', []))}
rdk consumer: {rdk['cmd'] if rdk else '-'}
java consumer: java -Xmx512m -cp <kafka {args.kafka_version} jars> org.apache.kafka.tools.{re.sub(r'127[.]0[.]0[.]1:[0-9]+', '<source>', java_c['cmd']) if java_c else '-'}
tern: {terns[0][1]['command'].replace(str(work), '<work>') if terns else '-'}
  tern mirrors --bootstrap-server <tern> --create --mirror {MIRROR_NAME} --mirror-config FILE   (FILE: bootstrap.servers=<source>, then the variant's configs)
  tern mirrors --bootstrap-server <tern> --start --mirror {MIRROR_NAME} --topics {','.join(TOPICS)}
  tern mirrors --bootstrap-server <tern> --describe --mirror {MIRROR_NAME} --json   (at the end; during the mirror only after {STALL_DESCRIBE_S:.0f} s without progress)
mm2: {mm.get('command', '') if mm else '-'}
mm2.properties:
{mm.get('props', '').rstrip() if mm else '-'}
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
