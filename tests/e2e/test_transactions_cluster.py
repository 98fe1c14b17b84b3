"""Transactions on a three-node cluster (test_cluster.py's Cluster of real `tern server`
processes, `__transaction_state` and `__consumer_offsets` with replication factor 3):

  1. a transactional producer (confluent-kafka) commits, aborts and commits transactions that
     span three partitions led by three different brokers, so the coordinator appends some
     markers itself and sends WriteTxnMarkers to the other leaders for the rest; a read_committed
     consumer reads exactly the committed records, in order, and its position reaches every log
     end (no marker is missing: the last stable offset caught up everywhere), while
     read_uncommitted sees the aborted ones too;
  2. the coordinator of the transactional id is killed with SIGKILL between transactions:
     another broker takes over its `__transaction_state` partition, a producer started with the
     same transactional id gets a higher epoch there (the state was replicated and reloaded), its
     transaction commits, and the first producer is fenced;
  3. kafka-clients 4.4 with transaction version 2 (tests/harness/compat/TransactionScenario.java):
     partition leaders on two brokers add their partitions to the transaction at the coordinator
     (AddPartitionsToTxn v5 between brokers), and the markers carry the bumped epoch; it prints
     what Kafka 4.4 prints."""

import difflib
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kafka_wire import Reader, kafka_request
from kafka_wire import string as _str
from replication_util import (
    NONE,
    REPLICATION_EXTRA,
    create_topic_raw_ok,
    leader_of,
    wait_isr_full,
)
from test_cluster import (
    kafka_jars,  # noqa: F401 - the session fixture with Apache Kafka's jars
    make_cluster,  # noqa: F401 - the fixture
    three_combined,
    wait_brokers_everywhere,
    wait_for,
)

PARTITIONS = 3
TXN_ID = "cluster-app"


def find_txn_coordinator(address, transactional_id):
    """FindCoordinator v1 (key type 1) to exactly this broker: (error code, node id)."""
    r = Reader(kafka_request(address, 10, 1, _str(transactional_id) + struct.pack(">b", 1)))
    r.int32()  # throttle_time_ms
    error = r.int16()
    r.string()  # error_message
    return error, r.int32()


def agreed_coordinator(cluster, ids):
    answers = set()
    for n in ids:
        try:
            answers.add(find_txn_coordinator(cluster.nodes[n].address, TXN_ID))
        except OSError:
            return None
    if len(answers) == 1:
        error, node = answers.pop()
        return node if error == NONE and node >= 0 else None
    return None


def run_transaction(producer, topic, tag, commit):
    producer.begin_transaction()
    for p in range(PARTITIONS):
        for i in range(5):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def read_all(bootstrap, topic, isolation):
    """Every value per partition, reading until the position reaches the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.time()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
                for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values = {p: [] for p in range(PARTITIONS)}
        deadline = time.time() + 30
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values[m.partition()].append(m.value().decode())
            positions = {tp.partition: tp.offset
                         for tp in c.position([TopicPartition(topic, p) for p in range(PARTITIONS)])}
            if positions == ends:
                return values, ends
        pytest.fail(f"{isolation} reader never reached the log ends {ends}: at {positions}")
    finally:
        c.close()


def log_ends(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{time.time()}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def expected(tags):
    return {p: [f"{t}-{p}-{i}" for t in tags for i in range(5)] for p in range(PARTITIONS)}


@pytest.mark.timeout(240)
def test_transactions_across_brokers_and_coordinator_failover(make_cluster):  # noqa: F811
    cluster = three_combined(make_cluster, {
        **REPLICATION_EXTRA,
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
    })
    wait_brokers_everywhere(cluster)
    topic = "tx-spread"
    create_topic_raw_ok(cluster, topic, PARTITIONS, 3)
    wait_isr_full(cluster, topic, PARTITIONS, 3)
    leaders = {p: leader_of(cluster, topic, p, cluster.broker_ids).leader for p in range(PARTITIONS)}
    assert len(set(leaders.values())) == PARTITIONS, f"leaders not spread: {leaders}"

    first = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": TXN_ID,
                      "transaction.timeout.ms": 60000})
    first.init_transactions(60)
    coordinator = wait_for("one transaction coordinator named by every node",
                           lambda: agreed_coordinator(cluster, cluster.broker_ids), 30)
    print(f"partition leaders {leaders}, transaction coordinator {coordinator}")
    run_transaction(first, topic, "c1", commit=True)
    run_transaction(first, topic, "a1", commit=False)
    run_transaction(first, topic, "c2", commit=True)

    # 15 records and 3 markers per partition. The last commit's markers are written after
    # commit_transaction returns (as on Kafka): wait for them.
    wait_for("every partition's last commit marker",
             lambda: log_ends(cluster.bootstrap(), topic) == {p: 18 for p in range(PARTITIONS)}, 30,
             diag=lambda: f"log ends {log_ends(cluster.bootstrap(), topic)}")
    committed, ends = read_all(cluster.bootstrap(), topic, "read_committed")
    assert committed == expected(["c1", "c2"])
    assert ends == {p: 18 for p in range(PARTITIONS)}, ends
    everything, _ = read_all(cluster.bootstrap(), topic, "read_uncommitted")
    assert everything == expected(["c1", "a1", "c2"])

    survivors = [n for n in cluster.broker_ids if n != coordinator]
    cluster.nodes[coordinator].kill9()
    new = wait_for(f"a transaction coordinator other than killed node {coordinator}",
                   lambda: (lambda c: c if c is not None and c != coordinator else None)(
                       agreed_coordinator(cluster, survivors)), 60)
    print(f"coordinator {coordinator} killed; now {new}")

    second = Producer({"bootstrap.servers": cluster.bootstrap(*survivors),
                       "transactional.id": TXN_ID, "transaction.timeout.ms": 60000})
    second.init_transactions(60)
    run_transaction(second, topic, "c3", commit=True)
    # The first producer's epoch is older: it is fenced.
    with pytest.raises(KafkaException) as fenced:
        first.begin_transaction()
        first.produce(topic, value=b"zombie", partition=0)
        first.flush(10)
        first.commit_transaction(20)
    print(f"zombie producer: {fenced.value.args[0]}")

    cluster.nodes[coordinator].start()
    wait_for("the third commit's markers",
             lambda: log_ends(cluster.bootstrap(*survivors), topic) == {p: 24 for p in range(PARTITIONS)},
             30, diag=lambda: f"log ends {log_ends(cluster.bootstrap(*survivors), topic)}")
    committed, ends = read_all(cluster.bootstrap(*survivors), topic, "read_committed")
    assert committed == expected(["c1", "c2", "c3"])


# What Apache Kafka 4.4 prints for TransactionScenario (test_compat.py::test_transactions_same_as_kafka
# compares the two side by side on one node).
KAFKA_44_TRANSACTION_SCENARIO = """\
after init: Empty epoch 0 partitions 0
sent c1-a to 0 at 0
sent c1-b to 0 at 1
sent c1-c to 1 at 0
after commit 1: CompleteCommit epoch 1 partitions 0
sent a2-a to 0 at 3
sent a2-b to 1 at 2
after abort 2: CompleteAbort epoch 2 partitions 0
sent c3-a to 1 at 4
after commit 3: CompleteCommit epoch 3 partitions 0
sent zombie-open to 0 at 5
after successor init: Empty epoch 5 partitions 0
zombie commit: InvalidProducerEpochException
sent c4-a to 0 at 7
after successor commit: CompleteCommit epoch 6 partitions 0
committed offset: 5
partition 0 producer epoch 6 open transaction from OptionalLong.empty
partition 1 producer epoch 3 open transaction from OptionalLong.empty
read_committed ends 9,6: [0@0=c1-a, 0@1=c1-b, 0@7=c4-a, 1@0=c1-c, 1@4=c3-a]
read_uncommitted ends 9,6: [0@0=c1-a, 0@1=c1-b, 0@3=a2-a, 0@5=zombie-open, 0@7=c4-a, 1@0=c1-c, 1@2=a2-b, 1@4=c3-a]\
""".splitlines()


@pytest.mark.timeout(240)
def test_transaction_version_2_across_brokers(make_cluster):  # noqa: F811
    """kafka-clients 4.4 speaking transaction version 2 to three nodes: the partitions it writes
    to are led by two brokers, so at least one leader adds its partition at a coordinator on
    another broker (AddPartitionsToTxn v5), and markers with the bumped epoch go out as
    WriteTxnMarkers v2. The same observations as Kafka 4.4 on one node."""
    from test_compat import PEER_VERSION, _compiled, _scenario, _require_tools

    _require_tools()
    cluster = three_combined(make_cluster, dict(REPLICATION_EXTRA))
    wait_brokers_everywhere(cluster)
    source = Path(__file__).resolve().parent.parent / "harness" / "compat" / "TransactionScenario.java"
    classpath = _compiled(PEER_VERSION, source)
    seen = _scenario(classpath, cluster.bootstrap(), "txn-v2-spread", main=source.stem)
    leaders = {p: leader_of(cluster, "txn-v2-spread", p, cluster.broker_ids).leader for p in range(2)}
    print(f"partition leaders {leaders}")
    assert len(set(leaders.values())) == 2, f"leaders not spread: {leaders}"
    diff = "\n".join(difflib.unified_diff(KAFKA_44_TRANSACTION_SCENARIO, seen, "Apache Kafka 4.4", "tern",
                                          lineterm=""))
    assert seen == KAFKA_44_TRANSACTION_SCENARIO, f"tern's cluster differs from Apache Kafka:\n{diff}"
