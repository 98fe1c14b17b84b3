"""`/metrics` and `/health` (http.listeners) while Tern serves clients and mirrors.

A source Tern and a destination Tern serving HTTP on a free port. The destination gets 200
produced records in a plain topic and a consumer reads them back; a 3-partition topic of the
source is mirrored into it under a byte-rate limit, so the copy takes a few seconds. Scrapes are
parsed with the Prometheus client's OpenMetrics parser: the produce counters equal what was sent
(records exactly, bytes at least the values' bytes), the Produce request counter equals the
count of its latency histogram, the consumer's bytes out and open connections are counted; while
the copy runs a partition shows a lag in records and in seconds (at least the age of the records),
then every mirror partition is counted MIRRORING with both lags 0, the mirror's records counter
equals what the source holds, with no fetch errors and a recent fetch from the source broker; the
leader count covers the topics; `/health` answers 200. An explicitly configured http.listeners address that is taken
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
from processes import free_port
from tern_process import TERN_BIN, Tern


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
    # Batches of 10 records (about 10 KB) so that a fetch of 20 KB per partition takes a part.
    p = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5, "batch.num.messages": 10})
    for i in range(300):
        p.produce("mirrored", value=b"m-%04d" % i + bytes(1000), partition=i % 3)
    assert p.flush(30) == 0
    produced_at = time.time()

    c = Consumer({"bootstrap.servers": dest.bootstrap, "group.id": "metrics-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("plain", 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < 200 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    assert got == values

    s = scrape(http)
    connections = value(s, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT")
    c.close()
    assert connections is not None and connections >= 1, "the open consumer's connections"
    assert value(s, "kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT") \
        >= connections
    produce_requests = value(s, "kafka_network_requestmetrics_requests_total", request="Produce")
    # Every Produce was answered before the scrape: each has its latency observed once.
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(s, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") \
        == produce_requests
    assert value(s, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="plain") == 200, s
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="plain") >= sum(map(len, values))
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="plain") >= sum(map(len, values))
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert value(s, "kafka_server_replicamanager_leadercount") >= 1

    # About 300 KB at 60 KB/s: a copy of several seconds, of records at least a second old.
    time.sleep(max(0.0, produced_at + 1.0 - time.time()))
    mu.create_mirror(dest.bootstrap, "m", source.bootstrap, str(tmp_path),
                     mirror_fetch_rate_max_bytes="60000", mirror_fetch_max_bytes="20000")
    mu.mirrors(dest.bootstrap, "--start", "--mirror", "m", "--topics", "mirrored")

    def behind():
        s = scrape(http)
        rows = [(value(s, "tern_mirror_partition_lag_records", mirror="m", topic="mirrored", partition=str(p)),
                 value(s, "tern_mirror_partition_lag_seconds", mirror="m", topic="mirrored", partition=str(p)))
                for p in range(3)]
        return any(lag and seconds is not None for lag, seconds in rows), rows

    rows = wait_for("a mirror partition behind the source with its lag in seconds", behind)
    for lag, seconds in rows:
        if lag and seconds is not None:
            # The records not yet mirrored were written at least a second before.
            assert 1.0 <= seconds < 120, rows

    def caught_up():
        s = scrape(http)
        lags = [value(s, "tern_mirror_partition_lag_records", mirror="m", topic="mirrored", partition=str(p))
                for p in range(3)]
        mirroring = value(s, "tern_mirror_partitions", mirror="m", state="MIRRORING")
        return lags == [0, 0, 0] and mirroring == 3, (lags, mirroring)

    wait_for("every mirror partition MIRRORING with lag 0 in /metrics", caught_up)
    s = scrape(http)
    assert [value(s, "tern_mirror_partition_lag_seconds", mirror="m", topic="mirrored", partition=str(p))
            for p in range(3)] == [0, 0, 0]
    assert value(s, "tern_mirror_records_total", mirror="m") == 300
    assert value(s, "tern_mirror_bytes_total", mirror="m") >= 300 * 1000
    assert value(s, "tern_mirror_fetch_errors_total", mirror="m") == 0
    since = [v for (name, labels), v in s.items()
             if name == "tern_mirror_seconds_since_last_fetch" and ("mirror", "m") in labels]
    assert len(since) == 1 and 0 <= since[0] < 30, since
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
