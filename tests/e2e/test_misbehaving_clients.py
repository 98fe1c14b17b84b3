"""Slow and misbehaving clients do not stop Tern from serving well-behaved ones.

A producer (idempotent, acks=all) and a consumer keep working on a Tern while other sockets:

1. send half a frame and stop, and stop reading their responses: with connections.max.idle.ms=2000
   the broker closes both within a few seconds of going idle;
2. announce frames of socket.request.max.bytes (100 MB) and send 1 KB of each: the broker holds
   what arrived, not what was announced (its resident memory grows by far less than the total
   announced), and frames larger than the limit close the connection;
3. flood it with complete maximum-size frames of garbage (socket.request.max.bytes=4 MB here):
   each such connection is closed, and memory comes back down;
4. fill max.connections (10,000, Kafka's default) with idle connections: connection 10,001 is
   closed at once (a clean refusal, not a hang in the accept backlog), /metrics counts exactly
   10,000 open connections, and the producer and consumer that were already connected go on.

Every phase ends with the checker: the records acknowledged so far are all read back, once each,
in order, bytes equal. Memory figures (RSS before and after) are printed for the record.
"""

import os
import socket
import struct
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from processes import free_port
from tern_process import Tern

MB = 1 << 20


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def api_versions_frame(correlation_id=1):
    header = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(header)) + header


def closed_by_peer(sock, within):
    """True once the peer closes `sock` (EOF or reset) within `within` seconds, reading and
    dropping whatever it sent before."""
    sock.settimeout(0.5)
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            if sock.recv(1 << 16) == b"":
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def answered(sock, timeout=5):
    """Sends ApiVersions v0 and reads the answer's frame; False when the broker closed instead."""
    sock.settimeout(timeout)
    try:
        sock.sendall(api_versions_frame())
        size = sock.recv(4, socket.MSG_WAITALL)
        if len(size) < 4:
            return False
        n = struct.unpack(">i", size)[0]
        return len(sock.recv(n, socket.MSG_WAITALL)) == n
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return False


def open_connections(gauge_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{gauge_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'):
                return float(line.split()[-1])
    return None


class Workload:
    """An idempotent acks=all producer and a consumer, both kept connected throughout; check()
    produces a round of records and reads everything acknowledged so far back."""

    def __init__(self, bootstrap, topic):
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "well-behaved",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.acked = []
        self.read = []
        self.round = 0

    def check(self, n=100):
        self.round += 1
        acked = []

        def on_delivery(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))

        for i in range(n):
            self.producer.produce(self.topic, value=b"r%d-%d-" % (self.round, i) + os.urandom(64),
                                  partition=0, on_delivery=on_delivery)
        assert self.producer.flush(30) == 0
        assert len(acked) == n, f"round {self.round}: {len(acked)} of {n} acknowledged"
        self.acked += sorted(acked)
        deadline = time.time() + 30
        while len(self.read) < len(self.acked) and time.time() < deadline:
            m = self.consumer.poll(0.5)
            if m is not None and not m.error():
                self.read.append((m.offset(), m.value()))
        offsets = [o for o, _ in self.read]
        assert offsets == sorted(set(offsets)), "offsets went back or repeated"
        assert self.read == self.acked, f"round {self.round}: read {len(self.read)} of {len(self.acked)}"

    def close(self):
        self.consumer.close()


@pytest.fixture
def broker(tmp_path):
    http = free_port()
    t = Tern(str(tmp_path), free_port(), extra=[
        "connections.max.idle.ms=2000",
        "socket.request.max.bytes=4194304",
        f"http.listeners=http://127.0.0.1:{http}",
    ]).start()
    admin = AdminClient({"bootstrap.servers": t.bootstrap})
    admin.create_topics([NewTopic("steady", 1, 1)])["steady"].result(timeout=30)
    yield t, http
    t.stop()


def test_idle_half_frames_and_unread_responses_are_closed(broker):
    tern, _ = broker
    work = Workload(tern.bootstrap, "steady")
    work.check()

    half = socket.create_connection(("127.0.0.1", tern.port))
    half.sendall(struct.pack(">i", 100) + b"x" * 10)

    # A client that sends requests and never reads: the answers fill the socket buffers.
    deaf = socket.create_connection(("127.0.0.1", tern.port))
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    deaf.settimeout(5)
    thousand = api_versions_frame() * 1000
    sent = 0
    try:
        for _ in range(1000):
            deaf.sendall(thousand)
            sent += 1000
    except (socket.timeout, OSError):
        pass
    # The broker stopped reading our requests: it is blocked writing answers nobody reads, which
    # only its write timeout ends (no read is pending).
    assert sent < 1_000_000, "the broker kept reading requests whose answers it could not send"
    started = time.time()
    work.check()
    assert closed_by_peer(half, within=10), "a half-sent frame kept its connection past the idle time"
    assert closed_by_peer(deaf, within=20), "a client that never reads kept its connection"
    print(f"deaf client sent {sent} requests; closed {time.time() - started:.1f}s after it stalled")
    work.check()
    work.close()


def test_declared_and_real_maximum_size_frames(broker):
    tern, _ = broker
    work = Workload(tern.bootstrap, "steady")
    work.check()
    pid = tern.proc.pid
    before = rss(pid)

    # Forty connections announce 4 MB each (160 MB in all) and send 1 KB.
    announced = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", tern.port))
        s.sendall(struct.pack(">i", 4 * MB) + b"\0" * 1024)
        announced.append(s)
    time.sleep(1)
    work.check()
    held = rss(pid) - before
    print(f"40 announced 4 MB frames, 1 KB sent of each: RSS {before / MB:.0f} MB -> +{held / MB:.1f} MB")
    assert held < 40 * MB, f"the broker reserved what was announced: +{held / MB:.0f} MB"

    # One byte over the limit: refused without reading it.
    over = socket.create_connection(("127.0.0.1", tern.port))
    over.sendall(struct.pack(">i", 4 * MB + 1))
    assert closed_by_peer(over, within=5)

    # Complete maximum-size frames of garbage, eight connections at a time, three rounds.
    garbage = struct.pack(">i", 4 * MB) + struct.pack(">hhi", 0x7fff, 0, 1) + b"\xff" * (4 * MB - 8)
    for _ in range(3):
        flood = [socket.create_connection(("127.0.0.1", tern.port)) for _ in range(8)]
        for s in flood:
            s.sendall(garbage)
        for s in flood:
            assert closed_by_peer(s, within=20), "a garbage frame did not close its connection"
            s.close()
    work.check()
    for s in announced:
        s.close()
    time.sleep(1)
    after = rss(pid)
    print(f"after 24 garbage frames of 4 MB and closing everything: RSS {after / MB:.0f} MB")
    assert after - before < 64 * MB
    work.check()
    work.close()


def test_max_connections_refuses_cleanly_and_serves_those_connected(tmp_path):
    http = free_port()
    tern = Tern(str(tmp_path), free_port(), extra=[f"http.listeners=http://127.0.0.1:{http}"]).start()
    idle = []
    try:
        admin = AdminClient({"bootstrap.servers": tern.bootstrap})
        admin.create_topics([NewTopic("steady", 1, 1)])["steady"].result(timeout=30)
        work = Workload(tern.bootstrap, "steady")
        work.check()
        before = rss(tern.proc.pid)
        refused = None
        for i in range(10_100):
            s = socket.create_connection(("127.0.0.1", tern.port))
            if not answered(s):
                refused = i
                s.close()
                break
            idle.append(s)
        assert refused is not None, "more than max.connections were served"
        assert open_connections(http) == 10_000
        per_connection = (rss(tern.proc.pid) - before) / len(idle)
        print(f"{len(idle)} idle connections served, the next one refused; "
              f"RSS +{per_connection / 1024:.1f} KB per connection")
        # The refusal is prompt every time, not a wait in the backlog.
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", tern.port))
            started = time.time()
            assert closed_by_peer(s, within=5) and time.time() - started < 2
            s.close()
        work.check()
        for s in idle[:100]:
            s.close()
        idle = idle[100:]
        time.sleep(0.5)
        fresh = socket.create_connection(("127.0.0.1", tern.port))
        assert answered(fresh), "a slot freed by a closed connection is usable again"
        fresh.close()
        work.check()
        work.close()
    finally:
        for s in idle:
            s.close()
        tern.stop()
