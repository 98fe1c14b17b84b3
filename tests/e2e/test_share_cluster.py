"""Share groups (KIP-932) on a three-node cluster (test_cluster.py's Cluster of real `tern server`
processes): the share consumers of tests/harness/compat/ShareConsumerScenario.java (kafka-clients
4.4) read a topic whose three partitions are led by three brokers, while one broker coordinates
the group. The leaders of the other two read the start offsets the coordinator stores
(ReadShareGroupStateSummary: the admin's reset to the earliest offset) and report them as they
move (WriteShareGroupState), so the consumers see what they see on one node, which is what
Apache Kafka 4.4 shows (test_compat.py::test_share_consumers_same_as_kafka), and the group's
start offsets end at the log ends."""

from pathlib import Path

import pytest

from replication_util import REPLICATION_EXTRA, leader_of
from test_cluster import (
    make_cluster,  # noqa: F401 - the fixture
    three_combined,
    wait_brokers_everywhere,
)
from test_compat import PEER_VERSION, _compiled, _require_tools, _scenario

SOURCE = Path(__file__).resolve().parent.parent / "harness" / "compat" / "ShareConsumerScenario.java"
TOPIC = "share-queue"

# What the scenario prints on one node and on Kafka 4.4 (lines starting with "info " aside).
EXPECTED = """\
phase1 failures: []
phase1 accepted distinct=81 accepted twice=0
phase1 rejected seen=9 delivered again=0
phase1 released then delivered with count 2=9
phase1 other records delivered more than once=0
phase1 deliveries after all were settled=0
phase1 lags: {share-queue-0=0, share-queue-1=0, share-queue-2=0}
phase1 group after close: state=Empty members=0
phase2 next consumer got all=true unacknowledged ones again with count 2=true others once=true
phase2 lags: {share-queue-0=0, share-queue-1=0, share-queue-2=0}\
""".splitlines()


@pytest.mark.timeout(240)
def test_share_consumers_across_brokers(make_cluster):  # noqa: F811
    _require_tools()
    cluster = three_combined(make_cluster, {
        **REPLICATION_EXTRA,
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
    })
    wait_brokers_everywhere(cluster)
    classpath = _compiled(PEER_VERSION, SOURCE)
    seen = _scenario(classpath, cluster.bootstrap(), TOPIC, main=SOURCE.stem)
    leaders = {p: leader_of(cluster, TOPIC, p, cluster.broker_ids).leader for p in range(3)}
    print(f"partition leaders {leaders}")
    print("\n".join(seen))
    assert len(set(leaders.values())) == 3, f"leaders not spread: {leaders}"
    assert [l for l in seen if not l.startswith("info ")] == EXPECTED
    # The coordinator holds every share-partition's start offset at its log end.
    assert "info phase2 start offsets: {share-queue-0=40, share-queue-1=30, share-queue-2=30}" in seen
