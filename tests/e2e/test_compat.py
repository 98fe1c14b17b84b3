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
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness"))
import kafka_peer  # noqa: E402
from conftest import Tern, free_port  # noqa: E402

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


def _compiled(version):
    jars = _jars(version, clients_only=True)
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = kafka_peer.cache_root() / "compat" / f"{version}-{digest}"
    if not (out / "CompatScenario.class").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".compat-", dir=out.parent))
        proc = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", jars.classpath(), str(SOURCE)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"javac against kafka-clients {version} failed:\n{proc.stderr}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return f"{out}:{jars.classpath()}"


def _scenario(classpath, bootstrap, topic):
    proc = subprocess.run(["java", "-Xmx256m", "-cp", classpath, "CompatScenario", bootstrap, topic],
                          capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"CompatScenario on {bootstrap} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
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
