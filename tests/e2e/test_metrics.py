"""`/metrics` and `/health` (http.listeners) while Tern serves clients and mirrors.

A source Tern and a destination Tern serving HTTP on a free port. The destination gets 200
produced records in a plain topic and a consumer reads them back; a 3-partition topic of the
source is mirrored into it. Scrapes are parsed with the Prometheus client's OpenMetrics parser:
the produce counters equal what was sent (records exactly, bytes at least the values' bytes), the
Produce request counter and the consumer's bytes out are counted, every mirror partition is
counted MIRRORING once caught up and its lag gauge reaches 0, and the leader count covers the
topics; `/health` answers 200. An explicitly configured http.listeners address that is taken
stops the broker at startup, naming the setting.
"""

import socket
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import mirror_util as mu
from conftest import TERN_BIN, Tern, free_port


def scrape(port):
    """{(sample name, frozenset of labels): value} of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def wait_for(what, check, timeout=30):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


@pytest.fixture
def pair(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    source = Tern(str(tmp_path / "src"), free_port()).start()
    http = free_port()
    dest = Tern(str(tmp_path / "dst"), free_port(), extra=[f"http.listeners=http://127.0.0.1:{http}"]).start()
    yield source, dest, http
    dest.stop()
    source.stop()


def test_metrics_count_produce_fetch_and_mirror_lag(pair, tmp_path):
    source, dest, http = pair
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=10) as r:
        assert r.status == 200 and r.read() == b"ok\n"

    for bootstrap, topic, parts in ((dest.bootstrap, "plain", 1), (source.bootstrap, "mirrored", 3)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, parts, 1)])[topic].result(timeout=30)
    values = [b"value-%03d" % i for i in range(200)]
    p = Producer({"bootstrap.servers": dest.bootstrap, "linger.ms": 5})
    for v in values:
        p.produce("plain", value=v, partition=0)
    assert p.flush(30) == 0
    p = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5})
    for i in range(300):
        p.produce("mirrored", value=b"m-%d" % i, partition=i % 3)
    assert p.flush(30) == 0

    c = Consumer({"bootstrap.servers": dest.bootstrap, "group.id": "metrics-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("plain", 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < 200 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == values

    s = scrape(http)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="plain") == 200, s
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="plain") >= sum(map(len, values))
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="plain") >= sum(map(len, values))
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(s, "kafka_server_replicamanager_leadercount") >= 1

    mu.create_mirror(dest.bootstrap, "m", source.bootstrap, str(tmp_path))
    mu.mirrors(dest.bootstrap, "--start", "--mirror", "m", "--topics", "mirrored")

    def caught_up():
        s = scrape(http)
        lags = [value(s, "tern_mirror_partition_lag_records", mirror="m", topic="mirrored", partition=str(p))
                for p in range(3)]
        mirroring = value(s, "tern_mirror_partitions", mirror="m", state="MIRRORING")
        return lags == [0, 0, 0] and mirroring == 3, (lags, mirroring)

    wait_for("every mirror partition MIRRORING with lag 0 in /metrics", caught_up)
    s = scrape(http)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="mirrored") is None, \
        "mirrored records are not produced records"
    assert value(s, "kafka_server_replicamanager_leadercount") >= 4


def test_a_configured_http_address_that_is_taken_stops_the_broker(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        p = subprocess.run([TERN_BIN, "server", "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                            "--override", f"log.dirs={tmp_path}/logs",
                            "--override", f"http.listeners=http://127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, p.stdout + p.stderr
        assert "http.listeners" in p.stdout + p.stderr, p.stdout + p.stderr
        bad = subprocess.run([TERN_BIN, "server", "--override", f"log.dirs={tmp_path}/logs2",
                              "--override", "http.listeners=https://127.0.0.1:1"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "http.listeners" in bad.stdout + bad.stderr, bad.stderr
    finally:
        taken.close()
