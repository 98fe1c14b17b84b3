"""Unclean leader election (unclean.leader.election.enable, a broker setting defaulting to false
and a topic config overriding it; ElectLeaders with election type UNCLEAN): when a partition's
last in-sync replica is gone, a live out-of-sync replica may lead only if unclean election is
allowed for the topic (or asked for with kafka-leader-election.sh --election-type UNCLEAN); it
leads alone in the ISR, and the records only the lost ISR had are gone. The old leader, started
again, follows it and truncates what it alone had (by leader epoch).

One cluster of real `tern server` processes (test_cluster.py's Cluster and Node: node logs under
tmp_path/node-<id>/tern.log, printed at teardown) with broker.session.timeout.ms=6000,
broker.heartbeat.interval.ms=500 and replica.lag.time.max.ms=4000: three combined voters 0-2 and
broker-only nodes 3 and 4, so that killing 3 and 4 never touches the metadata quorum. Three topics,
each with one partition assigned to [3, 4] (node 3 leads), min.insync.replicas=1 and
unclean.leader.election.enable not set (false, the broker default): `unclean` (its config is
altered later), `unclean-tool` (elected with the tool) and `unclean-default` (elected once the
broker default is altered). All go through the same steps:

  1. batch A, 100 numbered records acks=all, is acknowledged with both replicas in the ISR;
  2. kill -9 node 4 (the follower): the ISR shrinks to [3]; batch B, 50 records acks=all (the ISR
     of one is enough with min.insync.replicas=1), is acknowledged: only node 3 has it;
  3. kill -9 node 3 (the leader, the last of the ISR): every live node reports leader -1
     (offline) with the ISR still [3];
  4. node 4 is started again; once every live node lists it as a broker and it has applied
     metadata written after its registration (a marker topic created then is listed by it), the
     partitions are still offline (leader -1, as every live node reports) and a produce with a
     5 s message timeout is refused (no record acknowledged, and none of them is ever read back):
     node 4 is not in the ISR and unclean election is not allowed;
  5. `unclean`: kafka-configs.sh --alter --add-config unclean.leader.election.enable=true on the
     topic (org.apache.kafka.tools.ConfigCommand via kafka_peer.KafkaJars) -> node 4 leads it with a
     higher leader epoch, ISR [4]; `unclean-tool` stays offline (the topic config of another
     topic does not apply to it); batch C, 100 records acks=all, is acknowledged;
  6. `unclean-tool`: kafka-leader-election.sh --election-type UNCLEAN --topic unclean-tool
     --partition 0 (org.apache.kafka.tools.LeaderElectionCommand) reports the election done and
     node 4 leads with a higher epoch, ISR [4], although the topic does not allow unclean
     election; its batch C is acknowledged;
  6b. `unclean-default` stays offline through steps 5 and 6; kafka-configs.sh --entity-type
     brokers --entity-default --alter --add-config unclean.leader.election.enable=true (a dynamic
     cluster-wide broker default, which the active controller reads at each election) -> node 4
     leads it alone with a higher epoch, and its batch C is acknowledged;
  7. the documented loss: each partition reads back as exactly A then C, every record once at its
     acknowledged offset; C starts where A ended, at the offsets B had, and no record of B (nor
     of the refused produce) is there;
  8. node 3 is started again: it follows node 4, truncates B and catches up: the ISR is {3, 4}
     with node 4 leading, node 3's .log files become byte-identical to node 4's, and the
     partitions still read back as exactly A then C.

Cluster state is read with raw Metadata v7 requests sent to each node (replication_util.py) and
required to agree between the nodes asked; the Java tools' commands, exit codes and output are
printed (replication_admin_util.py's AdminTools). Nothing here asserts how fast anything
happens: every wait is a poll with a generous deadline."""

import pytest
from confluent_kafka import KafkaError

from replication_admin_util import LEADER_ELECTION, AdminTools, election_report, wait_partition
from replication_util import (
    REPLICATION_EXTRA,
    VALUE,
    agreed_partitions,
    check_acked,
    create_topic_raw_ok,
    read_all,
    try_metadata_v7,
    views,
    wait_isr_full,
    wait_replicas_identical,
)
from test_cluster import (
    COMBINED,
    kafka_jars,  # noqa: F401 - the session fixture with Apache Kafka's jars
    make_cluster,  # noqa: F401 - the fixture
    wait_brokers_everywhere,
    wait_for,
)
from test_replication import acknowledged, produce_once

BY_CONFIG = "unclean"
BY_TOOL = "unclean-tool"
BY_DEFAULT = "unclean-default"
TOPICS = (BY_CONFIG, BY_TOOL, BY_DEFAULT)
CONFIGS = {"min.insync.replicas": "1"}
ASSIGNMENT = {0: [3, 4]}

BATCH_A = [VALUE % i for i in range(100)]
BATCH_B = [VALUE % i for i in range(1000, 1050)]
REFUSED = [VALUE % i for i in range(1500, 1505)]
BATCH_C = [VALUE % i for i in range(2000, 2100)]


def values_read(read):
    return [v for _, v in read[0]]


def check_a_then_c(bootstrap, topic, acked_a, acked_c, what):
    """Partition 0 of `topic` is exactly batch A then batch C, each record once at its
    acknowledged offset; nothing of batch B or of the refused produce."""
    read, ends = read_all(bootstrap, topic, [0])
    got = values_read(read)
    b_left = sorted(set(got) & set(BATCH_B))
    refused_left = sorted(set(got) & set(REFUSED))
    assert not b_left, (f"{topic}/0 {what}: {len(b_left)} records of batch B (only the lost ISR, "
                        f"node 3, had them) are still there, e.g. {b_left[:5]}")
    assert not refused_left, (f"{topic}/0 {what}: records produced while it was offline are "
                              f"there: {refused_left}")
    assert got == BATCH_A + BATCH_C, (
        f"{topic}/0 {what}: expected batch A ({len(BATCH_A)}) then batch C ({len(BATCH_C)}), "
        f"read {len(got)} records (high watermark {ends[0]}), first {got[:3]}, last {got[-3:]}")
    check_acked(read, {**acked_a, **acked_c})
    return read


@pytest.mark.timeout(200)
def test_unclean_leader_election(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    cluster = make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED, 3: "broker", 4: "broker"},
                           REPLICATION_EXTRA)
    wait_brokers_everywhere(cluster)
    tools = AdminTools(kafka_jars, tmp_path)
    for topic in TOPICS:
        create_topic_raw_ok(cluster, topic, None, None, configs=CONFIGS, assignments=ASSIGNMENT)
    first = {}
    for topic in TOPICS:
        first[topic] = wait_isr_full(cluster, topic, 1, 2)[0]
        assert first[topic].leader == 3 and first[topic].replicas == (3, 4), first[topic]
    bootstrap = cluster.bootstrap(0, 1, 2)

    # 1. batch A on both replicas
    acked_a = {t: acknowledged(produce_once(bootstrap, t, BATCH_A, "all"),
                               f"{t}: batch A, acks=all with ISR [3, 4]") for t in TOPICS}

    # 2. the follower dies; batch B only on node 3
    cluster.nodes[4].kill9()
    for topic in TOPICS:
        shrunk = wait_partition(cluster, topic, 0, [0, 1, 2, 3], "ISR [3] led by node 3 after kill -9 of node 4",
                                lambda p: p.leader == 3 and p.isr == (3,))
        print(f"{topic} after killing node 4: {shrunk}")
    acked_b = {t: acknowledged(produce_once(bootstrap, t, BATCH_B, "all"),
                               f"{t}: batch B, acks=all with ISR [3] and min.insync.replicas=1")
               for t in TOPICS}
    for t in TOPICS:
        offsets = sorted(o for _, o in acked_b[t].values())
        assert offsets[0] == len(BATCH_A), f"{t}: batch B acknowledged at offsets {offsets[:3]}..."

    # 3. the leader, last of the ISR, dies: offline
    cluster.nodes[3].kill9()
    offline = {}
    for topic in TOPICS:
        offline[topic] = wait_partition(cluster, topic, 0, [0, 1, 2], "offline (leader -1), ISR [3]",
                                        lambda p: p.leader == -1 and p.isr == (3,))
        print(f"{topic} after killing node 3: {offline[topic]}")

    # 4. node 4 is back, out of sync: with unclean election not allowed, the partitions stay offline
    try:
        cluster.nodes[4].start()
    except RuntimeError as e:
        pytest.fail(f"node 4 did not start again after kill -9: {e}")
    live = [0, 1, 2, 4]

    def registered():
        mds = {n: try_metadata_v7(cluster.nodes[n].address) for n in live}
        return mds if all(md is not None and 4 in md.brokers for md in mds.values()) else None

    wait_for("every live node to list broker 4 again", registered, 45)
    # Metadata written after node 4 registered: once node 4 lists it, it has applied its own
    # registration and everything the controller decided up to then.
    create_topic_raw_ok(cluster, "after-node-4", 1, 1, via=0)
    wait_for("node 4 to list the topic after-node-4",
             lambda: (lambda md: md and "after-node-4" in md.topics)(
                 try_metadata_v7(cluster.nodes[4].address)), 30)
    for topic in TOPICS:
        parts = wait_for(f"nodes {live} to agree on {topic}", lambda: agreed_partitions(cluster, topic, live),
                         30, diag=lambda: views(cluster, topic, live))
        assert parts[0].leader == -1 and parts[0].isr == (3,), (
            f"{topic}/0 got a leader with node 3 (its only in-sync replica) down and unclean "
            f"election not allowed: {parts[0]}\n{views(cluster, topic, live)}")
    refused = produce_once(cluster.bootstrap(*live), BY_CONFIG, REFUSED, "all", timeout=5)
    got_acked = {v: r for v, r in refused.items() if not isinstance(r, KafkaError)}
    assert len(refused) == len(REFUSED) and not got_acked, (
        f"a produce to the offline {BY_CONFIG}/0 was acknowledged: {refused}")
    print(f"produce to the offline partition: {sorted({str(r) for r in refused.values()})}")
    for topic in TOPICS:
        parts = agreed_partitions(cluster, topic, live)
        assert parts and parts[0].leader == -1, (
            f"{topic}/0 got a leader without unclean election: {views(cluster, topic, live)}")

    bootstrap = cluster.bootstrap(*live)
    acked_c = {}

    # 5. unclean election enabled on one topic: node 4 leads it alone
    p = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", tools.config,
                  "--entity-type", "topics", "--entity-name", BY_CONFIG, "--alter",
                  "--add-config", "unclean.leader.election.enable=true")
    assert p.returncode == 0, f"kafka-configs exited {p.returncode}: {p.stdout}{p.stderr}"
    elected = wait_partition(cluster, BY_CONFIG, 0, live,
                             "node 4 leading alone after unclean.leader.election.enable=true",
                             lambda s: s.leader == 4 and s.isr == (4,))
    assert elected.epoch > offline[BY_CONFIG].epoch and elected.epoch > first[BY_CONFIG].epoch, (
        f"{BY_CONFIG}/0 elected without a higher leader epoch: {elected} (offline: {offline[BY_CONFIG]})")
    print(f"{BY_CONFIG} after enabling unclean election: {elected}")
    for other_topic in (BY_TOOL, BY_DEFAULT):
        other = agreed_partitions(cluster, other_topic, live)
        assert other and other[0].leader == -1, (
            f"{other_topic}/0 (unclean election not allowed) got a leader when {BY_CONFIG}'s "
            f"config was altered: {views(cluster, other_topic, live)}")
    acked_c[BY_CONFIG] = acknowledged(produce_once(bootstrap, BY_CONFIG, BATCH_C, "all"),
                                      f"{BY_CONFIG}: batch C, acks=all after the unclean election")

    # 6. ElectLeaders UNCLEAN on the other topic, whose config does not allow it
    p = tools.run(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--command-config", tools.config,
                  "--election-type", "UNCLEAN", "--topic", BY_TOOL, "--partition", "0")
    report = election_report(p.stdout)
    assert p.returncode == 0 and f"{BY_TOOL}-0" in report["succeeded"], (
        f"kafka-leader-election --election-type UNCLEAN: exit {p.returncode}, {report}")
    elected = wait_partition(cluster, BY_TOOL, 0, live, "node 4 leading alone after ElectLeaders UNCLEAN",
                             lambda s: s.leader == 4 and s.isr == (4,))
    assert elected.epoch > offline[BY_TOOL].epoch and elected.epoch > first[BY_TOOL].epoch, (
        f"{BY_TOOL}/0 elected without a higher leader epoch: {elected} (offline: {offline[BY_TOOL]})")
    print(f"{BY_TOOL} after ElectLeaders UNCLEAN: {elected}")
    acked_c[BY_TOOL] = acknowledged(produce_once(bootstrap, BY_TOOL, BATCH_C, "all"),
                                    f"{BY_TOOL}: batch C, acks=all after the unclean election")
    other = agreed_partitions(cluster, BY_DEFAULT, live)
    assert other and other[0].leader == -1, (
        f"{BY_DEFAULT}/0 got a leader from an election asked for another topic: "
        f"{views(cluster, BY_DEFAULT, live)}")

    # 6b. the cluster-wide dynamic broker default allows it: the third topic is elected
    p = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", tools.config,
                  "--entity-type", "brokers", "--entity-default", "--alter",
                  "--add-config", "unclean.leader.election.enable=true")
    assert p.returncode == 0, f"kafka-configs exited {p.returncode}: {p.stdout}{p.stderr}"
    elected = wait_partition(cluster, BY_DEFAULT, 0, live,
                             "node 4 leading alone after the dynamic broker default allowed it",
                             lambda s: s.leader == 4 and s.isr == (4,))
    assert elected.epoch > offline[BY_DEFAULT].epoch, (
        f"{BY_DEFAULT}/0 elected without a higher leader epoch: {elected}")
    print(f"{BY_DEFAULT} after the dynamic broker default: {elected}")
    acked_c[BY_DEFAULT] = acknowledged(produce_once(bootstrap, BY_DEFAULT, BATCH_C, "all"),
                                       f"{BY_DEFAULT}: batch C, acks=all after the unclean election")

    # 7. the loss: A then C, B gone, C at the offsets B had
    for t in TOPICS:
        c_offsets = sorted(o for _, o in acked_c[t].values())
        b_offsets = sorted(o for _, o in acked_b[t].values())
        assert c_offsets[0] == len(BATCH_A) == b_offsets[0], (
            f"{t}: batch C acknowledged from offset {c_offsets[0]}, batch B had been from "
            f"{b_offsets[0]}, batch A has {len(BATCH_A)} records")
        check_a_then_c(bootstrap, t, acked_a[t], acked_c[t], "after the unclean election")

    # 8. node 3 returns as a follower, truncates B, catches up
    try:
        cluster.nodes[3].start()
    except RuntimeError as e:
        pytest.fail(f"node 3 did not start again after kill -9: {e}")
    everyone = [0, 1, 2, 3, 4]
    for topic in TOPICS:
        state = wait_partition(cluster, topic, 0, everyone, "ISR {3, 4} led by node 4 after node 3 returned",
                               lambda s: s.leader == 4 and set(s.isr) == {3, 4}, timeout=60)
        print(f"{topic} after node 3 returned: {state}")
    for topic in TOPICS:
        wait_replicas_identical(cluster, topic, [0], [4, 3])
        check_a_then_c(cluster.bootstrap(), topic, acked_a[topic], acked_c[topic],
                       "after node 3 returned")
