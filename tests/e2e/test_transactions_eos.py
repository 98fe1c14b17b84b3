"""Exactly-once processing across crashes (tern only, since the test kills the broker).

A Java read-process-write loop (tests/e2e/java/EosLoop.java, Apache Kafka's own kafka-clients
from kafka_peer.KafkaJars, compiled here with javac) runs with exactly-once semantics: a
read_committed consumer in a group, a transactional producer, one transaction per poll batch
that writes "out-<value>" (same key, same partition index) to the output topic and commits the
consumed offsets with sendOffsetsToTransaction.  When a transaction fails, the loop aborts it (or
replaces its producer: the new one's initTransactions aborts what the old one left open) and
rewinds the consumer to the group's committed offsets, as an application that survives broker
restarts does.

While it works through N input records (3 partitions, written up front by an idempotent
producer), crashes happen, each once the loop has committed transactions since the previous one
and at a random moment (so mostly in the middle of a transaction: records sent, offsets or
commit pending).  The default schedule (EOS_EVENTS) is

    tern        tern killed with SIGKILL and started again on the same data;
    tern+loop   tern killed, then the loop too (SIGKILL) while tern is down; tern started again,
                then a new loop process (its initTransactions fences the dead one's epoch and
                aborts its open transaction, its consumer resumes at the committed offsets);
    tern
    loop        the loop alone killed mid-transaction and started again (the transaction it
                left open is aborted by the new instance's initTransactions);
    tern

so tern is killed 4 times (and the loop twice).  Then a read_committed consumer reads the output
from offset 0 to the high watermark (its position must get there: nothing left open) and every
input value appears exactly once, in its input partition's order, with nothing else; the group's
committed offsets are the input's end offsets.  A read_uncommitted read tells how many aborted
records the raw log holds (printed, not asserted: it depends on where the crashes land).

EOS_RECORDS (default 3000), EOS_EVENTS (comma separated, default above), EOS_SEED (random by
default; printed), EOS_ASSIGN=1 (the loop assigns the partitions instead of subscribing).
Everything stays in pytest's tmp_path: tern's log (tern/tern.log) and each loop process's stdout
and stderr (eos-loop-<n>.out/.err).
"""

import gc
import hashlib
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_peer import KafkaJars, cache_root
from processes import free_port
from tern_process import Tern
from test_transactions import (
    SETTINGS,
    WAIT,
    Delivered,
    create_topic,
    end_offsets,
    group_offsets,
    read_all,
    uid,
)

pytestmark = pytest.mark.timeout(420)

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "EosLoop.java"

N = int(os.environ.get("EOS_RECORDS", "3000"))
EVENTS = [e for e in re.split(r"[,\s]+", os.environ.get("EOS_EVENTS", "tern,tern+loop,tern,loop,tern")) if e]
PARTITIONS = 3
# How far the committed offsets must have come (a fraction of N) before each crash, and how long
# tern stays down.
MARKS = [0.10, 0.25, 0.40, 0.55, 0.68, 0.80, 0.88]
DOWNTIMES = [0.0, 1.5, 0.5, 3.0, 1.0, 0.2, 2.0]
LOOP_SECONDS = 240  # each Java loop process's own bound (it exits 3 after it)


# -- the Java program ---------------------------------------------------------------------------------

def java_classpath():
    """Apache Kafka's jars and the compiled EosLoop (cached under $TERN_CACHE/eos-loop/<hash of the
    source and the jar list>); skips when there is no JDK or no Kafka jars."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    dist = KafkaJars()
    try:
        cp = dist.classpath()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka's jars: {str(e).splitlines()[0]}")
    key = hashlib.sha256(SOURCE.read_bytes() + b"\0" + cp.encode()).hexdigest()[:16]
    out = cache_root() / "eos-loop" / key
    if not (out / "EosLoop.class").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out.parent))
        r = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", cp, str(SOURCE)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"javac {SOURCE} failed:\n{r.stdout}\n{r.stderr}")
        try:
            tmp.rename(out)
        except OSError:  # compiled by someone else meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    return dist, f"{out}:{cp}"


class Loop:
    """The running EosLoop: its stdout lines (also in a file), the committed offset sum it last
    reported, the number of committed transactions, aborts and producers."""

    def __init__(self, argv, log_dir, n):
        self.stdout_path = Path(log_dir) / f"eos-loop-{n}.out"
        self.stderr_path = Path(log_dir) / f"eos-loop-{n}.err"
        self.lines = []
        self.committed = 0
        self.txns = 0
        self.aborts = 0
        self.producers = 0
        self.in_txn = False  # between a BEGIN line and its PROGRESS or ABORT line
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(self.stderr_path, "wb"),
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.stdout_path, "w") as f:
            for line in self.proc.stdout:
                line = line.rstrip("\n")
                f.write(f"{time.strftime('%H:%M:%S')} {line}\n")
                f.flush()
                with self.lock:
                    self.lines.append(line)
                    m = re.search(r"\bcommitted=(\d+)", line)
                    if m and line.startswith(("PROGRESS", "REWIND", "SYNC ", "DONE")):
                        # A new process knows only the partitions it has committed to yet: the
                        # highest sum reported is a lower bound of the group's offsets' sum.
                        self.committed = max(self.committed, int(m.group(1)))
                    if line.startswith("BEGIN"):
                        self.in_txn = True
                    elif line.startswith("PROGRESS"):
                        self.txns += 1
                        self.in_txn = False
                    elif line.startswith("ABORT "):
                        self.aborts += 1
                        self.in_txn = False
                    elif line.startswith("NEWPRODUCER"):
                        self.producers += 1

    def running(self):
        return self.proc.poll() is None

    def tail(self, n=40):
        with self.lock:
            out = "\n".join(self.lines[-n:])
        try:
            err = "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            err = ""
        return f"--- loop stdout (last {n}) ---\n{out}\n--- loop stderr (last {n}) ---\n{err}"

    def kill(self):
        if self.running():
            self.proc.kill()
        self.proc.wait()
        self.thread.join(timeout=10)


class Loops:
    """The EosLoop processes one after the other (a killed one is replaced by a new one), with
    the figures summed over them."""

    def __init__(self, argv, log_dir):
        self.argv = argv
        self.log_dir = log_dir
        self.all = []
        self.start()

    def start(self):
        self.all.append(Loop(self.argv, self.log_dir, len(self.all) + 1))

    @property
    def current(self):
        return self.all[-1]

    def running(self):
        return self.current.running()

    @property
    def committed(self):
        return max(loop.committed for loop in self.all)

    def total(self, attr):
        return sum(getattr(loop, attr) for loop in self.all)

    def tail(self, n=40):
        return f"[loop process {len(self.all)}]\n{self.current.tail(n)}"

    def kill(self):
        for loop in self.all:
            loop.kill()


# -- fixtures and helpers ---------------------------------------------------------------------------

@pytest.fixture
def tern_eos(tmp_path):
    data = tmp_path / "tern"
    data.mkdir()
    extra = [f"{k}={v}" for k, v in SETTINGS.items()] + ["group.initial.rebalance.delay.ms=0"]
    t = Tern(str(data), free_port(), extra=extra)
    t.start()
    try:
        yield t
    finally:
        gc.collect()
        t.stop()


def produce_input(bs, topic):
    """N records, "in-<i>" with key "k-<i>" to partition i % PARTITIONS, by an idempotent producer;
    returns {partition: [value in offset order]} after checking the offsets are 0, 1, 2, ..."""
    d = Delivered()
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    for i in range(N):
        p.produce(topic, key=f"k-{i}", value=f"in-{i}", partition=i % PARTITIONS, on_delivery=d)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(WAIT) == 0, "input records not delivered"
    assert not d.errors, d.errors
    per_part = {}
    for part in range(PARTITIONS):
        recs = sorted((off, v) for q, off, v in d.ok if q == part)
        assert [off for off, _ in recs] == list(range(len(recs))), f"input partition {part} offsets"
        per_part[part] = [v for _, v in recs]
    return per_part


def wait_stable(bs, topic):
    """The output's high watermarks, once the last stable offsets have caught up with them."""
    deadline = time.time() + WAIT
    while True:
        hw = end_offsets(bs, topic, PARTITIONS, "read_uncommitted")
        lso = end_offsets(bs, topic, PARTITIONS, "read_committed")
        if hw == lso:
            return hw
        assert time.time() < deadline, f"last stable offsets {lso} stay behind the high watermarks {hw}"
        time.sleep(0.2)


def tern_log_excerpt(tern, n=60):
    """Tern's warnings, errors and transaction or group lines (the last n), without colours."""
    try:
        text = Path(tern.log_path).read_text(errors="replace")
    except OSError:
        return ""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()
    picked = [line for line in lines
              if re.search(r"(?i)\b(error|warn|panic)|txn|transaction|producer|fenc|abort|group|started", line)
              and "coordinating the transactions of this partition" not in line]
    return "\n".join(picked[-n:])


# -- the test --------------------------------------------------------------------------------------------

def test_exactly_once_across_kill9(tern_eos, tmp_path):
    dist, classpath = java_classpath()
    seed = int(os.environ.get("EOS_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    bs = tern_eos.bootstrap
    src = create_topic(bs, PARTITIONS)
    dst = create_topic(bs, PARTITIONS)
    group = f"eos-group-{uid()}"
    tid = f"eos-tid-{uid()}"

    inputs = produce_input(bs, src)
    input_end = {p: len(v) for p, v in inputs.items()}
    assert sum(input_end.values()) == N

    argv = [
        os.environ.get("JAVA", "java"), "-Xmx256m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={dist.libs / 'log4j2.properties'}",
        "-cp", classpath, "EosLoop",
        bs, src, dst, group, tid, str(N), str(LOOP_SECONDS),
        "--delay-ms=40", "--max-poll=25",
    ]
    if os.environ.get("EOS_ASSIGN") == "1":
        argv.append("--assign")
    started = time.time()
    loops = Loops(argv, tmp_path)
    crashes = []
    try:
        txns_after_last = 0
        for i, event in enumerate(EVENTS):
            if event not in ("tern", "loop", "tern+loop"):
                pytest.fail(f"EOS_EVENTS: unknown event {event!r} (tern, loop or tern+loop)")
            # Mid-work: a transaction committed since the last crash, and the next mark passed.
            mark = int(N * MARKS[i % len(MARKS)])
            deadline = time.time() + 120
            while loops.running() and not (loops.total("txns") > txns_after_last and loops.committed >= mark):
                assert time.time() < deadline, \
                    f"{event} crash {i + 1}: the loop made no progress in 120 s\n{loops.tail()}"
                time.sleep(0.02)
            if not loops.running() or loops.committed >= N:
                break
            time.sleep(rng.uniform(0, 0.25))  # somewhere inside a transaction
            at = {"event": event, "committed": loops.committed, "txns": loops.total("txns"),
                  "in_txn": loops.current.in_txn}
            down = 0.0
            if "tern" in event:
                tern_eos.kill9()
            if "loop" in event:
                loops.current.kill()
            if "tern" in event:
                down = DOWNTIMES[i % len(DOWNTIMES)]
                time.sleep(down)
                t0 = time.time()
                tern_eos.start()
                at["down_s"] = down
                at["tern_start_s"] = round(time.time() - t0, 1)
            if "loop" in event:
                loops.start()
            at["t"] = round(time.time() - started, 1)
            crashes.append(at)
            txns_after_last = loops.total("txns")
            print(f"crash #{len(crashes)}: {at}")

        try:
            rc = loops.current.proc.wait(timeout=LOOP_SECONDS + 30)
        except subprocess.TimeoutExpired:
            rc = None
        loop_s = time.time() - started
        loops.current.thread.join(timeout=10)
        assert rc == 0, f"the EOS loop ended with {rc} after {loop_s:.0f}s (crashes {crashes})\n" \
                        f"{loops.tail()}\n--- tern log ---\n{tern_eos.tail()}"
    finally:
        loops.kill()
    tern_kills = sum(1 for c in crashes if "tern" in c["event"])
    loop_kills = sum(1 for c in crashes if "loop" in c["event"])
    in_txn = sum(1 for c in crashes if c["in_txn"])
    want_kills = min(sum(1 for e in EVENTS if "tern" in e), 3)
    assert tern_kills >= want_kills, \
        f"the loop finished after {tern_kills} kills of tern only; {crashes}\n{loops.tail()}"

    # -- the checker ---------------------------------------------------------------------------------
    hw = wait_stable(bs, dst)
    committed = read_all(bs, dst, PARTITIONS, "read_committed", hw)
    raw = read_all(bs, dst, PARTITIONS, "read_uncommitted", hw)

    expected = {p: [f"out-{v}" for v in inputs[p]] for p in range(PARTITIONS)}
    got = {p: [v for _, v in committed[p]] for p in range(PARTITIONS)}
    where = {}
    for p in range(PARTITIONS):
        for off, v in committed[p]:
            where.setdefault(v, []).append((p, off))
    counts = Counter(v for vs in got.values() for v in vs)
    want = {v for vs in expected.values() for v in vs}
    duplicated = {v: where[v] for v, c in counts.items() if c > 1}
    missing = sorted(want - set(counts), key=lambda v: int(v.rsplit("-", 1)[1]))
    extra = sorted(set(counts) - want)

    raw_counts = Counter(v for recs in raw.values() for _, v in recs)
    raw_total = sum(raw_counts.values())
    committed_total = sum(counts.values())
    raw_dup_values = sum(1 for c in raw_counts.values() if c > 1)
    # Control records take offsets too: markers = high watermark - data records.
    markers = sum(hw.values()) - raw_total
    figures = (
        f"seed={seed} records={N} tern_kills={tern_kills} loop_kills={loop_kills} "
        f"crashes_inside_a_transaction={in_txn} loop_s={loop_s:.1f} "
        f"txns={loops.total('txns')} aborts={loops.total('aborts')} producers={loops.total('producers')} "
        f"output: committed_records={committed_total} raw_records={raw_total} "
        f"aborted_records={raw_total - committed_total} values_more_than_once_in_raw_log={raw_dup_values} "
        f"control_records={markers} hw={hw}"
    )
    print(figures)
    print(f"crashes: {crashes}")

    context = (f"{figures}\ncrashes: {crashes}\nloop output: {tmp_path}/eos-loop-*.out\n"
               f"tern log: {tern_eos.log_path}\n{loops.tail(20)}\n--- tern log (selected lines) ---\n{tern_log_excerpt(tern_eos)}")
    assert not duplicated, f"{len(duplicated)} values committed more than once, e.g. " \
                           f"{dict(list(duplicated.items())[:10])}\n{context}"
    assert not missing, f"{len(missing)} input values missing from the output, e.g. {missing[:20]}\n{context}"
    assert not extra, f"{len(extra)} unexpected values in the output, e.g. {extra[:20]}\n{context}"
    for p in range(PARTITIONS):
        if got[p] != expected[p]:
            first = next(k for k, (a, b) in enumerate(zip(got[p], expected[p])) if a != b)
            pytest.fail(f"output partition {p} is out of order from its position {first}: "
                        f"{got[p][first:first + 5]} instead of {expected[p][first:first + 5]}\n{context}")

    # The group's offsets went in with the transactions: they are the input's end offsets.
    assert group_offsets(bs, group, src, PARTITIONS) == input_end, context
