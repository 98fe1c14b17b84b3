"""Mirroring from a three-broker Apache Kafka into a three-broker Tern (issue 12), with both
sides disrupted, and a group committed far past what a paused mirror holds.

The source is a real Apache Kafka 4.4.0 cluster of three combined broker+controller nodes
(tests/harness/kafka_peer.py KafkaCluster, node logs under <tmp>/c2c-source*/node-<id>/kafka.log),
started once for the module. Each test starts its own three combined Tern nodes
(test_mirror_into_cluster.py's settings: fenced after 6 s without heartbeats,
default.replication.factor=3, min.insync.replicas=2; node logs under tmp_path/node-<id>/tern.log,
printed at teardown). The source is asked one broker at a time (raw Metadata v7 to every running
broker, ListOffsets and Fetch v4 to each partition's leader), because mirror_util's raw client
and test_mirror_into_cluster.check_mirror_equals_source speak to a single-broker source.

1. test_kafka_cluster_into_tern_cluster_with_kills_on_both_sides: a source topic with 6
   partitions, replication factor 3 and min.insync.replicas=2; an idempotent acks=all producer
   writes numbered, keyed values to it throughout. Three rounds, each: kill -9 the Tern broker
   leading the most mirror partitions and, right after, the source broker leading the most source
   partitions (each source broker once); wait until Tern has new leaders for the killed broker's
   partitions and the source has live leaders for all, then until the source acknowledged records
   at or past its ends after the kills and every partition's high watermark on Tern passed them;
   restart the source broker; once it is back in every ISR, a preferred leader election
   (AdminClient.elect_leaders) moves its partitions back to it, and again Tern must mirror records
   the source acknowledged after the move; the Tern broker is restarted before the source broker
   in odd rounds (it catches up during the election) and only after the election in even rounds
   (Tern follows the move a broker short), and must be back in every ISR. So each
   source partition's leader moves twice (two new source leader epochs) while Tern's own
   leadership moves as well. Then production stops and: `tern mirrors --describe --json` asked of
   each node shows every partition MIRRORING with lag 0 at the source's ends; every partition on
   Tern's leader has the same log span and the same batch bytes as on the source's leader, the
   partition leader epoch included (and batches of at least two source epochs, so the epochs were
   really tested), and Tern leads it in an epoch not below any of them; read_committed consumers
   (librdkafka's default isolation) read the same (offset, key, value) records from both
   clusters; every acknowledged value is there once, at its acknowledged offset, on both; the
   three Tern replicas are byte-identical. Failover (test_mirror_into_cluster.fail_over_and_write):
   `--stop` through node 2, every node describes every partition STOPPED, and a plain acks=all
   producer writes to every partition at the next offsets.
   Against a Tern that loses or doubles records when a mirror partition changes leader on either
   side, that rewrites the partition leader epoch, or whose fetchers do not follow the source's
   leaders, the waits for mirrored records or the comparisons fail.
2. test_group_far_ahead_of_a_paused_mirror_resumes_at_the_mirrored_end: a 3-partition topic
   mirrored (mirror.metadata.refresh.interval.ms=500) with a group's offsets: the group's first
   commit on the source must reach Tern as it is. Then the mirror topic is paused (PAUSED on every
   node), the source gets 500 more records per partition and the group commits near the source's
   new end, far past what Tern holds: Tern's committed offset must become exactly the mirrored end
   (the clamp; never past it) while Tern's high watermark stays put. Failover (`--stop` of the
   paused topic) must keep both. A plain producer then writes 5 records per partition to Tern,
   which must land at the mirrored end; four more sync intervals must leave the group at the
   mirrored end (the source's far-ahead offset, now within Tern's grown log, must no longer be
   synced). Then a consumer of the group with auto.offset.reset=earliest, and after it one with
   latest (neither commits), must each read exactly those 5 records per partition, from the
   mirrored end: an unclamped offset past the log end would be reset to 0 (earliest) or to the
   end (latest, reading nothing), and a late sync would skip the new records.
"""

import json
import os
import shutil
import struct
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_peer
import mirror_cluster_util as mcu
import mirror_util as mu
from replication_util import (
    agreed_partitions,
    check_acked,
    try_metadata_v7,
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
from test_mirror_into_cluster import (
    RF,
    SOURCE_OVERRIDES,
    TERN_EXTRA,
    VERSION,
    Timeline,
    fail_over_and_write,
    produce_to,
    tern_cluster,
    wait_describe_everywhere,
    wait_high_watermarks,
    wait_mirror_topic,
)
from test_mirror_kafka import committed

ROUNDS = 3
ELECTION_NOT_NEEDED = 84


# -- the source cluster ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A three-broker Apache Kafka 4.4.0 for the whole module."""
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: the Apache Kafka source needs Maven and a JDK")
    if not os.path.isfile(TERN_BIN):
        pytest.skip(f"no tern binary at {TERN_BIN} (set TERN_BIN)")
    try:
        kafka_peer.KafkaJars(VERSION).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {VERSION}: {str(e).splitlines()[0]}")
    kc = kafka_peer.KafkaCluster(VERSION, tmp_path_factory.mktemp("c2c-source"), brokers=3,
                                 overrides=SOURCE_OVERRIDES)
    kc.start(timeout=180)
    print(f"Apache Kafka {VERSION} cluster {kc.bootstrap}, logs {kc.data_dir}/node-*/kafka.log")
    try:
        yield kc
    finally:
        kc.stop(timeout=20)


def all_running(kc):
    """Starts again any source broker a failed test left down."""
    for n in kc.node_ids:
        if not kc.pid(n):
            kc.start_node(n, timeout=120)


def running_bootstrap(kc):
    return ",".join(kc.address(n) for n in kc.running())


def source_view(kc, topic, partitions):
    """{partition: PartitionState} of `topic` if every running source broker reports the same
    (raw Metadata v7), each partition led by a running broker; else None."""
    running = kc.running()
    seen = []
    for n in running:
        md = try_metadata_v7(kc.address(n), [topic])
        t = md and md.topics.get(topic)
        if not t or t.error != 0 or sorted(t.partitions) != list(range(partitions)):
            return None
        seen.append(t.partitions)
    if not seen or any(v != seen[0] for v in seen):
        return None
    if any(s.leader not in running for s in seen[0].values()):
        return None
    return seen[0]


def show_source(kc, topic, partitions):
    """Each running source broker's view of `topic`, for failure messages."""
    out = []
    for n in kc.running():
        md = try_metadata_v7(kc.address(n), [topic])
        t = md and md.topics.get(topic)
        out.append(f"source node {n}: " + ("<no answer>" if t is None else ", ".join(
            f"{p}:leader={s.leader} epoch={s.epoch} replicas={list(s.replicas)} isr={list(s.isr)}"
            for p, s in sorted(t.partitions.items()))))
    return "\n".join(out) + f"\n(source nodes running: {kc.running()}; logs {kc.data_dir}/node-*/kafka.log)"


def source_ends(kc, topic, partitions):
    """{partition: high watermark}, each asked of its leader (ListOffsets v1), or None while
    leaders move."""
    view = source_view(kc, topic, partitions)
    if view is None:
        return None
    by_leader = {}
    for p, s in view.items():
        by_leader.setdefault(s.leader, []).append(p)
    out = {}
    try:
        for leader, ps in sorted(by_leader.items()):
            with mu.RawKafka(kc.address(leader), timeout=5) as k:
                out.update(k.list_offsets(topic, ps, mu.LATEST))
    except (OSError, struct.error, mu.KafkaProtocolError):
        return None
    return out


def wait_source_ends(kc, topic, partitions, diag):
    return wait_for(f"the high watermarks of {topic} from the source's leaders",
                    lambda: source_ends(kc, topic, partitions), 30, interval=0.3, diag=diag)


def create_source_topic(kc, topic, partitions):
    """RF 3, min.insync.replicas=2; returns once every broker agrees on it with full ISRs."""
    admin = AdminClient({"bootstrap.servers": kc.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    del admin
    return wait_for(f"every source broker to list {topic} with full ISRs",
                    lambda: (lambda v: v if v and all(len(s.isr) == 3 for s in v.values()) else None)(
                        source_view(kc, topic, partitions)),
                    30, interval=0.3, diag=lambda: show_source(kc, topic, partitions))


def elect_preferred(kc, topic, partitions):
    """A preferred leader election of every partition of `topic` (ElectLeaders through the
    AdminClient); returns {partition: error} of the elections that failed for another reason than
    ELECTION_NOT_NEEDED."""
    admin = AdminClient({"bootstrap.servers": running_bootstrap(kc)})
    try:
        result = admin.elect_leaders(ElectionType.PREFERRED,
                                     [TopicPartition(topic, p) for p in range(partitions)]).result(timeout=60)
    finally:
        del admin
    failed = {}
    for tp, exc in result.items():
        err = exc.args[0] if isinstance(exc, Exception) and exc.args else exc  # KafkaError or KafkaException
        if err is not None and err.code() != ELECTION_NOT_NEEDED:
            failed[tp.partition] = err
    return failed


# -- 1. kills on both sides --------------------------------------------------------------------------


def acked_from(producer, ends):
    """{partition: the highest acknowledged offset} once the producer has an acknowledgement at
    or past ends[partition] on every partition, else None."""
    with producer.lock:
        placed = list(producer.acked.values())
    best = {}
    for p, o in placed:
        if o is not None and o >= ends[p]:  # None: acknowledged without its offset (a retried request)
            best[p] = max(best.get(p, -1), o)
    return best if len(best) == len(ends) else None


def wait_mirrored_after(cluster, kc, topic, partitions, ids, producer, what, floor, mark, diag):
    """Once the source has live leaders: its ends now; records the source acknowledged at or past
    them (necessarily after the disruption); then every partition's high watermark on Tern (asked
    of its leader among `ids`) past them and past `floor`."""
    ends = wait_source_ends(kc, topic, partitions, diag)
    acked = wait_for(f"{what}: records acknowledged by the source at or past its ends {ends} on every partition",
                     lambda: acked_from(producer, ends), 60, interval=0.3,
                     diag=lambda: f"producer: {producer.summary()}\n{diag()}")
    target = {p: max(acked[p], floor.get(p, -1)) for p in range(partitions)}
    hw = wait_high_watermarks(cluster, topic, partitions, ids,
                              f"{what}: every partition's high watermark on tern past {target} (records the "
                              f"source acknowledged after the source's ends were {ends})",
                              lambda hw: all(hw[p] > target[p] for p in target), 90, diag)
    mark(f"{what}: source acknowledged up to {acked}; tern high watermarks {hw}")
    return hw


def disrupt_both_sides(cluster, kc, topic, partitions, round_, producer, source_victims, mark, diag):
    """One round: kill -9 the Tern broker leading the most mirror partitions and the source broker
    leading the most source partitions (one not killed before); wait for new leaders on both sides
    and records mirrored after that; restart both; move the source's leaders back with a preferred
    election; wait for records mirrored after that and for the Tern broker in every ISR."""
    ids = cluster.broker_ids
    parts = wait_for("the leaders of the mirror topic as every tern broker reports them",
                     lambda: mcu.leaders(cluster, topic, ids) and agreed_partitions(cluster, topic, ids),
                     30, diag=diag)
    led = Counter(s.leader for s in parts.values())
    victim = max(ids, key=lambda n: (led[n], -n))
    old = {p: s for p, s in parts.items() if s.leader == victim}
    others = [n for n in ids if n != victim]
    src = wait_for("the source's leaders", lambda: source_view(kc, topic, partitions), 30, diag=diag)
    src_led = Counter(s.leader for s in src.values())
    src_victim = max(kc.node_ids, key=lambda n: (n not in source_victims, src_led[n], -n))
    source_victims.append(src_victim)
    src_old = sorted(p for p, s in src.items() if s.leader == src_victim)
    tern_at_kill = mcu.tern_high_watermarks(cluster, topic, range(partitions), ids) or {}

    cluster.nodes[victim].kill9()
    kc.kill(src_victim)
    mark(f"round {round_}: killed tern node {victim} (leader of {sorted(old)}; leaders per node {dict(led)}) "
         f"and source node {src_victim} (leader of {src_old}; leaders per node {dict(src_led)}); "
         f"tern high watermarks before {tern_at_kill}")
    for p, state in sorted(old.items()):
        new = wait_new_leader(cluster, topic, p, state, others)
        mark(f"round {round_}: tern partition {p} now led by node {new.leader} (epoch {new.epoch})")
    after = wait_for(f"round {round_}: every source partition led by a running broker (node {src_victim} killed)",
                     lambda: source_view(kc, topic, partitions), 45, interval=0.3, diag=diag)
    mark(f"round {round_}: source leaders (epochs) {({p: (s.leader, s.epoch) for p, s in after.items()})}")
    wait_mirrored_after(cluster, kc, topic, partitions, others, producer,
                        f"round {round_}, tern node {victim} and source node {src_victim} down",
                        tern_at_kill, mark, diag)

    def start_tern_victim():
        try:
            cluster.nodes[victim].start()
        except RuntimeError as e:
            pytest.fail(f"tern node {victim} did not start again after kill -9: {e}\n{diag()}")
        mark(f"round {round_}: tern node {victim} started again")

    # Odd rounds: the Tern broker is back (and catching up) during the source's election; even
    # rounds: the election happens while Tern is still a broker short.
    tern_back_first = round_ % 2 == 1
    if tern_back_first:
        start_tern_victim()
    try:
        kc.start_node(src_victim, timeout=120)
    except RuntimeError as e:
        pytest.fail(f"source node {src_victim} did not start again after kill -9: {e}\n{diag()}")
    mark(f"round {round_}: source node {src_victim} started again")
    wait_for(f"round {round_}: source node {src_victim} back in the ISR of every partition",
             lambda: (lambda v: v and all(src_victim in s.isr for s in v.values()))(
                 source_view(kc, topic, partitions)), 90, interval=0.5, diag=diag)
    before = source_view(kc, topic, partitions) or {}
    moving = sorted(p for p, s in before.items() if s.leader != s.replicas[0])
    failed = {}
    for _ in range(5):  # bounded: a broker just back may still refuse for a moment
        failed = elect_preferred(kc, topic, partitions)
        if not failed:
            break
        time.sleep(1)
    assert not failed, f"round {round_}: preferred election of {topic} failed: {failed}\n{diag()}"
    moved = wait_for(f"round {round_}: every source partition led by its preferred replica",
                     lambda: (lambda v: v if v and all(s.leader == s.replicas[0] for s in v.values()) else None)(
                         source_view(kc, topic, partitions)), 30, interval=0.3, diag=diag)
    mark(f"round {round_}: preferred election moved partitions {moving} back; source leaders (epochs) "
         f"{({p: (s.leader, s.epoch) for p, s in moved.items()})}")
    wait_mirrored_after(cluster, kc, topic, partitions, ids if tern_back_first else others, producer,
                        f"round {round_}, after the preferred election", {}, mark, diag)
    if not tern_back_first:
        start_tern_victim()
    wait_isr_full(cluster, topic, partitions, RF, timeout=90)
    mark(f"round {round_}: tern node {victim} back in every ISR")


def check_equals_source(cluster, kc, topic, partitions, ends, producer, mark):
    """Every partition on Tern equals the source's: the same log span and batch bytes (the
    partition leader epoch included) leader against leader, batches of at least two source epochs,
    Tern's leader epoch not below any of them; the same (offset, key, value) read_committed on
    both; every acknowledged value once at its offset on both; Tern's replicas byte-identical.
    Returns {partition: [(offset, key, value)]} read from Tern."""
    ids = cluster.broker_ids
    tern = wait_for("agreed tern leaders of the mirror topic", lambda: agreed_partitions(cluster, topic, ids), 30)
    src = wait_for("agreed source leaders", lambda: source_view(kc, topic, partitions), 30)
    epochs = {}
    for p in range(partitions):
        batches = mu.compare_partition(kc.address(src[p].leader), cluster.nodes[tern[p].leader].address, topic, p,
                                       what=f"{topic}-{p} (source leader node {src[p].leader}, tern leader "
                                            f"node {tern[p].leader})")
        epochs[p] = sorted({b.leader_epoch for b in batches})
    mark(f"log spans and batches identical on every partition; source batch epochs {epochs}")
    few = {p: e for p, e in epochs.items() if len(e) < 2}
    assert not few, f"partitions whose batches carry a single leader epoch although their leader moved: {few}"
    low = {p: (tern[p].epoch, max(e)) for p, e in epochs.items() if tern[p].epoch < max(e)}
    assert not low, ("tern leads partitions in a leader epoch below a mirrored batch's ((tern epoch, "
                     f"highest batch epoch)): {low}\n{views(cluster, topic, ids)}")

    src_records = mcu.read_records(kc.bootstrap, topic, ends)
    dst_records = mcu.read_records(cluster.bootstrap(), topic, ends)
    for p in range(partitions):
        diff = mcu.records_difference(src_records[p], dst_records[p])
        assert diff is None, f"partition {p}: {diff}"
    # check_acked takes an offset below 0 for "acknowledged without its offset"; the client says None.
    acked = {v: (p, -1 if o is None else o) for v, (p, o) in producer.acked.items()}
    for side, records in (("source", src_records), ("tern", dst_records)):
        try:
            check_acked({p: [(o, v) for o, _, v in recs] for p, recs in records.items()}, acked, producer.failed)
        except AssertionError as e:
            raise AssertionError(f"on the {side}: {e}") from None
    mark(f"{sum(len(r) for r in dst_records.values())} records equal on both sides (read_committed); every "
         f"acknowledged value present once, in order, at its acknowledged offset on both")
    wait_replicas_identical(cluster, topic, range(partitions), ids)
    mark("the three tern replicas' segment files are byte-identical")
    return dst_records


@pytest.mark.timeout(420)
def test_kafka_cluster_into_tern_cluster_with_kills_on_both_sides(source, make_cluster, tmp_path):  # noqa: F811
    topic, mirror, partitions = "c2c-orders", "c2c", 6
    mark = Timeline()
    all_running(source)
    cluster = tern_cluster(make_cluster)
    ids = cluster.broker_ids
    mark(f"source {source.bootstrap}; tern nodes {[cluster.nodes[n].address for n in ids]}, data under {tmp_path}")
    create_source_topic(source, topic, partitions)
    producer = mcu.KeyedNumberedProducer(source.bootstrap, topic, partitions, rate=150)

    def diag():
        running = [n for n in ids if cluster.nodes[n].running]
        described = mcu.describe_everywhere(cluster, mirror, topic, running)
        return (f"{mark}\nproducer: {producer.summary()}\n{show_source(source, topic, partitions)}\n"
                f"tern partitions:\n{views(cluster, topic, running)}\n"
                + "".join(f"describe through node {n}: {mcu.short_rows(r)}\n" for n, r in described.items())
                + f"{mcu.cluster_mirror_logs(cluster)}\n(tern data kept in {tmp_path})")

    producer.start()
    try:
        producer.wait_acked("the first records acknowledged by the source", 300)
        mu.create_mirror(cluster.nodes[0].address, mirror, source.bootstrap, tmp_path)
        mu.mirrors(cluster.nodes[1].address, "--start", "--mirror", mirror, "--topics", topic)
        mark("mirror created through node 0, topic started through node 1")
        wait_mirror_topic(cluster, topic, partitions)
        wait_mirrored_after(cluster, source, topic, partitions, ids, producer, "mirroring", {}, mark, diag)

        source_victims = []
        for round_ in range(1, ROUNDS + 1):
            disrupt_both_sides(cluster, source, topic, partitions, round_, producer, source_victims, mark, diag)
        producer.wait_acked("records acknowledged after the last round", 300)
    finally:
        producer.finish()
    mark(f"producer stopped: {producer.summary()}")
    producer.check_all_delivered()

    ends = wait_source_ends(source, topic, partitions, diag)
    mark(f"source ends {ends}")

    def caught_up(rows):
        return sorted(rows) == list(range(partitions)) and all(
            rows[p]["state"] == "MIRRORING" and rows[p]["lag"] == 0
            and rows[p]["destinationOffset"] == ends[p] and rows[p]["sourceOffset"] == ends[p]
            for p in range(partitions))

    wait_describe_everywhere(
        cluster, mirror, topic, ids,
        f"`tern mirrors --describe` asked of each of nodes {ids} to show every partition MIRRORING with lag 0 "
        f"at the source's ends {ends}", caught_up, 90, diag)
    mark("every node describes every partition MIRRORING with lag 0")
    failures = {n: cluster.nodes[n].log_text().count("mirror partition failed") for n in ids}
    mark(f"FAILED transitions (retried) per tern node: {failures}")

    mirrored = check_equals_source(cluster, source, topic, partitions, ends, producer, mark)
    fail_over_and_write(cluster, mirror, topic, partitions, ends, mirrored, 2, mark, diag)


# -- 2. a group far ahead of a paused mirror -------------------------------------------------------------


def group_offsets(bootstrap, group, topic, partitions, timeout=20):
    """test_mirror_kafka.committed, retried while the group coordinator is not available (a new
    __consumer_offsets partition, a coordinator moving)."""
    deadline = time.time() + timeout
    while True:
        try:
            return committed(bootstrap, group, topic, partitions)
        except KafkaException:
            if time.time() > deadline:
                raise
            time.sleep(0.3)


def commit_on(bootstrap, group, topic, offsets):
    """A standalone commit of {partition: offset} for `group` (no membership)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(offsets.items())], asynchronous=False)
    finally:
        c.close()


def consume_group(bootstrap, group, topic, reset, want, timeout=60):
    """A member of `group` (subscribe, auto.offset.reset=`reset`, no commits) reads until it has
    `want` records, then 2 s more (to see any surplus). Returns {partition: [(offset, key, value)]}
    and the consumer errors seen."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": reset, "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    got, errors = {}, []
    try:
        c.subscribe([topic])
        deadline = time.time() + timeout
        grace = None
        while time.time() < deadline and (grace is None or time.time() < grace):
            m = c.poll(0.2)
            if m is not None:
                if m.error():
                    errors.append(str(m.error()))
                else:
                    got.setdefault(m.partition(), []).append((m.offset(), m.key(), m.value()))
            if grace is None and sum(len(r) for r in got.values()) >= want:
                grace = time.time() + 2
    finally:
        c.close()
    return got, errors


@pytest.mark.timeout(300)
def test_group_far_ahead_of_a_paused_mirror_resumes_at_the_mirrored_end(source, make_cluster, tmp_path):  # noqa: F811
    topic, mirror, partitions, group = "c2c-paused", "c2c-groups", 3, "c2c-far-ahead"
    refresh = 0.5
    mark = Timeline()
    all_running(source)
    cluster = three_combined(make_cluster, {**TERN_EXTRA,
                                            "mirror.metadata.refresh.interval.ms": str(int(refresh * 1000))})
    wait_brokers_everywhere(cluster)
    ids = cluster.broker_ids
    addr = {n: cluster.nodes[n].address for n in ids}
    mark(f"source {source.bootstrap}; tern nodes {addr}, data under {tmp_path}")
    create_source_topic(source, topic, partitions)
    produce_to(source.bootstrap, topic, {p: [(b"k-%d" % i, b"before-%d-%d" % (p, i)) for i in range(100)]
                                         for p in range(partitions)})
    first = {p: 40 for p in range(partitions)}
    commit_on(source.bootstrap, group, topic, first)
    got = group_offsets(source.bootstrap, group, topic, partitions)
    assert got == first, f"group {group} on the source has {got} after committing {first}"

    def diag():
        described = mcu.describe_everywhere(cluster, mirror, topic, ids)
        return (f"{mark}\n{show_source(source, topic, partitions)}\ntern partitions:\n{views(cluster, topic, ids)}\n"
                + "".join(f"describe through node {n}: {mcu.short_rows(r)}\n" for n, r in described.items())
                + f"group {group} on tern: {group_offsets(cluster.bootstrap(), group, topic, partitions)}, on the "
                f"source: {group_offsets(source.bootstrap, group, topic, partitions)}\n"
                f"{mcu.cluster_mirror_logs(cluster)}\n(tern data kept in {tmp_path})")

    def describe_all(state, ends):
        def ok(rows):
            return sorted(rows) == list(range(partitions)) and all(
                rows[p]["state"] == state and rows[p]["destinationOffset"] == ends[p] for p in range(partitions))
        return wait_describe_everywhere(cluster, mirror, topic, ids,
                                        f"every node to describe every partition {state} at {ends}", ok, 60, diag)

    mu.create_mirror(addr[0], mirror, source.bootstrap, tmp_path)
    mu.mirrors(addr[1], "--start", "--mirror", mirror, "--topics", topic)
    wait_mirror_topic(cluster, topic, partitions)
    mirrored = wait_source_ends(source, topic, partitions, diag)
    describe_all("MIRRORING", mirrored)
    mark(f"mirrored up to the source's ends {mirrored}")
    wait_for(f"group {group}'s source offsets {first} synced to tern",
             lambda: group_offsets(cluster.bootstrap(), group, topic, partitions) == first, 30, interval=0.5, diag=diag)
    mark(f"group {group} synced as committed on the source: {first}")

    mu.mirrors(addr[2], "--pause", "--mirror", mirror, "--topics", topic)
    describe_all("PAUSED", mirrored)
    mark("paused: every node describes every partition PAUSED")
    produce_to(source.bootstrap, topic, {p: [(b"k-%d" % i, b"paused-%d-%d" % (p, i)) for i in range(500)]
                                         for p in range(partitions)})
    source_end = wait_source_ends(source, topic, partitions, diag)
    far = {p: source_end[p] - 7 for p in range(partitions)}
    commit_on(source.bootstrap, group, topic, far)
    got = group_offsets(source.bootstrap, group, topic, partitions)
    assert got == far, f"group {group} on the source has {got} after committing {far}"
    mark(f"source now ends at {source_end}; group {group} committed {far} on the source")

    seen = []

    def clamped():
        got = group_offsets(cluster.bootstrap(), group, topic, partitions)
        seen.append(got)
        past = {p: o for p, o in got.items() if o > mirrored[p]}
        assert not past, (f"group {group} on tern committed {got}: past the mirrored end {mirrored} "
                          f"(the source's {far} not clamped)\n{diag()}")
        return got == mirrored

    wait_for(f"a group sync pass to clamp {group}'s far-ahead source offsets {far} to the mirrored end {mirrored}",
             clamped, 30, interval=0.25, diag=lambda: f"committed on tern, last seen {seen[-3:]}\n{diag()}")
    time.sleep(4 * refresh)
    got = group_offsets(cluster.bootstrap(), group, topic, partitions)
    assert got == mirrored, f"group {group} on tern moved from the mirrored end {mirrored} to {got}\n{diag()}"
    hw = mcu.tern_high_watermarks(cluster, topic, range(partitions), ids)
    assert hw == mirrored, f"the paused mirror topic's high watermarks {hw}, mirrored {mirrored}\n{diag()}"
    mark(f"group {group} on tern clamped to the mirrored end {mirrored} and kept there; high watermarks unmoved")

    stop = mu.mirrors(addr[0], "--stop", "--mirror", mirror, "--topics", topic)
    mark(f"--stop of the paused topic: {stop.stdout.strip()}")
    describe_all("STOPPED", mirrored)
    hw = mcu.tern_high_watermarks(cluster, topic, range(partitions), ids)
    assert hw == mirrored, f"after --stop of the paused topic its high watermarks are {hw}, mirrored {mirrored}"
    got = group_offsets(cluster.bootstrap(), group, topic, partitions)
    assert got == mirrored, f"after --stop group {group} on tern has {got}, the mirrored end is {mirrored}\n{diag()}"

    per_partition = 5
    results, _ = produce_to(cluster.bootstrap(), topic, {
        p: [(b"after-%d" % p, b"after-stop-%d-%d" % (p, i)) for i in range(per_partition)] for p in range(partitions)})
    want = {b"after-stop-%d-%d" % (p, i): (p, mirrored[p] + i) for p in range(partitions) for i in range(per_partition)}
    assert results == want, f"writes after the failover acknowledged at {results}, expected {want}"
    mark(f"{len(want)} records written to tern after the failover at the mirrored end")
    time.sleep(4 * refresh)
    now = group_offsets(cluster.bootstrap(), group, topic, partitions)
    assert now == mirrored, (f"group {group} on tern moved to {now} after the failover (the mirrored end is "
                             f"{mirrored}, the source's offsets {far}): it must no longer be synced\n{diag()}")

    expected = {p: [(mirrored[p] + i, b"after-%d" % p, b"after-stop-%d-%d" % (p, i)) for i in range(per_partition)]
                for p in range(partitions)}
    for reset in ("earliest", "latest"):
        got, errors = consume_group(cluster.bootstrap(), group, topic, reset, per_partition * partitions)
        firsts = {p: r[0][0] for p, r in sorted(got.items()) if r}
        assert got == expected, (
            f"a consumer of {group} with auto.offset.reset={reset} started at {firsts} and read "
            f"{ {p: len(r) for p, r in got.items()} } records (errors {errors[:5]}); expected to start at the "
            f"mirrored end {mirrored} and read exactly the {per_partition} records written after the failover "
            f"per partition; first records read: "
            f"{json.dumps({p: [(o, k.decode(), v.decode()) for o, k, v in r[:8]] for p, r in got.items()})}"
            f"\n{diag()}")
        mark(f"a consumer of {group} with auto.offset.reset={reset} read exactly the records from the mirrored end")
    got = group_offsets(cluster.bootstrap(), group, topic, partitions)
    assert got == mirrored, f"group {group} on tern has {got} after consumers that never commit; expected {mirrored}"
