"""Mirroring from Apache Kafka into a Tern cluster of three brokers (issue 12).

The source is a real single-node Apache Kafka 4.4.0 (tests/harness/kafka_peer.py), started once
for the module. Each test starts its own three combined Tern nodes (test_cluster.py's Cluster:
node logs under tmp_path/node-<id>/tern.log, printed at teardown; pytest keeps tmp_path) with
replication_util.REPLICATION_EXTRA (fenced after 6 s without heartbeats), default.replication.factor=3
and min.insync.replicas=2, so the mirror topics that StartMirrorTopics creates (replication factor
-1: the broker default) have three replicas.

1. test_mirror_into_three_tern_brokers_survives_leader_kills: a 6-partition source topic, the
   mirror created through node 0 and the topic started through node 1; an idempotent acks=all
   producer writes numbered, keyed values to the source throughout. Twice, the Tern broker
   leading the most partitions of the mirror topic is killed with SIGKILL: the others must lead
   its partitions and the mirror must go on (every partition's high watermark on Tern passes the
   source's end at the kill), then it is started again and must rejoin every ISR. Production stops;
   `tern mirrors --describe --json` asked of each node must show every partition MIRRORING with
   lag 0 at the source's end; every partition must equal the source (same log span, same batch
   bytes, the partition leader epoch included, same (offset, key, value)); every acknowledged value
   is there once, at its acknowledged offset, in order; the three replicas' segment files are
   byte-identical. Failover: `--stop` through node 2; every node then describes every partition
   STOPPED, and a plain acks=all producer writes to every partition at the next offsets.
2. test_mirror_state_rpcs_between_brokers_bad_input: a 3-partition mirror (source records
   mirrored first). Raw ReadMirrorStates (100) asked of every broker: a broker that does not lead
   a partition's __mirror_state partition (mirror/src/state.rs coordinator_partition,
   reimplemented in mirror_cluster_util) answers NOT_COORDINATOR (16), the one that does answers
   MIRRORING. DescribeClusterMirrors (99) and `tern mirrors --describe` asked of each broker
   answer every partition with its offsets. After a leader change of mirror partition 0,
   WriteMirrorStates (101) to its coordinator with the writer leader epoch (tag 4) one below the
   partition's current leader epoch answers FENCED_LEADER_EPOCH (74) and changes nothing (the
   state is still MIRRORING, without the written error message or retry count), one with the
   current epoch is accepted, and one to any other broker answers NOT_COORDINATOR.

Against a Tern without mirroring into several brokers, both tests fail at their first wait for
mirrored records (only partitions led by the broker that also coordinates them are mirrored).
"""

import os
import shutil
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_peer
import mirror_cluster_util as mcu
import mirror_util as mu
from replication_util import (
    REPLICATION_EXTRA,
    agreed_partitions,
    check_acked,
    leader_of,
    views,
    wait_isr_full,
    wait_new_leader,
    wait_replicas_identical,
)
from tern_process import TERN_BIN
from test_cluster import (
    make_cluster,  # noqa: F401 - the fixture
    three_combined,
    wait_brokers_everywhere,
    wait_for,
)

VERSION = "4.4.0"
SOURCE_OVERRIDES = {"auto.create.topics.enable": "false"}
SOURCE_JVM = ["-Xmx512m", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
              "-Djava.awt.headless=true"]
TERN_EXTRA = {
    **REPLICATION_EXTRA,
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "mirror.metadata.refresh.interval.ms": "2000",
    "mirror.failed.retry.initial.backoff.ms": "200",
    "mirror.failed.retry.max.backoff.ms": "2000",
}
RF = 3


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """A single-node Apache Kafka 4.4.0 for the whole module."""
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: the Apache Kafka source needs Maven and a JDK")
    if not os.path.isfile(TERN_BIN):
        pytest.skip(f"no tern binary at {TERN_BIN} (set TERN_BIN)")
    try:
        kafka_peer.KafkaJars(VERSION).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {VERSION}: {str(e).splitlines()[0]}")
    peer = kafka_peer.KafkaPeer(VERSION, tmp_path_factory.mktemp("mirror-cluster-source"),
                                overrides=SOURCE_OVERRIDES, jvm_opts=SOURCE_JVM)
    peer.start(timeout=120)
    print(f"Apache Kafka {VERSION} {peer.bootstrap}, log {peer.log_path}")
    try:
        yield peer
    finally:
        peer.stop()


def tern_cluster(make_cluster):  # noqa: F811 - the fixture, passed in
    cluster = three_combined(make_cluster, TERN_EXTRA)
    wait_brokers_everywhere(cluster)
    return cluster


def create_source_topic(kafka, topic, partitions):
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)

    def serves():
        try:
            return mcu.source_ends(kafka.bootstrap, topic, range(partitions))
        except mu.KafkaProtocolError:
            return None

    wait_for(f"the source to serve every partition of {topic}", serves, 30)


def produce_to(bootstrap, topic, records, check=True, timeout=30):
    """A plain acks=all producer (no idempotence): records {partition: [(key, value)]}, in order.
    Returns ({value: (partition, offset) or KafkaError}, records left without a delivery report);
    with check, every record must be acknowledged. (A function of its own: a failing test's
    frame would keep the client, and its reconnects, alive after the brokers stop.)"""
    results = {}

    def delivered(err, msg):
        results[msg.value()] = err if err is not None else (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 0, "message.timeout.ms": timeout * 1000})
    for p, recs in sorted(records.items()):
        for key, value in recs:
            producer.produce(topic, key=key, value=value, partition=p, on_delivery=delivered)
    left = producer.flush(timeout + 15)
    del producer
    if check:
        failed = {v: r for v, r in results.items() if isinstance(r, KafkaError)}
        assert left == 0 and not failed, f"producing to {topic} at {bootstrap}: {left} unflushed, failed {failed}"
    return results, left


class Timeline:
    def __init__(self):
        self.t0 = time.time()
        self.events = []

    def __call__(self, event):
        line = f"{time.time() - self.t0:6.1f}s {event}"
        self.events.append(line)
        print(line, flush=True)

    def __str__(self):
        return "timeline:\n" + "\n".join(self.events)


def wait_mirror_topic(cluster, topic, partitions, timeout=30):
    """Until every broker lists the mirror topic with `partitions` partitions; then it must have
    RF replicas (StartMirrorTopics creates it with the broker default) and a full ISR."""
    ids = cluster.broker_ids
    parts = wait_for(f"every broker to list mirror topic {topic} with {partitions} partitions",
                     lambda: (lambda p: p if p and len(p) == partitions else None)(
                         agreed_partitions(cluster, topic, ids)),
                     timeout, interval=0.3, diag=lambda: views(cluster, topic, ids))
    rfs = {p: len(s.replicas) for p, s in parts.items()}
    assert set(rfs.values()) == {RF}, (
        f"mirror topic {topic} was created with replication factors {rfs}, expected {RF} "
        f"(default.replication.factor=3)")
    return wait_isr_full(cluster, topic, partitions, RF)


def wait_high_watermarks(cluster, topic, partitions, ids, what, ok, timeout, diag):
    """Until the high watermarks of `topic` on Tern (asked of each partition's leader among `ids`)
    satisfy ok(hws); returns them. A failure shows the last ones seen."""
    last = {}

    def ask():
        hw = mcu.tern_high_watermarks(cluster, topic, range(partitions), ids)
        last["hw"] = hw
        return hw if hw and ok(hw) else None

    return wait_for(what, ask, timeout, interval=0.5, diag=lambda: (
        f"last tern high watermarks (None: a leader unknown or not answering): {last.get('hw')}\n{diag()}"))


def wait_describe_everywhere(cluster, mirror, topic, ids, what, check, timeout, diag):
    """Until `tern mirrors --describe --json` asked of every node in `ids` answers rows for which
    check(rows) holds; returns {node: rows}."""
    last = {}

    def ask():
        last.clear()
        last.update(mcu.describe_everywhere(cluster, mirror, topic, ids))
        ok = all(not isinstance(rows, str) and check(rows) for rows in last.values())
        return dict(last) if ok else None

    return wait_for(what, ask, timeout, interval=0.5, diag=lambda: (
        "describe per node:\n" + "\n".join(f"  node {n}: {mcu.short_rows(r)}" for n, r in last.items())
        + "\n" + diag()))


# -- 1. kills of the brokers leading the mirror --------------------------------------------------------


def kill_busiest_broker(cluster, topic, partitions, round_, source_end, mark, diag):
    """Kills (SIGKILL) the broker leading the most partitions of `topic`; waits until the others
    lead its partitions and every partition's high watermark passes source_end() taken right
    after the kill (so records the source took after the kill reached Tern); starts it again and
    waits until it is back in every ISR. Returns the victim's id."""
    ids = cluster.broker_ids
    parts = wait_for("the leaders of the mirror topic as every broker reports them",
                     lambda: mcu.leaders(cluster, topic, ids) and agreed_partitions(cluster, topic, ids),
                     30, diag=diag)
    led = Counter(s.leader for s in parts.values())
    victim = max(ids, key=lambda n: (led[n], -n))
    old = {p: s for p, s in parts.items() if s.leader == victim}
    others = [n for n in ids if n != victim]
    tern_at_kill = mcu.tern_high_watermarks(cluster, topic, range(partitions), ids) or {}
    cluster.nodes[victim].kill9()
    src_at_kill = source_end()
    mark(f"round {round_}: killed node {victim} (leader of partitions {sorted(old)}; leaders per node "
         f"{dict(led)}); tern high watermarks before {tern_at_kill}, source ends {src_at_kill}")
    for p, state in sorted(old.items()):
        new = wait_new_leader(cluster, topic, p, state, others)
        mark(f"round {round_}: partition {p} now led by node {new.leader} (epoch {new.epoch})")
    target = {p: max(src_at_kill[p], tern_at_kill.get(p, 0)) for p in range(partitions)}
    hw = wait_high_watermarks(
        cluster, topic, partitions, others,
        f"round {round_}: the mirror to go on without node {victim}: every partition's high watermark "
        f"on tern past the source's end at the kill {target}",
        lambda hw: all(hw[p] > target[p] for p in target), 60, diag)
    mark(f"round {round_}: tern high watermarks {hw} with node {victim} down")
    try:
        cluster.nodes[victim].start()
    except RuntimeError as e:
        pytest.fail(f"node {victim} did not start again after kill -9: {e}\n{diag()}")
    wait_isr_full(cluster, topic, partitions, RF)
    mark(f"round {round_}: node {victim} restarted and back in every ISR")
    return victim


def check_mirror_equals_source(cluster, kafka, topic, partitions, ends, acked, failed, mark):
    """Every partition of the Tern cluster equals the source's: the same log span and batches
    (the partition leader epoch included) from its leader, the same (offset, key, value); every
    acknowledged value once, in order, at its offset; the three replicas byte-identical.
    Returns {partition: [(offset, key, value)]} read from Tern."""
    ids = cluster.broker_ids
    lead = wait_for("agreed leaders of the mirror topic", lambda: mcu.leaders(cluster, topic, ids), 30)
    for p in range(partitions):
        src = mu.compare_partition(kafka.bootstrap, cluster.nodes[lead[p]].address, topic, p,
                                   what=f"{topic}-{p} (tern leader node {lead[p]})")
        assert len(src) > 0 or ends[p] == 0, f"{topic}-{p}: no batches"
    mark(f"log spans and batches identical on every partition (tern leaders {lead})")

    src_records = mcu.read_records(kafka.bootstrap, topic, ends)
    dst_records = mcu.read_records(cluster.bootstrap(), topic, ends)
    for p in range(partitions):
        diff = mcu.records_difference(src_records[p], dst_records[p])
        assert diff is None, f"partition {p}: {diff}"
    check_acked({p: [(o, v) for o, _, v in recs] for p, recs in dst_records.items()}, acked, failed)
    mark(f"{sum(len(r) for r in dst_records.values())} records equal on both sides; every "
         f"acknowledged value present once, in order, at its acknowledged offset")

    wait_replicas_identical(cluster, topic, range(partitions), ids)
    mark("the three replicas' segment files are byte-identical")
    return dst_records


def fail_over_and_write(cluster, mirror, topic, partitions, ends, mirrored, via, mark, diag,
                        per_partition=5):
    """`tern mirrors --stop` through node `via`; then every node must describe every partition
    STOPPED, and a plain acks=all producer must write to every partition right after the
    mirrored records (`mirrored`: {partition: [(offset, key, value)]} up to ends[partition])."""
    ids = cluster.broker_ids
    stop = mu.mirrors(cluster.nodes[via].address, "--stop", "--mirror", mirror, "--topics", topic)
    mark(f"--stop through node {via}: {stop.stdout.strip()}")
    stopped_at = time.time()

    def all_stopped(rows):
        return sorted(rows) == list(range(partitions)) and all(r["state"] == "STOPPED" for r in rows.values())

    wait_describe_everywhere(cluster, mirror, topic, ids,
                             f"every node to describe every partition of {topic} STOPPED once --stop returned",
                             all_stopped, 10, diag)
    mark(f"every node describes every partition STOPPED ({time.time() - stopped_at:.1f}s after --stop returned)")

    sent = {b"after-stop-%d-%d" % (p, i): (p, ends[p] + i) for p in range(partitions) for i in range(per_partition)}
    results, left = produce_to(cluster.bootstrap(), topic, {
        p: [(b"after-%d" % p, b"after-stop-%d-%d" % (p, i)) for i in range(per_partition)]
        for p in range(partitions)}, check=False)
    assert left == 0, f"{left} records written after the failover got no delivery report\n{diag()}"
    failed = {v: r for v, r in results.items() if isinstance(r, KafkaError)}
    assert not failed, (f"{len(failed)} of {len(sent)} acks=all writes to the failed-over topic were refused, "
                        f"e.g. {list(failed.items())[:3]}\n{diag()}")
    misplaced = {v: (results.get(v), want) for v, want in sent.items() if results.get(v) != want}
    assert not misplaced, (f"writes after the failover acknowledged elsewhere than right after the mirrored "
                           f"records ((partition, offset) got, expected): {list(misplaced.items())[:6]}")
    after = mcu.read_records(cluster.bootstrap(), topic, {p: ends[p] + per_partition for p in range(partitions)})
    for p in range(partitions):
        assert after[p][:ends[p]] == mirrored[p], f"partition {p}: the mirrored records changed after the failover"
        assert after[p][ends[p]:] == [(ends[p] + i, b"after-%d" % p, b"after-stop-%d-%d" % (p, i))
                                      for i in range(per_partition)], \
            f"partition {p}: records after the failover read back as {after[p][ends[p]:]}"
    mark(f"{len(sent)} records written to the failed-over topic at the next offsets and read back")


@pytest.mark.timeout(300)
def test_mirror_into_three_tern_brokers_survives_leader_kills(kafka, make_cluster, tmp_path):  # noqa: F811
    topic, mirror, partitions = "orders-rf3", "dr", 6
    mark = Timeline()
    cluster = tern_cluster(make_cluster)
    ids = cluster.broker_ids
    mark(f"tern nodes {[cluster.nodes[n].address for n in ids]}, data under {tmp_path}")
    create_source_topic(kafka, topic, partitions)

    producer = mcu.KeyedNumberedProducer(kafka.bootstrap, topic, partitions, rate=150)

    def diag():
        running = [n for n in ids if cluster.nodes[n].running]
        described = mcu.describe_everywhere(cluster, mirror, topic, running)
        return (f"{mark}\nproducer: {producer.summary()}\n"
                f"tern partitions:\n{views(cluster, topic, running)}\n"
                + "".join(f"describe through node {n}: {mcu.short_rows(r)}\n" for n, r in described.items()) +
                f"{mcu.cluster_mirror_logs(cluster)}\n(data kept in {tmp_path})")

    def source_end():
        return mcu.source_ends(kafka.bootstrap, topic, range(partitions))

    producer.start()
    try:
        producer.wait_acked("the first records acknowledged by the source", 300)
        mu.create_mirror(cluster.nodes[0].address, mirror, kafka.bootstrap, tmp_path)
        mark("mirror created through node 0")
        mu.mirrors(cluster.nodes[1].address, "--start", "--mirror", mirror, "--topics", topic)
        mark("topic started through node 1")
        wait_mirror_topic(cluster, topic, partitions)
        mark(f"mirror topic has {RF} replicas in sync: {agreed_partitions(cluster, topic, ids)}")

        first = source_end()
        hw = wait_high_watermarks(cluster, topic, partitions, ids,
                                  f"tern to mirror the source's first records {first} into every partition",
                                  lambda hw: all(hw[p] >= first[p] for p in first), 60, diag)
        mark(f"mirroring: tern high watermarks {hw}")

        for round_ in (1, 2):
            kill_busiest_broker(cluster, topic, partitions, round_, source_end, mark, diag)
        producer.wait_acked("records acknowledged after the second restart", 300)
    finally:
        producer.finish()
    mark(f"producer stopped: {producer.summary()}")
    producer.check_all_delivered()

    ends = source_end()
    mark(f"source ends {ends}")

    def caught_up(rows):
        return sorted(rows) == list(range(partitions)) and all(
            rows[p]["state"] == "MIRRORING" and rows[p]["lag"] == 0
            and rows[p]["destinationOffset"] == ends[p] and rows[p]["sourceOffset"] == ends[p]
            for p in range(partitions))

    wait_describe_everywhere(
        cluster, mirror, topic, ids,
        f"`tern mirrors --describe` asked of each of nodes {ids} to show every partition MIRRORING "
        f"with lag 0 at the source's ends {ends}", caught_up, 90, diag)
    mark("every node describes every partition MIRRORING with lag 0")

    mirrored = check_mirror_equals_source(cluster, kafka, topic, partitions, ends, producer.acked,
                                          producer.failed, mark)
    fail_over_and_write(cluster, mirror, topic, partitions, ends, mirrored, 2, mark, diag)


# -- 2. the mirror state RPCs between brokers ---------------------------------------------------------


def check_reads(addr, mirror, topic, partitions, coord, what):
    """ReadMirrorStates for every partition of `topic`, asked of every broker: a partition's
    coordinator (coord: {partition: (__mirror_state partition, its leader)}) answers it without
    error, the others NOT_COORDINATOR. Returns ({partition: the coordinator's answer}, problems)."""
    answers, problems = {}, []
    for n, address in sorted(addr.items()):
        error, message, got = mcu.read_mirror_states(address, mirror, {topic: list(range(partitions))})
        if error != mcu.NONE:
            problems.append(f"node {n}: top-level error {error} {message}")
            continue
        for p in range(partitions):
            r = got.get((topic, p))
            cp, leader = coord[p]
            if r is None:
                problems.append(f"node {n}: no {topic}-{p} in the answer {got}")
            elif n == leader:
                answers[p] = r
                if r["error"] != mcu.NONE:
                    problems.append(f"{topic}-{p} asked of its coordinator node {n} (leader of "
                                    f"{mcu.MIRROR_STATE_TOPIC}-{cp}): {r}")
            elif r["error"] != mcu.NOT_COORDINATOR:
                problems.append(f"{topic}-{p} asked of node {n}, which does not lead "
                                f"{mcu.MIRROR_STATE_TOPIC}-{cp} (node {leader} does): {r}, expected "
                                f"error {mcu.NOT_COORDINATOR} NOT_COORDINATOR")
    return answers, problems


def wait_coordinators_mirroring(addr, mirror, topic, partitions, coord, what, timeout=30):
    """Until every partition's coordinator answers ReadMirrorStates with MIRRORING; every other
    broker must answer NOT_COORDINATOR at every try. Returns the coordinators' answers."""
    last = {}

    def ask():
        answers, problems = check_reads(addr, mirror, topic, partitions, coord, what)
        assert not problems, f"{what}: ReadMirrorStates:\n" + "\n".join(problems)
        last.update(answers)
        if all(answers.get(p, {}).get("state_name") == "MIRRORING" for p in range(partitions)):
            return answers
        return None

    return wait_for(f"{what}: every partition's coordinator to answer ReadMirrorStates with MIRRORING "
                    f"(coordinators {coord})", ask, timeout, interval=0.5, diag=lambda: f"last answers {last}")


@pytest.mark.timeout(240)
def test_mirror_state_rpcs_between_brokers_bad_input(kafka, make_cluster, tmp_path):  # noqa: F811
    topic, mirror, partitions = "states-rf3", "sm", 3
    mark = Timeline()
    cluster = tern_cluster(make_cluster)
    ids = cluster.broker_ids
    addr = {n: cluster.nodes[n].address for n in ids}
    mark(f"tern nodes {addr}, data under {tmp_path}")
    create_source_topic(kafka, topic, partitions)
    produce_to(kafka.bootstrap, topic, {p: [(b"k-%d" % i, b"v-%d" % i) for i in range(p, 300, partitions)]
                                        for p in range(partitions)})
    ends = mcu.source_ends(kafka.bootstrap, topic, range(partitions))

    def diag():
        return (f"{mark}\ntern partitions:\n{views(cluster, topic, [n for n in ids if cluster.nodes[n].running])}\n"
                f"{mcu.cluster_mirror_logs(cluster)}\n(data kept in {tmp_path})")

    mu.create_mirror(addr[0], mirror, kafka.bootstrap, tmp_path)
    mu.mirrors(addr[0], "--start", "--mirror", mirror, "--topics", topic)
    wait_mirror_topic(cluster, topic, partitions)
    mark("mirror created and started through node 0; the mirror topic has 3 replicas in sync")
    wait_high_watermarks(cluster, topic, partitions, ids,
                         f"tern to hold the source's {ends} records in every partition",
                         lambda hw: hw == ends, 60, diag)
    mark(f"every partition mirrored up to the source's ends {ends}")

    # Who coordinates each mirror partition: the leader of __mirror_state partition
    # coordinator_partition(mirror, topic id, partition).
    tid = mcu.topic_id(cluster.bootstrap(), topic)
    assert tid == mcu.topic_id(kafka.bootstrap, topic), "the mirror topic's id is not the source's"
    coord = wait_for("__mirror_state listed with the same live leaders by every broker",
                     lambda: mcu.coordinators(cluster, mirror, tid, range(partitions), ids), 30)
    n_state = len(wait_for("__mirror_state's leaders", lambda: mcu.mirror_state_leaders(addr[0]), 10))
    assert n_state == mcu.MIRROR_STATE_DEFAULT_PARTITIONS, \
        f"__mirror_state has {n_state} partitions; mirror.state.topic.num.partitions defaults to 50"
    mark(f"topic id {mcu.uuid_base64(tid)}; coordinators (partition: (__mirror_state partition, leader)) {coord}")

    states = wait_coordinators_mirroring(addr, mirror, topic, partitions, coord, "before any leader change")
    mark(f"ReadMirrorStates: MIRRORING from each partition's coordinator, NOT_COORDINATOR from the others: {states}")

    # DescribeClusterMirrors (99) asked raw of each broker, and the CLI: every partition, with
    # its offsets, whichever broker leads it.
    want = {p: ("MIRRORING", ends[p], ends[p], 0) for p in range(partitions)}
    described = {}

    def describe_all():
        described.clear()
        for n in ids:
            error, message, mirrors = mcu.describe_cluster_mirrors(addr[n], [mirror])
            merr, rows = mirrors.get(mirror, (None, {}))
            described[f"DescribeClusterMirrors to node {n}"] = (
                {p: (r["state"], r["destination"], r["source"], r["lag"]) for (t, p), r in rows.items() if t == topic}
                if (error, merr) == (mcu.NONE, mcu.NONE) else f"error {error} {message}, mirror error {merr}")
            rows = mcu.describe_rows(addr[n], mirror, topic)
            described[f"`tern mirrors --describe` through node {n}"] = rows if isinstance(rows, str) else {
                p: (r["state"], r["destinationOffset"], r["sourceOffset"], r["lag"]) for p, r in rows.items()}
        return all(got == want for got in described.values())

    wait_for(f"DescribeClusterMirrors (raw and through the CLI) asked of each node to answer every partition "
             f"as (state, destination, source, lag) {want}", describe_all, 15, interval=0.5,
             diag=lambda: "\n".join(f"  {k}: {v}" for k, v in described.items()) + f"\n{diag()}")
    mark("DescribeClusterMirrors and `tern mirrors --describe` answer every partition from each node")

    # A leader change of mirror partition 0 (its leader stopped and started again), so that its
    # leader epoch is at least 1 and epoch - 1 is a real, older epoch.
    old = leader_of(cluster, topic, 0, ids)
    if old.epoch < 1:
        node = cluster.nodes[old.leader]
        node.stop()
        new = wait_new_leader(cluster, topic, 0, old, [n for n in ids if n != old.leader])
        mark(f"node {old.leader} (leader of {topic}-0, epoch {old.epoch}) stopped; now node {new.leader}, "
             f"epoch {new.epoch}")
        try:
            node.start()
        except RuntimeError as e:
            pytest.fail(f"node {old.leader} did not start again: {e}")
        wait_isr_full(cluster, topic, partitions, RF)
    current = leader_of(cluster, topic, 0, ids)
    assert current.epoch >= 1, current
    coord = wait_for("agreed __mirror_state leaders after the restart",
                     lambda: mcu.coordinators(cluster, mirror, tid, range(partitions), ids), 30)
    mark(f"{topic}-0 led by node {current.leader}, leader epoch {current.epoch}; coordinators {coord}")
    states = wait_coordinators_mirroring(addr, mirror, topic, partitions, coord, "after the leader change")
    cp0, coordinator = coord[0]
    before = states[0]

    # A stale writer: FAILED written with the leader epoch before the current one.
    stale = mcu.write_partition(0, mcu.STATE_IDS["FAILED"], last_mirror_epoch=before["last_mirror_epoch"],
                                retry_attempt=3, error_message="written by a stale leader",
                                last_mirrored_offset=1, previous_state=mcu.STATE_IDS["MIRRORING"],
                                leader_epoch=current.epoch - 1)
    error, message, got = mcu.write_mirror_states(addr[coordinator], mirror, {topic: [stale]})
    assert error == mcu.NONE, f"WriteMirrorStates (stale epoch) to node {coordinator}: top-level error {error} {message}"
    assert got.get((topic, 0), (None,))[0] == mcu.FENCED_LEADER_EPOCH, (
        f"WriteMirrorStates {topic}-0 FAILED with leader_epoch {current.epoch - 1} (the partition's is "
        f"{current.epoch}) to its coordinator node {coordinator} answered {got}, expected "
        f"{mcu.FENCED_LEADER_EPOCH} FENCED_LEADER_EPOCH")
    _, _, after = mcu.read_mirror_states(addr[coordinator], mirror, {topic: [0]})
    a = after.get((topic, 0), {})
    keep = ("error", "state_name", "retry_attempt", "error_message", "last_mirrored_offset")
    assert {k: a.get(k) for k in keep} == {k: before[k] for k in keep} and a["state_name"] == "MIRRORING", (
        f"the fenced write changed {topic}-0: ReadMirrorStates now {a}, before {before}")
    rows = mcu.describe_rows(addr[coordinator], mirror, topic)
    assert not isinstance(rows, str) and rows.get(0, {}).get("state") == "MIRRORING", \
        f"after the fenced write, describe shows {mcu.short_rows(rows)}"
    mark(f"stale WriteMirrorStates fenced by node {coordinator}: {got}; state still {a}")

    # The current leader epoch is accepted (the state it has: nothing changes for the mirror).
    fresh = mcu.write_partition(0, mcu.STATE_IDS["MIRRORING"], last_mirror_epoch=before["last_mirror_epoch"],
                                previous_state=mcu.STATE_IDS["MIRRORING"], leader_epoch=current.epoch)
    error, message, got = mcu.write_mirror_states(addr[coordinator], mirror, {topic: [fresh]})
    assert (error, got.get((topic, 0), (None,))[0]) == (mcu.NONE, mcu.NONE), (
        f"WriteMirrorStates {topic}-0 MIRRORING with the current leader epoch {current.epoch} to its "
        f"coordinator node {coordinator} answered top-level {error} {message}, partitions {got}; "
        f"expected no error")

    # Any other broker is not the coordinator.
    for n in ids:
        if n == coordinator:
            continue
        error, message, got = mcu.write_mirror_states(addr[n], mirror, {topic: [fresh]})
        assert error == mcu.NONE, f"WriteMirrorStates to node {n}: top-level error {error} {message}"
        assert got.get((topic, 0), (None,))[0] == mcu.NOT_COORDINATOR, (
            f"WriteMirrorStates {topic}-0 to node {n}, which does not lead {mcu.MIRROR_STATE_TOPIC}-{cp0} "
            f"(node {coordinator} does), answered {got}, expected {mcu.NOT_COORDINATOR} NOT_COORDINATOR")
    mark("WriteMirrorStates: the current epoch accepted by the coordinator, NOT_COORDINATOR from the others")

    states = wait_coordinators_mirroring(addr, mirror, topic, partitions, coord, "after the writes", timeout=5)
    for n in ids:
        error, message, mirrors = mcu.describe_cluster_mirrors(addr[n], [mirror])
        rows = mirrors.get(mirror, (None, {}))[1]
        got = {p: r["state"] for (t, p), r in rows.items() if t == topic}
        assert error == mcu.NONE and got == {p: "MIRRORING" for p in range(partitions)}, \
            f"DescribeClusterMirrors to node {n} after the writes: error {error} {message}, states {got}"
    mark(f"every partition still MIRRORING: {states}")
