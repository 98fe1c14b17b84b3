"""confluent-kafka (librdkafka) produces and consumes against tern: every record comes back
exactly (key, value, headers, timestamp, offset), with every codec and acks setting, and
survives a clean restart and a kill -9."""

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

N = 100_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000


def create_topic(bootstrap, name, partitions=PARTITIONS, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    fs[name].result(timeout=30)


def record(i):
    key = None if i % 10 == 0 else f"key-{i}".encode()
    value = None if i % 97 == 0 else (f"value-{i}-" * (1 + i % 7)).encode()
    headers = [("h", str(i).encode()), ("empty", None)] if i % 3 == 0 else []
    return key, value, headers, BASE_TS + i


def produce(bootstrap, topic, n, codec="none", acks="all", start=0):
    """Produces n records; returns {i: (partition, offset)} for the acknowledged ones."""
    acked = {}
    errors = []

    def on_delivery(err, msg, i):
        if err is not None:
            errors.append(err)
        else:
            acked[i] = (msg.partition(), msg.offset())

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "acks": acks,
            "linger.ms": 5,
            "enable.idempotence": False,
        }
    )
    for i in range(start, start + n):
        key, value, headers, ts = record(i)
        while True:
            try:
                p.produce(
                    topic,
                    key=key,
                    value=value,
                    headers=headers,
                    timestamp=ts,
                    partition=i % PARTITIONS,
                    on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i),
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    return acked


def consume_all(bootstrap, topic, expected, timeout=60):
    """Reads every partition from offset 0 until `expected` records arrived."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "e2e-assign-only",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
    c.close()
    return out


def check_records(msgs, acked, n, start=0):
    assert len(msgs) == n, f"expected {n} records, got {len(msgs)}"
    per_partition = {}
    for m in msgs:
        i = int(m.headers()[0][1]) if m.headers() else None
        per_partition.setdefault(m.partition(), []).append(m.offset())
        _, ts = m.timestamp()
        idx = ts - BASE_TS
        key, value, headers, _ = record(idx)
        assert m.key() == key
        assert m.value() == value
        assert (m.headers() or []) == headers
        if i is not None:
            assert i == idx
        if acked:
            assert acked[idx] == (m.partition(), m.offset())
    for p, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p} offsets not contiguous"


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(tern, codec):
    topic = f"codec-{codec}"
    create_topic(tern.bootstrap, topic)
    acked = produce(tern.bootstrap, topic, N, codec=codec, acks="all")
    assert len(acked) == N
    check_records(consume_all(tern.bootstrap, topic, N), acked, N)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_round_trip_every_acks(tern, acks):
    topic = f"acks-{acks}"
    create_topic(tern.bootstrap, topic)
    acked = produce(tern.bootstrap, topic, N, codec="lz4", acks=acks)
    msgs = consume_all(tern.bootstrap, topic, N)
    # acks=0 delivery reports carry no offsets; records must still all arrive.
    check_records(msgs, acked if acks != "0" else None, N)


def test_records_survive_clean_restart(tern):
    create_topic(tern.bootstrap, "restart")
    acked = produce(tern.bootstrap, "restart", 20_000, codec="zstd")
    tern.restart()
    check_records(consume_all(tern.bootstrap, "restart", 20_000), acked, 20_000)
    # Appends continue after the restart at the next offsets.
    more = produce(tern.bootstrap, "restart", 3_000, codec="zstd", start=20_000)
    assert min(o for (_, o) in more.values()) >= 20_000 // PARTITIONS - 1
    acked.update(more)
    check_records(consume_all(tern.bootstrap, "restart", 23_000), acked, 23_000)


def test_acknowledged_records_survive_kill_9(tern):
    create_topic(tern.bootstrap, "crash")
    acked = produce(tern.bootstrap, "crash", 20_000, codec="snappy", acks="all")
    tern.kill9()
    tern.start()
    check_records(consume_all(tern.bootstrap, "crash", 20_000), acked, 20_000)
