"""The log cleaner's threads compact a compacted topic within `log.cleaner.backoff.ms`, and keep
doing so after kafka-style dynamic changes of their number and I/O budget: a consumer reading
from the start then sees the latest value of every key at the offset it was written at, and
nothing else.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                  NewTopic)

from processes import free_port
from tern_process import Tern

KEYS = 20
ROUNDS = 4


@pytest.fixture
def tern_fast_cleaner(tmp_path):
    # Segments roll by age every 100 ms, so that all written becomes cleanable.
    t = Tern(tmp_path, free_port(), ["log.cleaner.backoff.ms=200",
                                     "log.retention.check.interval.ms=100"]).start(serving=True)
    yield t
    t.stop()


def _produce_rounds(bootstrap, topic):
    """ROUNDS values of every key; returns each key's last (offset, value)."""
    latest = {}
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})

    def remember(err, msg):
        assert err is None, err
        latest[msg.key()] = (msg.offset(), msg.value())

    for r in range(ROUNDS):
        for k in range(KEYS):
            p.produce(topic, key=f"k{k}".encode(), value=f"r{r}-{k}".encode(), on_delivery=remember)
            p.flush(10)
    return latest


def _read_all(bootstrap, topic, end):
    """Every (key, offset, value) from the start up to offset `end`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.time_ns()}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.time() + 30
        while time.time() < deadline:
            m = c.poll(1)
            if m is None or m.error():
                continue
            out.append((m.key(), m.offset(), m.value()))
            if m.offset() >= end - 1:
                return out
        raise AssertionError(f"read only {len(out)} records of {topic} up to {end}")
    finally:
        c.close()


def _compacted(bootstrap, topic, latest):
    """Waits until reading `topic` gives exactly the latest record of every key."""
    expected = sorted((k, o, v) for k, (o, v) in latest.items())
    end = max(o for o, _ in latest.values()) + 1
    deadline = time.time() + 30
    seen = None
    while time.time() < deadline:
        seen = sorted(_read_all(bootstrap, topic, end))
        if seen == expected:
            return
        time.sleep(0.5)
    raise AssertionError(f"not compacted within 30 s: {len(seen)} records, {len(expected)} expected")


def _create(admin, topic):
    # Small segments roll while producing, and the active one once it is 100 ms old.
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "600", "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(timeout=30)


def test_cleaner_threads_compact_and_follow_dynamic_settings(tern_fast_cleaner):
    bootstrap = tern_fast_cleaner.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, "cleaned-1")
    _compacted(bootstrap, "cleaned-1", _produce_rounds(bootstrap, "cleaned-1"))

    # Two threads and a budget of 64 KiB a second, as kafka-configs would set them.
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker.add_incremental_config(ConfigEntry("log.cleaner.threads", "2",
                                              incremental_operation=AlterConfigOpType.SET))
    broker.add_incremental_config(ConfigEntry("log.cleaner.io.max.bytes.per.second", "65536",
                                              incremental_operation=AlterConfigOpType.SET))
    admin.incremental_alter_configs([broker])[broker].result(timeout=30)
    for topic in ("cleaned-2", "cleaned-3"):
        _create(admin, topic)
    for topic in ("cleaned-2", "cleaned-3"):
        _compacted(bootstrap, topic, _produce_rounds(bootstrap, topic))


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tern_fast_cleaner):
    """A ratio never reached after the first pass: only max.compaction.lag.ms makes the cleaner
    take the second round of values."""
    bootstrap = tern_fast_cleaner.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "lagged"
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "600", "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"})])[topic].result(timeout=30)
    _compacted(bootstrap, topic, _produce_rounds(bootstrap, topic))
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    latest = {}

    def remember(err, msg):
        assert err is None, err
        latest[msg.key()] = (msg.offset(), msg.value())

    for k in range(KEYS // 4):
        p.produce(topic, key=f"k{k}".encode(), value=b"late", on_delivery=remember)
    p.flush(10)
    earlier = _read_all(bootstrap, topic, min(o for o, _ in latest.values()))
    expected = {k: (o, v) for k, o, v in earlier if k not in latest}
    _compacted(bootstrap, topic, {**expected, **latest})
