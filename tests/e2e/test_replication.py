"""Partition replication between tern brokers, Kafka's way: followers fetch from the leader, the
high watermark is the lowest log end offset over the ISR, acks=all waits for the ISR and needs
min.insync.replicas of it, the controller shrinks and expands ISRs and elects a new leader from the
ISR when a broker is fenced, and a former leader truncates its log by leader epoch.

Each test starts its own cluster of real `tern server` processes (test_cluster.py's Cluster and
Node: node logs under tmp_path/node-<id>/tern.log, printed at teardown) with
broker.session.timeout.ms=6000, broker.heartbeat.interval.ms=500 and replica.lag.time.max.ms=4000,
and checks what clients see and what the replicas hold on disk:

  1. acks=all across kill -9 of a leader: on three combined nodes, a topic with replication
     factor 3, 3 partitions and min.insync.replicas=2; an idempotent acks=all producer keeps
     producing numbered values while a consumer reads along. The leader of partition 0 is killed
     with SIGKILL (another replica takes over with a higher leader epoch and takes acks=all
     writes), started again, and rejoins every ISR. Every acknowledged value is read back exactly
     once at its acknowledged offset, in the producer's order, nothing else is there, no delivery
     failed; the consumer reading along saw no high watermark and no offset go back, no offset
     reset, and everything it read is still there; the three replicas' .log segment files are
     byte-identical;
  2. the same with the leader of partition 0 frozen with SIGSTOP until the other brokers report a
     new leader (it has been fenced for missing heartbeats), then resumed with SIGCONT: it goes
     back to being a follower, truncates what only it had, and its segments end byte-identical;
  3. Apache Kafka's VerifiableProducer (kafka-verifiable-producer.sh, the Java client, --acks -1,
     idempotent) through the same kill -9 and restart: every record it reports acknowledged is
     read back once at its reported offset, and it reports every record acknowledged;
  4. min.insync.replicas=2: with both followers of a partition killed (broker-only nodes, so the
     metadata quorum stays), the ISR shrinks to the leader, acks=all produce is refused with
     NOT_ENOUGH_REPLICAS (and writes nothing) while acks=1 is acknowledged; with the followers
     started again the ISR grows back to three, acks=all is acknowledged, every acknowledged
     record (acks=1 and acks=all) reads back at its offset and the three replicas are identical;
  5. refused input: CreateTopics with replication factor 4 on three brokers or 0 ->
     INVALID_REPLICATION_FACTOR; a replica assignment naming an unknown broker or one broker twice
     -> INVALID_REPLICA_ASSIGNMENT; none of them is created (no node lists it, no node has its
     partition dir, while a topic created after them is listed everywhere);
  6. after a leader change (epoch >= 1) the new leader serves every record to a consumer; a
     follower's Fetch (replica_id = a follower, Fetch v11) with the partition's leader epoch
     minus one -> FENCED_LEADER_EPOCH (a consumer's too), with one above it ->
     UNKNOWN_LEADER_EPOCH, and none changes the partition (leader, epoch, ISR, high watermark,
     records), while the follower's fetch with the current epoch is answered without error;
  7. a consumer group committing after each batch keeps going when the broker that is its group
     coordinator is killed with SIGKILL (__consumer_offsets with replication factor 3): another
     broker becomes the coordinator, acknowledged commits are never read back lower, every
     produced record is consumed at least once, at its acknowledged place, and the final
     committed offsets are the log ends.

Cluster state is read with raw Metadata v7 requests sent to each node (leader, leader epoch,
replicas, ISR as that node reports them) and required to agree between the nodes asked."""

import signal
import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition, Consumer

from replication_util import (
    FENCED_LEADER_EPOCH,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    NONE,
    REPLICATION_EXTRA,
    UNKNOWN_LEADER_EPOCH,
    VALUE,
    GroupReader,
    NumberedProducer,
    VerifiableProducer,
    WatermarkWatcher,
    agreed_partitions,
    check_acked,
    create_topic_raw_ok,
    create_topics_raw,
    fetch_v11,
    find_coordinator,
    high_watermarks,
    leader_of,
    metadata_v7,
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
    wait_brokers_everywhere,
    wait_for,
)

PARTITIONS = 3
RF = 3
MIN_ISR = {"min.insync.replicas": "2"}


def replicated_cluster(make_cluster, **extra):  # noqa: F811 - the fixture, passed in
    cluster = three_combined(make_cluster, {**REPLICATION_EXTRA, **extra})
    wait_brokers_everywhere(cluster)
    return cluster


def others(cluster, node_id):
    return [n for n in cluster.broker_ids if n != node_id]


def failover_checks(cluster, topic, producer, watcher):
    """After the producer finished: the final read, the watcher's view, the replicas on disk."""
    try:
        final, ends = read_all(cluster.bootstrap(), topic, range(PARTITIONS))
        print(f"log ends {ends}")
        check_acked(final, producer.acked, producer.failed)
        producer.check_all_delivered()
        watcher.finish(ends)
    finally:
        watcher.stop_flag.set()
    watcher.check(final)
    wait_replicas_identical(cluster, topic, range(PARTITIONS), cluster.broker_ids)


@pytest.mark.timeout(170)
def test_acks_all_survives_leader_kill9(make_cluster):  # noqa: F811
    """Kill -9 the leader of partition 0 under idempotent acks=all load, start it again: nothing
    acknowledged is lost or duplicated or moved, consumers never see the high watermark go back,
    and the three replicas end byte-identical."""
    cluster = replicated_cluster(make_cluster)
    topic = "kill9"
    create_topic_raw_ok(cluster, topic, PARTITIONS, RF, configs=MIN_ISR)
    wait_isr_full(cluster, topic, PARTITIONS, RF)

    producer = NumberedProducer(cluster.bootstrap(), topic, PARTITIONS)
    watcher = WatermarkWatcher(cluster.bootstrap(), topic, range(PARTITIONS))
    watcher.start()
    producer.start()
    try:
        producer.wait_acked("600 acknowledged records before the kill", 600)
        old = leader_of(cluster, topic, 0, cluster.broker_ids)
        victim = old.leader
        cluster.nodes[victim].kill9()
        new = wait_new_leader(cluster, topic, 0, old, others(cluster, victim))
        print(f"partition 0: leader {old.leader} (epoch {old.epoch}) killed, now {new}")
        assert victim not in new.isr, new
        producer.wait_acked(f"acks=all records on partition 0 led by node {new.leader}", 100,
                            partition=0)
        try:
            cluster.nodes[victim].start()
        except RuntimeError as e:
            pytest.fail(f"node {victim} did not start again after kill -9: {e}")
        wait_isr_full(cluster, topic, PARTITIONS, RF)
        producer.wait_acked("records acknowledged with the ISR whole again", 300)
    finally:
        producer.finish()
    failover_checks(cluster, topic, producer, watcher)


@pytest.mark.timeout(170)
def test_acks_all_survives_leader_sigstop(make_cluster):  # noqa: F811
    """SIGSTOP the leader of partition 0 until the others report a new leader (it was fenced after
    broker.session.timeout.ms), SIGCONT it: it follows again, drops what only it had, catches up;
    same checks as for kill -9."""
    cluster = replicated_cluster(make_cluster)
    topic = "sigstop"
    create_topic_raw_ok(cluster, topic, PARTITIONS, RF, configs=MIN_ISR)
    wait_isr_full(cluster, topic, PARTITIONS, RF)

    producer = NumberedProducer(cluster.bootstrap(), topic, PARTITIONS)
    watcher = WatermarkWatcher(cluster.bootstrap(), topic, range(PARTITIONS))
    watcher.start()
    producer.start()
    frozen = None
    try:
        producer.wait_acked("600 acknowledged records before the stop", 600)
        old = leader_of(cluster, topic, 0, cluster.broker_ids)
        frozen = cluster.nodes[old.leader]
        frozen.proc.send_signal(signal.SIGSTOP)
        new = wait_new_leader(cluster, topic, 0, old, others(cluster, old.leader))
        print(f"partition 0: leader {old.leader} (epoch {old.epoch}) stopped, now {new}")
        assert old.leader not in new.isr, new
        producer.wait_acked(f"acks=all records on partition 0 led by node {new.leader}", 100,
                            partition=0)
        frozen.proc.send_signal(signal.SIGCONT)
        frozen = None
        wait_isr_full(cluster, topic, PARTITIONS, RF)
        after = agreed_partitions(cluster, topic, cluster.broker_ids)
        assert after[0].epoch > old.epoch, after
        producer.wait_acked("records acknowledged with the ISR whole again", 300)
    finally:
        if frozen is not None and frozen.running:
            frozen.proc.send_signal(signal.SIGCONT)
        producer.finish()
    failover_checks(cluster, topic, producer, watcher)


VP_CONFIG = """\
enable.idempotence=true
retries=2147483647
max.in.flight.requests.per.connection=5
delivery.timeout.ms=90000
request.timeout.ms=5000
linger.ms=5
metadata.max.age.ms=2000
reconnect.backoff.max.ms=1000
"""


@pytest.mark.timeout(170)
def test_java_verifiable_producer_acks_all_across_kill(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """Apache Kafka's VerifiableProducer (--acks -1, idempotent, retrying) produces 9000 records
    at 300/s while the leader of partition 0 is killed -9 and started again: every record it
    reports acknowledged is in the log once, at its reported partition and offset, and it
    reports all of them acknowledged."""
    cluster = replicated_cluster(make_cluster)
    topic = "verifiable"
    create_topic_raw_ok(cluster, topic, PARTITIONS, RF, configs=MIN_ISR)
    wait_isr_full(cluster, topic, PARTITIONS, RF)

    config = tmp_path / "verifiable-producer.properties"
    config.write_text(VP_CONFIG)
    total = 9000
    vp = VerifiableProducer(kafka_jars, cluster.bootstrap(), topic, total, 300, config,
                            tmp_path / "verifiable-producer.stderr").start()
    try:
        wait_for("1000 records acknowledged to VerifiableProducer", lambda: vp.acked_count() >= 1000,
                 60, diag=lambda: f"{vp.summary()}\n{vp.stderr_tail()}")
        old = leader_of(cluster, topic, 0, cluster.broker_ids)
        victim = old.leader
        on_p0 = vp.acked_count(0)
        cluster.nodes[victim].kill9()
        new = wait_new_leader(cluster, topic, 0, old, others(cluster, victim))
        print(f"partition 0: leader {old.leader} (epoch {old.epoch}) killed, now {new}")
        wait_for(f"VerifiableProducer's records acknowledged on partition 0 led by node {new.leader}",
                 lambda: vp.acked_count(0) > on_p0, 60, diag=vp.summary)
        try:
            cluster.nodes[victim].start()
        except RuntimeError as e:
            pytest.fail(f"node {victim} did not start again after kill -9: {e}")
        wait_isr_full(cluster, topic, PARTITIONS, RF)
        code = vp.wait(timeout=110)
    finally:
        vp.kill()
    print(f"VerifiableProducer exited {code}: {vp.summary()}")
    assert not vp.duplicate_acks, vp.summary()

    final, ends = read_all(cluster.bootstrap(), topic, range(PARTITIONS))
    print(f"log ends {ends}")
    check_acked(final, vp.acked, vp.failed,
                number=lambda v: int(v) if v and v.isdigit() else None)
    assert code == 0, f"VerifiableProducer exited {code}:\n{vp.stderr_tail()}"
    assert not vp.failed and len(vp.acked) == total, vp.summary()
    wait_replicas_identical(cluster, topic, range(PARTITIONS), cluster.broker_ids)


def produce_once(bootstrap, topic, values, acks, timeout=15):
    """Sends `values` to partition 0 with `acks`, no retries, no idempotence; returns
    {value: (partition, offset) or KafkaError}."""
    out = {}

    def delivered(err, msg):
        out[msg.value()] = err if err is not None else (msg.partition(), msg.offset())

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "retries": 0,
        "linger.ms": 0,
        "message.timeout.ms": timeout * 1000,
    })
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=delivered)
    left = p.flush(timeout + 15)
    assert left == 0, f"{left} records without a delivery report"
    return out


def acknowledged(results, what):
    failed = {v: r for v, r in results.items() if isinstance(r, KafkaError)}
    assert not failed, f"{what}: {len(failed)} of {len(results)} not acknowledged, e.g. {list(failed.items())[:3]}"
    return results


@pytest.mark.timeout(170)
def test_min_insync_replicas(make_cluster):  # noqa: F811
    """Replicas 0 (leader), 3 and 4 (broker-only) of a partition with min.insync.replicas=2;
    kill -9 brokers 3 and 4: the ISR shrinks to [0]; acks=all is refused with NOT_ENOUGH_REPLICAS
    and appends nothing, acks=1 is acknowledged; start 3 and 4 again: the ISR is [0, 3, 4] again,
    acks=all is acknowledged, everything acknowledged reads back at its offset, and the three
    replicas are byte-identical."""
    cluster = make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED, 3: "broker", 4: "broker"},
                           REPLICATION_EXTRA)
    wait_brokers_everywhere(cluster)
    topic = "min-isr"
    create_topic_raw_ok(cluster, topic, None, None, configs=MIN_ISR, assignments={0: [0, 3, 4]})
    state = wait_isr_full(cluster, topic, 1, RF)[0]
    assert state.leader == 0 and state.replicas == (0, 3, 4), state
    bootstrap = cluster.bootstrap(0, 1, 2)

    acked = {}
    acked.update(acknowledged(produce_once(bootstrap, topic, [VALUE % i for i in range(100)], "all"),
                              "acks=all with the whole ISR"))

    for n in (3, 4):
        cluster.nodes[n].kill9()
    survivors = [0, 1, 2]
    shrunk = wait_for(
        "the ISR of min-isr/0 to shrink to the leader, node 0",
        lambda: (lambda ps: ps[0] if ps and ps[0].isr == (0,) and ps[0].leader == 0 else None)(
            agreed_partitions(cluster, topic, survivors)),
        45, diag=lambda: views(cluster, topic, survivors))
    print(f"after killing brokers 3 and 4: {shrunk}")
    end_before = high_watermarks(bootstrap, topic, [0])[0]

    refused_values = [VALUE % i for i in range(1000, 1005)]
    refused = produce_once(bootstrap, topic, refused_values, "all")
    codes = {v: (r.code() if isinstance(r, KafkaError) else r) for v, r in refused.items()}
    assert len(codes) == len(refused_values) and all(c == KafkaError.NOT_ENOUGH_REPLICAS for c in codes.values()), (
        f"acks=all with ISR [0] and min.insync.replicas=2 should fail with NOT_ENOUGH_REPLICAS: {refused}")
    assert high_watermarks(bootstrap, topic, [0])[0] == end_before, "the refused records moved the high watermark"

    acked.update(acknowledged(
        produce_once(bootstrap, topic, [VALUE % i for i in range(2000, 2050)], "1"),
        "acks=1 with ISR [0]"))

    for n in (3, 4):
        cluster.nodes[n].spawn()
    for n in (3, 4):
        try:
            cluster.nodes[n].wait_ready()
        except RuntimeError as e:
            pytest.fail(f"broker {n} did not start again after kill -9: {e}")
    state = wait_isr_full(cluster, topic, 1, RF)[0]
    print(f"after starting brokers 3 and 4 again: {state}")

    acked.update(acknowledged(
        produce_once(bootstrap, topic, [VALUE % i for i in range(3000, 3100)], "all"),
        "acks=all with the ISR whole again"))

    final, _ = read_all(bootstrap, topic, [0])
    check_acked(final, acked)  # the refused values are not there either: nothing else may be
    wait_replicas_identical(cluster, topic, [0], [0, 3, 4])


@pytest.mark.timeout(120)
def test_replication_bad_input(make_cluster):  # noqa: F811
    """On three brokers: replication factor 4 or 0 -> INVALID_REPLICATION_FACTOR; an assignment
    naming unknown broker 7 or broker 0 twice -> INVALID_REPLICA_ASSIGNMENT; each sent to a
    different node (forwarded to the controller). None of them exists afterwards on any node
    (Metadata, partition dirs), while a topic created after them is listed by every node."""
    cluster = replicated_cluster(make_cluster)
    refused = {
        # name: (partitions, replication factor, assignments, expected error)
        "rf-four": (1, 4, {}, INVALID_REPLICATION_FACTOR),
        "rf-zero": (1, 0, {}, INVALID_REPLICATION_FACTOR),
        "unknown-broker": (-1, -1, {0: [0, 1, 7]}, INVALID_REPLICA_ASSIGNMENT),
        "unknown-broker-alone": (-1, -1, {0: [7]}, INVALID_REPLICA_ASSIGNMENT),
        "same-broker-twice": (-1, -1, {0: [0, 0, 1]}, INVALID_REPLICA_ASSIGNMENT),
    }
    for i, (name, (partitions, rf, assignments, expected)) in enumerate(refused.items()):
        via = cluster.broker_ids[i % len(cluster.broker_ids)]
        got = create_topics_raw(cluster.nodes[via].address,
                                [(name, partitions, rf, assignments, MIN_ISR)])
        error, message = got.get(name, (None, None))
        assert error == expected, (f"CreateTopics {name} (partitions {partitions}, replication "
                                   f"factor {rf}, assignments {assignments}) via node {via}: "
                                   f"error {error} ({message}), expected {expected}")
        print(f"{name}: error {error}: {message}")

    # Metadata records are applied in order: once a later topic is listed everywhere, a refused
    # one that had been created would be listed too.
    create_topic_raw_ok(cluster, "after-refused", 1, 1, via=cluster.broker_ids[-1])

    def listed_everywhere():
        mds = {n: try_metadata_v7(cluster.nodes[n].address) for n in cluster.broker_ids}
        return mds if all(md and "after-refused" in md.topics for md in mds.values()) else None

    mds = wait_for("after-refused listed by every node", listed_everywhere, 30)
    for n, md in mds.items():
        assert not set(refused) & set(md.topics), f"node {n} lists {sorted(set(refused) & set(md.topics))}"
        asked = metadata_v7(cluster.nodes[n].address, list(refused))
        assert all(name not in asked.topics or asked.topics[name].error != NONE for name in refused), (
            n, asked.topics)
        dirs = sorted(d.name for d in cluster.nodes[n].data_dir.iterdir()
                      if d.name.rsplit("-", 1)[0] in refused)
        assert not dirs, f"node {n} has partition dirs {dirs}"


@pytest.mark.timeout(150)
def test_follower_fetch_with_stale_leader_epoch_is_fenced(make_cluster):  # noqa: F811
    """A topic with replication factor 3 and 200 records whose leader was moved once (SIGTERM to
    it, started again), so its leader epoch is at least 1; the new leader serves the 200 records
    to a consumer (Fetch v11 with the current epoch). A Fetch v11 to the leader with replica_id =
    a follower and current_leader_epoch = epoch - 1 (fetch offset 0) answers FENCED_LEADER_EPOCH
    without records, as does a consumer's; epoch + 1 answers UNKNOWN_LEADER_EPOCH; the follower's
    fetch with the current epoch at its log end is answered without error. Afterwards, and
    replica.lag.time.max.ms later, the partition has the same leader, epoch and ISR, the same high
    watermark, and every record reads back at its offset."""
    cluster = replicated_cluster(make_cluster)
    topic = "fenced"
    create_topic_raw_ok(cluster, topic, 1, RF)
    wait_isr_full(cluster, topic, 1, RF)
    acked = produce(cluster.bootstrap(), topic, range(200), partition_of=lambda i: 0)

    old = leader_of(cluster, topic, 0, cluster.broker_ids)
    mover = cluster.nodes[old.leader]
    assert mover.stop(), f"node {old.leader} did not exit on SIGTERM"
    wait_new_leader(cluster, topic, 0, old, others(cluster, old.leader))
    try:
        mover.start()
    except RuntimeError as e:
        pytest.fail(f"node {old.leader} did not start again: {e}")
    wait_isr_full(cluster, topic, 1, RF)

    def consumer_fetch():
        state = agreed_partitions(cluster, topic, cluster.broker_ids)[0]
        r = fetch_v11(cluster.nodes[state.leader].address, topic, 0, -1, state.epoch, 0)
        return state, r

    def serves_all():
        state, r = consumer_fetch()
        ok = (r.error, r.partition_error, r.high_watermark) == (NONE, NONE, 200) and r.records
        return (state, r) if ok else None

    wait_for("the new leader to serve the 200 records to a consumer (high watermark 200)",
             serves_all, 15, diag=lambda: consumer_fetch())

    def fetches():
        """(state, follower, {case: FetchResult}) with the partition's state unchanged around
        the requests, or None."""
        state = agreed_partitions(cluster, topic, cluster.broker_ids)[0]
        leader = cluster.nodes[state.leader].address
        follower = next(r for r in state.replicas if r != state.leader)
        got = {
            "follower, epoch - 1": fetch_v11(leader, topic, 0, follower, state.epoch - 1, 0),
            "consumer, epoch - 1": fetch_v11(leader, topic, 0, -1, state.epoch - 1, 0),
            "follower, epoch + 1": fetch_v11(leader, topic, 0, follower, state.epoch + 1, 0),
            "follower, current epoch, at its log end": fetch_v11(leader, topic, 0, follower, state.epoch, 200),
        }
        same = agreed_partitions(cluster, topic, cluster.broker_ids)
        return (state, follower, got) if same and same[0] == state else None

    state, follower, got = wait_for("fetches answered by an unchanged leader", fetches, 30)
    print(f"state {state}; follower {follower}; answers {got}")
    assert state.epoch >= 1, f"the leader epoch should have been bumped by the leader change: {state}"
    for case in ("follower, epoch - 1", "consumer, epoch - 1"):
        r = got[case]
        assert (r.error, r.partition_error) == (NONE, FENCED_LEADER_EPOCH), (case, r)
        assert not r.records, (case, r)
    r = got["follower, epoch + 1"]
    assert (r.error, r.partition_error) == (NONE, UNKNOWN_LEADER_EPOCH), r
    assert not r.records, r
    r = got["follower, current epoch, at its log end"]
    assert (r.error, r.partition_error, r.high_watermark) == (NONE, NONE, 200), r

    # Unchanged now and after a follower would have fallen out of the ISR (replica.lag.time.max.ms).
    deadline = time.time() + 6
    while time.time() < deadline:
        now = agreed_partitions(cluster, topic, cluster.broker_ids)
        if now is not None:
            assert now[0] == state, f"the partition changed after the fenced fetches: {state} -> {now[0]}"
        time.sleep(0.5)
    assert wait_for("the partition's state from every node", lambda: agreed_partitions(
        cluster, topic, cluster.broker_ids), 10)[0] == state
    assert high_watermarks(cluster.bootstrap(), topic, [0])[0] == 200
    check_exactly_once(consume_assigned(cluster.bootstrap(), topic, [0], len(acked)), acked)


@pytest.mark.timeout(170)
def test_group_survives_coordinator_kill9(make_cluster):  # noqa: F811
    """__consumer_offsets with replication factor 3: a group member committing after every batch
    while records keep coming; its coordinator is killed with SIGKILL. Another broker becomes
    the coordinator, the member commits there, no acknowledged commit is read back lower, every
    produced record is consumed at least once (at its acknowledged place), and the final
    committed offsets equal the log ends."""
    cluster = replicated_cluster(make_cluster, **{
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "6",
        "group.initial.rebalance.delay.ms": "0",
    })
    topic, group = "grouped", "survivors"
    create_topic_raw_ok(cluster, topic, PARTITIONS, RF, configs=MIN_ISR)
    wait_isr_full(cluster, topic, PARTITIONS, RF)

    producer = NumberedProducer(cluster.bootstrap(), topic, PARTITIONS, rate=200)
    reader = GroupReader(cluster.bootstrap(), topic, range(PARTITIONS), group)
    producer.start()
    reader.start()
    try:
        wait_for("the group member's first acknowledged commits",
                 lambda: len(reader.best_offsets()) == PARTITIONS, 60,
                 diag=lambda: f"commit failures {reader.commit_failures[-3:]}, errors {reader.errors[-5:]}")

        def coordinator(ids):
            answers = set()
            for n in ids:
                try:
                    answers.add(find_coordinator(cluster.nodes[n].address, group))
                except OSError:
                    return None
            if len(answers) == 1:
                error, node = answers.pop()
                return node if error == NONE and node >= 0 else None
            return None

        victim = wait_for("one coordinator named by every node", lambda: coordinator(cluster.broker_ids), 30)
        survivors = others(cluster, victim)
        before = reader.best_offsets()
        cluster.nodes[victim].kill9()
        killed_at = time.time()
        new = wait_for(f"a coordinator other than killed node {victim}",
                       lambda: (lambda c: c if c is not None and c != victim else None)(coordinator(survivors)),
                       45)
        print(f"coordinator {victim} killed; now {new}; acknowledged commits before: {before}")
        wait_for("an acknowledged commit beyond the offsets committed before the kill",
                 lambda: any(o > before.get(p, -1) for c in reader.commits_after(killed_at) for p, o in c.items()),
                 60, diag=lambda: f"commit failures {reader.commit_failures[-3:]}, errors {reader.errors[-5:]}")
        producer.wait_acked("more records after the failover", 200)
    finally:
        producer.finish()
    try:
        ends = high_watermarks(cluster.bootstrap(), topic, range(PARTITIONS))
        wait_for("the group to consume every acknowledged record",
                 lambda: set(producer.acked) <= reader.seen_values(), 60,
                 diag=lambda: f"{len(set(producer.acked) - reader.seen_values())} not consumed")
        wait_for(f"acknowledged commits up to the log ends {ends}",
                 lambda: reader.best_offsets() == ends, 30,
                 diag=lambda: f"best {reader.best_offsets()}, failures {reader.commit_failures[-3:]}")
    finally:
        reader.finish()
    print(f"group: {len(reader.seen)} records read, {len(reader.commits)} commits acknowledged, "
          f"{len(reader.commit_failures)} failed (last {reader.commit_failures[-3:]}), "
          f"{len(reader.fetches)} read back")

    assert reader.fetches_after(killed_at), "no committed offsets were read back after the kill"
    assert not reader.violations, reader.violations[:10]
    wrong = [(p, o, v, producer.acked.get(v)) for p, o, v in reader.seen if producer.acked.get(v) != (p, o)]
    assert not wrong, f"{len(wrong)} records consumed elsewhere than acknowledged, e.g. {wrong[:10]}"
    producer.check_all_delivered()

    c = Consumer({"bootstrap.servers": cluster.bootstrap(*survivors), "group.id": group,
                  "enable.auto.commit": False})
    try:
        committed = {tp.partition: tp.offset
                     for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)}
    finally:
        c.close()
    assert committed == ends, f"committed {committed}, log ends {ends}"


@pytest.mark.timeout(150)
def test_num_replica_fetchers_changes_at_runtime(make_cluster, kafka_jars, tmp_path):  # noqa: F811
    """num.replica.fetchers as a dynamic broker config: kafka-configs.sh --entity-default sets it
    to 2 on three brokers that follow six partitions of replication factor 3 with one fetcher per
    leader (3, more than double, is refused as Kafka refuses it); every node moves the partitions whose fetcher changes (its log says so), records
    produced with acks=all before and after are acknowledged, the ISR stays full, every record
    reads back once, and the replicas end byte-identical. A value below 1 is refused."""
    from confluent_kafka import Producer
    from replication_admin_util import AdminTools

    cluster = replicated_cluster(make_cluster)
    topic, partitions = "fetchers", 6
    create_topic_raw_ok(cluster, topic, partitions, RF, configs=MIN_ISR)
    wait_isr_full(cluster, topic, partitions, RF)
    bootstrap = cluster.bootstrap()

    def produce_all(first, count):
        """`count` numbered values to each partition, acks=all; {value: (partition, offset)}."""
        out = {}

        def delivered(err, msg):
            out[msg.value()] = err if err is not None else (msg.partition(), msg.offset())

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(first, first + count * partitions):
            p.produce(topic, value=VALUE % i, partition=i % partitions, on_delivery=delivered)
        assert p.flush(45) == 0
        return acknowledged(out, f"values {first}..")

    acked = produce_all(0, 100)
    tools = AdminTools(kafka_jars, tmp_path)
    refused = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                        "--entity-default", "--alter", "--add-config", "num.replica.fetchers=0")
    assert refused.returncode != 0 and "num.replica.fetchers" in refused.stdout + refused.stderr
    # As Kafka: at most double the count in force.
    refused = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                        "--entity-default", "--alter", "--add-config", "num.replica.fetchers=3")
    assert refused.returncode != 0 and "double the current value 1" in refused.stdout + refused.stderr
    p = tools.run("kafka-configs", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
                  "--entity-default", "--alter", "--add-config", "num.replica.fetchers=2")
    assert p.returncode == 0, f"kafka-configs exited {p.returncode}: {p.stdout}{p.stderr}"
    wait_for("every node to resize its replica fetchers",
             lambda: all("resizing the replica fetchers" in cluster.nodes[n].log_text()
                         for n in cluster.broker_ids), 30)
    acked.update(produce_all(600, 100))
    wait_isr_full(cluster, topic, partitions, RF)
    final, ends = read_all(bootstrap, topic, range(partitions))
    assert sum(ends.values()) == 1200, ends
    check_acked(final, acked)
    wait_replicas_identical(cluster, topic, range(partitions), cluster.broker_ids)
