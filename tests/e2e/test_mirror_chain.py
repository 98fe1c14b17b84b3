"""Mirror chains and fan-out: Apache Kafka 4.4 (A) -> Tern B -> Tern C, and A -> B, A -> C.

1. The chain.  Idempotent producers (several, so several producer ids) and transactional ones
   (three commits, two aborts, plain writes inside them) write to A; A is restarted once midway, so the batches span two
   partition leader epochs and the producers after the restart get ids from a new block.  B
   mirrors A's topic, C mirrors B's mirror topic (C's mirror config names B as its source).  A
   group's committed offsets (with their leader epochs) travel A -> B -> C.  Once C has
   everything, every partition is byte-identical A vs B and A vs C (partition leader epoch
   included), the three serve the same records to read_committed and read_uncommitted consumers,
   the same aborted-transaction lists and the same OffsetForLeaderEpoch answers, and B and C
   lead every partition in an epoch at least as high as any batch they hold.
   Then the end of the chain fails over (`--stop` on C only): C's topic is writable at the next
   offsets, in a leader epoch not below any mirrored batch, and the producer id C hands out is
   above every producer id in A's log; B's topic stays read-only (READ_ONLY_TOPIC, 134) and keeps
   mirroring A, and C no longer follows.
2. Fan-out: B and C both mirror the same topic of A; both byte-identical to A; failing over B
   leaves C mirroring A.

The Kafka source starts once for the module; each test has its own Terns.
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import mirror_chain_util as mcu
import mirror_util as mu
from replication_util import metadata_v7
from test_mirror_kafka import (MAIN_VERSION, Acks, Sources, compare_topic, consume_all,
                               create_topics, high_watermarks, produce, produce_refused, producer,
                               start_mirror, topic_config, topic_id)

PARTITIONS = 3


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    s = Sources(tmp_path_factory.mktemp("chain-source"))
    try:
        yield s.get(MAIN_VERSION)
    finally:
        s.stop_all()


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def transactions(bootstrap, topic, outcomes, start):
    """A transactional producer (its own transactional id) runs one transaction per outcome
    ("commit"/"abort"), 4 records per partition each, with a plain idempotent record per partition
    written inside each.  Returns (records written in all, of those aborted, the next index)."""
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("chain-tx"),
                   "linger.ms": 5, "compression.type": "lz4"})
    tx.init_transactions(30)
    written = aborted = 0
    i = start
    for outcome in outcomes:
        tx.begin_transaction()
        for _ in range(4 * PARTITIONS):
            tx.produce(topic, key=f"tx-{i}".encode(), value=f"{outcome}-{i}".encode(), partition=i % PARTITIONS)
            i += 1
        tx.flush(30)
        produce(bootstrap, topic, PARTITIONS, PARTITIONS, start=i, tag="between", enable_idempotence=True)
        i += PARTITIONS
        written += PARTITIONS
        written += 4 * PARTITIONS
        if outcome == "commit":
            tx.commit_transaction(30)
        else:
            aborted += 4 * PARTITIONS
            tx.abort_transaction(30)
    return written, aborted, i


def commit_group(bootstrap, group, topic, counts):
    """A librdkafka consumer of `group` reads counts[p] records of each partition from the start
    and commits the next offset with the leader epoch of the last record read (KIP-320).
    Returns {partition: (offset, leader_epoch)} as committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in counts])
        last = {}  # the last record below counts[p]: (offset, leader epoch)
        reached = {p: -1 for p in counts}  # control records are never delivered: any offset past
        deadline = time.time() + 30
        while any(reached[p] < counts[p] - 1 for p in counts):
            assert time.time() < deadline, f"consumed only up to {reached}"
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            reached[m.partition()] = max(reached[m.partition()], m.offset())
            if m.offset() < counts[m.partition()]:
                last[m.partition()] = (m.offset(), m.leader_epoch())
        offsets = [TopicPartition(topic, p, off + 1, leader_epoch=epoch) for p, (off, epoch) in last.items()]
        c.commit(offsets=offsets, asynchronous=False)
        return {p: (off + 1, epoch) for p, (off, epoch) in last.items()}
    finally:
        c.close()


def test_chain_kafka_to_tern_to_tern_failover_at_the_end(source, tmp_path):
    terns = mcu.start_terns(tmp_path, ["b", "c"])
    b, c = terns["b"], terns["c"]
    try:
        _chain(source, b, c, tmp_path)
    finally:
        for t in (b, c):
            t.stop()


def _chain(a, b, c, tmp_path):
    t0 = time.time()
    topic = unique("chain")
    create_topics(a.bootstrap, {topic: (PARTITIONS, None)})

    # Epoch 1 on A: idempotent producers (one per call: several producer ids) and transactions.
    n = 0
    produce(a.bootstrap, topic, 300, PARTITIONS, start=n, codec="lz4", enable_idempotence=True)
    n += 300
    written, aborted, n = transactions(a.bootstrap, topic, ["commit", "abort", "commit"], n)
    produce(a.bootstrap, topic, 150, PARTITIONS, start=n, codec="zstd", enable_idempotence=True)
    n += 150

    # B mirrors A; C mirrors B's mirror topic.
    start_mirror(b, a, "m-ab", [topic], tmp_path)
    mu.wait_mirrored(b.bootstrap, "m-ab", a.bootstrap, [topic], timeout=60)
    start_mirror(c, b, "m-bc", [topic], tmp_path)
    mu.wait_mirrored(c.bootstrap, "m-bc", b.bootstrap, [topic], timeout=60)
    print(f"[{time.time() - t0:.0f}s] A -> B -> C mirroring the first epoch")

    # A restarts (a new partition leader epoch, a new producer-id block) while both mirror.
    a.stop()
    time.sleep(1.0)
    a.start(timeout=120)
    produce(a.bootstrap, topic, 300, PARTITIONS, start=n, codec="gzip", enable_idempotence=True)
    n += 300
    w2, ab2, n = transactions(a.bootstrap, topic, ["abort", "commit"], n)
    written += w2
    aborted += ab2
    produce(a.bootstrap, topic, 90, PARTITIONS, start=n, enable_idempotence=True)
    n += 90
    total = 300 + 150 + 300 + 90 + written

    # A group's offsets (with leader epochs) on A, synced to B, then from B to C.
    group = unique("chain-group")
    want = commit_group(a.bootstrap, group, topic, {0: 140, 1: 250, 2: 271})
    src_committed = mcu.committed_with_epochs(a.bootstrap, group, topic, PARTITIONS)
    assert src_committed == want, f"A holds {src_committed}, committed {want}"

    mu.wait_mirrored(b.bootstrap, "m-ab", a.bootstrap, [topic], timeout=90)
    mu.wait_mirrored(c.bootstrap, "m-bc", b.bootstrap, [topic], timeout=90)
    print(f"[{time.time() - t0:.0f}s] C caught up with B, B with A")

    # -- the three logs -------------------------------------------------------------------------
    src = compare_topic(a, b, topic, PARTITIONS)  # A vs B, byte for byte, epochs included
    compare_topic(a, c, topic, PARTITIONS)  # A vs C
    summary = mcu.log_summary(src)
    print(f"A's log: {summary}")
    assert summary["records"] == total, summary  # every record written, aborted ones included
    assert len(summary["epochs"]) >= 2 and max(summary["epochs"]) > 0, \
        f"the restart of A did not change the partition leader epoch: {summary['epochs']}"
    assert summary["controls"] >= 5 * PARTITIONS, summary
    assert len(summary["producer_ids"]) >= 6, summary
    for t in (b, c):
        assert topic_id(t.bootstrap, topic) == topic_id(a.bootstrap, topic)
    assert topic_config(b.bootstrap, topic).get("mirror.name") == "m-ab"
    assert topic_config(c.bootstrap, topic).get("mirror.name") == "m-bc"

    committed_a = consume_all(a.bootstrap, topic, PARTITIONS, "read_committed")
    assert len(committed_a) == total - aborted
    assert not [r for r in committed_a if r[3] and r[3].startswith(b"abort")]
    for t in (b, c):
        assert consume_all(t.bootstrap, topic, PARTITIONS, "read_committed") == committed_a, t.bootstrap
    uncommitted_a = consume_all(a.bootstrap, topic, PARTITIONS)
    assert len(uncommitted_a) == total
    assert consume_all(c.bootstrap, topic, PARTITIONS) == uncommitted_a

    # LSO, high watermark and aborted transactions of a read_committed fetch.
    with mu.RawKafka(a.bootstrap) as ra, mu.RawKafka(b.bootstrap) as rb, mu.RawKafka(c.bootstrap) as rc:
        for p in range(PARTITIONS):
            fa = ra.fetch(topic, p, 0, max_bytes=10 << 20, isolation=1)
            assert len(fa.aborted) == 2, (p, fa.aborted)
            for name, r in (("B", rb), ("C", rc)):
                f = r.fetch(topic, p, 0, max_bytes=10 << 20, isolation=1)
                assert (f.error_code, f.high_watermark, f.last_stable_offset, sorted(f.aborted)) == \
                    (fa.error_code, fa.high_watermark, fa.last_stable_offset, sorted(fa.aborted)), (name, p)

    # Partition leader epochs: B and C lead in an epoch >= every batch epoch they hold, and answer
    # OffsetForLeaderEpoch as A does for every epoch in A's log (and those in between).
    per_partition = mcu.epochs_by_partition(src)
    asked = {p: list(range(0, max(es) + 1)) for p, es in per_partition.items()}
    answers_a = mcu.epoch_end_offsets(a.bootstrap, topic, asked)
    for name, t in (("B", b), ("C", c)):
        parts = metadata_v7(t.bootstrap, [topic]).topics[topic].partitions
        low = {p: parts[p].epoch for p in range(PARTITIONS) if parts[p].epoch < max(per_partition[p])}
        assert not low, f"{name}'s partition leader epochs {low} below its batches' {per_partition}"
        answers = mcu.epoch_end_offsets(t.bootstrap, topic, asked)
        diff = {k: (answers_a[k], answers[k]) for k in answers_a if answers_a[k] != answers[k]}
        assert not diff, f"OffsetForLeaderEpoch (A, {name}) differ: {diff}"
    print(f"epochs {per_partition}, OffsetForLeaderEpoch on A: {answers_a}")

    # The group's offsets, leader epochs included, reached B and C.
    mcu.wait_committed_with_epochs(b.bootstrap, group, topic, want, what="B")
    mcu.wait_committed_with_epochs(c.bootstrap, group, topic, want, what="C")

    # -- failover at the end of the chain --------------------------------------------------------
    hw = high_watermarks(c.bootstrap, topic, PARTITIONS)
    out = mu.mirrors(c.bootstrap, "--stop", "--mirror", "m-bc", "--topics", topic)
    assert "Stopped" in out.stdout, out.stdout
    rows = [r for r in mu.describe(c.bootstrap, "m-bc") if r["topic"] == topic]
    assert {r["state"] for r in rows} == {"STOPPED"}, rows
    assert {r["partition"]: r["destinationOffset"] for r in rows} == hw
    assert topic_config(c.bootstrap, topic).get("mirror.name") == "m-bc.stopped"
    print(f"[{time.time() - t0:.0f}s] C failed over at {hw}")

    # B stays a read-only mirror of A.
    assert topic_config(b.bootstrap, topic).get("mirror.name") == "m-ab"
    for idempotent in (False, True):
        codes = produce_refused(b.bootstrap, topic, PARTITIONS, idempotent)
        assert codes == {134}, f"B (idempotent={idempotent}): expected READ_ONLY_TOPIC (134), got {codes}"
    assert {r["state"] for r in mu.describe(b.bootstrap, "m-ab") if r["topic"] == topic} == {"MIRRORING"}

    # C is writable: a new idempotent producer appends at the next offsets.
    p = producer(c.bootstrap, enable_idempotence=True, linger_ms=0)
    acks = Acks()
    for i in range(2 * PARTITIONS):
        p.produce(topic, key=b"after-failover", value=f"c-{i}".encode(), partition=i % PARTITIONS, on_delivery=acks)
    assert p.flush(30) == 0
    assert not acks.errors, acks.errors
    assert sorted(acks.offsets) == sorted((q, hw[q] + k) for q in range(PARTITIONS) for k in range(2))
    got = consume_all(c.bootstrap, topic, PARTITIONS)
    assert [(r[0], r[1], r[3]) for r in got if r[2] == b"after-failover"] == \
        sorted((i % PARTITIONS, hw[i % PARTITIONS] + i // PARTITIONS, f"c-{i}".encode()) for i in range(2 * PARTITIONS))
    assert [r for r in got if r[2] != b"after-failover"] == uncommitted_a

    new = mcu.read_topic_batches(c.bootstrap, topic, PARTITIONS, start=hw)
    new_pids = {bt.producer_id for bs in new.values() for bt in bs}
    new_epochs = {q: sorted({bt.leader_epoch for bt in bs}) for q, bs in new.items()}
    mirrored_max = max(summary["epochs"])
    print(f"after failover: C's producer ids {new_pids}, A's {summary['producer_ids']}; "
          f"new batch epochs {new_epochs}, mirrored max {mirrored_max}")
    assert len(new_pids) == 1, new_pids
    assert min(new_pids) > max(summary["producer_ids"]), \
        f"C handed out producer id {new_pids} after failover, not above A's producer ids {summary['producer_ids']}"
    assert all(e > mirrored_max for es in new_epochs.values() for e in es), \
        f"C's new batches carry epochs {new_epochs}, below the mirrored batches' {mirrored_max}"
    parts = metadata_v7(c.bootstrap, [topic]).topics[topic].partitions
    c_batches = mcu.read_topic_batches(c.bootstrap, topic, PARTITIONS)
    for q in range(PARTITIONS):
        top = max(bt.leader_epoch for bt in c_batches[q])
        assert parts[q].epoch >= top, f"C's partition {q} leads in epoch {parts[q].epoch}, its log holds epoch {top}"

    # A transactional producer starts on C too (init_transactions after the failover): the
    # transaction coordinator hands out producer ids above every mirrored one as well.
    ends = {q: max(bt.last_offset for bt in c_batches[q]) + 1 for q in range(PARTITIONS)}
    transactions(c.bootstrap, topic, ["commit", "abort"], 100_000)
    txn_pids = {bt.producer_id for bs in mcu.read_topic_batches(c.bootstrap, topic, PARTITIONS, start=ends).values()
                for bt in bs if bt.is_transactional}
    print(f"after failover: C's transactional producer ids {txn_pids}")
    assert len(txn_pids) == 1 and min(txn_pids) > max(summary["producer_ids"]), \
        f"C's transactional producer id {txn_pids} is not above A's producer ids {summary['producer_ids']}"
    c_ends = high_watermarks(c.bootstrap, topic, PARTITIONS)

    # A keeps being written: B follows, C (failed over) does not.
    produce(a.bootstrap, topic, 30, PARTITIONS, start=n, enable_idempotence=True)
    mu.wait_mirrored(b.bootstrap, "m-ab", a.bootstrap, [topic], timeout=60)
    compare_topic(a, b, topic, PARTITIONS)
    time.sleep(1.5)
    assert high_watermarks(c.bootstrap, topic, PARTITIONS) == c_ends
    print(f"[{time.time() - t0:.0f}s] done")


# -- fan-out ---------------------------------------------------------------------------------------

def test_fan_out_two_terns_mirror_one_topic(source, tmp_path):
    terns = mcu.start_terns(tmp_path, ["b", "c"])
    b, c = terns["b"], terns["c"]
    a = source
    try:
        topic = unique("fanout")
        create_topics(a.bootstrap, {topic: (PARTITIONS, None)})
        produce(a.bootstrap, topic, 300, PARTITIONS, codec="snappy", enable_idempotence=True)
        start_mirror(b, a, "m-fan-b", [topic], tmp_path)
        start_mirror(c, a, "m-fan-c", [topic], tmp_path)
        _, aborted, n = transactions(a.bootstrap, topic, ["commit", "abort"], 300)
        produce(a.bootstrap, topic, 150, PARTITIONS, start=n, codec="zstd", enable_idempotence=True)
        n += 150
        for t, m in ((b, "m-fan-b"), (c, "m-fan-c")):
            mu.wait_mirrored(t.bootstrap, m, a.bootstrap, [topic], timeout=60)
            compare_topic(a, t, topic, PARTITIONS)
        committed_a = consume_all(a.bootstrap, topic, PARTITIONS, "read_committed")
        assert consume_all(b.bootstrap, topic, PARTITIONS, "read_committed") == committed_a
        assert consume_all(c.bootstrap, topic, PARTITIONS, "read_committed") == committed_a

        # Failing over B does not disturb C.
        hw = high_watermarks(b.bootstrap, topic, PARTITIONS)
        mu.mirrors(b.bootstrap, "--stop", "--mirror", "m-fan-b", "--topics", topic)
        acks = produce(b.bootstrap, topic, PARTITIONS, PARTITIONS, start=10_000, tag="b-only", enable_idempotence=True)
        assert sorted(acks.offsets) == sorted(hw.items())
        produce(a.bootstrap, topic, 60, PARTITIONS, start=n, enable_idempotence=True)
        mu.wait_mirrored(c.bootstrap, "m-fan-c", a.bootstrap, [topic], timeout=60)
        compare_topic(a, c, topic, PARTITIONS)
        assert produce_refused(c.bootstrap, topic, PARTITIONS) == {134}
        assert high_watermarks(b.bootstrap, topic, PARTITIONS) == {q: hw[q] + 1 for q in range(PARTITIONS)}
    finally:
        for t in (b, c):
            t.stop()
