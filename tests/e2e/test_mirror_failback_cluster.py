"""Failing back into a Tern cluster whose followers hold the writes the failback truncates.

Cluster A is three combined Tern nodes (test_mirror_into_cluster.py's settings: fenced after 6 s
without heartbeats, default.replication.factor=3, min.insync.replicas=2; node logs under
tmp_path/node-<id>/tern.log, printed at teardown). B, the disaster-recovery side, is a single Tern
node (tmp_path/b/tern.log). Topic `fb` on A: 3 partitions, replication factor 3.

1. N keyed, numbered records per partition are written to A (acks=all). B mirrors A (`tern
   mirrors --create --mirror dr` on B with A as its source, `--start --topics fb`) until B's
   describe shows every partition MIRRORING with lag 0 at A's ends, and B equals A batch for batch.
2. Failover at B (`--stop` on B): B's topic becomes writable and gets M "after-failover" records
   per partition, one record per batch, at the offsets right after the mirrored ones; their
   batches carry B's post-failover leader epoch.
3. A, the old source, stays writable. Its leaders are made to change (kill -9 of the broker
   leading the low-epoch partitions, restart, full ISR, a preferred election) until every
   partition's leader epoch on A is above every epoch of B's post-failover batches; then K
   "divergent" records per partition (K < M) are written to A with acks=all, one per batch, and
   every replica of A is made to hold them (read from each node's segment files). The test checks
   (and prints) that A's divergent batches carry higher partition leader epochs than B's
   post-failover batches: the divergence cannot be seen by comparing epochs of the delta.
4. Failback: on A, `tern mirrors --create --mirror back` with B as source and `--start --topics
   fb` (A's topic has the topic id B's copy was created with, so it is allowed). A's partitions
   must truncate to B's last mirrored offsets (LastMirroredOffsets) and fetch B's delta.
5. Once every node of A describes every partition MIRRORING with lag 0 at B's ends and A's
   high watermarks are B's ends: every partition read from A's leader (raw Fetch) has B's log span and B's batches byte for byte
   (the partition leader epoch included); each of A's three replicas, read from its segment
   files, holds exactly B's batches (same offsets, same bytes); no divergent value is left in any
   replica's segment files; the M after-failover records are on every replica at B's offsets; the
   three replicas' segment files are byte-identical.
6. A fails over again (`--stop` on A): every node describes STOPPED, and one acks=all record per
   partition lands at B's end offset, in a leader epoch above every mirrored batch.

Against a Tern whose PREPARING step truncates only the leader (not waiting for the in-sync
followers to truncate too), or whose leader cannot tell a follower where to truncate when the
follower's last fetched epoch (A's divergent epoch) is above every epoch left in the leader's log
after the truncation and the delta (B's lower epochs), a follower of A keeps the divergent
records under B's delta: step 5's per-replica comparison names the node, the partition and the
batches it kept, and the failure message shows what each leader answers a Fetch v12 sent as
that follower (diverging epoch, records) and OffsetForLeaderEpoch for the follower's epochs.
"""

import re
import struct
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import mirror_chain_util as mchu
import mirror_cluster_util as mcu
import mirror_util as mu
from kafka_wire import NO_TAGS, Reader, compact_array, compact_string, kafka_request
from processes import free_port
from replication_util import (
    VALUE,
    agreed_partitions,
    create_topic_raw_ok,
    full_isr,
    views,
    wait_isr_full,
    wait_new_leader,
    wait_replicas_identical,
)
from tern_process import Tern
from test_cluster import (
    make_cluster,  # noqa: F401 - the fixture
    plain,
    wait_for,
)
from test_mirror_into_cluster import (
    RF,
    Timeline,
    produce_to,
    tern_cluster,
    wait_describe_everywhere,
    wait_high_watermarks,
)

TOPIC = "fb"
PARTITIONS = 3
N = 20  # records per partition written to A before the mirror
M = 12  # after-failover records per partition written to B
K = 5  # divergent records per partition written to A after B's failover (K < M)
MAX_EPOCH_ROUNDS = 6
ELECTION_NOT_NEEDED = 84
B_OVERRIDES = [
    "mirror.metadata.refresh.interval.ms=2000",
    "mirror.failed.retry.initial.backoff.ms=200",
    "mirror.failed.retry.max.backoff.ms=2000",
]


# -- B, a single Tern node ------------------------------------------------------------------------


@pytest.fixture
def dr_tern(tmp_path):
    """B: a single Tern node with its own data dir (tmp_path/b); its log tail is printed at
    teardown."""
    d = tmp_path / "b"
    d.mkdir(parents=True, exist_ok=True)
    try:
        t = Tern(str(d), free_port(), B_OVERRIDES).start()
    except RuntimeError as e:
        pytest.fail(f"tern B did not start: {e}")
    try:
        yield t
    finally:
        t.stop()
        print(f"----- {t.log_path} (last 40 lines) -----")
        print(t.tail())


# -- records ------------------------------------------------------------------------------------------


def produce_one_by_one(bootstrap, topic, records, timeout=30):
    """records {partition: [(key, value)]}: each record sent alone (acks=all, no idempotence) and
    flushed before the next, so each is a batch of its own. Returns {value: (partition,
    offset)}; every record must be acknowledged."""
    results = {}

    def delivered(err, msg):
        results[msg.value()] = err if err is not None else (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 0, "message.timeout.ms": timeout * 1000})
    left = 0
    for p, recs in sorted(records.items()):
        for key, value in recs:
            producer.produce(topic, key=key, value=value, partition=p, on_delivery=delivered)
            left += producer.flush(timeout + 5)
    del producer
    failed = {v: r for v, r in results.items() if isinstance(r, KafkaError)}
    assert left == 0 and not failed, f"producing to {topic} at {bootstrap}: {left} unflushed, failed {failed}"
    return results


def zigzag(r):
    """A signed varint (zigzag) at r['pos'] of r['buf']."""
    shift = value = 0
    while True:
        b = r["buf"][r["pos"]]
        r["pos"] += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1)
        shift += 7


def batch_records(batch):
    """[(offset, key, value)] of an uncompressed magic-2 batch (mirror_util.Batch)."""
    if batch.codec != 0:
        return [(batch.base_offset, None, b"<compressed batch>")]
    r = {"buf": batch.data, "pos": 61}
    out = []
    for _ in range(batch.record_count):
        length = zigzag(r)
        end = r["pos"] + length
        r["pos"] += 1  # attributes
        zigzag(r)  # timestamp delta
        delta = zigzag(r)
        klen = zigzag(r)
        key = None if klen < 0 else bytes(r["buf"][r["pos"]:r["pos"] + klen])
        r["pos"] += max(klen, 0)
        vlen = zigzag(r)
        value = None if vlen < 0 else bytes(r["buf"][r["pos"]:r["pos"] + vlen])
        out.append((batch.base_offset + delta, key, value))
        r["pos"] = end
    return out


# -- one replica, read from its segment files ----------------------------------------------------------


def disk_bytes(node, topic, partition):
    """The partition's .log segment files on this node, concatenated in base-offset order (None:
    no partition dir)."""
    d = node.data_dir / f"{topic}-{partition}"
    if not d.is_dir():
        return None
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def disk_batches(node, topic, partition):
    """The record batches of one replica as its segment files hold them ([] for no dir); stops
    at a partial batch or at zero padding (a preallocated active segment)."""
    d = node.data_dir / f"{topic}-{partition}"
    if not d.is_dir():
        return []
    out = []
    for f in sorted(d.glob("*.log")):
        buf = f.read_bytes()
        pos = 0
        while pos + 17 <= len(buf):
            base, length = struct.unpack_from(">qi", buf, pos)
            if length <= 0 or pos + 12 + length > len(buf) or buf[pos + 16] != 2:
                break
            out.append(mu.Batch(base, bytes(buf[pos:pos + 12 + length])))
            pos += 12 + length
    return out


def batch_view(batches, limit=40):
    """[base..last e<epoch>] of batches, for messages."""
    s = " ".join(f"[{b.base_offset}..{b.last_offset} e{b.leader_epoch}]" for b in batches[-limit:])
    return ("... " if len(batches) > limit else "") + s


def replica_report(cluster, topic, partitions, tag=b"divergent-"):
    """Each replica's batches (offsets, epochs) and the values with `tag` its segment files hold."""
    lines = []
    for n, node in sorted(cluster.nodes.items()):
        for p in partitions:
            batches = disk_batches(node, topic, p)
            data = disk_bytes(node, topic, p) or b""
            found = sorted(set(re.findall(re.escape(tag) + rb"[0-9]+-[0-9]+", data)))
            lines.append(f"  node {n} {topic}-{p}: {len(batches)} batches, end "
                         f"{batches[-1].last_offset + 1 if batches else None}; {tag.decode()} values on disk "
                         f"{[v.decode() for v in found]}; tail {batch_view(batches, 12)}")
    return "\n".join(lines)


def follower_fetch_probe(address, topic, partition, replica_id, leader_epoch, fetch_offset,
                         last_fetched_epoch):
    """One Fetch v12 (the version Tern's followers send) to the leader at `address`, as follower
    `replica_id` at `fetch_offset` with `last_fetched_epoch` (answered at once, max_wait 0): what the
    leader tells that follower. Returns {error, partition_error, high_watermark, diverging (epoch,
    end offset) or None, record bytes}, or a string on failure. A diagnostic: it is what the
    follower itself sends."""
    part = (struct.pack(">iiqiqi", partition, leader_epoch, fetch_offset, last_fetched_epoch, -1, 1 << 20)
            + NO_TAGS)
    body = (struct.pack(">iiiibii", replica_id, 0, 0, 1 << 20, 0, 0, -1)
            + compact_array([topic], lambda t: compact_string(t) + compact_array([part], lambda x: x)
                            + NO_TAGS)
            + compact_array([], lambda x: x)  # forgotten_topics_data
            + compact_string("")  # rack_id
            + NO_TAGS)
    try:
        r = Reader(kafka_request(address, 1, 12, NO_TAGS + body))
        r.tags()  # response header v1
        r.int32()  # throttle_time_ms
        out = {"error": r.int16()}
        r.int32()  # session_id
        found = {}

        def one_partition(name):
            index, perr, hw = r.int32(), r.int16(), r.int64()
            r.int64()  # last_stable_offset
            r.int64()  # log_start_offset
            r.compact_array(lambda: (r.int64(), r.int64(), r.tags()))  # aborted_transactions
            r.int32()  # preferred_read_replica
            n = r.uvarint() - 1
            records = b"" if n < 0 else r.buf[r.pos:r.pos + n]
            r.pos += max(n, 0)
            extra = r.tags()
            diverging = None
            if 0 in extra:
                diverging = struct.unpack_from(">iq", extra[0])
            if name == topic and index == partition:
                found.update(partition_error=perr, high_watermark=hw, diverging=diverging,
                             record_bytes=len(records),
                             batches=batch_view(mu.split_batches(records)) if records else "")

        def one_topic():
            name = r.compact_string()
            r.compact_array(lambda: one_partition(name))
            r.tags()

        r.compact_array(one_topic)
        out.update(found)
        return out
    except (OSError, struct.error, AssertionError) as e:
        return f"{address}: {e!r}"


def probe_followers(cluster, topic, partitions, ids):
    """For each partition, what its leader answers each follower fetching from that follower's
    log end (in its segment files) with its last batch's epoch; and OffsetForLeaderEpoch answered
    by the leader for every epoch in its followers' logs."""
    parts = agreed_partitions(cluster, topic, ids)
    if not parts:
        return "  (no agreed view of the partitions)"
    lines = []
    for p in partitions:
        s = parts[p]
        if s.leader not in ids:
            lines.append(f"  {topic}-{p}: no live leader ({s})")
            continue
        leader = cluster.nodes[s.leader].address
        epochs = set()
        for n in s.replicas:
            if n == s.leader or n not in ids:
                continue
            batches = disk_batches(cluster.nodes[n], topic, p)
            end = batches[-1].last_offset + 1 if batches else 0
            last = batches[-1].leader_epoch if batches else -1
            epochs.update(x.leader_epoch for x in batches)
            answer = follower_fetch_probe(leader, topic, p, n, s.epoch, end, last)
            lines.append(f"  {topic}-{p} leader node {s.leader} (epoch {s.epoch}, isr {list(s.isr)}) to follower "
                         f"node {n} fetching at {end} with last fetched epoch {last}: {answer}")
        try:
            ofle_answers = mchu.offsets_for_leader_epoch(leader, topic, [(p, e) for e in sorted(epochs)])
        except (OSError, struct.error, AssertionError) as e:
            ofle_answers = repr(e)
        lines.append(f"  {topic}-{p} OffsetForLeaderEpoch on leader node {s.leader} "
                     f"[(partition, epoch, error, epoch, end offset)]: {ofle_answers}")
    return "\n".join(lines)


def log_lines(path, words, n=30):
    """The last n lines of a log that contain any of `words` (case-insensitive)."""
    try:
        lines = plain(Path(path).read_text(errors="replace")).splitlines()
    except OSError:
        return ""
    keep = [l for l in lines if any(w in l.lower() for w in words)]
    return "\n".join(keep[-n:])


# -- A's leader epochs ---------------------------------------------------------------------------------


def elect_preferred(bootstrap, topic, partitions):
    """A preferred leader election of every partition (ElectLeaders through the AdminClient);
    {partition: error} of those that failed for another reason than ELECTION_NOT_NEEDED."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        result = admin.elect_leaders(ElectionType.PREFERRED,
                                     [TopicPartition(topic, p) for p in range(partitions)]).result(timeout=60)
    finally:
        del admin
    failed = {}
    for tp, exc in result.items():
        err = exc.args[0] if isinstance(exc, Exception) and exc.args else exc
        if err is not None and err.code() != ELECTION_NOT_NEEDED:
            failed[tp.partition] = err
    return failed


def raise_leader_epochs(cluster, topic, partitions, above, mark, diag):
    """Until every partition of `topic` on A is led in an epoch above `above`: each round kills
    (SIGKILL) the broker leading the most partitions still at or below it, waits for their new
    leaders, starts it again, waits for full ISRs and runs a preferred election (moving its
    partitions back: a second epoch). Returns the final {partition: PartitionState}."""
    ids = cluster.broker_ids

    def settled():
        parts = agreed_partitions(cluster, topic, ids)
        return parts if full_isr(parts, partitions, RF) else None

    for round_ in range(1, MAX_EPOCH_ROUNDS + 1):
        parts = wait_for(f"{topic} on A with full ISRs agreed by every node", settled, 60, interval=0.3,
                         diag=lambda: views(cluster, topic, ids))
        low = {p: s for p, s in parts.items() if s.epoch <= above}
        if not low:
            return parts
        led = Counter(s.leader for s in low.values())
        victim = max(ids, key=lambda n: (led[n], -n))
        old = {p: s for p, s in parts.items() if s.leader == victim}
        others = [n for n in ids if n != victim]
        cluster.nodes[victim].kill9()
        mark(f"epoch round {round_}: killed node {victim}, leader of {sorted(old)} (epochs "
             f"{ {p: s.epoch for p, s in sorted(parts.items())} }, must pass {above})")
        for p, s in sorted(old.items()):
            new = wait_new_leader(cluster, topic, p, s, others)
            mark(f"epoch round {round_}: {topic}-{p} now led by node {new.leader}, epoch {new.epoch}")
        try:
            cluster.nodes[victim].start()
        except RuntimeError as e:
            pytest.fail(f"node {victim} did not start again after kill -9: {e}\n{diag()}")
        wait_isr_full(cluster, topic, partitions, RF)
        failed = elect_preferred(cluster.bootstrap(), topic, partitions)
        assert not failed, f"preferred election on A failed: {failed}\n{diag()}"
        parts = wait_for(f"{topic} on A settled after the preferred election", settled, 60, interval=0.3,
                         diag=lambda: views(cluster, topic, ids))
        mark(f"epoch round {round_}: node {victim} back, preferred election done; leaders/epochs "
             f"{ {p: (s.leader, s.epoch) for p, s in sorted(parts.items())} }")
    parts = agreed_partitions(cluster, topic, ids)
    pytest.fail(f"after {MAX_EPOCH_ROUNDS} rounds of leader changes A's epochs are still not all above "
                f"{above}: {parts}\n{diag()}")


# -- the test -------------------------------------------------------------------------------------------


@pytest.mark.timeout(540)
def test_failback_into_cluster_truncates_every_replica(make_cluster, dr_tern, tmp_path):  # noqa: F811
    mark = Timeline()
    cluster = tern_cluster(make_cluster)
    ids = cluster.broker_ids
    addr = {n: cluster.nodes[n].address for n in ids}
    b = dr_tern.bootstrap
    parts = range(PARTITIONS)
    mark(f"A: tern nodes {addr}; B: tern {b}; data under {tmp_path}")

    def diag():
        running = [n for n in ids if cluster.nodes[n].running]
        described = mcu.describe_everywhere(cluster, "back", TOPIC, running)
        words = ("mirror", "truncat", "diverg", "isr chang")
        return (f"{mark}\nA partitions:\n{views(cluster, TOPIC, running)}\n"
                + "".join(f"A describe (mirror back) through node {n}: {mcu.short_rows(r)}\n"
                          for n, r in described.items())
                + f"B describe (mirror dr): {mcu.short_rows(mcu.describe_rows(b, 'dr', TOPIC))}\n"
                + f"A replicas on disk:\n{replica_report(cluster, TOPIC, parts)}\n"
                + f"A's leaders asked as each follower would (raw Fetch v12, OffsetForLeaderEpoch):\n"
                  f"{probe_followers(cluster, TOPIC, parts, running)}\n"
                + "".join(f"--- node {n} ({node.log_path}) mirror/truncation/epoch lines:\n"
                          f"{log_lines(node.log_path, words)}\n" for n, node in sorted(cluster.nodes.items()))
                + f"--- B ({dr_tern.log_path}) mirror lines:\n{log_lines(dr_tern.log_path, ('mirror',))}\n"
                + f"(data kept in {tmp_path})")

    # -- setup: fb on A, N numbered keyed records ----------------------------------------------------
    create_topic_raw_ok(cluster, TOPIC, PARTITIONS, RF)
    wait_isr_full(cluster, TOPIC, PARTITIONS, RF)
    acked = produce_to(cluster.bootstrap(), TOPIC, {
        p: [(b"k-%08d" % i, VALUE % i) for i in range(p, N * PARTITIONS, PARTITIONS)] for p in parts})[0]
    ends_a = wait_for("A's high watermarks", lambda: mcu.tern_high_watermarks(cluster, TOPIC, parts, ids), 30)
    assert ends_a == {p: N for p in parts}, f"A's ends {ends_a} after {N} records per partition: {acked}"
    mark(f"{N * PARTITIONS} records on A, ends {ends_a}")

    # -- 1. B mirrors A ---------------------------------------------------------------------------------
    mu.create_mirror(b, "dr", cluster.bootstrap(), tmp_path)
    mu.mirrors(b, "--start", "--mirror", "dr", "--topics", TOPIC)
    mark("mirror dr created and started on B (source: A)")

    def b_caught_up():
        rows = mcu.describe_rows(b, "dr", TOPIC)
        ok = not isinstance(rows, str) and sorted(rows) == list(parts) and all(
            rows[p]["state"] == "MIRRORING" and rows[p]["lag"] == 0
            and rows[p]["destinationOffset"] == ends_a[p] == rows[p]["sourceOffset"] for p in parts)
        return rows if ok else None

    wait_for(f"B to describe every partition MIRRORING with lag 0 at A's ends {ends_a}", b_caught_up, 60,
             interval=0.5, diag=diag)
    lead = wait_for("A's leaders", lambda: mcu.leaders(cluster, TOPIC, ids), 30)
    for p in parts:
        mu.compare_partition(addr[lead[p]], b, TOPIC, p, what=f"B's {TOPIC}-{p} vs A (leader node {lead[p]})")
    mark("B mirrors A: every partition MIRRORING with lag 0, batches identical")

    # -- 2. failover at B, M records written there -------------------------------------------------------
    stop = mu.mirrors(b, "--stop", "--mirror", "dr", "--topics", TOPIC)
    mark(f"--stop on B: {stop.stdout.strip()}")
    wait_for("B to describe every partition STOPPED",
             lambda: (lambda r: not isinstance(r, str) and sorted(r) == list(parts)
                      and all(x["state"] == "STOPPED" for x in r.values()))(mcu.describe_rows(b, "dr", TOPIC)),
             15, interval=0.3, diag=diag)
    after = {p: [(b"after-%d" % p, b"after-failover-%d-%d" % (p, i)) for i in range(M)] for p in parts}
    placed = produce_one_by_one(b, TOPIC, after)
    want = {v: (p, ends_a[p] + i) for p in parts for i, (_, v) in enumerate(after[p])}
    assert placed == want, f"after-failover records on B placed at {placed}, expected {want}"
    ends_b = {p: N + M for p in parts}
    b_epochs = {}
    with mu.RawKafka(b) as k:
        for p in parts:
            assert k.latest(TOPIC, p) == ends_b[p], f"B's {TOPIC}-{p} ends at {k.latest(TOPIC, p)}"
            batches = k.read_batches(TOPIC, p, ends_a[p], ends_b[p])
            b_epochs[p] = sorted({x.leader_epoch for x in batches})
    mark(f"{M} after-failover records per partition on B at offsets {N}..{N + M - 1}; "
         f"B's post-failover batch epochs {b_epochs}")
    above = max(e for es in b_epochs.values() for e in es)

    # -- 3. A's epochs rise above B's; K divergent records on A ---------------------------------------
    a_parts = raise_leader_epochs(cluster, TOPIC, PARTITIONS, above, mark, diag)
    mark(f"A's leaders/epochs {({p: (s.leader, s.epoch) for p, s in sorted(a_parts.items())})}, all above {above}")
    divergent = {p: [(b"div-%d" % p, b"divergent-%d-%d" % (p, i)) for i in range(K)] for p in parts}
    placed = produce_one_by_one(cluster.bootstrap(), TOPIC, divergent)
    want = {v: (p, ends_a[p] + i) for p in parts for i, (_, v) in enumerate(divergent[p])}
    assert placed == want, f"divergent records on A placed at {placed}, expected {want}\n{diag()}"
    ends_div = {p: N + K for p in parts}
    lead = wait_for("A's leaders", lambda: mcu.leaders(cluster, TOPIC, ids), 30)
    a_div_epochs, a_leader_batches = {}, {}
    for p in parts:
        with mu.RawKafka(addr[lead[p]]) as k:
            a_leader_batches[p] = k.read_batches(TOPIC, p, 0, ends_div[p])
        a_div_epochs[p] = sorted({x.leader_epoch for x in a_leader_batches[p] if x.base_offset >= ends_a[p]})

    def replicas_hold_divergence():
        return all([x.data for x in disk_batches(cluster.nodes[n], TOPIC, p)]
                   == [x.data for x in a_leader_batches[p]] for n in ids for p in parts)

    wait_for("every replica of A to hold the divergent records (segment files = the leader's batches)",
             replicas_hold_divergence, 30, interval=0.5, diag=diag)
    mark(f"{K} divergent records per partition on every replica of A at offsets {N}..{N + K - 1}; "
         f"A's divergent batch epochs {a_div_epochs} vs B's post-failover batch epochs {b_epochs}")
    print(f"EPOCHS: B post-failover batches {b_epochs}; A divergent batches {a_div_epochs}; "
          f"A leaders/epochs {({p: (s.leader, s.epoch) for p, s in sorted(a_parts.items())})}")
    for p in parts:
        assert min(a_div_epochs[p]) > max(b_epochs[p]), (
            f"{TOPIC}-{p}: A's divergent batches have epochs {a_div_epochs[p]}, not above B's post-failover "
            f"epochs {b_epochs[p]}: the test would not show what it is meant to\n{diag()}")

    # -- 4. failback: A mirrors B ---------------------------------------------------------------------
    mu.create_mirror(addr[0], "back", b, tmp_path)
    mu.mirrors(addr[1], "--start", "--mirror", "back", "--topics", TOPIC)
    mark("mirror back created on A (node 0) and started (node 1), source B")

    def caught_up(rows):
        return sorted(rows) == list(parts) and all(
            rows[p]["state"] == "MIRRORING" and rows[p]["lag"] == 0
            and rows[p]["destinationOffset"] == ends_b[p] == rows[p]["sourceOffset"] for p in parts)

    wait_describe_everywhere(
        cluster, "back", TOPIC, ids,
        f"every node of A to describe every partition MIRRORING with lag 0 at B's ends {ends_b}",
        caught_up, 90, diag)
    mark("every node of A describes every partition MIRRORING with lag 0")
    print(f"A's leaders asked as each follower would, right after the failback:\n"
          f"{probe_followers(cluster, TOPIC, parts, ids)}")

    # -- 5. A equals B on its leader and on every replica -------------------------------------------
    # describe's destinationOffset is the leader's log end; the high watermark needs the ISR.
    wait_high_watermarks(cluster, TOPIC, PARTITIONS, ids,
                         f"A's high watermarks (asked of each leader) to reach B's ends {ends_b}",
                         lambda hw: hw == ends_b, 30, diag)
    lead = wait_for("A's leaders", lambda: mcu.leaders(cluster, TOPIC, ids), 30)
    b_batches = {}
    for p in parts:
        b_batches[p] = mu.compare_partition(b, addr[lead[p]], TOPIC, p,
                                            what=f"A's {TOPIC}-{p} (leader node {lead[p]}) vs B")
    mark(f"A's leaders {lead}: every partition has B's log span and batches, byte for byte")
    want_records = {p: [r for x in b_batches[p] for r in batch_records(x)] for p in parts}
    for p in parts:
        assert [o for o, _, _ in want_records[p]] == list(range(ends_b[p])), \
            f"B's {TOPIC}-{p} holds offsets {[o for o, _, _ in want_records[p]]}"

    def replica_mismatches():
        out = []
        for n in ids:
            for p in parts:
                got = disk_batches(cluster.nodes[n], TOPIC, p)
                if [x.data for x in got] != [x.data for x in b_batches[p]]:
                    out.append(f"node {n} {TOPIC}-{p}: replica {batch_view(got, 30)} vs B {batch_view(b_batches[p], 30)}")
        return out

    last = {}

    def replicas_equal_b():
        last["m"] = replica_mismatches()
        return not last["m"]

    wait_for("every replica of A (its segment files) to hold exactly B's batches", replicas_equal_b, 30,
             interval=0.5, diag=lambda: "mismatches:\n" + "\n".join(last.get("m", [])) + "\n" + diag())
    mark("each of A's three replicas holds exactly B's batches")

    for n in ids:
        for p in parts:
            data = disk_bytes(cluster.nodes[n], TOPIC, p) or b""
            left = sorted(set(re.findall(rb"divergent-[0-9]+-[0-9]+", data)))
            assert not left, (f"node {n} {TOPIC}-{p} still holds divergent records of A in its segment files: "
                              f"{[v.decode() for v in left]}\n{diag()}")
            got = {o: (key, v) for x in disk_batches(cluster.nodes[n], TOPIC, p) for o, key, v in batch_records(x)}
            for i, (key, v) in enumerate(after[p]):
                assert got.get(ends_a[p] + i) == (key, v), (
                    f"node {n} {TOPIC}-{p}: offset {ends_a[p] + i} holds {got.get(ends_a[p] + i)}, expected the "
                    f"after-failover record {(key, v)} written to B there\n{diag()}")
            assert [(o,) + got[o] for o in sorted(got)] == want_records[p], \
                f"node {n} {TOPIC}-{p}: records differ from B's\n{diag()}"
    mark("no divergent record on any replica of A; B's after-failover records on every replica at B's offsets")
    wait_replicas_identical(cluster, TOPIC, list(parts), ids)
    mark("A's three replicas' segment files are byte-identical")
    a_after = agreed_partitions(cluster, TOPIC, ids)
    print(f"EPOCHS after failback: A leaders/epochs {({p: (s.leader, s.epoch) for p, s in sorted(a_after.items())})}; "
          f"batch epochs on A {({p: sorted({x.leader_epoch for x in b_batches[p]}) for p in parts})}")
    for p in parts:
        answer = mchu.offsets_for_leader_epoch(addr[lead[p]], TOPIC, [(p, e) for e in a_div_epochs[p]])
        mark(f"OffsetForLeaderEpoch on A's leader of {TOPIC}-{p} for the divergent epochs: {answer}")

    # -- 6. A fails over again and takes writes at the next offsets ---------------------------------
    stop = mu.mirrors(addr[2], "--stop", "--mirror", "back", "--topics", TOPIC)
    mark(f"--stop on A (node 2): {stop.stdout.strip()}")

    def all_stopped(rows):
        return sorted(rows) == list(parts) and all(r["state"] == "STOPPED" for r in rows.values())

    wait_describe_everywhere(cluster, "back", TOPIC, ids, "every node of A to describe every partition STOPPED",
                             all_stopped, 15, diag)
    final = {p: [(b"final-%d" % p, b"after-failback-%d" % p)] for p in parts}
    placed = produce_one_by_one(cluster.bootstrap(), TOPIC, final)
    want = {v: (p, ends_b[p]) for p in parts for _, v in final[p]}
    assert placed == want, f"records after A's failover placed at {placed}, expected {want}\n{diag()}"
    lead = wait_for("A's leaders", lambda: mcu.leaders(cluster, TOPIC, ids), 30)
    top = max(x.leader_epoch for p in parts for x in b_batches[p])
    for p in parts:
        with mu.RawKafka(addr[lead[p]]) as k:
            batches = k.read_batches(TOPIC, p, 0, ends_b[p] + 1)
        assert [x.data for x in batches[:-1]] == [x.data for x in b_batches[p]], \
            f"{TOPIC}-{p}: the failed-back records changed after A's failover\n{diag()}"
        assert batch_records(batches[-1]) == [(ends_b[p],) + final[p][0]], \
            f"{TOPIC}-{p}: last batch {batch_records(batches[-1])}"
        assert batches[-1].leader_epoch > top, (
            f"{TOPIC}-{p}: the write after A's failover has epoch {batches[-1].leader_epoch}, not above the "
            f"mirrored batches' {top}")
    wait_replicas_identical(cluster, TOPIC, list(parts), ids)
    mark(f"A failed over: one record per partition at B's ends {ends_b}, above epoch {top}; replicas identical")
