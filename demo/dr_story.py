#!/usr/bin/env python3
"""The DR drill of docker-compose.yml, without Docker: real processes on loopback.

An Apache Kafka (from the test harness's cached jars) is the primary and a Tern the DR cluster:

  1. the billing application writes orders to Kafka and its consumer group commits half of them;
  2. Tern mirrors the topic; the lag in /metrics falls to 0 and the group's offsets arrive;
  3. `tern mirrors --verify` proves the copy batch by batch;
  4. failover (`--stop --json`): the report says what was left behind and when the topic took writes;
  5. the billing consumer moves to Tern and resumes exactly at its committed offsets;
  6. writes on both sides (Tern now primary, a stale writer still on Kafka): `--verify` names the
     offset where they parted;
  7. fail back to the primary (the drill ends): `--start` again, Tern drops what it took during the
     drill, mirrors what Kafka gained, and `--verify` is equal again.

Each step prints one line; any unmet expectation stops the story with its reason (exit 1).

  ~/.cache/tern/venv/bin/python demo/dr_story.py [--tern-bin PATH] [--kafka-version 3.9.1] [--keep]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
import kafka_peer  # noqa: E402

TOPIC, GROUP, MIRROR, PARTITIONS, RECORDS = "orders", "billing", "dr", 3, 3000


class StoryFailed(Exception):
    pass


def say(step, text):
    print(f"[{step}] {text}", flush=True)


def expect(ok, why):
    if not ok:
        raise StoryFailed(why)


def wait(what, check, timeout=60, every=0.5):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(every)
    raise StoryFailed(f"timed out waiting for {what}; last: {last}")


class TernProcess:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.dir = workdir
        self.port = kafka_peer.free_port()
        self.http = kafka_peer.free_port()
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        args = [self.binary, "server"]
        for kv in (f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.dir}/logs",
                   f"http.listeners=http://127.0.0.1:{self.http}",
                   "mirror.metadata.refresh.interval.ms=1000"):
            args += ["--override", kv]
        self.log = open(self.dir / "tern.log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            expect(self.proc.poll() is None, f"tern exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise StoryFailed("tern did not start")

    def stop(self):
        if self.proc:
            kafka_peer.stop_process(self.proc)

    def mirrors(self, *args, ok=(0,)):
        p = subprocess.run([self.binary, "mirrors", "--bootstrap-server", self.bootstrap, *args],
                           capture_output=True, text=True, timeout=120)
        expect(p.returncode in ok, f"tern mirrors {' '.join(args)} exited {p.returncode}: {p.stderr}{p.stdout}")
        return p

    def metrics(self):
        """{(name, {labels}): value} of the samples named tern_mirror_*."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if not line.startswith("tern_mirror_"):
                continue
            head, value = line.rsplit(" ", 1)
            name, _, labels = head.partition("{")
            pairs = dict(kv.split("=", 1) for kv in labels.rstrip("}").split(",") if kv)
            out[(name, tuple(sorted((k, v.strip('"')) for k, v in pairs.items())))] = float(value)
        return out


def lags(tern):
    m = tern.metrics()
    rows = {}
    for (name, labels), v in m.items():
        d = dict(labels)
        if d.get("topic") != TOPIC:
            continue
        p = int(d["partition"])
        if name == "tern_mirror_partition_lag_records":
            rows.setdefault(p, {})["records"] = v
        if name == "tern_mirror_partition_lag_seconds":
            rows.setdefault(p, {})["seconds"] = v
    return rows


def wait_caught_up(tern, step):
    seen = []

    def check():
        rows = lags(tern)
        total = sum(r.get("records", 0) for r in rows.values())
        oldest = max((r.get("seconds", 0) for r in rows.values()), default=0)
        if len(rows) == PARTITIONS and (not seen or seen[-1] != total):
            seen.append(total)
            say(step, f"lag in /metrics: {int(total)} records over {len(rows)} partitions, "
                f"up to {oldest:.1f} s behind")
        return len(rows) == PARTITIONS and total == 0, rows

    wait("the mirror's lag to reach 0 in /metrics", check, timeout=120)


def produce(bootstrap, start, count, sent):
    # Batches of 50 orders, as an application writing steadily would make.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": 50})
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(err)
        else:
            sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i in range(start, start + count):
        p.produce(TOPIC, key=b"order-%d" % i, value=b'{"order": %d, "amount": %d}' % (i, i * 7 % 1000),
                  partition=i % PARTITIONS, on_delivery=on_delivery)
        p.poll(0)
    expect(p.flush(60) == 0 and not failed, f"produce to {bootstrap} failed: {failed[:3]}")


def end_offsets(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-story-probe"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def committed(bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in
                c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        c.close()


def verify(tern):
    p = tern.mirrors("--verify", "--mirror", MIRROR, "--json", ok=(0, 2))
    rows = {r["partition"]: r for r in json.loads(p.stdout)["partitions"] if r["topic"] == TOPIC}
    return p.returncode, rows


def story(args, work):
    say("setup", f"starting Apache Kafka {args.kafka_version} and Tern on loopback (work dir {work})")
    kafka_peer.KafkaJars(args.kafka_version).ensure()
    kafka = kafka_peer.KafkaPeer(args.kafka_version, work / "kafka",
                                 overrides={"auto.create.topics.enable": "false"},
                                 jvm_opts=["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
    tern = TernProcess(args.tern_bin, work)
    try:
        kafka.start(timeout=120)
        tern.start()
        say("setup", f"Kafka at {kafka.bootstrap}, Tern at {tern.bootstrap} (/metrics on port {tern.http})")
        run(kafka, tern, work)
    finally:
        tern.stop()
        kafka.stop()


def run(kafka, tern, work):
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
    sent = {}
    produce(kafka.bootstrap, 0, RECORDS, sent)
    ends = end_offsets(kafka.bootstrap)
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    half = {p: ends[p] // 2 for p in ends}
    read = {p: 0 for p in ends}
    deadline = time.time() + 60
    while any(read[p] < half[p] for p in read) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error() and m.offset() < half[m.partition()]:
            read[m.partition()] += 1
    expect(read == half, f"billing read {read} of {half}")
    c.commit(offsets=[TopicPartition(TOPIC, p, half[p]) for p in half], asynchronous=False)
    c.close()
    say("1", f"{RECORDS} orders on Kafka {ends}; group {GROUP} committed {half}")

    props = work / "mirror.properties"
    # A byte-rate limit makes the initial copy take a few seconds, so there is lag to watch.
    props.write_text(f"bootstrap.servers={kafka.bootstrap}\nmirror.fetch.wait.max.ms=200\n"
                     "mirror.fetch.rate.max.bytes=30000\nmirror.fetch.max.bytes=8192\n")
    tern.mirrors("--create", "--mirror", MIRROR, "--mirror-config", str(props))
    tern.mirrors("--start", "--mirror", MIRROR, "--topics", TOPIC)
    say("2", f"mirror {MIRROR} created, {TOPIC} started")
    wait_caught_up(tern, "2")
    wait(f"group {GROUP}'s offsets on Tern", lambda: (committed(tern.bootstrap) == half, committed(tern.bootstrap)))
    say("2", f"group {GROUP}'s offsets synced to Tern: {half}")

    code, rows = verify(tern)
    expect(code == 0 and all(r["result"] == "EQUAL" for r in rows.values()), f"verify: {code} {rows}")
    say("3", f"verify: equal, {sum(r['batches'] for r in rows.values())} batches compared byte for byte")

    report = json.loads(tern.mirrors("--stop", "--mirror", MIRROR, "--topics", TOPIC, "--json").stdout)
    for r in sorted(report["partitions"], key=lambda r: r["partition"]):
        expect(r["lastMirroredOffset"] == ends[r["partition"]], f"failover left records behind: {r}")
    lost = sum(r["recordsNotMirrored"] or 0 for r in report["partitions"])
    say("4", f"failover: writable after {report['writableAfterMs']} ms; last mirrored offsets "
        f"{ {r['partition']: r['lastMirroredOffset'] for r in report['partitions']} }, {lost} records not mirrored")

    c = Consumer({"bootstrap.servers": tern.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    got = {p: [] for p in ends}
    deadline = time.time() + 60
    while any(len(got[p]) < ends[p] - half[p] for p in got) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.partition()].append(m)
    for p in got:
        offsets = [m.offset() for m in got[p]]
        expect(offsets == list(range(half[p], ends[p])), f"partition {p} on Tern read {offsets[:3]}..., "
               f"expected {half[p]}..{ends[p] - 1} once each, in order")
        for m in got[p]:
            expect(sent[(p, m.offset())] == (m.key(), m.value()), f"partition {p} offset {m.offset()} differs")
    c.commit(asynchronous=False)
    c.close()
    say("5", f"consumer resumed at committed offsets {half} on Tern and read the "
        f"{sum(len(v) for v in got.values())} records after them, once each, in order, bytes equal")

    produce(tern.bootstrap, RECORDS, 30, {})
    produce(kafka.bootstrap, RECORDS + 30, 30, sent)
    code, rows = verify(tern)
    parted = {p: r.get("firstDivergentOffset") for p, r in rows.items()}
    expect(code == 2 and parted == ends, f"verify after writes on both sides: exit {code}, {rows}")
    say("6", f"writes on both sides: verify exits 2, the sides parted at {parted} (the last mirrored offsets)")

    tern.mirrors("--start", "--mirror", MIRROR, "--topics", TOPIC)
    kafka_ends = end_offsets(kafka.bootstrap)
    wait_caught_up(tern, "7")
    wait("Tern's log ends at Kafka's", lambda: (end_offsets(tern.bootstrap) == kafka_ends,
                                                 end_offsets(tern.bootstrap)))
    code, rows = verify(tern)
    expect(code == 0 and all(r["result"] == "EQUAL" for r in rows.values()), f"verify after failback: {code} {rows}")
    say("7", f"fail back: Tern dropped its drill writes and mirrors Kafka again, ends {kafka_ends}; verify: equal")
    say("done", "the drill passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern-bin", default=os.environ.get("TERN_BIN", str(ROOT / "target" / "release" / "tern")))
    ap.add_argument("--kafka-version", default="3.9.1")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tern-dr-story-"))
    try:
        story(args, work)
        return 0
    except StoryFailed as e:
        print(f"DRILL FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
