"""Apache Kafka's own command-line tools (kafka-tools 4.4.0 from Maven Central, run as
`java -cp` through kafka_peer.KafkaJars) against a real tern: kafka-topics, kafka-configs, the
console producer and consumer, kafka-get-offsets, kafka-delete-records, kafka-consumer-groups and
the producer/consumer perf tools, with their output and exit codes checked as Apache Kafka's
broker would make them.

The expectations were checked against a real Apache Kafka 4.4 broker:

    TERN_E2E_PEER=kafka pytest tests/e2e/test_kafka_tools.py tests/e2e/test_kcat.py

passes everything except the strict xfails marked "tern bug", which pass there (XPASS).

Each JVM start costs about a second, so every test packs a whole scenario into few tool runs and
puts setup data in with confluent-kafka where the tool is not what is tested; the tests of a module
share one broker (tern_module) and keep to their own topics."""

import json
import re
import socket
import struct
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_peer import KafkaJars


@pytest.fixture(scope="session")
def kafka():
    return KafkaJars().ensure()


class Tools:
    """The tools pointed at one tern."""

    def __init__(self, dist, bootstrap):
        self.dist = dist
        self.bootstrap = bootstrap

    def __call__(self, tool, *args, input=None, timeout=90):
        return self.dist.run(tool, "--bootstrap-server", self.bootstrap, *args, input=input, timeout=timeout)

    def ok(self, tool, *args, input=None, timeout=90):
        p = self(tool, *args, input=input, timeout=timeout)
        assert p.returncode == 0, f"{tool} {args} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        return p.stdout


@pytest.fixture
def tools(kafka, tern_module):
    return Tools(kafka, tern_module.bootstrap)


def create_topic(bootstrap, name, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(timeout=30)


def produce(bootstrap, topic, records):
    """records: [(partition, key, value, timestamp_ms or None)]"""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    errors = []
    for part, key, value, ts in records:
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, key=key, value=value, partition=part,
                  on_delivery=lambda err, msg: err and errors.append(err), **kw)
    assert p.flush(30) == 0
    assert not errors, errors


def api_keys(bootstrap):
    """The API keys the broker advertises (ApiVersions v0, by hand: no client hides anything)."""
    host, port = bootstrap.rsplit(":", 1)
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
    _, err, n = struct.unpack(">ihi", buf[4:14])
    assert err == 0
    return {struct.unpack(">hhh", buf[14 + 6 * i:20 + 6 * i])[0] for i in range(n)}


def xfail_without_groups(request, bootstrap):
    """Consumer groups are being built: until the broker advertises FindCoordinator (10) and
    JoinGroup (11), a test that needs them is an expected failure, and it must fail."""
    if not {10, 11} <= api_keys(bootstrap):
        request.applymarker(pytest.mark.xfail(strict=True, reason="consumer groups not implemented yet"))


def describe_rows(out):
    """kafka-topics --describe output -> (topic line fields, [partition line fields])."""
    lines = [l for l in out.splitlines() if l.strip()]

    def fields(line):
        return dict(re.findall(r"(\w+): ?([^\t]*)", line.strip()))

    head = fields(lines[0])
    parts = [fields(l) for l in lines[1:]]
    return head, parts


def offsets(out):
    """kafka-get-offsets output (topic:partition:offset lines) -> {(topic, partition): offset}."""
    res = {}
    for line in out.splitlines():
        m = re.fullmatch(r"(.+):(\d+):(-?\d*)", line.strip())
        assert m, f"not topic:partition:offset: {line!r}"
        res[(m.group(1), int(m.group(2)))] = int(m.group(3)) if m.group(3) else None
    return res


# -- kafka-topics ---------------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(tools):
    out = tools.ok("kafka-topics", "--create", "--topic", "orders", "--partitions", "3",
                   "--replication-factor", "1", "--config", "retention.ms=3600000",
                   "--config", "max.message.bytes=20000")
    assert out.strip() == "Created topic orders."

    tools.ok("kafka-topics", "--create", "--topic", "other", "--partitions", "1")
    listed = tools.ok("kafka-topics", "--list", "--exclude-internal").split()
    assert listed == sorted(listed) and {"orders", "other"} <= set(listed)
    assert not [t for t in listed if t.startswith("__")]

    head, parts = describe_rows(tools.ok("kafka-topics", "--describe", "--topic", "orders"))
    assert head["Topic"] == "orders"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head["TopicId"]), head
    assert head["TopicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    assert head["PartitionCount"] == "3"
    assert head["ReplicationFactor"] == "1"
    # the topic's own configs (Kafka 4.4 with eligible leader replicas also shows the cluster's
    # min.insync.replicas here)
    assert {"max.message.bytes=20000", "retention.ms=3600000"} <= set(head["Configs"].split(","))
    assert [p["Partition"] for p in parts] == ["0", "1", "2"]
    for p in parts:
        assert (p["Topic"], p["Leader"], p["Replicas"], p["Isr"]) == ("orders", "1", "1", "1"), p

    assert tools.ok("kafka-topics", "--alter", "--topic", "orders", "--partitions", "5").strip() == ""
    # --describe without --topic describes every topic; --topic takes a regular expression.
    out = tools.ok("kafka-topics", "--describe", "--topic", "ord.*")
    head, parts = describe_rows(out)
    assert head["PartitionCount"] == "5"
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in parts] == [
        (str(i), "1", "1", "1") for i in range(5)
    ]

    assert tools.ok("kafka-topics", "--delete", "--topic", "orders").strip() == ""
    listed = tools.ok("kafka-topics", "--list", "--exclude-internal").split()
    assert "other" in listed and "orders" not in listed


def test_topics_errors(tools):
    tools.ok("kafka-topics", "--create", "--topic", "dup", "--partitions", "3")

    p = tools("kafka-topics", "--create", "--topic", "dup", "--partitions", "3")
    assert p.returncode == 1
    assert "Error while executing topic command : Topic 'dup' already exists." in p.stdout

    # --if-not-exists turns that into a success that creates nothing
    p = tools("kafka-topics", "--create", "--if-not-exists", "--topic", "dup", "--partitions", "1")
    assert p.returncode == 0 and "Created" not in p.stdout, p

    p = tools("kafka-topics", "--create", "--topic", "bad/name")
    assert p.returncode == 1
    # the wording differs between Kafka versions; the error is INVALID_TOPIC_EXCEPTION
    assert "InvalidTopicException" in p.stderr and "bad/name" in p.stdout, p

    p = tools("kafka-topics", "--describe", "--topic", "missing")
    assert p.returncode == 1
    assert "Topic 'missing' does not exist as expected" in p.stdout

    p = tools("kafka-topics", "--alter", "--topic", "dup", "--partitions", "2")
    assert p.returncode == 1
    assert "InvalidPartitionsException" in p.stderr
    # Kafka 4.4: "The topic dup currently has 3 partition(s); 2 would not be an increase."
    assert "3 partition" in p.stdout and "2" in p.stdout, p.stdout

    p = tools("kafka-topics", "--create", "--topic", "rf3", "--replication-factor", "3")
    assert p.returncode == 1
    assert "InvalidReplicationFactorException" in p.stderr
    assert "Unable to replicate the partition 3 time(s)" in p.stdout

    listed = tools.ok("kafka-topics", "--list", "--exclude-internal").split()
    assert "dup" in listed and "rf3" not in listed and "bad/name" not in listed


def test_topics_create_colliding_name(tools, tern_module):
    create_topic(tern_module.bootstrap, "coll.ide")
    p = tools("kafka-topics", "--create", "--topic", "coll_ide")
    # Kafka's tool warns about '.' and '_' before asking; the broker refuses
    assert "collides with existing topic: coll.ide" in p.stdout, p.stdout
    assert p.returncode == 1
    md = AdminClient({"bootstrap.servers": tern_module.bootstrap}).list_topics(timeout=10)
    assert "coll_ide" not in md.topics


# -- kafka-configs --------------------------------------------------------------------------------


def test_configs_describe_alter_delete(tools):
    tools.ok("kafka-topics", "--create", "--topic", "conf", "--partitions", "1")
    base = ("kafka-configs", "--entity-type", "topics", "--entity-name", "conf")

    assert tools.ok(*base, "--describe").strip() == "Dynamic configs for topic conf are:"

    out = tools.ok(*base, "--alter", "--add-config", "retention.ms=12345,cleanup.policy=[compact,delete]")
    assert out.strip() == "Completed updating config for topic conf."

    out = tools.ok(*base, "--describe")
    lines = out.strip().splitlines()
    assert lines[0] == "Dynamic configs for topic conf are:"
    got = {l.split("=", 1)[0].strip(): l.strip() for l in lines[1:]}
    assert set(got) == {"cleanup.policy", "retention.ms"}
    assert got["retention.ms"].startswith(
        "retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345"
    )
    assert got["cleanup.policy"].startswith(
        "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete"
    )

    out = tools.ok(*base, "--alter", "--delete-config", "retention.ms")
    assert out.strip() == "Completed updating config for topic conf."
    out = tools.ok(*base, "--describe", "--all")
    lines = out.strip().splitlines()
    assert lines[0] == "All configs for topic conf are:"
    all_cfg = {l.strip().split("=", 1)[0]: l.strip() for l in lines[1:]}
    # back to the default (its synonyms: test_configs_describe_all_like_kafka)
    assert all_cfg["retention.ms"].startswith("retention.ms=604800000 sensitive=false synonyms=")
    assert all_cfg["cleanup.policy"].startswith("cleanup.policy=compact,delete sensitive=false")
    for name in ("segment.bytes", "min.insync.replicas", "max.message.bytes", "compression.type"):
        assert name in all_cfg, name

    # refused alterations: a value of the wrong type, a name that is no topic config
    p = tools(*base, "--alter", "--add-config", "retention.ms=abc")
    assert p.returncode == 1
    assert "InvalidConfigurationException: Invalid value abc for configuration retention.ms" in p.stdout + p.stderr
    p = tools(*base, "--alter", "--add-config", "no.such.config=1")
    assert p.returncode == 1
    assert "InvalidConfigurationException: Unknown topic config name: no.such.config" in p.stdout + p.stderr

    # an unknown topic: the tool says so (UNKNOWN_TOPIC_OR_PARTITION from DescribeConfigs)
    p = tools("kafka-configs", "--entity-type", "topics", "--entity-name", "missing", "--describe")
    assert "The topic 'missing' doesn't exist and doesn't have dynamic config." in p.stdout


# Every topic config that Apache Kafka 4.4's DescribeConfigs lists for a topic.
KAFKA_4_4_TOPIC_CONFIGS = """
cleanup.policy compression.gzip.level compression.lz4.level compression.type compression.zstd.level
delete.retention.ms errors.deadletterqueue.group.enable file.delete.delay.ms flush.messages flush.ms
follower.replication.throttled.replicas index.interval.bytes leader.replication.throttled.replicas
local.retention.bytes local.retention.ms max.compaction.lag.ms max.decompressed.message.bytes
max.message.bytes message.timestamp.after.max.ms message.timestamp.before.max.ms
message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms min.insync.replicas
preallocate remote.copy.lag.bytes remote.copy.lag.ms remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms segment.bytes
segment.index.bytes segment.jitter.ms segment.ms unclean.leader.election.enable
""".split()


# Kafka 4.4's topic configs that tern leaves out, as the README says (tiered storage, Kafka
# Streams' dead-letter queues, Kafka's decompression bound).
NOT_LISTED_BY_TERN = """
errors.deadletterqueue.group.enable local.retention.bytes local.retention.ms
max.decompressed.message.bytes remote.copy.lag.bytes remote.copy.lag.ms remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable
""".split()


def test_configs_describe_all_like_kafka(tools, tern_module):
    create_topic(tern_module.bootstrap, "conf-all")
    out = tools.ok("kafka-configs", "--entity-type", "topics", "--entity-name", "conf-all", "--describe", "--all")
    lines = out.strip().splitlines()
    assert lines[0] == "All configs for topic conf-all are:"
    got = {l.strip().split("=", 1)[0]: l.strip() for l in lines[1:]}
    assert sorted(set(KAFKA_4_4_TOPIC_CONFIGS) - set(got)) == sorted(NOT_LISTED_BY_TERN)
    # Kafka's broker synonyms of these (log.retention.ms, log.roll.ms, ...) have no default of their
    # own (the default lives in log.retention.hours, ...), so the default value has no synonym
    for name, value in (("retention.ms", "604800000"), ("segment.ms", "604800000"),
                        ("segment.jitter.ms", "0"), ("flush.ms", "9223372036854775807")):
        assert got[name] == f"{name}={value} sensitive=false synonyms={{}}", got[name]
    assert got["segment.bytes"] == (
        "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"
    )


def test_configs_describe_all_of_a_broker(tools, tern_module):
    """kafka-configs --describe --all on a broker: the settings tern reads, each with its source
    chain, as Kafka prints them; secrets (none set here) would show as null."""
    out = tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    lines = out.strip().splitlines()
    assert lines[0] == "All configs for broker 1 are:"
    got = {l.strip().split("=", 1)[0]: l.strip() for l in lines[1:]}
    assert got["num.partitions"] == "num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}"
    assert got["log.retention.hours"] == (
        "log.retention.hours=168 sensitive=false synonyms={DEFAULT_CONFIG:log.retention.hours=168}")
    assert got["listeners"].startswith(
        f"listeners=PLAINTEXT://127.0.0.1:{tern_module.port} sensitive=false synonyms={{STATIC_BROKER_CONFIG:")
    assert got["ssl.keystore.key"] == "ssl.keystore.key=null sensitive=true synonyms={}"
    assert len(got) > 80, len(got)
    # Only the dynamic ones without --all: tern has none.
    out = tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert out.strip() == "Dynamic configs for broker 1 are:"

    # Dynamic: a cluster-wide default, then this broker's own value over it, then both removed.
    tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-default", "--alter",
             "--add-config", "log.retention.ms=7200000")
    out = tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-default", "--describe")
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}" in out, out
    tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
             "--add-config", "log.retention.ms=3600000")
    out = tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert ("log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}") in out, out
    create_topic(tern_module.bootstrap, "dyn-retention")
    out = tools.ok("kafka-configs", "--entity-type", "topics", "--entity-name", "dyn-retention", "--describe", "--all")
    assert "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000" in out, out
    # Read-only, as in Kafka.
    p = tools("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
              "--add-config", "num.partitions=3")
    assert p.returncode != 0 and "Cannot update these configs dynamically: [num.partitions]" in p.stdout + p.stderr
    tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
             "--delete-config", "log.retention.ms")
    tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-default", "--alter",
             "--delete-config", "log.retention.ms")
    out = tools.ok("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert out.strip() == "Dynamic configs for broker 1 are:"


# -- console producer and consumer ----------------------------------------------------------------

CONSOLE_LINES = [
    # headers \t key \t value, as LineMessageReader reads them with parse.headers and parse.key
    ("h1:a,h2:b", "k1", "v1"),
    ("h3:", "k2", "hello world"),
    ("h4:x", "k3", "{\"json\": [1, 2]}"),
]

FORMATTER = [
    "--formatter-property", "print.key=true",
    "--formatter-property", "print.offset=true",
    "--formatter-property", "print.partition=true",
    "--formatter-property", "print.headers=true",
]


def test_console_producer_and_consumer(tools):
    tools.ok("kafka-topics", "--create", "--topic", "lines", "--partitions", "1")
    stdin = "".join(f"{h}\t{k}\t{v}\n" for h, k, v in CONSOLE_LINES)
    p = tools("kafka-console-producer", "--topic", "lines",
              "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
              "--command-property", "acks=all", "--command-property", "linger.ms=0", input=stdin)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() in ("", ">" * len(p.stdout.strip())), p.stdout  # prompts only
    assert p.stderr.strip() == "", p.stderr

    p = tools("kafka-console-consumer", "--topic", "lines", "--partition", "0", "--offset", "earliest",
              "--max-messages", str(len(CONSOLE_LINES)), *FORMATTER)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        f"Partition:0\tOffset:{i}\t{h}\t{k}\t{v}" for i, (h, k, v) in enumerate(CONSOLE_LINES)
    ]
    assert f"Processed a total of {len(CONSOLE_LINES)} messages" in p.stderr


def test_console_consumer_offsets_and_max_messages(tools, tern_module):
    create_topic(tern_module.bootstrap, "seq")
    produce(tern_module.bootstrap, "seq", [(0, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(10)])
    p = tools("kafka-console-consumer", "--topic", "seq", "--partition", "0", "--offset", "7",
              "--max-messages", "2", "--formatter-property", "print.key=true",
              "--formatter-property", "print.offset=true", "--formatter-property", "key.separator=|")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["Offset:7|k7|v7", "Offset:8|k8|v8"]
    assert "Processed a total of 2 messages" in p.stderr


def test_console_consumer_with_group(tools, tern_module, request):
    xfail_without_groups(request, tern_module.bootstrap)
    create_topic(tern_module.bootstrap, "grouped")
    produce(tern_module.bootstrap, "grouped", [(0, b"k", f"v{i}".encode(), None) for i in range(3)])
    p = tools("kafka-console-consumer", "--topic", "grouped", "--group", "console-group",
              "--from-beginning", "--max-messages", "3", "--timeout-ms", "15000", timeout=60)
    assert p.stdout.splitlines() == ["v0", "v1", "v2"], p.stderr
    assert p.returncode == 0


# -- kafka-get-offsets and kafka-delete-records ---------------------------------------------------

BASE_TS = 1_700_000_000_000


def test_get_offsets(tools, tern_module):
    create_topic(tern_module.bootstrap, "offs", partitions=3)
    create_topic(tern_module.bootstrap, "empty", partitions=1)
    # partition 0: 5 records at BASE_TS + 0, 10, ..., 40; partition 1: 2 records; partition 2: none
    produce(tern_module.bootstrap, "offs",
            [(0, None, b"x", BASE_TS + 10 * i) for i in range(5)] + [(1, None, b"y", BASE_TS) for _ in range(2)])

    latest = offsets(tools.ok("kafka-get-offsets", "--topic", "offs"))
    assert latest == {("offs", 0): 5, ("offs", 1): 2, ("offs", 2): 0}

    earliest = offsets(tools.ok("kafka-get-offsets", "--topic", "offs", "--time", "earliest"))
    assert earliest == {("offs", 0): 0, ("offs", 1): 0, ("offs", 2): 0}

    # a timestamp: the first offset whose timestamp is at or after it (none after the last one)
    by_ts = offsets(tools.ok("kafka-get-offsets", "--topic-partitions", "offs:0", "--time", str(BASE_TS + 15)))
    assert by_ts == {("offs", 0): 2}
    by_ts = offsets(tools.ok("kafka-get-offsets", "--topic-partitions", "offs:0-1", "--time", str(BASE_TS + 41)))
    assert by_ts == {}  # the tool leaves out partitions answered with offset -1

    # -3: the offset of the record with the largest timestamp (ListOffsets v7)
    max_ts = offsets(tools.ok("kafka-get-offsets", "--topic-partitions", "offs:0", "--time", "-3"))
    assert max_ts == {("offs", 0): 4}

    # --topic is a regular expression over every topic
    assert offsets(tools.ok("kafka-get-offsets", "--topic", "offs|empty")) == {**latest, ("empty", 0): 0}

    p = tools("kafka-get-offsets", "--topic", "missing")
    assert p.returncode == 1
    assert "Could not match any topic-partitions with the specified filters" in p.stderr + p.stdout


def test_delete_records(tools, tern_module, tmp_path):
    create_topic(tern_module.bootstrap, "trim", partitions=2)
    produce(tern_module.bootstrap, "trim",
            [(0, None, f"a{i}".encode(), None) for i in range(6)] + [(1, None, f"b{i}".encode(), None) for i in range(3)])

    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "trim", "partition": 0, "offset": 4},
        {"topic": "trim", "partition": 1, "offset": -1},  # -1: up to the high watermark
    ]}))
    out = tools.ok("kafka-delete-records", "--offset-json-file", str(spec))
    assert "Records delete operation completed:" in out
    assert "partition: trim-0\tlow_watermark: 4" in out
    assert "partition: trim-1\tlow_watermark: 3" in out

    assert offsets(tools.ok("kafka-get-offsets", "--topic", "trim", "--time", "-2")) == {
        ("trim", 0): 4, ("trim", 1): 3,
    }
    assert offsets(tools.ok("kafka-get-offsets", "--topic", "trim", "--time", "-1")) == {
        ("trim", 0): 6, ("trim", 1): 3,
    }

    # reading from the earliest offset starts at the new log start
    p = tools("kafka-console-consumer", "--topic", "trim", "--partition", "0", "--offset", "earliest",
              "--max-messages", "2", "--formatter-property", "print.offset=true")
    assert p.stdout.splitlines() == ["Offset:4\ta4", "Offset:5\ta5"], p.stderr

    # beyond the high watermark: OFFSET_OUT_OF_RANGE for that partition; the tool still exits 0
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "trim", "partition": 0, "offset": 100}]}))
    out = tools.ok("kafka-delete-records", "--offset-json-file", str(spec))
    assert "partition: trim-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in out
    assert offsets(tools.ok("kafka-get-offsets", "--topic", "trim", "--time", "-2"))[("trim", 0)] == 4


# -- the Java producer and consumer through the perf tools ----------------------------------------


def test_producer_and_consumer_perf(tools, tern_module, request):
    # ProducerPerformance: the Java producer's defaults (idempotent, acks=all), lz4 batches
    create_topic(tern_module.bootstrap, "perf", partitions=2)
    p = tools("kafka-producer-perf-test", "--topic", "perf", "--num-records", "20000",
              "--record-size", "100", "--throughput", "-1",
              "--command-property", "compression.type=lz4", "linger.ms=5")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^20000 records sent, ", p.stdout, re.M), p.stdout
    latest = offsets(tools.ok("kafka-get-offsets", "--topic", "perf"))
    assert set(latest) == {("perf", 0), ("perf", 1)} and sum(latest.values()) == 20000

    # ConsumerPerformance subscribes with a group
    xfail_without_groups(request, tern_module.bootstrap)
    p = tools("kafka-consumer-perf-test", "--topic", "perf", "--num-records", "20000", "--timeout", "30000")
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert stats["data.consumed.in.nMsg"] == "20000", p.stdout


# -- kafka-consumer-groups ------------------------------------------------------------------------


def group_rows(out):
    """The table rows of kafka-consumer-groups output -> [{column: value}]."""
    rows, header = [], None
    for line in out.splitlines():
        cols = line.split()
        if not cols:
            header = None
        elif cols[0] == "GROUP":
            header = cols
        elif header and len(cols) == len(header):
            rows.append(dict(zip(header, cols)))
    return rows


def test_consumer_groups_tool(tools, tern_module, request):
    xfail_without_groups(request, tern_module.bootstrap)
    create_topic(tern_module.bootstrap, "cgt", partitions=2)
    produce(tern_module.bootstrap, "cgt", [(i % 2, None, b"r", None) for i in range(20)])
    cg = ("kafka-consumer-groups", "--group", "tool-group")

    # offsets of a group that has no members (here: none yet) can be set from outside
    out = tools.ok(*cg, "--reset-offsets", "--to-offset", "3", "--topic", "cgt", "--execute")
    assert [(r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in group_rows(out)] == [
        ("cgt", "0", "3"), ("cgt", "1", "3"),
    ]
    out = tools.ok(*cg, "--reset-offsets", "--to-latest", "--topic", "cgt:1", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in group_rows(out)] == [("1", "10")]

    p = tools(*cg, "--describe", "--offsets")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Consumer group 'tool-group' has no active members." in p.stdout + p.stderr
    got = [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in group_rows(out)]
    assert got == [("cgt", "0", "3", "10", "7"), ("cgt", "1", "10", "10", "0")]

    assert "tool-group" in tools.ok("kafka-consumer-groups", "--list").split()

    out = tools.ok(*cg, "--delete")
    assert "Deletion of requested consumer groups ('tool-group') was successful." in out
    p = tools(*cg, "--describe")
    # DescribeGroups v0-v5 answer a Dead group, v6 (Kafka 4.x) GROUP_ID_NOT_FOUND
    assert ("Error: Consumer group 'tool-group' does not exist." in p.stdout + p.stderr
            or "GroupIdNotFoundException: Group tool-group not found." in p.stdout + p.stderr), p


# -- kafka-transactions ---------------------------------------------------------------------------


def tool_rows(out):
    """Tab-separated tool output -> [{column: value}], values stripped."""
    lines = [l for l in out.splitlines() if l.strip()]
    head = [c.strip() for c in lines[0].split("\t") if c.strip()]
    return [dict(zip(head, (c.strip() for c in l.split("\t")))) for l in lines[1:]]


def test_transactions_tool(tools, tern_module):
    """list, describe and describe-producers show an open transaction; abort (as an operator ends
    a hanging one) writes its abort marker, so read_committed sees none of its records."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = tern_module.bootstrap
    create_topic(bootstrap, "tx-tool")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-tool-app",
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx-tool", value=b"open-%d" % i, partition=0)
    assert p.flush(30) == 0

    listed = [r for r in tool_rows(tools.ok("kafka-transactions", "list"))
              if r["TransactionalId"] == "tx-tool-app"]
    assert len(listed) == 1 and listed[0]["TransactionState"] == "Ongoing", listed
    pid = listed[0]["ProducerId"]
    [desc] = tool_rows(tools.ok("kafka-transactions", "describe", "--transactional-id", "tx-tool-app"))
    assert desc["TransactionState"] == "Ongoing"
    assert desc["ProducerId"] == pid and desc["TransactionTimeoutMs"] == "60000"
    assert desc["TopicPartitions"] == "tx-tool-0"
    [prod] = tool_rows(tools.ok("kafka-transactions", "describe-producers", "--topic", "tx-tool",
                                "--partition", "0"))
    assert prod["ProducerId"] == pid and prod["LastSequence"] == "4"
    assert prod["CurrentTransactionStartOffset"] == "0"

    tools.ok("kafka-transactions", "abort", "--topic", "tx-tool", "--partition", "0",
             "--start-offset", "0")
    [prod] = tool_rows(tools.ok("kafka-transactions", "describe-producers", "--topic", "tx-tool",
                                "--partition", "0"))
    assert prod["CurrentTransactionStartOffset"] in ("None", "-1")

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tx-tool-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition("tx-tool", 0), timeout=10, cached=False)
        assert (lo, hi) == (0, 6)  # five records and the abort marker
        c.assign([TopicPartition("tx-tool", 0, 0)])
        seen = []
        deadline = time.time() + 10
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
            if c.position([TopicPartition("tx-tool", 0)])[0].offset == 6:
                break
        assert seen == []
        assert c.position([TopicPartition("tx-tool", 0)])[0].offset == 6
    finally:
        c.close()
