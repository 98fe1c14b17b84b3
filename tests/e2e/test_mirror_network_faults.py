"""Network faults between a mirror's source (a real Apache Kafka 4.4) and Tern.

The source has two listeners: one its own clients use directly, and one it advertises at the
address of a TCP proxy the test controls (tests/e2e/tcp_proxy.py), which the mirror is given. While
the source keeps taking writes, the proxy:

1. turns into a black hole (connections stay open, nothing answers; new connections are accepted
   and never answered: a partition, or a source that accepts connections but never answers) for
   longer than the mirror's request timeout (3 s here) and retry backoff: the mirror's partitions
   report FAILED with the reason (between retries, which go on while the fault lasts), /metrics
   counts fetch errors and shows the time since the source last answered;
2. heals: the mirror recovers by itself to MIRRORING with lag 0;
3. resets every connection and refuses new ones (the source is down), then heals again.

A second test slows the link instead (every chunk forwarded 150 ms late) and stalls it for less
than the request timeout, twice, mid-copy: the mirror never reports FAILED and the copy is whole.

After each heal the checker reads both logs whole: same log start and end, the same batches byte
for byte (no gap, no duplicate), and every record the source acknowledged is in Tern's copy.
"""

import time
import urllib.request

import pytest

import kafka_peer
import mirror_util as mu
from processes import free_port
from tern_process import Tern
from tcp_proxy import TcpProxy
from test_mirror_kafka import SOURCE_JVM, create_topics, produce

VERSION = "4.4.0"
TOPIC, PARTITIONS = "net", 2


@pytest.fixture
def source(tmp_path):
    try:
        kafka_peer.KafkaJars(VERSION).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {VERSION}: {str(e).splitlines()[0]}")
    peer = kafka_peer.KafkaPeer(VERSION, tmp_path / "kafka", jvm_opts=SOURCE_JVM)
    mirror_port = free_port()
    proxy = TcpProxy(mirror_port)
    peer.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{peer.port},MIRROR://127.0.0.1:{mirror_port},"
                     f"CONTROLLER://127.0.0.1:{peer.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{peer.port},MIRROR://{proxy.address}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,MIRROR:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "auto.create.topics.enable": "false",
    })
    peer.start(timeout=120)
    try:
        yield peer, proxy
    finally:
        proxy.close()
        peer.stop()


@pytest.fixture
def tern(tmp_path):
    d = tmp_path / "tern"
    d.mkdir()
    http = free_port()
    t = Tern(str(d), free_port(), [
        "mirror.metadata.refresh.interval.ms=2000",
        "mirror.failed.retry.initial.backoff.ms=200",
        "mirror.failed.retry.max.backoff.ms=2000",
        f"http.listeners=http://127.0.0.1:{http}",
    ]).start()
    t.http = http
    try:
        yield t
    finally:
        t.stop()


def fetch_errors(tern):
    with urllib.request.urlopen(f"http://127.0.0.1:{tern.http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('tern_mirror_fetch_errors_total{mirror="m"}'):
                return float(line.split()[-1])
    return 0.0


def wait_failed(tern, timeout=60):
    """The first sighting of a FAILED partition of the topic (a failed partition is retried
    after its backoff, so FAILED alternates with a retry while the fault lasts)."""
    deadline = time.time() + timeout
    rows = []
    while time.time() < deadline:
        rows = [r for r in mu.describe(tern.bootstrap, "m") if r["topic"] == TOPIC]
        failed = [r for r in rows if r["state"] == "FAILED"]
        if failed:
            return failed
        time.sleep(0.2)
    raise AssertionError(f"the mirror never reported FAILED: {rows}")


def seconds_since_last_fetch(tern):
    with urllib.request.urlopen(f"http://127.0.0.1:{tern.http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('tern_mirror_seconds_since_last_fetch{mirror="m"'):
                return float(line.split()[-1])
    return None


def check_copy(kafka, tern, acked):
    mu.wait_mirrored(tern.bootstrap, "m", kafka.bootstrap, [TOPIC], timeout=120)
    for p in range(PARTITIONS):
        mu.compare_partition(kafka.bootstrap, tern.bootstrap, TOPIC, p)
    ends = {p: mu.RawKafka(tern.bootstrap).__enter__().latest(TOPIC, p) for p in range(PARTITIONS)}
    for p, offset in acked:
        assert offset < ends[p], f"acknowledged {TOPIC}-{p}@{offset} missing from the mirror"


def test_partition_silent_source_and_reset_then_heal(source, tern, tmp_path):
    kafka, proxy = source
    create_topics(kafka.bootstrap, {TOPIC: (PARTITIONS, None)})
    acked = list(produce(kafka.bootstrap, TOPIC, 400, PARTITIONS).offsets)
    mu.create_mirror(tern.bootstrap, "m", proxy.address, str(tmp_path), request_timeout_ms="3000",
                     mirror_socket_timeout_ms="3000")
    mu.mirrors(tern.bootstrap, "--start", "--mirror", "m", "--topics", TOPIC)
    check_copy(kafka, tern, acked)

    for fault in ("blackhole", "reset"):
        errors_before = fetch_errors(tern)
        proxy.set_mode(fault)
        acked += produce(kafka.bootstrap, TOPIC, 300, PARTITIONS, start=len(acked)).offsets
        faulted = time.time()
        rows = wait_failed(tern)
        print(f"{fault}: FAILED after {time.time() - faulted:.1f}s: {rows}")
        reason = "timed out" if fault == "blackhole" else ""
        assert all(r["errorMessage"] and reason in r["errorMessage"] for r in rows), rows
        assert all(r["retryAttempt"] >= 1 for r in rows), rows
        assert fetch_errors(tern) > errors_before
        # The staleness of what the lag is computed from is visible while the source is silent.
        time.sleep(1)
        assert seconds_since_last_fetch(tern) >= 1
        proxy.set_mode("pass")
        acked += produce(kafka.bootstrap, TOPIC, 100, PARTITIONS, start=len(acked)).offsets
        check_copy(kafka, tern, acked)


def test_delay_and_short_stalls_are_absorbed(source, tern, tmp_path):
    kafka, proxy = source
    create_topics(kafka.bootstrap, {TOPIC: (PARTITIONS, None)})
    acked = list(produce(kafka.bootstrap, TOPIC, 300, PARTITIONS).offsets)
    proxy.set_mode("delay", delay_s=0.15)
    mu.create_mirror(tern.bootstrap, "m", proxy.address, str(tmp_path), request_timeout_ms="3000",
                     mirror_socket_timeout_ms="3000")
    mu.mirrors(tern.bootstrap, "--start", "--mirror", "m", "--topics", TOPIC)
    errors_before = fetch_errors(tern)
    for round_ in range(2):
        acked += produce(kafka.bootstrap, TOPIC, 300, PARTITIONS, start=len(acked)).offsets
        # A stall shorter than the 3 s request timeout: held bytes flow on afterwards.
        proxy.set_mode("blackhole")
        stalled_until = time.time() + 1.5
        while time.time() < stalled_until:
            rows = [r for r in mu.describe(tern.bootstrap, "m") if r["topic"] == TOPIC]
            assert not [r for r in rows if r["state"] == "FAILED"], f"stall {round_}: {rows}"
            time.sleep(0.2)
        proxy.set_mode("delay", delay_s=0.15)
    check_copy(kafka, tern, acked)
    rows = [r for r in mu.describe(tern.bootstrap, "m") if r["topic"] == TOPIC]
    assert all(r["state"] == "MIRRORING" for r in rows), rows
    assert fetch_errors(tern) == errors_before, "a delay or short stall counted as a fetch error"
