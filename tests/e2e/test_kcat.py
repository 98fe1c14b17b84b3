"""kcat (Debian's, on librdkafka 2.0.2: older protocol versions than confluent-kafka's librdkafka,
e.g. ListOffsets v2, Metadata v4) against a real tern: keyed lines with headers in and exactly
back out, every codec, metadata listing, offsets by timestamp.

.ci/run installs kcat; where it is missing outside CI these tests are skipped."""

import json
import os
import shutil
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

KCAT = shutil.which("kcat") or shutil.which("kafkacat")

pytestmark = pytest.mark.skipif(
    KCAT is None and not os.environ.get("CI"),
    reason="kcat is not installed (apt-get install kcat; .ci/run does)",
)

# %p partition, %o offset, %k/%s key/value, %K/%S their lengths (-1 for null), %h headers
FMT = "%p|%o|%k|%s|%K|%S|%h\\n"


def kcat(broker, *args, input=None, timeout=60):
    p = subprocess.run(
        [KCAT or "kcat", "-b", broker.bootstrap, *args],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )
    return p


def ok(p):
    assert p.returncode == 0, f"kcat exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p.stdout


def create_topic(broker, name, partitions=1):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


LINES = ["k1:v1", "k2:hello world", "k3:", "k4:a:b:c", "k5:" + "x" * 5000]


def expected(partition, start=0):
    out = []
    for i, line in enumerate(LINES):
        k, v = line.split(":", 1)
        out.append(f"{partition}|{start + i}|{k}|{v}|{len(k)}|{len(v)}|h1=a,h2=b")
    return out


def produce_lines(broker, topic, partition, extra=()):
    ok(kcat(broker, "-P", "-t", topic, "-p", str(partition), "-K:", "-H", "h1=a", "-H", "h2=b", *extra,
            input="".join(l + "\n" for l in LINES)))


def test_produce_keyed_lines_with_headers_and_read_back_from_offset_0(tern_module):
    create_topic(tern_module, "kc", partitions=2)
    produce_lines(tern_module, "kc", 0)
    produce_lines(tern_module, "kc", 1)
    # -o 0 starts at an absolute offset: no ListOffsets needed
    out = ok(kcat(tern_module, "-C", "-t", "kc", "-p", "0", "-e", "-q", "-o", "0", "-f", FMT))
    assert out.splitlines() == expected(0)
    out = ok(kcat(tern_module, "-C", "-t", "kc", "-e", "-q", "-o", "0", "-f", FMT))
    got = out.splitlines()
    assert sorted(got) == sorted(expected(0) + expected(1))
    # each partition's records in offset order
    for part in (0, 1):
        assert [l for l in got if l.startswith(f"{part}|")] == expected(part)


def test_null_keys_and_values(tern_module):
    create_topic(tern_module, "nulls")
    # -Z: an empty key or value is sent as null
    ok(kcat(tern_module, "-P", "-t", "nulls", "-p", "0", "-K:", "-Z", input="a:\n:b\nc:d\n"))
    out = ok(kcat(tern_module, "-C", "-t", "nulls", "-e", "-q", "-o", "0", "-f", "%o|%K|%S|%k|%s\\n"))
    assert out.splitlines() == ["0|1|-1|a|", "1|-1|1||b", "2|1|1|c|d"]


def test_read_back_from_beginning(tern_module):
    create_topic(tern_module, "beg")
    produce_lines(tern_module, "beg", 0)
    p = kcat(tern_module, "-C", "-t", "beg", "-e", "-q", "-o", "beginning", "-f", FMT, timeout=30)
    assert p.stdout.splitlines() == expected(0), p.stderr
    assert p.returncode == 0
    # the last two records: -o -2 is relative to the end
    p = kcat(tern_module, "-C", "-t", "beg", "-p", "0", "-e", "-q", "-o", "-2", "-f", FMT, timeout=30)
    assert p.stdout.splitlines() == expected(0)[-2:], p.stderr


def test_query_offsets_by_timestamp(tern_module):
    create_topic(tern_module, "times")
    p = Producer({"bootstrap.servers": tern_module.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(5):
        p.produce("times", value=b"x", partition=0, timestamp=base + 1000 * i)
    assert p.flush(30) == 0
    # -Q -t topic:partition:timestamp: the first offset at or after that time
    out = ok(kcat(tern_module, "-Q", "-t", f"times:0:{base + 2500}", timeout=30))
    assert "times [0] offset 3" in out, out


def test_compressed_batches(tern_module):
    # one tern for all codecs: a broker start costs more than the four runs
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = f"z-{codec}"
        create_topic(tern_module, topic)
        lines = [f"key{i}:value {i} " + "abc" * (i % 50) for i in range(500)]
        ok(kcat(tern_module, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec, "-X", "linger.ms=50",
                input="".join(l + "\n" for l in lines)))
        out = ok(kcat(tern_module, "-C", "-t", topic, "-e", "-q", "-o", "0", "-f", "%o %k:%s\\n"))
        assert out.splitlines() == [f"{i} {l}" for i, l in enumerate(lines)], codec


def test_idempotent_producer_and_acks(tern_module):
    create_topic(tern_module, "acks")
    # librdkafka 2.0.2's idempotent producer: InitProducerId, then sequenced batches
    ok(kcat(tern_module, "-P", "-t", "acks", "-p", "0", "-X", "enable.idempotence=true", "-z", "lz4",
            input="a\nb\nc\n"))
    for acks in ("0", "1", "all"):
        ok(kcat(tern_module, "-P", "-t", "acks", "-p", "0", "-X", f"acks={acks}", input=f"acks={acks}\n"))
    out = ok(kcat(tern_module, "-C", "-t", "acks", "-e", "-q", "-o", "0", "-f", "%o %s\\n"))
    lines = out.splitlines()
    assert lines[:3] == ["0 a", "1 b", "2 c"]
    # acks=0 gets no answer: its record may land after the next process's
    assert sorted(l.split(" ", 1)[1] for l in lines[3:]) == ["acks=0", "acks=1", "acks=all"]
    assert [l.split(" ", 1)[0] for l in lines[3:]] == ["3", "4", "5"]


def test_metadata_listing(tern_module):
    create_topic(tern_module, "meta-a", partitions=3)
    create_topic(tern_module, "meta-b", partitions=1)
    port = tern_module.port

    out = ok(kcat(tern_module, "-L", "-t", "meta-a"))
    lines = [l.rstrip() for l in out.splitlines()]
    assert lines[0] == f"Metadata for meta-a (from broker 1: 127.0.0.1:{port}/1):"
    assert " 1 brokers:" in lines
    assert f"  broker 1 at 127.0.0.1:{port} (controller)" in lines
    assert '  topic "meta-a" with 3 partitions:' in lines
    for i in range(3):
        assert f"    partition {i}, leader 1, replicas: 1, isrs: 1" in lines

    meta = json.loads(ok(kcat(tern_module, "-L", "-J")))
    assert meta["controllerid"] == 1
    assert meta["brokers"] == [{"id": 1, "name": f"127.0.0.1:{port}"}]
    topics = {t["topic"]: t for t in meta["topics"]}
    assert {"meta-a", "meta-b"} <= set(topics)  # the module's other tests have topics too
    for name, count in (("meta-a", 3), ("meta-b", 1)):
        t = topics[name]
        assert "error" not in t, t
        assert [p["partition"] for p in sorted(t["partitions"], key=lambda p: p["partition"])] == list(range(count))
        for p in t["partitions"]:
            assert p["leader"] == 1 and p["replicas"] == [{"id": 1}] and p["isrs"] == [{"id": 1}]

    # an unknown topic (auto-creation off): the error shows in the listing
    out = kcat(tern_module, "-L", "-J", "-t", "no-such-topic", "-X", "allow.auto.create.topics=false").stdout
    t = json.loads(out)["topics"]
    assert [(x["topic"], x.get("error"), x["partitions"]) for x in t] == [
        ("no-such-topic", "Broker: Unknown topic or partition", [])
    ]
    # ... and was not created by the request
    names = {x["topic"] for x in json.loads(ok(kcat(tern_module, "-L", "-J")))["topics"]}
    assert "no-such-topic" not in names
