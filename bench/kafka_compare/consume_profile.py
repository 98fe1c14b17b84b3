#!/usr/bin/env python3
"""The "consume p=8 none" cell of run.py alone, with a perf profile of tern while it serves it.

Per round: a fresh tern and a fresh Apache Kafka; ProducerPerformance writes the cell's topic
(8 partitions, acks=1, no compression, --records 1 KiB records) to both; ConsumerPerformance
(--print-metrics) reads it from both, the order alternating per round, as in run.py.  After the
measured runs, one more tern consume of the same topic (fresh group) runs under
`perf record -F <freq> --call-graph dwarf -p <tern>` so the profile does not slow the measured run.
Also per consume: the broker's CPU seconds and /proc/<pid>/io rchar/wchar deltas, and the
consumer's fetch metrics.

    python bench/kafka_compare/consume_profile.py --records 300000 --rounds 2 --out /tmp/consprof
    perf script -i /tmp/consprof/perf-r0.data -F comm,tid,ip,sym | python bench/kafka_compare/perf_group.py
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402
from run import CONSUMER, ProcWatch, create_topic, kafka_peer, produce, start_tern  # noqa: E402

METRICS = ("fetch-size-avg", "fetch-size-max", "fetch-latency-avg", "fetch-latency-max",
           "records-per-request-avg", "fetch-total", "fetch-rate", "bytes-consumed-total",
           "records-consumed-total", "fetch-throttle-time-avg")


def io_counters(pid):
    out = {}
    for line in open(f"/proc/{pid}/io"):
        k, v = line.split(":")
        out[k] = int(v)
    return out


def consume(jars, bootstrap, topic, records, group):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", records,
            "--group", group, "--timeout", 30000, "--print-metrics"]
    out = jars.run(CONSUMER, *args, jvm_opts=run.TOOL_JVM, timeout=600)
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    hi = next((i for i, l in enumerate(lines) if l.startswith("start.time")), None)
    if out.returncode != 0 or hi is None:
        raise RuntimeError(f"ConsumerPerformance failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    row = dict(zip([c.strip() for c in lines[hi].split(",")], [v.strip() for v in lines[hi + 1].split(",")]))
    metrics = {}
    for line in lines:
        # the client-level (not per-topic) fetch manager metrics
        m = re.match(r"consumer-fetch-manager-metrics:([a-z-]+):\{client-id=[^,}]*\}\s*:\s*([-\d.E+NaN]+)", line)
        if m and m.group(1) in METRICS:
            metrics[m.group(1)] = float(m.group(2))
    return {"mb_s": float(row["fetch.MB.sec"]), "rec_s": float(row["fetch.nMsg.sec"]),
            "fetch_ms": float(row["fetch.time.ms"]), "rebalance_ms": float(row["rebalance.time.ms"]),
            "records": int(row["data.consumed.in.nMsg"]), "metrics": metrics, "cmd": args}


def measured(jars, broker, topic, records, group):
    io0 = io_counters(broker.pid)
    with ProcWatch(broker.pid) as w:
        r = consume(jars, broker.bootstrap, topic, records, group)
    io1 = io_counters(broker.pid)
    r["cpu_s"] = w.cpu_s
    r["rchar_mb"] = (io1["rchar"] - io0["rchar"]) / 2**20
    r["wchar_mb"] = (io1["wchar"] - io0["wchar"]) / 2**20
    return r


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--tern", default="/work/target/release/tern")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--reps", type=int, default=1,
                    help="measured consumes per broker and round, the order swapping every time")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="after producing: sync, then this many seconds of quiet before consuming")
    ap.add_argument("--out", required=True, help="directory for perf data and results.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jars = kafka_peer.KafkaJars(args.kafka_version).ensure()
    work = Path(tempfile.mkdtemp(prefix="tern-consprof-"))
    topic = f"p{args.partitions}-acks1-none"
    results = []
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:5.0f}s] {msg}", flush=True)

    log(f"load average {open('/proc/loadavg').read().strip()}")
    try:
        for rnd in range(args.rounds):
            brokers = {"tern": start_tern(args.tern, work / f"r{rnd}-tern"),
                       "kafka": kafka_peer.KafkaPeer(args.kafka_version, work / f"r{rnd}-kafka").start()}
            log(f"round {rnd}: tern pid {brokers['tern'].pid}, kafka pid {brokers['kafka'].pid}")
            try:
                order = ["tern", "kafka"] if rnd % 2 == 0 else ["kafka", "tern"]
                for b in order:
                    create_topic(brokers[b].bootstrap, topic, args.partitions)
                    p = produce(jars, brokers[b].bootstrap, topic, args.records, "1", "none")
                    log(f"round {rnd} produce {b}: {p['mb_s']:.1f} MB/s")
                subprocess.run(["sync"])
                time.sleep(args.settle)
                for rep in range(args.reps):
                    for b in (order if rep % 2 == 0 else order[::-1]):
                        time.sleep(1)
                        log(f"round {rnd} rep {rep} consume {b} (load {open('/proc/loadavg').read().split()[0]})")
                        r = measured(jars, brokers[b], topic, args.records, f"perf-{rnd}-{rep}-{b}")
                        r.update(round=rnd, rep=rep, broker=b, profiled=False)
                        results.append(r)
                        log(f"  {b}: {r['mb_s']:.1f} MB/s, fetch {r['fetch_ms']:.0f} ms, broker CPU {r['cpu_s']:.2f} s, "
                            f"rchar {r['rchar_mb']:.0f} MiB wchar {r['wchar_mb']:.0f} MiB, {r['metrics']}")
                # the profiled tern consume
                time.sleep(1)
                data = out / f"perf-r{rnd}.data"
                perf = subprocess.Popen(["perf", "record", "-F", str(args.freq), "--call-graph", "dwarf,16384",
                                         "-p", str(brokers["tern"].pid), "-o", str(data)],
                                        stdout=subprocess.DEVNULL, stderr=open(out / f"perf-r{rnd}.log", "w"))
                time.sleep(1)
                try:
                    r = measured(jars, brokers["tern"], topic, args.records, f"perf-{rnd}-tern-profiled")
                finally:
                    perf.send_signal(2)
                    perf.wait(timeout=120)
                r.update(round=rnd, broker="tern", profiled=True)
                results.append(r)
                log(f"  tern under perf: {r['mb_s']:.1f} MB/s, fetch {r['fetch_ms']:.0f} ms, "
                    f"broker CPU {r['cpu_s']:.2f} s, {r['metrics']}")
            finally:
                for b in brokers.values():
                    b.stop()
                for b in brokers.values():
                    shutil.rmtree(b.data_dir, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        log(f"done; load average {open('/proc/loadavg').read().strip()}")
        (out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
