#!/usr/bin/env python3
"""A soak with a checker (issue 18): a mixed workload against one Tern that is killed with
SIGKILL at random moments, then a checker that reads everything back.

The workload, for --duration seconds:
  - three writers: idempotent acks=all producers (a new producer every 20-60 s) writing --rate
    records/s in all to random partitions of soak-a (4 partitions) and soak-b (3); each value
    names its producer and sequence number, and only a successful delivery report counts as
    acknowledged;
  - a consumer group of two members on both topics, committing synchronously after each
    batch; a watcher reads the committed offsets back every 2 s;
  - topic churn: every 3-6 s a scratch topic is created, written and the one before the last
    deleted;
  - a mirror from a real Apache Kafka 4.4 (started from the test harness's jars) whose source
    topic takes 50 records/s;
  - Tern killed with SIGKILL every --kill-every MIN MAX seconds (seeded) and started again on the
    same data dir and port 0.2-2 s later; one restart in four is itself killed 0.1-3.5 s into
    its start (while it recovers its logs and loads its coordinators) before the one that stays.

The checker, once the workload has stopped (violations seen while running count too):
  - every Tern topic read from the beginning: every acknowledged record present exactly once,
    at its acknowledged offset; offsets contiguous; per producer and partition in sequence order;
    no duplicate, nothing corrupt (unacknowledged records may be there, at most once);
  - the group's committed offsets never went back, never below an acknowledged commit, and every
    offset below them was processed by a member;
  - acknowledged topic creations exist and acknowledged deletions stay deleted (after each kill
    and at the end);
  - the mirror catches up and every batch equals the source's byte for byte.

  ~/.cache/tern/venv/bin/python tests/soak/soak.py --duration 1800 --seed 7 \\
      --tern-bin target/release/tern --kill-every 20 60 [--summary-json out.json] [--keep]

Prints a summary; exits 1 with the first violation (2 when the harness itself failed). The
work dir (Tern's and Kafka's data and logs) is kept after a failure or with --keep.
"""

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path[:0] = [str(HERE), str(TESTS / "e2e"), str(TESTS / "harness")]

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import checker  # noqa: E402
import kafka_peer  # noqa: E402
import mirror_util  # noqa: E402
import tern_process  # noqa: E402
from ledger import Ledger  # noqa: E402
from processes import free_port  # noqa: E402
from workload import (CLIENT_LOG, CommitWatcher, CrashableTern, GroupMember, Killer,  # noqa: E402
                      MirrorSourceWriter, TopicChurn, TopicWriter, client_conf)

SOAK_TOPICS = {"soak-a": 4, "soak-b": 3}
GROUP = "soak-group"
GROUP_MEMBERS = 2
WRITERS = 3
MIRROR, MIRROR_TOPIC, MIRROR_PARTITIONS, MIRROR_RATE = "soak-mirror", "mirrored", 3, 50
TERN_OVERRIDES = [
    "auto.create.topics.enable=false",  # a deleted scratch topic must not come back
    "group.initial.rebalance.delay.ms=0",
    "mirror.metadata.refresh.interval.ms=2000",
    "mirror.failed.retry.initial.backoff.ms=200",
    "mirror.failed.retry.max.backoff.ms=2000",
]
KAFKA_OVERRIDES = {"auto.create.topics.enable": "false"}
KAFKA_JVM = ["-Xmx512m", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=1800, help="seconds of workload")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--tern-bin", default=os.environ.get("TERN_BIN", "target/release/tern"))
    ap.add_argument("--kill-every", type=float, nargs=2, metavar=("MIN", "MAX"), default=(20, 60))
    ap.add_argument("--rate", type=float, default=240, help="records/s written to Tern in all")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--work-dir", help="default: a new temporary dir")
    ap.add_argument("--summary-json", help="also write the summary here")
    ap.add_argument("--keep", action="store_true", help="keep the work dir after a pass")
    return ap.parse_args(argv)


def log(text):
    print(text, flush=True)


def log_clients_to(path):
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    CLIENT_LOG.addHandler(handler)
    CLIENT_LOG.setLevel(logging.INFO)
    CLIENT_LOG.propagate = False


def use_tern_binary(path):
    """Tern and `tern mirrors` (mirror_util) read the binary's path from tern_process.TERN_BIN."""
    tern_process.TERN_BIN = os.path.abspath(path)


def create_topics(bootstrap, partitions_by_topic):
    admin = AdminClient(client_conf(bootstrap))
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in partitions_by_topic.items()],
                                  operation_timeout=30)
    for f in futures.values():
        f.result(timeout=60)


def start_kafka_source(work_dir, version):
    kafka = kafka_peer.KafkaPeer(version, work_dir / "kafka", overrides=KAFKA_OVERRIDES, jvm_opts=KAFKA_JVM)
    kafka.start(timeout=180)
    create_topics(kafka.bootstrap, {MIRROR_TOPIC: MIRROR_PARTITIONS})
    return kafka


def start_mirror(tern, kafka, work_dir):
    mirror_util.create_mirror(tern.bootstrap, MIRROR, kafka.bootstrap, str(work_dir))
    mirror_util.mirrors(tern.bootstrap, "--start", "--mirror", MIRROR, "--topics", MIRROR_TOPIC)


def start_workload(args, ledger, tern, kafka):
    """Starts every workload thread; returns them by role. The ledger's clock starts here."""
    ledger.started = time.monotonic()
    partitions = [(t, p) for t, n in SOAK_TOPICS.items() for p in range(n)]
    w = {
        "writers": [TopicWriter(i, ledger, tern.bootstrap, SOAK_TOPICS, args.rate / WRITERS,
                                rotate=(20, 60), seed=args.seed * 100 + i) for i in range(WRITERS)],
        "members": [GroupMember(i, ledger, tern.bootstrap, GROUP, list(SOAK_TOPICS))
                    for i in range(GROUP_MEMBERS)],
        "watcher": [CommitWatcher(ledger, tern.bootstrap, GROUP, partitions)],
        "churn": [TopicChurn(ledger, tern.bootstrap, seed=args.seed * 100 + 50)],
        "mirror source": [MirrorSourceWriter(ledger, kafka.bootstrap, MIRROR_TOPIC, MIRROR_PARTITIONS,
                                             MIRROR_RATE)],
        "killer": [Killer(ledger, tern, seed=args.seed, every=tuple(args.kill_every))],
    }
    for group in w.values():
        for worker in group:
            worker.start()
    return w


def harness_failure(workers):
    for group in workers.values():
        for worker in group:
            if worker.failure:
                return f"{worker.name} failed:\n{worker.failure}"
    return None


def run_for(duration, ledger, workers):
    """Lets the workload run, with a progress line every 30 s; returns a harness failure."""
    deadline = time.monotonic() + duration
    next_progress = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(1)
        failure = harness_failure(workers)
        if failure:
            return failure
        if time.monotonic() >= next_progress:
            next_progress += 30
            log(f"[{ledger.elapsed():6.0f}s] acknowledged {ledger.acked_count}, kills {ledger.kills}, "
                f"commits {sum(h.acked_count for h in ledger.commits.values())}, topics created "
                f"{len(ledger.created)}, violations so far {len(ledger.violations)}")
    return None


def stop_workload(workers, tern):
    """Stops the killer first (Tern is up once it returns), then the rest; producers flush."""
    order = ["killer", "churn", "writers", "mirror source", "members", "watcher"]
    for role in order:
        for worker in workers[role]:
            worker.stop()
        for worker in workers[role]:
            worker.join(timeout=400)
            if worker.is_alive():
                return f"{worker.name} did not stop"
        if role == "killer" and tern.proc is None:
            tern.start()
    return harness_failure(workers)


def check_everything(ledger, tern, kafka, workers):
    """The checker's passes; returns (figures, violations)."""
    violations = checker.Violations(ledger.violations)
    figures = {}
    figures.update(checker.check_topics(ledger, tern.bootstrap, violations))
    records = checker.check_records(ledger, tern.bootstrap, violations, exclude={MIRROR_TOPIC})
    figures.update(records)
    partitions = [(t, p) for t, n in SOAK_TOPICS.items() for p in range(n)]
    figures.update(checker.check_commits(ledger, tern.bootstrap, GROUP, partitions,
                                         records["high watermarks"], violations))
    mirror_writer = workers["mirror source"][0]
    if mirror_writer.failures:
        violations.add(f"the mirror's source producer failed: {mirror_writer.failures[:3]}")
    figures.update(checker.check_mirror(tern.bootstrap, kafka.bootstrap, MIRROR, MIRROR_TOPIC,
                                        MIRROR_PARTITIONS, ledger.mirror_produced, violations))
    for writer, error in ledger.fatal_producer_errors:
        violations.add(f"producer {writer} failed fatally: {error}")
    return figures, violations


def summary_of(args, ledger, workers, figures, violations, duration):
    return {
        "seed": args.seed,
        "duration s": round(duration, 1),
        "workload s": args.duration,
        "records produced": len(ledger.sent),
        "records acknowledged": ledger.acked_count,
        "records read back": figures.get("acknowledged read back"),
        "unacknowledged present": figures.get("unacknowledged present"),
        "acknowledged in deleted topics": figures.get("acknowledged in deleted topics"),
        "delivery errors": dict(ledger.delivery_errors),
        "kills": ledger.kills,
        "kills during start": workers["killer"][0].kills_during_start,
        "restarts": ledger.restarts,
        "kill schedule (s, down s, killed s into a start)": workers["killer"][0].schedule,
        "topics created": figures.get("topics created"),
        "topics deleted": figures.get("topics deleted"),
        "topic requests in doubt": figures.get("topic requests in doubt"),
        "topic checks": workers["churn"][0].checks,
        "group commits acknowledged": figures.get("commits acknowledged"),
        "group commits failed": dict(ledger.commit_failures),
        "committed offsets checked": figures.get("committed offsets read"),
        "mirror records produced": ledger.mirror_produced,
        "mirror records compared": figures.get("mirror records compared"),
        "violations": len(violations),
        "first violation": violations[0] if violations else None,
    }


def print_summary(summary):
    log("\n== soak summary ==")
    for key, value in summary.items():
        log(f"{key:32} {value}")


def main(argv=None):
    args = parse_args(argv)
    use_tern_binary(args.tern_bin)
    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="tern-soak-"))
    (work_dir / "tern").mkdir(parents=True, exist_ok=True)
    log_clients_to(work_dir / "clients.log")
    log(f"soak: seed {args.seed}, {args.duration:.0f}s, kill every {args.kill_every[0]:g}-"
        f"{args.kill_every[1]:g}s, work dir {work_dir}")
    began = time.monotonic()
    ledger = Ledger()
    kafka = tern = None
    passed = False
    try:
        kafka = start_kafka_source(work_dir, args.kafka_version)
        metrics = f"http.listeners=http://127.0.0.1:{free_port()}"  # not the fixed 9644
        tern = CrashableTern(str(work_dir / "tern"), free_port(), TERN_OVERRIDES + [metrics]).start()
        log(f"kafka {kafka.version} {kafka.bootstrap}, tern {tern.bootstrap} (log {tern.log_path})")
        create_topics(tern.bootstrap, SOAK_TOPICS)
        start_mirror(tern, kafka, work_dir)
        workers = start_workload(args, ledger, tern, kafka)
        failure = run_for(args.duration, ledger, workers) or stop_workload(workers, tern)
        if failure:
            log(f"HARNESS FAILURE: {failure}")
            return 2
        log(f"[{ledger.elapsed():6.0f}s] workload stopped; checking")
        figures, violations = check_everything(ledger, tern, kafka, workers)
        summary = summary_of(args, ledger, workers, figures, violations, time.monotonic() - began)
        print_summary(summary)
        if args.summary_json:
            Path(args.summary_json).write_text(json.dumps(summary, indent=1))
        if violations:
            log(f"\nVIOLATION: {violations[0]}")
            for v in violations[1:10]:
                log(f"  also: {v}")
            log(f"work dir kept: {work_dir} (tern log {tern.log_path})")
            return 1
        log("\nPASS")
        passed = True
        return 0
    finally:
        for process in (tern, kafka):
            if process:
                process.stop()
        if passed and not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
