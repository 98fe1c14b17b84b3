"""Operating a replicated tern cluster with Apache Kafka's own admin tools: preferred leader
elections (ElectLeaders), the automatic return of preferred leaders, partition reassignment
(AlterPartitionReassignments / ListPartitionReassignments, KIP-455), log dirs (DescribeLogDirs /
AlterReplicaLogDirs), and a network partition that cuts a partition leader off.

Each test starts its own cluster of real `tern server` processes (test_cluster.py's Cluster and
Node: node logs under tmp_path/node-<id>/tern.log, printed at teardown) with
broker.session.timeout.ms=6000, broker.heartbeat.interval.ms=500 and replica.lag.time.max.ms=4000
unless said otherwise, and runs Apache Kafka 4.x's tools as `java -cp <Kafka's jars> <main
class>` (kafka_peer.KafkaJars; every run's command, exit code and output is printed):

  1. kafka-leader-election.sh --election-type PREFERRED (org.apache.kafka.tools
     .LeaderElectionCommand), three combined nodes with auto.leader.rebalance.enable=false, a
     topic with explicit assignments (partitions 1 and 3 prefer node 1): node 1 is restarted
     (SIGTERM, start), its partitions are led elsewhere and stay so after it is back in every
     ISR; the tool with --topic/--partition 1 reports the election done and every node then
     reports node 1 leading partition 1 with a higher leader epoch; run again it reports "Valid
     replica already elected" (ELECTION_NOT_NEEDED) and changes nothing; --all-topic-partitions
     elects exactly partition 3, the only one left whose preferred replica does not lead; with
     node 2 stopped, electing its partition 2 fails with PreferredLeaderNotAvailableException
     (exit 1) and changes nothing, and --all-topic-partitions reports the same for elect-2 (as
     Apache Kafka's controller answers every partition whose election was needed); every record
     produced before is read back exactly once;
  2. auto.leader.rebalance.enable=true with leader.imbalance.check.interval.seconds=2 (and the
     default leader.imbalance.per.broker.percentage, 10): under an idempotent acks=all producer,
     node 1, the preferred leader of 7 of a topic's 9 partitions, is restarted; its partitions
     are led elsewhere meanwhile; once it is back in their ISRs the controller moves their
     leadership back to it with no tool (every node agrees, higher leader epochs, a node logs
     "moving leadership back to preferred replicas"); every acknowledged record reads back once
     at its offset and the replicas are byte-identical;
  3. kafka-reassign-partitions.sh (org.apache.kafka.tools.reassign.ReassignPartitionsCommand) on
     three combined nodes and two broker-only nodes: while an idempotent acks=all producer keeps
     producing, --execute moves partition 0 from [0, 1, 2] to [3, 4, 1] (its leader, node 0,
     leaves); it completes: every node reports replicas [3, 4, 1], all in the ISR, a leader among
     them with a higher epoch; ListPartitionReassignments is empty; --verify reports it
     completed (and exits 0); nodes 0 and 2 no longer have the partition's directory; the
     producer keeps being acknowledged; every acknowledged record reads back exactly once at its
     offset, and the new replicas' .log files are byte-identical;
  4. --cancel, and refused input: on three combined nodes and broker-only node 3, partition 0
     of a topic on [0, 1, 2] is reassigned to [0, 1, 3] while node 3 is frozen (SIGSTOP, so it
     is still registered when the tool checks the broker ids but cannot catch up):
     ListPartitionReassignments shows replicas [0, 1, 3, 2], adding [3], removing [2]; --verify
     says still in progress; --cancel restores replicas [0, 1, 2] with the whole ISR and an empty
     ListPartitionReassignments (the tool's exit code is then only checked for the throttle
     clearing that must time out on the frozen node 3, as it would on Apache Kafka), and node 3,
     resumed, has no directory for it. A target naming
     unknown broker 7 is refused by the tool ("Unknown broker id 7", exit 1) and, sent anyway
     with kafka-python's admin, by the broker with INVALID_REPLICA_ASSIGNMENT, as is a target
     naming a broker twice; cancelling when nothing is ongoing is NO_REASSIGNMENT_IN_PROGRESS;
     none of them changes the partition, and its records are all still there;
  5. kafka-log-dirs.sh --describe (org.apache.kafka.tools.LogDirsCommand) with node 0 on two
     log.dirs: the JSON names both of node 0's dirs and the one dir of nodes 1 and 2, each
     partition replica of a 6-partition topic once, in the dir that holds its directory on disk,
     with its size (the bytes of its .log files, the same on the three brokers, unequal between
     partitions), offsetLag 0, isFuture false; both of node 0's dirs are used. AlterReplicaLogDirs
     (kafka-python) to a replica's current dir succeeds, to a dir the broker does not have is
     LOG_DIR_NOT_FOUND, to node 0's other dir is KAFKA_STORAGE_ERROR (moves are not implemented);
     nothing moves, and after node 0 is restarted it reports the same placement and sizes and the
     records all read back;
  6. a network partition (root and `ip netns` needed, skipped otherwise): three combined nodes in
     their own network namespaces (test_cluster_partition.py's bridge and veths, on 10.233.0.0/24),
     a topic with replication factor 3 and min.insync.replicas=2, an idempotent acks=all producer
     and a consumer reading along; the leader of partition 0 is cut off (its link down: from the
     other nodes and from the clients). The other nodes fence it and elect a leader from the
     ISR with a higher epoch, the producer goes on there; meanwhile a producer inside the cut-off
     node's namespace writes acks=1 records to it, which only it has. Healed, it comes back as a
     follower, its acks=1 records are gone (truncated), every acknowledged record reads back
     exactly once, in order, at its offset, the consumer never saw the high watermark go back,
     and the three replicas' .log files are byte-identical.

Cluster state is read with raw Metadata v7 requests sent to each node (replication_util.py) and
required to agree between the nodes asked."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import TopicPartition as KTopicPartition
from kafka import TopicPartitionReplica

from replication_admin_util import (
    AdminTools,
    admin_client,
    list_reassignments_raw,
    make_custom_cluster,  # noqa: F401 - the fixture
    netns_cluster_factory,  # noqa: F401 - the fixture
    wait_partition,
    wait_reassignments,
    with_implicit_acks_placed,
)
from replication_util import (
    INVALID_REPLICA_ASSIGNMENT,
    VALUE,
    REPLICATION_EXTRA,
    NumberedProducer,
    WatermarkWatcher,
    agreed_partitions,
    check_acked,
    create_topic_raw_ok,
    leader_of,
    read_all,
    try_metadata_v7,
    views,
    wait_isr_full,
    wait_new_leader,
    wait_replicas_identical,
)
from test_cluster import (
    COMBINED,
    check_exactly_once,
    consume_assigned,
    kafka_jars,  # noqa: F401 - the session fixture with Apache Kafka's jars
    make_cluster,  # noqa: F401 - the fixture
    produce,
    three_combined,
    try_metadata,
    wait_brokers_everywhere,
    wait_for,
)

MIN_ISR = {"min.insync.replicas": "2"}
LOG_DIR_NOT_FOUND = 57
KAFKA_STORAGE_ERROR = 56
NO_REASSIGNMENT_IN_PROGRESS = 85


def led(parts):
    """{partition: (leader, leader epoch)}."""
    return {p: (s.leader, s.epoch) for p, s in parts.items()}


def agreed(cluster, topic, ids=None):
    ids = list(ids or cluster.broker_ids)
    return wait_for(f"nodes {ids} to agree on {topic}", lambda: agreed_partitions(cluster, topic, ids),
                    30, diag=lambda: views(cluster, topic, ids))


def others(cluster, node_id):
    return [n for n in cluster.broker_ids if n != node_id]


def check_producer_acked(final, producer):
    """check_acked for a NumberedProducer, records librdkafka acknowledged implicitly (no
    offset) taken at the offset where they are found on their partition."""
    placed, implicit = with_implicit_acks_placed(final, producer.acked)
    if implicit:
        print(f"{len(implicit)} records acknowledged without an offset (librdkafka's implicit "
              f"ack of a timed-out request), found at {[placed[v] for v in sorted(implicit)][:20]}")
    check_acked(final, placed, producer.failed)


def restart(node):
    assert node.stop(), f"node {node.node_id} did not exit on SIGTERM"
    try:
        node.start()
    except RuntimeError as e:
        pytest.fail(f"node {node.node_id} did not start again: {e}")


# -- 1. kafka-leader-election.sh ---------------------------------------------------------------------------

ELECTION_ASSIGNMENTS = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1], 3: [1, 0, 2]}


@pytest.mark.timeout(120)
def test_preferred_leader_election_with_kafka_tool(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """kafka-leader-election.sh --election-type PREFERRED, by partition and for all partitions,
    after the preferred leader was restarted; again (not needed); with the preferred replica
    down (not available). See the module docstring, 1."""
    cluster = three_combined(make_cluster, {**REPLICATION_EXTRA, "auto.leader.rebalance.enable": "false"})
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    topic, count = "elect", len(ELECTION_ASSIGNMENTS)
    create_topic_raw_ok(cluster, topic, None, None, assignments=ELECTION_ASSIGNMENTS)
    start = wait_isr_full(cluster, topic, count, 3)
    assert {p: s.leader for p, s in start.items()} == {p: r[0] for p, r in ELECTION_ASSIGNMENTS.items()}, start
    acked = produce(cluster.bootstrap(), topic, range(400), partition_of=lambda i: i % count)

    # Node 1 restarted: partitions 1 and 3 are led elsewhere, and stay so once it is back.
    restart_at = agreed(cluster, topic)
    node1 = cluster.nodes[1]
    assert node1.stop(), "node 1 did not exit on SIGTERM"
    for p in (1, 3):
        wait_new_leader(cluster, topic, p, restart_at[p], [0, 2])
    try:
        node1.start()
    except RuntimeError as e:
        pytest.fail(f"node 1 did not start again: {e}")
    moved = wait_isr_full(cluster, topic, count, 3)
    print(f"after restarting node 1: {moved}")
    assert moved[1].leader != 1 and moved[3].leader != 1, (
        f"with auto.leader.rebalance.enable=false node 1 leads its preferred partitions again "
        f"without an election: {moved}")

    # --topic elect --partition 1
    p, report = tools.elect_preferred(cluster.bootstrap(), topic, 1)
    assert p.returncode == 0, f"kafka-leader-election exited {p.returncode}"
    assert report == {"succeeded": {"elect-1"}, "noop": set(), "failed": {}}, report
    first = wait_partition(cluster, topic, 1, cluster.broker_ids,
                           f"led by its preferred replica 1 with an epoch above {moved[1].epoch}",
                           lambda s: s.leader == 1 and s.epoch > moved[1].epoch)
    assert first.replicas == (1, 2, 0), first
    now = agreed(cluster, topic)
    assert {k: v for k, v in led(now).items() if k != 1} == {k: v for k, v in led(moved).items() if k != 1}, (
        f"electing partition 1 changed other partitions: {led(moved)} -> {led(now)}")

    # Again: not needed, nothing changes.
    p, report = tools.elect_preferred(cluster.bootstrap(), topic, 1)
    assert p.returncode == 0, f"kafka-leader-election exited {p.returncode}"
    assert report == {"succeeded": set(), "noop": {"elect-1"}, "failed": {}}, report
    again = agreed(cluster, topic)
    assert led(again) == led(now), f"an election that was not needed changed leaders: {led(now)} -> {led(again)}"

    # --all-topic-partitions: partition 3 is the only one whose preferred replica does not lead.
    p, report = tools.elect_preferred(cluster.bootstrap())
    assert p.returncode == 0, f"kafka-leader-election --all-topic-partitions exited {p.returncode}"
    assert report["succeeded"] == {"elect-3"} and not report["failed"], report
    wait_partition(cluster, topic, 3, cluster.broker_ids,
                   f"led by its preferred replica 1 with an epoch above {moved[3].epoch}",
                   lambda s: s.leader == 1 and s.epoch > moved[3].epoch)
    after_all = agreed(cluster, topic)
    assert {p: s.leader for p, s in after_all.items()} == {p: r[0] for p, r in ELECTION_ASSIGNMENTS.items()}, after_all
    assert {k: v for k, v in led(after_all).items() if k != 3} == {k: v for k, v in led(again).items() if k != 3}, (
        f"--all-topic-partitions changed partitions that did not need it: {led(again)} -> {led(after_all)}")

    # The preferred replica of partition 2 is down: not available, nothing changes.
    node2 = cluster.nodes[2]
    assert node2.stop(), "node 2 did not exit on SIGTERM"
    without2 = wait_new_leader(cluster, topic, 2, after_all[2], [0, 1])
    p, report = tools.elect_preferred(cluster.bootstrap(0, 1), topic, 2)
    assert p.returncode != 0, "electing a partition whose preferred replica is down should fail"
    assert set(report["failed"]) == {"elect-2"} and not report["succeeded"] and not report["noop"], report
    assert "PreferredLeaderNotAvailableException" in report["failed"]["elect-2"], report
    still = agreed(cluster, topic, [0, 1])
    assert (still[2].leader, still[2].epoch) == (without2.leader, without2.epoch), (without2, still[2])
    # The same for all partitions: Apache Kafka's controller answers every partition but those
    # whose election is not needed, so the tool reports elect-2 failed (and exits 1).
    p_all, report_all = tools.elect_preferred(cluster.bootstrap(0, 1))
    after_all_down = agreed(cluster, topic, [0, 1])
    assert led(after_all_down) == led(still), f"nothing could be elected: {led(still)} -> {led(after_all_down)}"

    msgs = consume_assigned(cluster.bootstrap(0, 1), topic, range(count), len(acked))
    check_exactly_once(msgs, acked)

    assert "elect-2" in report_all["failed"] and not report_all["succeeded"], (
        f"kafka-leader-election --all-topic-partitions with partition 2's preferred replica down "
        f"should report elect-2 as PreferredLeaderNotAvailableException, as Apache Kafka does; "
        f"it reported {report_all}, exit {p_all.returncode}")
    assert "PreferredLeaderNotAvailableException" in report_all["failed"]["elect-2"], report_all
    assert p_all.returncode != 0, f"exit {p_all.returncode} though elect-2 failed"


# -- 2. auto.leader.rebalance.enable ---------------------------------------------------------------------------

REBALANCE_LINE = "moving leadership back to preferred replicas"


# Partitions 0-6 prefer node 1, 7 node 0, 8 node 2. Seven of them: whichever broker registered
# first also prefers every partition of the internal __mirror_state topic (50, replication factor
# 1, created while it was the only broker), and 7 of 57 is still above the default
# leader.imbalance.per.broker.percentage of 10.
REBALANCE_ASSIGNMENTS = {**{p: [1, 2, 0] if p % 2 else [1, 0, 2] for p in range(7)},
                         7: [0, 1, 2], 8: [2, 0, 1]}


@pytest.mark.timeout(120)
def test_auto_leader_rebalance_returns_leadership(make_cluster):  # noqa: F811
    """With leader.imbalance.check.interval.seconds=2 a restarted preferred leader gets its
    partitions back by itself once it is in the ISR, under acks=all load. See the module
    docstring, 2."""
    cluster = three_combined(make_cluster, {
        **REPLICATION_EXTRA,
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "2",
    })
    wait_brokers_everywhere(cluster)
    topic, count = "rebalance", len(REBALANCE_ASSIGNMENTS)
    preferred = {p: r[0] for p, r in REBALANCE_ASSIGNMENTS.items()}
    node1_prefers = [p for p, n in preferred.items() if n == 1]
    create_topic_raw_ok(cluster, topic, None, None, configs=MIN_ISR, assignments=REBALANCE_ASSIGNMENTS)
    start = wait_isr_full(cluster, topic, count, 3)
    assert {p: s.leader for p, s in start.items()} == preferred, start
    mirror_state = try_metadata_v7(cluster.nodes[0].address, ["__mirror_state"])
    print(f"__mirror_state leaders: "
          f"{sorted({s.leader for t in (mirror_state.topics.values() if mirror_state else []) for s in t.partitions.values()})}")
    marks = {n: len(node.log_text()) for n, node in cluster.nodes.items()}

    producer = NumberedProducer(cluster.bootstrap(), topic, count, rate=150)
    producer.start()
    try:
        producer.wait_acked("150 acknowledged records", 150)
        node1 = cluster.nodes[1]
        assert node1.stop(), "node 1 did not exit on SIGTERM"
        moved = wait_for(
            f"nodes 0 and 2 to agree that partitions {node1_prefers} are led by them, with higher epochs",
            lambda: (lambda parts: parts if parts and all(
                parts[p].leader in (0, 2) and parts[p].epoch > start[p].epoch for p in node1_prefers)
                else None)(agreed_partitions(cluster, topic, [0, 2])),
            45, diag=lambda: views(cluster, topic, [0, 2]))
        print(f"node 1 stopped: {led(moved)}")
        producer.wait_acked(f"records on partition 1 led by node {moved[1].leader}", 20, partition=1)
        try:
            node1.start()
        except RuntimeError as e:
            pytest.fail(f"node 1 did not start again: {e}")
        back = wait_for(
            f"every node to agree that node 1 leads its preferred partitions {node1_prefers} again, "
            f"with higher epochs, with no election asked for",
            lambda: (lambda parts: parts if parts and all(
                parts[p].leader == 1 and parts[p].epoch > moved[p].epoch for p in node1_prefers)
                else None)(agreed_partitions(cluster, topic, cluster.broker_ids)),
            60, interval=0.3, diag=lambda: views(cluster, topic, cluster.broker_ids))
        print(f"back: {led(back)}")
        assert {p: s.leader for p, s in back.items()} == preferred, back
        assert all(1 in back[p].isr for p in node1_prefers), back
        producer.wait_acked("records acknowledged after the rebalance", 150)
    finally:
        producer.finish()
    said = [l for n, node in cluster.nodes.items()
            for l in node.log_text()[marks[n]:].splitlines() if REBALANCE_LINE in l]
    assert said, f"no node logged {REBALANCE_LINE!r}"
    print("\n".join(said))

    final, ends = read_all(cluster.bootstrap(), topic, range(count))
    print(f"log ends {ends}")
    check_producer_acked(final, producer)
    producer.check_all_delivered()
    wait_replicas_identical(cluster, topic, range(count), cluster.broker_ids)


# -- 3. and 4. kafka-reassign-partitions.sh ----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_reassign_partitions_with_kafka_tool_under_load(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """--execute [0, 1, 2] -> [3, 4, 1] under acks=all load, then --verify; the old replicas'
    logs are deleted, the new ones hold every acknowledged record. See the module docstring, 3."""
    cluster = make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED, 3: "broker", 4: "broker"},
                           REPLICATION_EXTRA)
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    topic = "moving"
    create_topic_raw_ok(cluster, topic, None, None, configs=MIN_ISR,
                        assignments={0: [0, 1, 2], 1: [1, 2, 0]})
    before = wait_isr_full(cluster, topic, 2, 3)[0]
    assert before.leader == 0, before
    target = [3, 4, 1]
    plan = {(topic, 0): target}

    producer = NumberedProducer(cluster.bootstrap(), topic, 2, rate=150)
    producer.start()
    try:
        producer.wait_acked("300 acknowledged records before the reassignment", 300)
        p = tools.reassign(cluster.bootstrap(), "execute", plan)
        assert p.returncode == 0, f"--execute exited {p.returncode}"
        assert "Successfully started partition reassignment for moving-0" in p.stdout, p.stdout
        assert '"replicas":[0,1,2]' in p.stdout, "the rollback JSON should show the current replicas"
        print(f"ListPartitionReassignments right after --execute: "
              f"{list_reassignments_raw(cluster.nodes[1].address)}")

        done = wait_partition(
            cluster, topic, 0, cluster.broker_ids,
            f"replicas {target}, all in the ISR, led by one of them",
            lambda s: s.replicas == tuple(target) and set(s.isr) == set(target) and s.leader in target,
            timeout=60)
        print(f"after the reassignment: {done}")
        assert done.epoch > before.epoch, (before, done)
        wait_reassignments(cluster, cluster.broker_ids, "none ongoing", lambda a: a == {})
        verify = tools.reassign(cluster.bootstrap(), "verify", plan)
        assert "Reassignment of partition moving-0 is completed." in verify.stdout, verify.stdout

        def leftovers():
            return {n: [d.name for d in cluster.nodes[n].data_dir.glob(f"{topic}-0")] for n in (0, 2)}
        wait_for("nodes 0 and 2, no longer replicas, to delete moving-0's directory",
                 lambda: not any(leftovers().values()), 30, diag=leftovers)
        producer.wait_acked("records on partition 0 acknowledged by its new replicas", 100, partition=0)
    finally:
        producer.finish()

    final, ends = read_all(cluster.bootstrap(), topic, range(2))
    print(f"log ends {ends}")
    check_producer_acked(final, producer)
    producer.check_all_delivered()
    wait_replicas_identical(cluster, topic, [0], target)
    wait_replicas_identical(cluster, topic, [1], [1, 2, 0])
    assert agreed(cluster, topic)[0].replicas == tuple(target)
    assert verify.returncode == 0, (
        f"kafka-reassign-partitions --verify of a completed reassignment exited {verify.returncode} "
        f"(Apache Kafka's clears the reassignment throttles then, and exits 0):\n{verify.stdout}")


@pytest.mark.timeout(120)
def test_reassignment_cancel_and_refused_input(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """--cancel of a reassignment that cannot finish (its new replica's broker is frozen)
    restores the original replicas; an unknown or repeated broker id is refused and changes
    nothing. See the module docstring, 4. broker.session.timeout.ms is 20 s here, so the frozen
    broker is still registered (and listed by DescribeCluster) when the tool checks the ids."""
    cluster = make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED, 3: "broker"},
                           {**REPLICATION_EXTRA, "broker.session.timeout.ms": "20000"})
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    voters = cluster.bootstrap(0, 1, 2)
    topic = "cancelled"
    tp = KTopicPartition(topic, 0)
    create_topic_raw_ok(cluster, topic, None, None, configs=MIN_ISR, assignments={0: [0, 1, 2]})
    original = wait_isr_full(cluster, topic, 1, 3)[0]
    acked = produce(voters, topic, range(200), partition_of=lambda i: 0)
    plan = {(topic, 0): [0, 1, 3]}

    frozen = cluster.nodes[3]
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        for attempt in range(3):
            p = tools.reassign(voters, "execute", plan)
            if "Unknown broker id 3" not in p.stdout or attempt == 2:
                break
            # Fenced before the tool asked (a very slow JVM start): let it register again.
            frozen.proc.send_signal(signal.SIGCONT)
            wait_brokers_everywhere(cluster)
            frozen.proc.send_signal(signal.SIGSTOP)
        assert p.returncode == 0, f"--execute exited {p.returncode}"
        assert "Successfully started partition reassignment for cancelled-0" in p.stdout, p.stdout

        ongoing = wait_reassignments(cluster, [0, 1, 2], "cancelled-0 ongoing", lambda a: a != {})
        assert ongoing == {(topic, 0): ((0, 1, 3, 2), (3,), (2,))}, ongoing
        during = wait_partition(cluster, topic, 0, [0, 1, 2], "replicas [0, 1, 3, 2] while 3 is added",
                                lambda s: s.replicas == (0, 1, 3, 2))
        assert 3 not in during.isr and during.leader == 0, during
        verify = tools.reassign(voters, "verify", plan)
        assert verify.returncode == 0, f"--verify exited {verify.returncode}"
        assert "Reassignment of partition cancelled-0 is still in progress." in verify.stdout, verify.stdout

        cancel = tools.reassign(voters, "cancel", plan)  # its exit code is checked at the end
        assert "Successfully cancelled partition reassignment for: cancelled-0" in cancel.stdout, cancel.stdout
        restored = wait_partition(cluster, topic, 0, [0, 1, 2], "back to replicas [0, 1, 2], all in sync",
                                  lambda s: s.replicas == (0, 1, 2) and set(s.isr) == {0, 1, 2})
        assert restored.leader == 0, restored
        wait_reassignments(cluster, [0, 1, 2], "none ongoing after --cancel", lambda a: a == {})
    finally:
        if frozen.running:
            frozen.proc.send_signal(signal.SIGCONT)

    # Node 3, resumed, learns it is no replica and has no directory for the partition.
    wait_brokers_everywhere(cluster)
    wait_partition(cluster, topic, 0, cluster.broker_ids, "replicas [0, 1, 2] as node 3 sees it too",
                   lambda s: s.replicas == (0, 1, 2))
    wait_for("node 3 to have no cancelled-0 directory",
             lambda: not (frozen.data_dir / f"{topic}-0").exists(), 20)

    # Refused input.
    p = tools.reassign(voters, "execute", {(topic, 0): [0, 1, 7]})
    assert p.returncode != 0 and "Unknown broker id 7" in p.stdout, p.stdout
    admin = admin_client(voters)
    try:
        refused = {
            "unknown broker 7": admin.alter_partition_reassignments({tp: [0, 1, 7]}),
            "broker 0 twice": admin.alter_partition_reassignments({tp: [0, 0, 1]}),
        }
        nothing = admin.alter_partition_reassignments({tp: None})
    finally:
        admin.close()
    print(f"refused: {refused}; cancel with nothing ongoing: {nothing}")
    for what, result in refused.items():
        err = result.get(tp)
        assert err is not None and err.errno == INVALID_REPLICA_ASSIGNMENT, (what, result)
    assert nothing.get(tp) is not None and nothing[tp].errno == NO_REASSIGNMENT_IN_PROGRESS, nothing

    unchanged = agreed(cluster, topic)[0]
    assert (unchanged.replicas, set(unchanged.isr), unchanged.leader) == ((0, 1, 2), {0, 1, 2}, 0), unchanged
    assert unchanged.epoch == restored.epoch, (restored, unchanged)
    wait_reassignments(cluster, cluster.broker_ids, "none ongoing after the refused requests", lambda a: a == {})
    assert not (frozen.data_dir / f"{topic}-0").exists()
    print(f"original {original}, restored {restored}")
    check_exactly_once(consume_assigned(voters, topic, [0], len(acked)), acked)
    # After cancelling, the tool clears the throttles on every broker of the plan, the frozen
    # one included; that call can only time out (as against Apache Kafka with a frozen broker),
    # so a nonzero exit is accepted for that reason alone.
    assert cancel.returncode == 0 or "Timed out waiting to send the call" in cancel.stdout, (
        f"kafka-reassign-partitions --cancel exited {cancel.returncode}:\n{cancel.stdout}")


# -- 5. kafka-log-dirs.sh --------------------------------------------------------------------------------


def log_bytes(d):
    return sum(f.stat().st_size for f in Path(d).glob("*.log"))


def placement(cluster, dirs, topic, count):
    """{node: {partition: (log dir, bytes of its .log files)}} from the disk."""
    out = {}
    for n, node_dirs in dirs.items():
        out[n] = {}
        for p in range(count):
            found = [d for d in node_dirs if (Path(d) / f"{topic}-{p}").is_dir()]
            out[n][p] = [(d, log_bytes(Path(d) / f"{topic}-{p}")) for d in found]
    return out


@pytest.mark.timeout(120)
def test_log_dirs_describe_and_alter(make_custom_cluster, kafka_jars, tmp_path):  # noqa: F811
    """kafka-log-dirs.sh --describe with two log.dirs on node 0; AlterReplicaLogDirs to the
    current dir, an unknown dir, the other dir. See the module docstring, 5."""
    second = tmp_path / "node-0" / "data-second"
    first = tmp_path / "node-0" / "data"
    cluster = make_custom_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED}, REPLICATION_EXTRA,
                                  per_node={0: {"log.dirs": f"{first},{second}"}})
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    dirs = {0: [os.path.realpath(first), os.path.realpath(second)],
            1: [os.path.realpath(cluster.nodes[1].data_dir)],
            2: [os.path.realpath(cluster.nodes[2].data_dir)]}
    topic, count = "dirs", 6
    create_topic_raw_ok(cluster, topic, count, 3)
    wait_isr_full(cluster, topic, count, 3)
    # Partition p gets (p + 1) * 60 records: every partition has its own size.
    shares = [p for p in range(count) for _ in range(p + 1)]
    acked = produce(cluster.bootstrap(), topic, range(60 * len(shares)),
                    partition_of=lambda i: shares[i % len(shares)])

    def same_everywhere():
        where = placement(cluster, dirs, topic, count)
        ok = all(len(where[n][p]) == 1 for n in where for p in range(count)) and all(
            len({where[n][p][0][1] for n in where}) == 1 for p in range(count))
        return where if ok else None

    where = wait_for("every replica in one dir per node, with the same bytes on the three nodes",
                     same_everywhere, 30, diag=lambda: placement(cluster, dirs, topic, count))
    sizes = {p: where[0][p][0][1] for p in range(count)}
    assert len(set(sizes.values())) == count and all(s > 0 for s in sizes.values()), sizes
    used = {where[0][p][0][0] for p in range(count)}
    assert used == set(dirs[0]), f"node 0 put every partition in {used}, not spread over {dirs[0]}"

    def check_described(brokers, source):
        assert set(brokers) == {0, 1, 2}, (source, brokers)
        for n, logdirs in brokers.items():
            assert sorted(d["logDir"] for d in logdirs) == sorted(dirs[n]), (source, n, logdirs)
            assert all(d.get("error") is None for d in logdirs), (source, n, logdirs)
            seen = {}
            for d in logdirs:
                for part in d["partitions"]:
                    name, _, index = part["partition"].rpartition("-")
                    if name == topic:
                        seen.setdefault(int(index), []).append(
                            (d["logDir"], part["size"], part["offsetLag"], part["isFuture"]))
            want = {p: [(where[n][p][0][0], sizes[p], 0, False)] for p in range(count)}
            assert seen == want, f"{source}: broker {n} describes {seen}, on disk {want}"

    p, doc = tools.describe_log_dirs(cluster.bootstrap())
    assert p.returncode == 0 and doc is not None, f"kafka-log-dirs exited {p.returncode}"
    assert "Received log directory information from brokers 0,1,2" in p.stdout, p.stdout
    check_described({b["broker"]: b["logDirs"] for b in doc["brokers"]}, "kafka-log-dirs --describe")

    admin = admin_client(cluster.bootstrap())
    try:
        here = {TopicPartitionReplica(topic, p, 0): where[0][p][0][0] for p in range(count)}
        stay = admin.alter_replica_log_dirs(here)
        other_dir = {d for d in dirs[0] if d != where[0][0][0][0]}.pop()
        unknown = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): str(tmp_path / "no-such-dir")})
        not_broker1s = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): dirs[0][1]})
        move = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): other_dir})
    finally:
        admin.close()
    print(f"to the current dirs: {stay}\nto a dir that does not exist: {unknown}\n"
          f"to node 0's dir on node 1: {not_broker1s}\nto node 0's other dir: {move}")
    assert {r: e.errno for r, e in stay.items()} == {r: 0 for r in here}, stay
    assert [e.errno for e in unknown.values()] == [LOG_DIR_NOT_FOUND], unknown
    assert [e.errno for e in not_broker1s.values()] == [LOG_DIR_NOT_FOUND], not_broker1s
    assert [e.errno for e in move.values()] == [KAFKA_STORAGE_ERROR], move
    assert placement(cluster, dirs, topic, count) == where, "a replica moved"

    # Node 0 restarted: it finds its replicas in both dirs.
    restart(cluster.nodes[0])
    wait_isr_full(cluster, topic, count, 3)
    admin = admin_client(cluster.bootstrap())
    try:
        described = admin.describe_log_dirs()
    finally:
        admin.close()
    brokers = {}
    for b in described:
        brokers[b["broker"]] = [
            {"logDir": d["log_dir"], "error": None if d["error_code"] == 0 else d["error_code"],
             "partitions": [{"partition": f"{t['name']}-{x['partition_index']}", "size": x["partition_size"],
                             "offsetLag": x["offset_lag"], "isFuture": x["is_future_key"]}
                            for t in d["topics"] for x in t["partitions"]]}
            for d in b["log_dirs"]]
    assert placement(cluster, dirs, topic, count) == where, "a replica moved across the restart"
    check_described(brokers, "DescribeLogDirs after restarting node 0")
    check_exactly_once(consume_assigned(cluster.bootstrap(), topic, range(count), len(acked)), acked)


# -- 6. a network partition cuts the leader off --------------------------------------------------------------

MINORITY_PRODUCER = r"""
import json, sys
from confluent_kafka import Producer
address, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = []
def delivered(err, msg):
    out.append({"value": msg.value().decode(), "error": str(err) if err else None,
                "partition": msg.partition(), "offset": msg.offset()})
p = Producer({"bootstrap.servers": address, "acks": "1", "enable.idempotence": False, "retries": 0,
              "linger.ms": 0, "message.timeout.ms": 8000, "socket.timeout.ms": 5000})
for i in range(count):
    p.produce(topic, value=b"minority-%d" % i, partition=0, on_delivery=delivered)
    p.poll(0)
left = p.flush(20)
print(json.dumps({"left": left, "results": out}))
"""


def brokers_listed(node):
    md = try_metadata(node.address)
    return None if md is None else set(md.brokers)


@pytest.mark.timeout(120)
def test_network_partition_of_a_leader(netns_cluster_factory, tmp_path):  # noqa: F811
    """The leader of partition 0 is cut off the network under acks=all load; the rest fence it
    and elect from the ISR, the producer goes on; what only it wrote is truncated when it comes
    back as a follower. See the module docstring, 6."""
    cluster = netns_cluster_factory({**REPLICATION_EXTRA, "auto.leader.rebalance.enable": "false"})
    ids = sorted(cluster.nodes)
    wait_for("every node to list the three brokers",
             lambda: all(brokers_listed(cluster.nodes[n]) == set(ids) for n in ids), 30,
             diag=lambda: {n: brokers_listed(cluster.nodes[n]) for n in ids})
    topic = "cut"
    create_topic_raw_ok(cluster, topic, 3, 3, configs=MIN_ISR)
    wait_isr_full(cluster, topic, 3, 3)

    producer = NumberedProducer(cluster.bootstrap(), topic, 3, rate=150)
    watcher = WatermarkWatcher(cluster.bootstrap(), topic, range(3))
    watcher.start()
    producer.start()
    minority = {}
    cut_off = None
    try:
        producer.wait_acked("300 acknowledged records before the cut", 300)
        old = leader_of(cluster, topic, 0, ids)
        isolated = cluster.nodes[old.leader]
        rest = others(cluster, old.leader)
        mark = isolated.log_size()
        cluster.net.cut(old.leader)
        cut_off = old.leader
        print(f"cut off node {old.leader}, leader of {topic}/0 (epoch {old.epoch})")

        new = wait_new_leader(cluster, topic, 0, old, rest)
        print(f"{topic}/0 after the cut: {new}")
        assert new.leader in rest and new.leader in old.isr and old.leader not in new.isr, (old, new)
        wait_for(f"nodes {rest} to fence broker {old.leader} (not listed any more)",
                 lambda: all(brokers_listed(cluster.nodes[n]) == set(rest) for n in rest), 30,
                 diag=lambda: {n: brokers_listed(cluster.nodes[n]) for n in rest})
        producer.wait_acked(f"acks=all records on {topic}/0 led by node {new.leader}", 100, partition=0)

        # Inside the cut-off node's namespace: acks=1 records only the old leader can have.
        script = tmp_path / "minority_producer.py"
        script.write_text(MINORITY_PRODUCER)
        got = subprocess.run(["ip", "netns", "exec", isolated.ns, sys.executable, str(script),
                              isolated.address, topic, "20"], capture_output=True, text=True, timeout=60)
        print(f"producer inside node {old.leader}'s namespace exited {got.returncode}: "
              f"{got.stdout.strip()[:3000]} {got.stderr.strip()[-2000:]}")
        assert got.returncode == 0, got.stderr
        results = json.loads(got.stdout.strip().splitlines()[-1])["results"]
        minority = {r["value"].encode(): (r["partition"], r["offset"]) for r in results if r["error"] is None}
        print(f"acks=1 records node {old.leader} acknowledged while cut off: {sorted(minority.values())}")

        cluster.net.heal(old.leader)
        cut_off = None
        wait_for("the three brokers listed by every node again",
                 lambda: all(brokers_listed(cluster.nodes[n]) == set(ids) for n in ids), 45,
                 diag=lambda: {n: brokers_listed(cluster.nodes[n]) for n in ids})
        whole = wait_isr_full(cluster, topic, 3, 3)
        print(f"after healing: {whole}")
        assert whole[0].leader != old.leader and whole[0].epoch >= new.epoch, (
            f"node {old.leader} should be back as a follower of {topic}/0: {whole[0]}")
        producer.wait_acked("records acknowledged with the ISR whole again", 200)
    finally:
        if cut_off is not None:
            cluster.net.heal(cut_off)
        producer.finish()
    since = [l for l in isolated.log_since(mark).splitlines() if "trunc" in l.lower()]
    print(f"node {old.leader}'s log lines about truncation since the cut:\n" + "\n".join(since[-10:]))

    try:
        final, ends = read_all(cluster.bootstrap(), topic, range(3))
        print(f"log ends {ends}")
        kept = [(v, where) for v, where in minority.items()
                if any(value == v for _, value in final[where[0]])]
        assert not kept, (f"acks=1 records only the cut-off old leader had are still in the log after "
                          f"it came back: {kept}")
        check_producer_acked(final, producer)
        producer.check_all_delivered()
        watcher.finish(ends)
    finally:
        watcher.stop_flag.set()
    watcher.check(final)
    wait_replicas_identical(cluster, topic, range(3), ids)


@pytest.mark.timeout(150)
def test_reassignment_throttle_holds_a_new_replica_back(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """kafka-reassign-partitions.sh --execute --throttle: a partition of one replica holding
    4 MB gets a second replica with a 100 kB/s throttle (the tool sets both brokers'
    leader/follower.replication.throttled.rate and the topic's throttled replicas). Four seconds
    later the new replica holds less than 2.5 MB (about 0.5 MB at the rate; unthrottled it copies
    everything in well under a second) and is not in the ISR.
    Once the brokers' rates are deleted it catches up, joins the ISR, --verify completes and
    clears the throttle, and the replicas are byte-identical with every record read back."""
    from confluent_kafka import Producer
    from replication_admin_util import REASSIGN

    cluster = three_combined(make_cluster, REPLICATION_EXTRA)
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    topic = "throttled"
    create_topic_raw_ok(cluster, topic, None, None, assignments={0: [0]})
    wait_isr_full(cluster, topic, 1, 1)
    bootstrap = cluster.bootstrap()
    acked = {}

    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                  "compression.type": "none"})
    for i in range(4000):
        p.produce(topic, value=VALUE % i + b"-" + os.urandom(500).hex().encode(), partition=0,
                  on_delivery=delivered)
        p.poll(0)
    assert p.flush(60) == 0
    assert not failed and len(acked) == 4000, failed[:3]

    plan = {(topic, 0): [0, 1]}
    out = tools.run(REASSIGN, "--bootstrap-server", bootstrap, "--command-config", tools.config,
                    "--execute", "--reassignment-json-file", tools.plan_file(plan),
                    "--throttle", "100000")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "throttle" in out.stdout.lower(), out.stdout

    def copied():
        return sum(f.stat().st_size for f in cluster.nodes[1].data_dir.glob(f"{topic}-0/*.log"))

    time.sleep(4)
    held = copied()
    state = agreed_partitions(cluster, topic, cluster.broker_ids)[0]
    print(f"after 4 s under the throttle: node 1 holds {held} bytes; {state}")
    assert 0 < held < 2_500_000, f"node 1 copied {held} bytes in 4 s under a 100 kB/s throttle"
    assert 1 not in state.isr, state

    for node in (0, 1):
        d = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", tools.config,
                      "--entity-type", "brokers", "--entity-name", str(node), "--alter",
                      "--delete-config", "leader.replication.throttled.rate,follower.replication.throttled.rate")
        assert d.returncode == 0, d.stdout + d.stderr
    wait_partition(cluster, topic, 0, cluster.broker_ids, "node 1 in the ISR after the throttle went",
                   lambda s: set(s.isr) == {0, 1}, timeout=60)
    verify = tools.reassign(bootstrap, "verify", plan)
    assert "Reassignment of partition throttled-0 is completed." in verify.stdout, verify.stdout
    wait_replicas_identical(cluster, topic, [0], [0, 1])
    final, ends = read_all(bootstrap, topic, [0])
    assert ends[0] == 4000, ends
    check_acked(final, acked, number=lambda v: int(v[2:10]))
