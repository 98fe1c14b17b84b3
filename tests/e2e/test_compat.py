"""Java clients against tern and against a real Apache Kafka, same scenario, same observations.

tests/harness/compat/CompatScenario.java (compiled here with javac against each kafka-clients version, cached by
source hash in $TERN_CACHE/compat) creates a 3-partition topic (and provokes TopicExists,
InvalidPartitions, InvalidReplicationFactor, UnknownTopicOrPartition), produces 1000 keyed records
with acks=all, consumes them in a group, commits, and reads the committed offsets back through the
consumer and the admin client, then deletes the group twice.  It prints one line per observation;
the test runs it against tern and against Apache Kafka 4.4.0 (tests/harness/kafka_peer.py) and
requires the same lines.

test_mirrormaker2_from_kafka_into_tern: MirrorMaker 2 copies a topic of that Kafka into tern.

Client versions: TERN_COMPAT_CLIENTS (default "2.1.1 2.8.2 3.9.1 4.4.0"; about 2 min in all on 2 busy cores).  Needs mvn and javac; skipped with
the reason when either is missing or Maven Central cannot be reached.
"""

import difflib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import kafka_peer
from processes import free_port
from tern_process import Tern

HERE = Path(__file__).resolve().parent

SOURCE = HERE.parent / "harness" / "compat" / "CompatScenario.java"
CLIENTS = os.environ.get("TERN_COMPAT_CLIENTS", "2.1.1 2.8.2 3.9.1 4.4.0").split()
PEER_VERSION = os.environ.get("TERN_COMPAT_PEER", "4.4.0")


def _require_tools():
    for tool in ("mvn", "javac", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: the Java compatibility tests need Maven and a JDK")


def _jars(version, clients_only):
    try:
        return kafka_peer.KafkaJars(version, clients_only=clients_only).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {version} from Maven: {str(e).splitlines()[0]}")


@pytest.fixture(scope="module")
def brokers():
    _require_tools()
    _jars(PEER_VERSION, clients_only=False)
    with tempfile.TemporaryDirectory(prefix="compat-") as d:
        os.makedirs(os.path.join(d, "tern"))
        tern = Tern(os.path.join(d, "tern"), free_port())
        kafka = kafka_peer.KafkaPeer(PEER_VERSION, os.path.join(d, "kafka"), jvm_opts=["-Xmx512m"])
        try:
            tern.start()
            kafka.start()
            yield {"tern": tern, "kafka": kafka}
        finally:
            tern.stop()
            kafka.stop()


def _compiled(version, source=SOURCE):
    jars = _jars(version, clients_only=True)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    out = kafka_peer.cache_root() / "compat" / f"{source.stem}-{version}-{digest}"
    if not (out / f"{source.stem}.class").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".compat-", dir=out.parent))
        proc = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", jars.classpath(), str(source)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"javac against kafka-clients {version} failed:\n{proc.stderr}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return f"{out}:{jars.classpath()}"


def _scenario(classpath, bootstrap, topic, main="CompatScenario"):
    proc = subprocess.run(["java", "-Xmx256m", "-cp", classpath, main, bootstrap, topic],
                          capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{main} on {bootstrap} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc.stdout.splitlines()


@pytest.mark.parametrize("client", CLIENTS)
def test_same_observations_as_kafka(brokers, client):
    classpath = _compiled(client)
    topic = "compat-" + client.replace(".", "-")
    seen = {name: _scenario(classpath, b.bootstrap, topic) for name, b in brokers.items()}
    kafka, tern = seen["kafka"], seen["tern"]
    # The scenario itself, as Apache Kafka answers it.
    assert "create OK" in kafka and "consumed 1000" in kafka, "\n".join(kafka)
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"kafka-clients {client}: tern differs from Apache Kafka:\n{diff}"
    committed = sum(int(l.rsplit(" ", 1)[1]) for l in tern if l.startswith("admin committed partition"))
    assert committed == 1000


def test_share_group_admin_same_as_kafka(brokers):
    """Share groups' admin half (KIP-932) through kafka-clients 4.4's Admin
    (tests/harness/compat/ShareGroupScenario.java): an offset reset creating the group, start
    offsets and lags read back (all, or named partitions, one without a start offset), a second
    alter, unknown topics and partitions, a classic group of the same namespace refused both
    ways, offsets of a topic deleted, the group deleted; tern prints what Kafka 4.4 prints."""
    source = HERE.parent / "harness" / "compat" / "ShareGroupScenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = {name: _scenario(classpath, b.bootstrap, "share-admin", main=source.stem)
            for name, b in brokers.items()}
    kafka, tern = seen["kafka"], seen["tern"]
    # The scenario itself, as Apache Kafka answers it.
    assert "alter new group: OK" in kafka and "delete group: OK" in kafka, "\n".join(kafka)
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"tern differs from Apache Kafka:\n{diff}"
    assert "all offsets: {share-admin-0=3 lag=7, share-admin-1=0 lag=4}" in tern


def test_share_consumers_same_as_kafka(brokers):
    """Share consumers (KIP-932) through kafka-clients 4.4's KafkaShareConsumer
    (tests/harness/compat/ShareConsumerScenario.java): two consumers read a topic as a queue,
    accepting, releasing and rejecting records; every accepted record comes exactly once,
    released ones once more with delivery count 2, rejected ones never; a consumer closing
    without acknowledging gives its records to the next; the start offsets end at the log
    end. tern prints what Kafka 4.4 prints."""
    source = HERE.parent / "harness" / "compat" / "ShareConsumerScenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = {name: _scenario(classpath, b.bootstrap, "share-queue", main=source.stem)
            for name, b in brokers.items()}
    # Kafka 4.4's start offsets stay at the first record settled out of order (it reports its
    # last persisted snapshot's); the README names this difference. Lags are compared.
    kafka, tern = ([l for l in seen[n] if not l.startswith("info ")] for n in ("kafka", "tern"))
    assert "phase1 accepted distinct=81 accepted twice=0" in kafka, "\n".join(kafka)
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"tern differs from Apache Kafka:\n{diff}"
    assert "phase2 lags: {share-queue-0=0, share-queue-1=0, share-queue-2=0}" in tern
    assert "info phase2 start offsets: {share-queue-0=40, share-queue-1=30, share-queue-2=30}" in seen["tern"]


def test_share_consumer_v2_same_as_kafka(brokers):
    """ShareFetch and ShareAcknowledge v2 through kafka-clients 4.4
    (tests/harness/compat/ShareV2Scenario.java): a share consumer in record-limit mode takes
    exactly max.poll.records records out of one batch, renews one record's lock, releases one
    and accepts the rest; tern prints what Kafka 4.4 prints."""
    source = HERE.parent / "harness" / "compat" / "ShareV2Scenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = {name: _scenario(classpath, b.bootstrap, "share-v2", main=source.stem)
            for name, b in brokers.items()}
    # As in test_share_consumers_same_as_kafka, Kafka's start offset is its last snapshot's.
    kafka, tern = ([l for l in seen[n] if not l.startswith("info ")] for n in ("kafka", "tern"))
    assert "poll 1: [0:1, 1:1, 2:1] commit [share-v2-0=OK]" in kafka, "\n".join(kafka)
    assert "accepted [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in kafka, "\n".join(kafka)
    assert "info start offset 10" in seen["tern"]
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"tern differs from Apache Kafka:\n{diff}"


def test_transactions_same_as_kafka(brokers):
    """Transactions through kafka-clients 4.4 (tests/harness/compat/TransactionScenario.java),
    which speaks transaction version 2 (KIP-890 part 2) to a broker that has it in force: no
    AddPartitionsToTxn or AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5+ add them), EndTxn
    v5 handing back the next epoch. A commit with offsets, an abort, a commit, a zombie fenced
    by its successor: the same offsets, states, epochs, errors, records and producer state as
    Kafka 4.4."""
    source = HERE.parent / "harness" / "compat" / "TransactionScenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = {name: _scenario(classpath, b.bootstrap, "txn-v2", main=source.stem)
            for name, b in brokers.items()}
    kafka, tern = seen["kafka"], seen["tern"]
    # Version 2 itself, as Kafka 4.4 shows it: every commit or abort bumps the epoch.
    assert "after commit 1: CompleteCommit epoch 1 partitions 0" in kafka, "\n".join(kafka)
    assert "after abort 2: CompleteAbort epoch 2 partitions 0" in kafka, "\n".join(kafka)
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"tern differs from Apache Kafka:\n{diff}"


def test_group_migration_same_as_kafka(brokers):
    """A consumer group changing protocol with members in it (KIP-848's online migration)
    through kafka-clients 4.4 (tests/harness/compat/MigrationScenario.java): a classic member's
    group becomes a consumer group when a consumer-protocol member joins, the two split the
    partitions, the group turns classic again when that member leaves, and the classic member
    takes everything back. The same sizes, group types, states, assignors and members as Kafka
    4.4, every record read once, the same committed offsets."""
    source = HERE.parent / "harness" / "compat" / "MigrationScenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = {name: _scenario(classpath, b.bootstrap, "migration", main=source.stem)
            for name, b in brokers.items()}
    kafka, tern = seen["kafka"], seen["tern"]
    # The migration itself, as Kafka 4.4 shows it.
    assert any(l.startswith("mixed: type Consumer state Stable") for l in kafka), "\n".join(kafka)
    assert any(l.startswith("downgraded: type Classic state Stable") for l in kafka), "\n".join(kafka)
    assert "records read 500, more than once 0" in kafka, "\n".join(kafka)
    diff = "\n".join(difflib.unified_diff(kafka, tern, f"Apache Kafka {PEER_VERSION}", "tern", lineterm=""))
    assert tern == kafka, f"tern differs from Apache Kafka:\n{diff}"


def test_mirrormaker2_from_kafka_into_tern(brokers, tmp_path):
    """MirrorMaker 2 (connect-mirror, kafka_peer.MIRROR_VERSION) copies a topic of the real Kafka
    into tern as `source.<topic>`, every record in order, with its Connect state topics on tern."""
    from confluent_kafka import Consumer, Producer

    try:
        kafka_peer.KafkaJars(kafka_peer.MIRROR_VERSION, mirror=True).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve connect-mirror {kafka_peer.MIRROR_VERSION}: {str(e).splitlines()[0]}")
    kafka, tern = brokers["kafka"], brokers["tern"]
    topic = "mirrored-orders"
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(200):
        p.produce(topic, key=f"k{i % 7}", value=f"v{i}")
    assert p.flush(30) == 0
    mm = kafka_peer.MirrorMaker2(kafka.bootstrap, tern.bootstrap, tmp_path / "mm2", topics=topic).start()
    try:
        c = Consumer({"bootstrap.servers": tern.bootstrap, "group.id": "mm2-check",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([f"source.{topic}"])
        got = []
        deadline = time.time() + 120
        while len(got) < 200 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.key().decode(), m.value().decode()))
        c.close()
        assert got == [(f"k{i % 7}", f"v{i}") for i in range(200)], f"mirrored {len(got)} of 200:\n{mm.tail()}"
    finally:
        mm.stop()


# Broker settings whose default Tern deliberately differs from Kafka's (the README lists them).
TERN_BROKER_DEFAULTS = {
    "listeners": "one command starts a broker on 127.0.0.1:9092, not on every interface",
    "log.dir": "data lives in ./data, not /tmp/kafka-logs",
    "node.id": "a single node needs no configuration (Kafka requires it)",
    "process.roles": "a single node is broker and controller (Kafka requires it)",
    "controller.listener.names": "CONTROLLER without configuration (Kafka requires it)",
    "max.connections": "10,000 connections by default, not unlimited",
    "sasl.enabled.mechanisms": "Kafka's GSSAPI is not implemented: SASL needs it set",
    "ssl.keystore.type": "Tern reads PEM stores only (Kafka: JKS)",
    "ssl.truststore.type": "Tern reads PEM stores only (Kafka: JKS)",
    "broker.id": "no default of its own: Tern takes it as node.id when node.id is absent",
}

# Topic configs Kafka 4.4 lists that Tern does not (the README lists them).
TOPIC_CONFIGS_NOT_LISTED = {
    **dict.fromkeys(["local.retention.bytes", "local.retention.ms", "remote.storage.enable",
                     "remote.log.copy.disable", "remote.log.delete.on.disable",
                     "remote.copy.lag.bytes", "remote.copy.lag.ms"], "tiered storage"),
    "errors.deadletterqueue.group.enable": "KIP-1034 dead-letter queues (Kafka Streams)",
    "max.decompressed.message.bytes": "Tern bounds decompression with its own fixed limit",
}

# Fields of a topic config that differ on purpose: (config, field) -> why.
TOPIC_FIELDS_DIFFERING = {
    ("min.insync.replicas", "config_source"):
        "Kafka 4 writes min.insync.replicas as a cluster-wide dynamic default when it formats the "
        "cluster (DYNAMIC_DEFAULT_BROKER_CONFIG); Tern's is its default (DEFAULT_CONFIG), value 1",
}


def _described(bootstrap, resource_type, name):
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        out = admin.describe_configs([ConfigResource(resource_type, name)], config_filter="all",
                                     include_synonyms=True)
    finally:
        admin.close()
    (configs,) = next(iter(out.values())).values()
    return configs


def _default_of(entry):
    return next((s["value"] for s in entry["synonyms"] if s["source"] == "DEFAULT_CONFIG"), None)


def test_describe_configs_matches_kafka(brokers):
    """DescribeConfigs of a broker and of a new topic, on tern and on Kafka: every broker setting
    tern lists that Kafka lists too has Kafka's type, read-only flag, sensitivity and default
    (except TERN_BROKER_DEFAULTS); every topic config Kafka lists, tern lists with the same value,
    source and type (except TOPIC_CONFIGS_NOT_LISTED)."""
    from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic

    seen = {}
    for name, b in brokers.items():
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        try:
            admin.create_topics([NewTopic("described", 1, 1)])
        finally:
            admin.close()
        # node.id 1: kafka_peer's, and tern's default.
        seen[name] = (_described(b.bootstrap, ConfigResourceType.BROKER, "1"),
                      _described(b.bootstrap, ConfigResourceType.TOPIC, "described"))
    (k_broker, k_topic), (t_broker, t_topic) = seen["kafka"], seen["tern"]

    problems = []
    common = sorted(set(t_broker) & set(k_broker))
    assert len(common) > 60, f"only {len(common)} broker settings in common"
    for key in common:
        t, k = t_broker[key], k_broker[key]
        for field in ("config_type", "read_only", "is_sensitive"):
            if t[field] != k[field]:
                problems.append(f"broker {key}: {field} {t[field]!r} on tern, {k[field]!r} on Kafka")
        if key not in TERN_BROKER_DEFAULTS and _default_of(t) != _default_of(k):
            problems.append(f"broker {key}: default {_default_of(t)!r} on tern, {_default_of(k)!r} on Kafka")
    for key in sorted(set(TERN_BROKER_DEFAULTS) - set(common)):
        problems.append(f"TERN_BROKER_DEFAULTS names {key}, which is not listed by both")

    for key in sorted(set(k_topic) - set(TOPIC_CONFIGS_NOT_LISTED)):
        if key not in t_topic:
            problems.append(f"topic {key}: listed by Kafka, not by tern")
            continue
        t, k = t_topic[key], k_topic[key]
        for field in ("value", "config_source", "config_type", "read_only", "is_sensitive"):
            if t[field] != k[field] and (key, field) not in TOPIC_FIELDS_DIFFERING:
                problems.append(f"topic {key}: {field} {t[field]!r} on tern, {k[field]!r} on Kafka")
    for key in sorted(set(TOPIC_CONFIGS_NOT_LISTED) & set(t_topic)):
        problems.append(f"topic {key} is in TOPIC_CONFIGS_NOT_LISTED but tern lists it")
    assert not problems, "\n".join(problems)


# Group configs Kafka 4.4 has that tern refuses (broker/src/config/group_configs.rs NOT_APPLIED):
# streams groups, the share-group dead-letter queue, assignment intervals.
GROUP_CONFIGS_NOT_LISTED = {
    "consumer.assignment.interval.ms", "errors.deadletterqueue.copy.record.enable",
    "errors.deadletterqueue.topic.name", "share.assignment.interval.ms",
    "streams.assignment.interval.ms", "streams.assignor.name",
    "streams.heartbeat.interval.ms", "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas", "streams.rack.aware.assignment.tags",
    "streams.session.timeout.ms",
}


def _alter_group(bootstrap, group, configs):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        out = admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group, configs=configs)],
                                  raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    (result,) = next(iter(out.values())).values()
    return result  # 'OK', or the error's name and message


def _kafka_configs(bootstrap, *args):
    """kafka-configs on broker settings: what --describe prints, else its last line (the
    outcome, or the error's cause)."""
    return _kafka_configs_of(bootstrap, "brokers", *args)


def _kafka_configs_of(bootstrap, entity_type, *args):
    """kafka-configs on one entity type, as _kafka_configs."""
    proc = _jars(PEER_VERSION, clients_only=False).run(
        "kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", entity_type, *args)
    if "--describe" in args:
        # Kafka 4 writes min.insync.replicas as a cluster-wide default when it formats (see
        # TOPIC_FIELDS_DIFFERING); Tern does not.
        return "\n".join(l for l in proc.stdout.strip().splitlines()
                         if not l.strip().startswith("min.insync.replicas="))
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[-1] if lines else ""


def test_log_cleaner_settings_change_as_in_kafka(brokers):
    """kafka-configs changes the log cleaner's settings without a restart on both brokers, and
    both refuse the same bad changes with the same messages: more than double the threads, less
    than a megabyte of dedupe buffer per thread, a negative backoff, log.cleaner.enable."""
    steps = [
        ("--entity-default", "--alter", "--add-config", "log.cleaner.threads=5"),
        ("--entity-default", "--alter", "--add-config", "log.cleaner.threads=2"),
        ("--entity-name", "1", "--alter", "--add-config", "log.cleaner.dedupe.buffer.size=1000"),
        ("--entity-name", "1", "--alter", "--add-config", "log.cleaner.backoff.ms=-1"),
        ("--entity-name", "1", "--alter", "--add-config", "log.cleaner.enable=false"),
        ("--entity-name", "1", "--alter", "--add-config",
         "log.cleaner.io.max.bytes.per.second=1048576,log.cleaner.backoff.ms=500"),
        ("--entity-name", "1", "--alter", "--add-config", "log.cleaner.threads=4"),
        ("--entity-name", "1", "--alter", "--add-config", "log.cleaner.threads=9"),
        ("--entity-name", "1", "--describe"),
        ("--entity-default", "--describe"),
    ]
    seen = {}
    for name, b in brokers.items():
        seen[name] = [_kafka_configs(b.bootstrap, *step) for step in steps]
        # Leave the cleaners as they were for the tests after this one.
        _kafka_configs(b.bootstrap, "--entity-name", "1", "--alter", "--delete-config",
                       "log.cleaner.threads,log.cleaner.io.max.bytes.per.second,log.cleaner.backoff.ms")
        _kafka_configs(b.bootstrap, "--entity-default", "--alter", "--delete-config",
                       "log.cleaner.threads")
    assert "more than double the current value 1" in seen["kafka"][0], seen["kafka"]
    assert seen["kafka"][1] == "Completed updating default config for brokers in the cluster."
    assert "more than double the current value 4" in seen["kafka"][7], seen["kafka"]
    assert seen["tern"] == seen["kafka"], "\n".join(
        difflib.unified_diff(seen["kafka"], seen["tern"], "kafka", "tern", lineterm=""))


def _transactions_on_a_compacted_topic(bootstrap, topic):
    """A committed transaction (k0..k4), an aborted one rewriting k0..k4, a committed one (k5)
    and a plain record overwriting k1; then, once segment.ms has passed, a plain "tail" record
    rolls the segment so that all the rest becomes cleanable."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0"})])[topic].result(30)
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx", "linger.ms": 0})
    tx.init_transactions(30)
    for value, commit, keys in ((b"committed", True, range(5)), (b"aborted", False, range(5)),
                                (b"c3", True, [5])):
        tx.begin_transaction()
        for k in keys:
            tx.produce(topic, key=f"k{k}".encode(), value=value)
        tx.flush(30)
        (tx.commit_transaction if commit else tx.abort_transaction)(30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    plain.produce(topic, key=b"k1", value=b"plain")
    plain.flush(30)
    time.sleep(1.0)
    plain.produce(topic, key=b"tail", value=b"t")
    plain.flush(30)


def _read_until_tail(bootstrap, topic, isolation):
    """Every record of partition 0 from the start up to the "tail" key, as (offset, key, value)
    with None for a tombstone's value, read at `isolation` (read_uncommitted shows aborted
    records if they are still there)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{time.time_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.time() + 20
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.offset(), m.key().decode(), m.value() and m.value().decode()))
            if m.key() == b"tail":
                return out
        raise AssertionError(f"{topic} on {bootstrap}: no tail record after {out}")
    finally:
        c.close()


def test_transactions_are_compacted_as_in_kafka(brokers):
    """On a compacted topic the cleaner removes an aborted transaction's records and compacts a
    committed one's like any others, on Tern as on Kafka 4.4: read from the start (with
    read_uncommitted, which would show aborted records if they were still there), both give the
    same records at the same offsets."""
    topic = "txn-compacted"
    for b in brokers.values():
        _transactions_on_a_compacted_topic(b.bootstrap, topic)
    # Offsets: committed k0..k4 0-4 (marker 5), aborted 6-10 (marker 11), k5 12 (marker 13),
    # plain k1 14, tail 15.
    expected = [(0, "k0", "committed"), (2, "k2", "committed"), (3, "k3", "committed"),
                (4, "k4", "committed"), (12, "k5", "c3"), (14, "k1", "plain"), (15, "tail", "t")]
    seen = {}
    deadline = time.time() + 90  # Kafka's cleaner looks every log.cleaner.backoff.ms (15 s)
    while time.time() < deadline:
        seen = {name: _read_until_tail(b.bootstrap, topic, "read_uncommitted") for name, b in brokers.items()}
        if all(records == expected for records in seen.values()):
            break
        time.sleep(2)
    assert seen["kafka"] == expected, seen["kafka"]
    assert seen["tern"] == seen["kafka"], seen


def test_an_old_tombstone_outlives_the_pass_that_finds_it_as_in_kafka(brokers):
    """KIP-534: a tombstone stamped a day ago (CreateTime) is kept for delete.retention.ms from
    the cleaner pass that first finds it, not from its own timestamp: once the value it deletes
    has been compacted away, the tombstone is still there to read, on Tern as on Kafka 4.4."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "old-tombstone"
    day_ago = int(time.time() * 1000) - 86_400_000
    for b in brokers.values():
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "600000"})])[topic].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": "all"})
        p.produce(topic, key=b"k0", value=b"v", timestamp=day_ago)
        p.produce(topic, key=b"k1", value=b"kept", timestamp=day_ago)
        p.produce(topic, key=b"k0", value=None, timestamp=day_ago)
        p.flush(30)
        time.sleep(1.0)
        p.produce(topic, key=b"tail", value=b"t")
        p.flush(30)
    expected = [(1, "k1", "kept"), (2, "k0", None), (3, "tail", "t")]
    seen = {}
    deadline = time.time() + 90  # Kafka's cleaner looks every log.cleaner.backoff.ms (15 s)
    while time.time() < deadline:
        seen = {name: _read_until_tail(b.bootstrap, topic, "read_committed") for name, b in brokers.items()}
        if all(records[0][0] != 0 for records in seen.values()):
            break
        time.sleep(2)
    assert seen["kafka"] == expected, seen
    assert seen["tern"] == expected, seen


def test_compaction_lags_in_conflict_are_refused_as_in_kafka(brokers):
    """min.compaction.lag.ms above max.compaction.lag.ms: refused at creation and at a change,
    with Kafka's message, on both brokers."""
    jars = _jars(PEER_VERSION, clients_only=False)
    seen = {}
    for name, b in brokers.items():
        create = jars.run("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic",
                          "lags", "--config", "min.compaction.lag.ms=5000",
                          "--config", "max.compaction.lag.ms=1000")
        created = jars.run("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic",
                           "lags", "--config", "max.compaction.lag.ms=1000")
        altered = _kafka_configs_of(b.bootstrap, "topics", "--entity-name", "lags", "--alter",
                                    "--add-config", "min.compaction.lag.ms=5000")
        seen[name] = [[l for l in create.stdout.splitlines() if l.startswith("Error")],
                      created.stdout.strip(), altered]
    assert "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms " \
        "(1000)" in seen["kafka"][2], seen["kafka"]
    assert seen["tern"] == seen["kafka"]


def test_group_configs_match_kafka(brokers):
    """DescribeConfigs of a group before and after IncrementalAlterConfigs sets some of its
    configs, on tern and on Kafka 4.4: every group config Kafka lists (but GROUP_CONFIGS_NOT_LISTED)
    tern lists with the same value, source, type, flags and synonyms; bad changes get the same
    errors as on Kafka."""
    from kafka.admin import ConfigResourceType

    changes = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000",
               "consumer.session.timeout.ms": "50000", "share.isolation.level": "read_committed",
               "share.renew.acknowledge.enable": "false"}
    bad = [{"no.such.config": "1"}, {"share.delivery.count.limit": "1"},
           {"share.delivery.count.limit": "11"}, {"share.auto.offset.reset": "none"},
           {"consumer.heartbeat.interval.ms": "x"}, {"share.isolation.level": "READ_COMMITTED"},
           {"share.renew.acknowledge.enable": "maybe"}]
    seen = {}
    for name, b in brokers.items():
        before = _described(b.bootstrap, ConfigResourceType.GROUP, "configured-group")
        errors = [_alter_group(b.bootstrap, "configured-group", c) for c in bad]
        assert _alter_group(b.bootstrap, "configured-group", changes) == "OK", name
        after = _described(b.bootstrap, ConfigResourceType.GROUP, "configured-group")
        seen[name] = (before, after, errors)
    problems = []
    for phase, (k, t) in (("before", (seen["kafka"][0], seen["tern"][0])),
                          ("after", (seen["kafka"][1], seen["tern"][1]))):
        for key in sorted(set(k) - GROUP_CONFIGS_NOT_LISTED):
            if key not in t:
                problems.append(f"{phase} {key}: listed by Kafka, not by tern")
                continue
            for field in ("value", "config_source", "config_type", "read_only", "is_sensitive", "synonyms"):
                if t[key][field] != k[key][field]:
                    problems.append(f"{phase} {key}: {field} {t[key][field]!r} on tern, {k[key][field]!r} on Kafka")
        for key in sorted(set(t) - set(k)):
            problems.append(f"{phase} {key}: listed by tern, not by Kafka")
        for key in sorted(GROUP_CONFIGS_NOT_LISTED & set(t)):
            problems.append(f"{phase} {key} is in GROUP_CONFIGS_NOT_LISTED but tern lists it")
    if seen["tern"][2] != seen["kafka"][2]:
        problems.append(f"errors for {bad}: {seen['tern'][2]} on tern, {seen['kafka'][2]} on Kafka")
    assert not problems, "\n".join(problems)
    assert "OK" not in seen["kafka"][2], seen["kafka"][2]
    assert seen["tern"][1]["share.auto.offset.reset"]["config_source"] == "DYNAMIC_GROUP_CONFIG"


def _log_sizes(bootstrap, topics):
    """Bytes on disk of partition 0 of each topic, from kafka-log-dirs.sh --describe."""
    import json

    proc = _jars(PEER_VERSION, clients_only=False).run(
        "kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", ",".join(topics))
    doc = next(json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{"))
    sizes = {}
    for broker in doc["brokers"]:
        for log_dir in broker["logDirs"]:
            for p in log_dir["partitions"]:
                sizes[p["partition"].rsplit("-", 1)[0]] = p["size"]
    return sizes


def test_compression_levels_as_in_kafka(brokers):
    """KIP-390: a topic's compression.gzip.level, or the broker's default of it, decides how the
    broker recompresses: the same uncompressed records take fewer bytes on disk at level 9 than at
    level 1, on both brokers; out-of-range levels are refused with Kafka's message at creation and
    at a change."""
    from confluent_kafka import Consumer, Producer

    jars = _jars(PEER_VERSION, clients_only=False)
    values = [f"record {i} of a run of text, {i * 7919 % 1000} again and {i % 13}".encode() for i in range(5000)]
    topics = ["gzip-1", "gzip-9", "gzip-broker-1"]
    seen = {}
    for name, b in brokers.items():
        for level in (1, 9):
            jars.run("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", f"gzip-{level}",
                     "--config", "compression.type=gzip", "--config", f"compression.gzip.level={level}",
                     check=True)
        # No level of its own: the cluster-wide default applies.
        _kafka_configs_of(b.bootstrap, "brokers", "--entity-default", "--alter",
                          "--add-config", "compression.gzip.level=1")
        jars.run("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", "gzip-broker-1",
                 "--config", "compression.type=gzip", check=True)
        refused = jars.run("kafka-topics", "--bootstrap-server", b.bootstrap, "--create", "--topic",
                           "gzip-bad", "--config", "compression.gzip.level=0")
        seen[name] = [
            [l for l in refused.stdout.splitlines() if l.startswith("Error")],
            *(_kafka_configs_of(b.bootstrap, "topics", "--entity-name", "gzip-1", "--alter",
                                "--add-config", change)
              for change in ("compression.lz4.level=18", "compression.zstd.level=23",
                             "compression.zstd.level=-131073", "compression.zstd.level=high")),
        ]
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "none", "linger.ms": 50,
                      "batch.size": 1 << 20})
        for topic in topics:
            for v in values:
                p.produce(topic, value=v, partition=0)
        assert p.flush(30) == 0
        sizes = _log_sizes(b.bootstrap, topics)
        assert sizes["gzip-9"] < sizes["gzip-1"], f"{name}: {sizes}"
        assert sizes["gzip-9"] < sizes["gzip-broker-1"], f"{name}: {sizes}"
        _kafka_configs_of(b.bootstrap, "brokers", "--entity-default", "--alter",
                          "--delete-config", "compression.gzip.level")
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "levels", "auto.offset.reset": "earliest"})
        c.subscribe(["gzip-9"])
        got, deadline = [], time.time() + 30
        while len(got) < len(values) and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert got == values, f"{name}: read back {len(got)} of {len(values)}"
    said = "\n".join(str(x) for x in seen["kafka"])
    for message in ("Value must be between 1 and 9 or equal to -1", "Value must be no more than 17",
                    "Value must be no more than 22", "Value must be at least -131072",
                    "Not a number of type INT"):
        assert message in said, said
    assert seen["tern"] == seen["kafka"]


def _range_members(bootstrap, group, subscriptions):
    """KIP-848 members of `group` with group.remote.assignor=range, one per (instance id or None,
    topics) in `subscriptions`, once the group is stable: [(instance id, member id, topics,
    sorted partitions)]."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    consumers = []
    for instance, topics in subscriptions:
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                "group.remote.assignor": "range", "auto.offset.reset": "earliest"}
        if instance:
            conf["group.instance.id"] = instance
        c = Consumer(conf)
        c.subscribe(topics)
        consumers.append((instance, topics, c))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        deadline, state = time.time() + 90, None
        while time.time() < deadline:
            for _, _, c in consumers:
                c.poll(0.1)
            desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
            owned = sum(len(c.assignment()) for _, _, c in consumers)
            state = (owned, len(desc.members), str(desc.state))
            if owned == 14 and len(desc.members) == len(consumers) and state[2].endswith("STABLE"):
                break
        else:
            pytest.fail(f"the group on {bootstrap} did not settle: {state}")
        return [(instance, c.memberid(), topics, sorted((tp.topic, tp.partition) for tp in c.assignment()))
                for instance, topics, c in consumers]
    finally:
        for _, _, c in consumers:
            c.close()


def _kafka_range(members, partitions):
    """Kafka's server-side range assignment of `members` [(instance id, member id, topics, _)]:
    members ordered static first by instance id, then by member id; per topic its subscribers in
    that order take contiguous ranges, the first `count % subscribers` one partition more."""
    order = sorted(members, key=lambda m: (m[0] is None, m[0] or "", m[1]))
    out = {m[1]: [] for m in members}
    for topic, count in partitions.items():
        subscribers = [m[1] for m in order if topic in m[2]]
        each, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            take = each + (1 if i < extra else 0)
            out[member] += [(topic, p) for p in range(start, start + take)]
            start += take
    return {member: sorted(parts) for member, parts in out.items()}


def test_range_assignor_same_as_kafka(brokers):
    """KIP-848's server-side range assignor on tern and on Kafka 4.4, with two static members,
    two dynamic ones and mixed subscriptions: static members first by instance id, then dynamic
    ones by member id, take contiguous ranges of each topic among its subscribers, as Kafka's
    RangeAssignor does; the assignment by instance id and subscription is the same on both."""
    from group_util import create_topic

    partitions = {"ranged-a": 7, "ranged-b": 7}
    both, only_a = list(partitions), ["ranged-a"]
    subscriptions = [("static-b", both), (None, both), ("static-a", both), (None, only_a)]
    seen = {}
    for name, b in brokers.items():
        for t in partitions:
            create_topic(b.bootstrap, t, 7)
        members = _range_members(b.bootstrap, "g-range", subscriptions)
        expected = _kafka_range(members, partitions)
        got = {member: parts for _, member, _, parts in members}
        assert got == expected, f"{name}: {members}"
        # Comparable across brokers: member ids are random, instance ids and subscriptions not.
        seen[name] = sorted((instance or "", len(topics), parts) for instance, _, topics, parts in members
                            if instance)
    assert seen["tern"] == seen["kafka"]
