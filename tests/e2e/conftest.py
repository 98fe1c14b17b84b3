"""Fixtures that start a real `tern` process on a free loopback port with a fresh data dir."""

import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

TERN_BIN = os.environ.get("TERN_BIN", "target/release/tern")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tern:
    """A tern server process that tests can stop, kill -9 and restart on the same data."""

    def __init__(self, data_dir, port, extra=()):
        self.data_dir = data_dir
        self.port = port
        self.extra = list(extra)
        self.proc = None
        self.log_path = os.path.join(data_dir, "tern.log")
        # Seconds to wait for the listener at start and for a clean exit at stop (benchmarks
        # with thousands of partitions need more).
        self.start_timeout = 30
        self.stop_timeout = 30

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        args = [
            TERN_BIN,
            "server",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}/logs",
        ]
        for kv in self.extra:
            args += ["--override", kv]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tern exited with {self.proc.returncode}: {self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"tern did not start listening: {self.tail()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""


@pytest.fixture
def tern():
    with tempfile.TemporaryDirectory(prefix="tern-e2e-") as d:
        t = Tern(d, free_port()).start()
        try:
            yield t
        finally:
            t.stop()


class PeerBroker:
    """A broker this suite did not start (TERN_E2E_PEER=host:port), e.g. a real Apache Kafka
    with node.id=1, to check that the tests expect what Apache Kafka does."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.port = int(bootstrap.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def tern_module():
    """One tern for a whole test module: for tests that each keep to their own topics and would
    otherwise spend more time starting and stopping brokers than testing (the tool tests).
    With TERN_E2E_PEER=kafka, a real Apache Kafka 4.x started per module (kafka_dist.KafkaServer);
    with TERN_E2E_PEER=host:port, that broker (a fresh one per run: topics stay)."""
    peer = os.environ.get("TERN_E2E_PEER")
    if peer == "kafka":
        from kafka_dist import KafkaServer

        with tempfile.TemporaryDirectory(prefix="kafka-e2e-") as d:
            k = KafkaServer(d).start()
            try:
                yield k
            finally:
                k.stop()
        return
    if peer:
        yield PeerBroker(peer)
        return
    with tempfile.TemporaryDirectory(prefix="tern-e2e-") as d:
        t = Tern(d, free_port()).start()
        try:
            yield t
        finally:
            t.stop()
