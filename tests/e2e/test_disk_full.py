"""A full disk: produce is refused with KAFKA_STORAGE_ERROR, nothing acknowledged is lost.

Tern's log.dirs sit on a 48 MB tmpfs that the test mounts (root needed; skipped otherwise), with
an 8 MB filler file beside them. An idempotent acks=all producer writes 5 KB records until the
disk is full:

1. once the disk is full every produce answers KAFKA_STORAGE_ERROR (a probe producer without
   retries sees the code itself) and the failed write leaves nothing behind: the log is offline
   for writes, named in Tern's log;
2. consumers still read every acknowledged record while the disk is full;
3. the filler is removed and Tern restarted (writes to a log that failed stay refused until a
   restart, as in Kafka, where the log dir goes offline): produce works again;
4. the checker reads everything back: every acknowledged record exactly once, in order, bytes
   equal, and offsets without a gap or a duplicate.

In a cluster of three, the leader whose disk fills hands its partitions to another in-sync
replica, so the producer goes on there without an error it sees, and after the disk is freed
and the broker restarted its replica catches up and rejoins the ISR.
"""

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from processes import free_port
from tern_process import Tern

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)])
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def read_all(bootstrap, topic, expected, timeout=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + timeout
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    # Anything beyond what was acknowledged would show up here too.
    end = time.time() + 1
    while time.time() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    c.close()
    return got


def produce_round(p, topic, n, acked, failed):
    def on_delivery(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.value()))
        else:
            failed.append(err.code())

    for _ in range(n):
        p.produce(topic, value=os.urandom(5000), partition=0, on_delivery=on_delivery)
        p.poll(0)
    p.flush(60)


def test_full_disk_refuses_writes_and_loses_nothing(small_disk, tmp_path):
    (small_disk / "filler").write_bytes(b"\1" * (8 << 20))
    data = tmp_path / "tern"
    data.mkdir()
    tern = Tern(str(data), free_port(), extra=[f"log.dirs={small_disk}/logs",
                                               "log.segment.bytes=4194304"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": tern.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(timeout=30)
        p = Producer({"bootstrap.servers": tern.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 8000})
        acked, failed = [], []
        for _ in range(12):
            produce_round(p, "t", 1000, acked, failed)
            if failed:
                break
        assert failed, "the disk never filled"
        assert 4000 < len(acked) < 12000, len(acked)

        probe = Producer({"bootstrap.servers": tern.bootstrap, "acks": "all", "retries": 0,
                          "enable.idempotence": False})
        errors = []
        probe.produce("t", value=b"probe", partition=0,
                      on_delivery=lambda err, msg: errors.append(err and err.code()))
        probe.flush(30)
        assert errors == [KafkaError.KAFKA_STORAGE_ERROR], errors
        with open(tern.log_path, "rb") as f:
            assert b"log offline after a failed write" in f.read()

        got = read_all(tern.bootstrap, "t", len(acked))
        assert got == sorted(acked), f"read {len(got)} of {len(acked)} acknowledged while full"

        (small_disk / "filler").unlink()
        tern.restart()
        p = Producer({"bootstrap.servers": tern.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 30000})
        before = len(acked)
        failed.clear()
        produce_round(p, "t", 500, acked, failed)
        assert not failed and len(acked) == before + 500, (failed[:3], len(acked) - before)

        got = read_all(tern.bootstrap, "t", len(acked))
        offsets = [o for o, _ in got]
        assert offsets == list(range(len(got))), "a gap or a duplicate in the offsets"
        values = [v for _, v in got]
        assert len(set(values)) == len(values), "a record written twice"
        # Every acknowledged record at its offset, bytes equal (an unacknowledged one may exist:
        # a timed-out send is not a promise of absence, but none was written while full).
        by_offset = dict(got)
        missing = [o for o, v in acked if by_offset.get(o) != v]
        assert not missing, f"{len(missing)} acknowledged records lost, first at {missing[0]}"
        assert len(got) == len(acked), f"read {len(got)}, acknowledged {len(acked)}"
    finally:
        tern.stop()


def _leader_and_isr(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[0]
    return p.leader, sorted(p.isrs)


def _offline_replicas(bootstrap, topic):
    """Metadata's offline_replicas of partition 0 (kafka-python's admin client asks v5+)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    (p,) = described["partitions"]
    return sorted(p["offline_replicas"])


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_a_cluster_replica_whose_disk_fills_steps_aside_and_loses_nothing(small_disk, tmp_path, role):
    """Node 1 keeps its logs on the small disk and is the partition's leader or a follower.
    Its disk fills mid-stream: as leader it hands the partition to the next in-sync replica; as
    follower it leaves the ISR at once (replica.lag.time.max.ms is ten minutes here, so the lag
    rule cannot be what drops it). Either way the idempotent acks=all producer sees no error,
    every acknowledged record is read back once and in order, and after the disk is freed and
    node 1 restarted it is in sync again."""
    from test_cluster import COMBINED, Cluster

    cluster = Cluster(tmp_path / "cluster", {0: COMBINED, 1: COMBINED, 2: COMBINED},
                      {"replica.lag.time.max.ms": "600000"})
    cluster.nodes[1].extra.update({"log.dirs": str(small_disk / "logs"),
                                   "metadata.log.dir": str(tmp_path / "node-1-metadata")})
    cluster.start()
    replicas, leader_after, said = {
        "leader": ([1, 2, 0], 2, "leadership moved to another in-sync replica"),
        "follower": ([2, 1, 0], 2, "out of the ISR and of elections until a restart"),
    }[role]
    try:
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("full", num_partitions=1, replica_assignment=[replicas],
                                      config={"min.insync.replicas": "2"})])["full"].result(30)
        deadline = time.time() + 30
        while _leader_and_isr(bootstrap, "full") != (replicas[0], [0, 1, 2]) and time.time() < deadline:
            time.sleep(0.5)
        assert _leader_and_isr(bootstrap, "full") == (replicas[0], [0, 1, 2])
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        acked, failed = [], []
        produce_round(p, "full", 500, acked, failed)
        assert not failed and len(acked) == 500

        # Fill node 1's disk: its next append fails and takes its replica offline.
        with open(small_disk / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\1" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        produce_round(p, "full", 1500, acked, failed)
        assert not failed, f"the producer saw errors: {failed[:3]}"
        assert len(acked) == 2000
        assert _leader_and_isr(bootstrap, "full") == (leader_after, [0, 2])
        assert said in cluster.nodes[1].log_text()
        # Metadata names the replica offline, as Kafka names one on a failed log dir.
        assert _offline_replicas(bootstrap, "full") == [1]

        got = read_all(cluster.bootstrap(0, 2), "full", len(acked))
        assert [o for o, _ in got] == list(range(len(got))), "a gap or a duplicate in the offsets"
        assert got == sorted(acked), f"read {len(got)} of {len(acked)} acknowledged"

        # Freed and restarted, node 1 catches up and is in sync again.
        (small_disk / "filler").unlink()
        node = cluster.nodes[1]
        node.terminate()
        assert node.stop(timeout=30)
        node.start()
        deadline = time.time() + 60
        while _leader_and_isr(bootstrap, "full")[1] != [0, 1, 2] and time.time() < deadline:
            time.sleep(0.5)
        assert _leader_and_isr(bootstrap, "full")[1] == [0, 1, 2]
        assert _offline_replicas(bootstrap, "full") == []
    finally:
        cluster.stop()
        cluster.report()
