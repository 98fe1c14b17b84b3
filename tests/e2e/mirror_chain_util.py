"""Helpers for test_mirror_chain.py and test_mirror_epochs.py (mirror chains, fan-out, leader
epochs and group offsets across a failover).

- offsets_for_leader_epoch(): OffsetForLeaderEpoch (api key 23) v3, raw: non-flexible, request
  header v1, response header v0, so it runs over mirror_util.RawKafka:
      request  replica_id INT32 (-1: a consumer), topics [name STRING,
               partitions [partition INT32, current_leader_epoch INT32, leader_epoch INT32]]
      response throttle_time_ms INT32, topics [name STRING,
               partitions [error_code INT16, partition INT32, leader_epoch INT32, end_offset INT64]]
  Served by Apache Kafka 2.3+ and by Tern (v2-v4).
- committed_with_epochs(): a group's committed offsets with their leader epochs (KIP-320), as
  librdkafka's OffsetFetch reads them (None: no leader epoch).
- log_summary(): what one partition's batches hold (epochs, producer ids, control batches), read
  with mirror_util.RawKafka.
- start_terns(): single-node Terns, each on its own loopback port and data dir.
"""

import struct
import time

from confluent_kafka import Consumer, TopicPartition

import mirror_util as mu
from kafka_wire import Reader, string
from processes import free_port
from tern_process import Tern

OFFSET_FOR_LEADER_EPOCH = 23

# Broker overrides for the Terns of these tests: group offsets and configs synced twice a second.
TERN_OVERRIDES = [
    "mirror.metadata.refresh.interval.ms=500",
    "mirror.failed.retry.initial.backoff.ms=200",
    "mirror.failed.retry.max.backoff.ms=2000",
]


def start_terns(root, names, overrides=TERN_OVERRIDES):
    """{name: Tern}, each started with its own data dir root/<name> and a free loopback port.
    On a failed start the ones already started are stopped."""
    started = {}
    try:
        for name in names:
            d = root / name
            d.mkdir(parents=True, exist_ok=True)
            started[name] = Tern(str(d), free_port(), list(overrides)).start()
            print(f"tern {name} {started[name].bootstrap}, log {started[name].log_path}")
        return started
    except BaseException:
        for t in started.values():
            t.stop()
        raise


# -- OffsetForLeaderEpoch --------------------------------------------------------------------------

def offsets_for_leader_epoch(bootstrap, topic, requests, version=3):
    """requests: [(partition, leader_epoch)], current_leader_epoch -1 (no fencing check).
    Returns [(partition, requested epoch, error_code, leader_epoch, end_offset)] in request order
    (one request per entry, so that a partition may be asked for several epochs)."""
    out = []
    with mu.RawKafka(bootstrap) as r:
        for partition, epoch in requests:
            body = struct.pack(">i", -1)  # replica_id: a consumer
            body += struct.pack(">i", 1) + string(topic)
            body += struct.pack(">i", 1) + struct.pack(">iii", partition, -1, epoch)
            rd = Reader(r.request(OFFSET_FOR_LEADER_EPOCH, version, body))
            rd.take(">i")  # throttle_time_ms
            got = None
            for _ in range(rd.take(">i")):
                rd.string()
                for _ in range(rd.take(">i")):
                    err, p, leader_epoch, end_offset = rd.take(">hiiq")
                    if p == partition:
                        got = (partition, epoch, err, leader_epoch, end_offset)
            if got is None:
                raise AssertionError(f"{bootstrap}: no {topic}-{partition} in the OffsetForLeaderEpoch response")
            out.append(got)
    return out


def epoch_end_offsets(bootstrap, topic, partition_epochs):
    """{(partition, epoch): (error_code, leader_epoch, end_offset)} for every epoch of every
    partition in partition_epochs ({partition: [epochs]})."""
    reqs = [(p, e) for p, es in sorted(partition_epochs.items()) for e in es]
    return {(p, e): (err, le, end) for p, e, err, le, end in offsets_for_leader_epoch(bootstrap, topic, reqs)}


# -- logs ------------------------------------------------------------------------------------------

def read_topic_batches(bootstrap, topic, partitions, start=None):
    """{partition: [Batch]} from the log start (or `start`: {partition: offset}) to the high
    watermark."""
    with mu.RawKafka(bootstrap) as r:
        return {p: r.read_batches(topic, p, None if start is None else start[p]) for p in range(partitions)}


def log_summary(batches):
    """{partition: [Batch]} -> epochs, producer ids (>= 0), control batches, record count."""
    flat = [b for bs in batches.values() for b in bs]
    return {
        "epochs": sorted({b.leader_epoch for b in flat}),
        "producer_ids": sorted({b.producer_id for b in flat if b.producer_id >= 0}),
        "controls": sum(1 for b in flat if b.is_control),
        "transactional": sum(1 for b in flat if b.is_transactional and not b.is_control),
        "records": sum(b.record_count for b in flat if not b.is_control),
        "batches": len(flat),
    }


def epochs_by_partition(batches):
    """{partition: sorted batch epochs}"""
    return {p: sorted({b.leader_epoch for b in bs}) for p, bs in batches.items()}


def epoch_of_offset(batches, offset):
    """The partition leader epoch of the batch that holds `offset` ([Batch] of one partition)."""
    for b in batches:
        if b.base_offset <= offset <= b.last_offset:
            return b.leader_epoch
    raise AssertionError(f"no batch holds offset {offset}")


# -- group offsets ---------------------------------------------------------------------------------

def committed_with_epochs(bootstrap, group, topic, partitions):
    """{partition: (offset, leader_epoch or None)}; offset -1001 when nothing is committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: (tp.offset, tp.leader_epoch) for tp in tps}
    finally:
        c.close()


def wait_committed_with_epochs(bootstrap, group, topic, want, timeout=30, what=""):
    """Until the group's committed offsets and leader epochs on `bootstrap` are `want`."""
    deadline = time.time() + timeout
    while True:
        got = committed_with_epochs(bootstrap, group, topic, len(want))
        if got == want:
            return got
        if time.time() > deadline:
            raise AssertionError(f"{what} group {group} on {bootstrap}: committed (offset, leader epoch) "
                                 f"{got}, expected {want}")
        time.sleep(0.3)


def wait_states(bootstrap, mirror, topic, state, timeout=30):
    """Until every partition of `topic` in `mirror` is in `state`; returns the describe rows."""
    deadline = time.time() + timeout
    while True:
        rows = [r for r in mu.describe(bootstrap, mirror) if r["topic"] == topic]
        if rows and {r["state"] for r in rows} == {state}:
            return rows
        if time.time() > deadline:
            raise AssertionError(f"{bootstrap} mirror {mirror} {topic}: not all {state}: {rows}")
        time.sleep(0.3)
