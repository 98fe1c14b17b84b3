"""Fixtures that start a real `tern` process on a free loopback port with a fresh data dir."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

# The harness (tests/harness: tern_process, kafka_peer, kafka_wire, processes) is imported by
# module name from every test module here; this is the one place that puts it on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "harness"))

from processes import free_port  # noqa: E402
from tern_process import Tern  # noqa: E402


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
    With TERN_E2E_PEER=kafka, a real single-node Apache Kafka (kafka_peer.KafkaPeer, of
    kafka_peer.DEFAULT_VERSION) started per module; with TERN_E2E_PEER=host:port, that broker (a
    fresh one per run: topics stay)."""
    peer = os.environ.get("TERN_E2E_PEER")
    if peer == "kafka":
        from kafka_peer import DEFAULT_VERSION, KafkaPeer

        with tempfile.TemporaryDirectory(prefix="kafka-e2e-") as d:
            k = KafkaPeer(DEFAULT_VERSION, d, jvm_opts=["-Xmx512m"]).start()
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
