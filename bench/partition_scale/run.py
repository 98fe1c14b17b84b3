#!/usr/bin/env python3
"""Ten thousand partitions on one broker, Tern and Apache Kafka 4.4 in the same run.

For each broker: create 100 topics of 100 partitions (CreateTopics, ten topics per request) and
time it until Metadata lists all 10,000 partitions with a leader; then, idle, the resident
memory and the CPU it spends doing nothing for 30 s (a loop over partitions that should not
run shows here); the latency of a full Metadata request (v1, all topics; 30 requests, median
and worst); then a clean stop (SIGTERM until the process exits) and a restart (start on the
same data) timed until Metadata lists all the partitions again, and memory after it. The same idle measurement with no topic gives the
baseline. Results are printed as a Markdown table for bench/RESULTS.md.

  ~/.cache/tern/venv/bin/python bench/partition_scale/run.py [--tern-bin PATH] [--no-kafka]
"""

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
import kafka_peer  # noqa: E402
from kafka_wire import Connection, Reader  # noqa: E402
from processes import free_port, stop_process  # noqa: E402
from tern_process import Tern  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 100
TICK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def metadata_partitions(bootstrap):
    """(partitions of the scale-* topics with a leader, seconds) of one Metadata v1 request for
    all topics."""
    with Connection(bootstrap, timeout=60) as k:
        started = time.perf_counter()
        data = k.request(3, 1, struct.pack(">i", -1))
        took = time.perf_counter() - started
    r = Reader(data)
    for _ in range(r.take(">i")):  # brokers
        r.take(">i"), r.string(), r.take(">i"), r.string()
    r.take(">i")  # controller id
    led = 0
    for _ in range(r.take(">i")):
        _, topic, _ = r.take(">h"), r.string(), r.take(">b")
        for _ in range(r.take(">i")):
            _err, _p, leader = r.take(">hii")
            for _ in range(2):  # replicas, then the ISR
                for _ in range(r.take(">i")):
                    r.take(">i")
            # Only the benchmark's topics: internal ones (__consumer_offsets, ...) do not count.
            led += leader >= 0 and topic.startswith("scale-")
    return led, took


def wait_listed(bootstrap, want, timeout=900):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if metadata_partitions(bootstrap)[0] >= want:
                return
        except (OSError, ConnectionError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{bootstrap} never listed {want} partitions")


IDLE_SECONDS = 30


def idle(pid, seconds=None):
    seconds = seconds or IDLE_SECONDS
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - before) / seconds


def measure(name, start, stop, bootstrap_of, pid_of, topics):
    row = {"broker": name}
    start()
    row["baseline_rss"] = rss_mb(pid_of())
    row["baseline_cpu"] = idle(pid_of())
    admin = AdminClient({"bootstrap.servers": bootstrap_of()})
    started = time.time()
    for first in range(0, topics, 10):
        fs = admin.create_topics([NewTopic(f"scale-{i:03d}", PARTITIONS, 1)
                                  for i in range(first, min(first + 10, topics))],
                                 operation_timeout=120, request_timeout=300)
        for f in fs.values():
            f.result(timeout=600)
    wait_listed(bootstrap_of(), topics * PARTITIONS)
    row["create_s"] = time.time() - started
    time.sleep(10)
    row["rss"] = rss_mb(pid_of())
    row["cpu"] = idle(pid_of())
    times = [metadata_partitions(bootstrap_of())[1] * 1000 for _ in range(30)]
    row["meta_p50"], row["meta_max"] = statistics.median(times), max(times)
    started = time.time()
    stop()
    row["stop_s"] = time.time() - started
    started = time.time()
    start()
    wait_listed(bootstrap_of(), topics * PARTITIONS)
    row["restart_s"] = time.time() - started
    row["restart_rss"] = rss_mb(pid_of())
    stop()
    print(row, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern-bin", default=str(ROOT / "target" / "release" / "tern"))
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--topics", type=int, default=100, help="topics of 100 partitions (default 100)")
    ap.add_argument("--idle-seconds", type=int, default=30)
    args = ap.parse_args()
    global IDLE_SECONDS
    IDLE_SECONDS = args.idle_seconds
    work = Path(tempfile.mkdtemp(prefix="tern-scale-"))
    rows = []
    (work / "tern").mkdir()
    tern = Tern(str(work / "tern"), free_port(), ["num.partitions=1"], binary=args.tern_bin)
    tern.start_timeout = tern.stop_timeout = 900
    rows.append(measure("Tern", tern.start, tern.stop, lambda: tern.bootstrap, lambda: tern.proc.pid,
                        args.topics))
    if not args.no_kafka:
        kafka = kafka_peer.KafkaPeer("4.4.0", work / "kafka", jvm_opts=["-Xmx2g", "-Xms1g"])

        def stop_kafka():
            # Kafka's own clean shutdown, however long it takes (the harness kills after 30 s).
            stop_process(kafka.proc, timeout=900)
            kafka.proc = None

        rows.append(measure("Kafka 4.4.0", lambda: kafka.start(timeout=900), stop_kafka,
                            lambda: kafka.bootstrap, lambda: kafka.pid, args.topics))
    print()
    print("| broker | idle RSS, no topic | idle CPU, no topic "
          f"| create {args.topics * PARTITIONS:,} partitions | idle RSS | idle CPU "
          "| full Metadata p50 / max | clean stop | restart until listed | RSS after restart |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['broker']} | {r['baseline_rss']:.0f} MB | {r['baseline_cpu']:.1f} % | {r['create_s']:.1f} s "
              f"| {r['rss']:.0f} MB | {r['cpu']:.1f} % | {r['meta_p50']:.1f} / {r['meta_max']:.1f} ms "
              f"| {r['stop_s']:.1f} s | {r['restart_s']:.1f} s | {r['restart_rss']:.0f} MB |")


if __name__ == "__main__":
    main()
