"""kafka-python produces and consumes against tern with every codec and acks setting, and reads
back exactly what it wrote; its admin client creates, describes and deletes topics."""

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

N = 100_000
PARTITIONS = 2
BASE_TS = 1_600_000_000_000


def record(i):
    key = None if i % 11 == 0 else f"k{i}".encode()
    # kafka-python refuses a record with neither key nor value.
    value = None if i % 101 == 0 and key is not None else (f"v{i}" * (1 + i % 5)).encode()
    headers = [("n", str(i).encode())] if i % 4 == 0 else []
    return key, value, headers, BASE_TS + i


def produce(bootstrap, topic, n, codec=None, acks="all"):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks=acks if acks == "all" else int(acks),
        linger_ms=5,
        batch_size=64 * 1024,
    )
    futures = []
    for i in range(n):
        key, value, headers, ts = record(i)
        futures.append(
            (i, p.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts,
                       partition=i % PARTITIONS))
        )
    p.flush(timeout=120)
    acked = {}
    for i, f in futures:
        md = f.get(timeout=60)
        if acks != "0":
            acked[i] = (md.partition, md.offset)
    p.close()
    return acked


def consume_all(bootstrap, topic, expected, timeout=90):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    out = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        for _, msgs in c.poll(timeout_ms=500, max_records=10_000).items():
            out.extend(msgs)
    c.close()
    return out


def check(msgs, acked, n):
    assert len(msgs) == n
    offsets = {}
    for m in msgs:
        idx = m.timestamp - BASE_TS
        key, value, headers, _ = record(idx)
        assert (m.key, m.value, list(m.headers)) == (key, value, headers)
        if acked is not None:
            assert acked[idx] == (m.partition, m.offset)
        offsets.setdefault(m.partition, []).append(m.offset)
    for p, o in offsets.items():
        assert o == list(range(len(o))), f"partition {p} offsets not contiguous"


def create(bootstrap, name, configs=None):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, PARTITIONS, 1, topic_configs=configs or {})])
    return admin


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_every_codec(tern, codec):
    topic = f"kp-{codec or 'none'}"
    create(tern.bootstrap, topic).close()
    acked = produce(tern.bootstrap, topic, N, codec=codec)
    check(consume_all(tern.bootstrap, topic, N), acked, N)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks(tern, acks):
    topic = f"kp-acks-{acks}"
    create(tern.bootstrap, topic).close()
    acked = produce(tern.bootstrap, topic, N, codec="gzip", acks=acks)
    check(consume_all(tern.bootstrap, topic, N), acked if acks != "0" else None, N)


def test_admin_create_describe_delete(tern):
    admin = create(tern.bootstrap, "adm", {"retention.ms": "12345", "cleanup.policy": "compact"})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("adm", 1, 1)])
    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm")])
    # kafka-python 3 returns only the configs set on the topic.
    configs = res["topic"]["adm"]
    assert configs["retention.ms"]["value"] == "12345"
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["config_type"] == "LONG"
    assert "adm" in admin.list_topics()
    admin.delete_topics(["adm"])
    deadline = time.time() + 10
    while "adm" in admin.list_topics() and time.time() < deadline:
        time.sleep(0.1)
    assert "adm" not in admin.list_topics()
    admin.close()


def test_records_survive_restart_and_kill_9(tern):
    create(tern.bootstrap, "kp-restart").close()
    acked = produce(tern.bootstrap, "kp-restart", 20_000, codec="lz4")
    tern.restart()
    check(consume_all(tern.bootstrap, "kp-restart", 20_000), acked, 20_000)
    tern.kill9()
    tern.start()
    check(consume_all(tern.bootstrap, "kp-restart", 20_000), acked, 20_000)
