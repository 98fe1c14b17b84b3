"""Transactions (KIP-98) end to end with confluent-kafka (librdkafka): every test runs against a
real Apache Kafka 4.4 (tests/harness/kafka_peer.py) and against tern, and checks what a client
sees: exact records and offsets under read_committed and read_uncommitted, committed group
offsets, and the errors the producer raises.

- commit, abort, commit: read_committed sees exactly the committed records, read_uncommitted all
  of them, and every transaction leaves one control record per partition it wrote to;
- consume-transform-produce with send_offsets_to_transaction: the group's offsets move with a
  committed transaction and stay put with an aborted one;
- zombie fencing: a second producer with the same transactional.id aborts the first one's open
  transaction, and the first one gets a fatal _FENCED error;
- a producer that dies in a transaction: the coordinator aborts it after transaction.timeout.ms,
  the last stable offset moves on, and the transactional id can be used again;
- a producer that outlives its transaction's timeout: the abort bumps its epoch, so its commit or
  next Produce fails with a fatal _FENCED error;
- init_transactions with a transaction.timeout.ms above transaction.max.timeout.ms fails with
  INVALID_TRANSACTION_TIMEOUT;
- a read_committed consumer waits behind an open transaction, then reads everything in order.

What Apache Kafka 4.4 answers librdkafka 2.16 here (which uses InitProducerId v4,
AddPartitionsToTxn v0, AddOffsetsToTxn v0, TxnOffsetCommit v3, EndTxn v1, Produce v10): EndTxn and
Produce with a fenced epoch get INVALID_PRODUCER_EPOCH (47), also after a timeout abort
(PRODUCER_FENCED, 90, and TRANSACTION_TIMED_OUT, 92, exist from EndTxn v2 on), which librdkafka
raises as the fatal local error _FENCED (-144); InitProducerId with too long a timeout gets
INVALID_TRANSACTION_TIMEOUT (50), raised as a fatal error with that code.

TXN_BROKERS: "kafka", "tern" or both (the default, comma or space separated).
TXN_KAFKA_VERSION: the Apache Kafka version of the peer (default 4.4.0).
Every wait is bounded (WAIT seconds), so against a broker without transactions the tests fail
instead of hanging.
"""

import gc
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

try:
    from confluent_kafka import ConsumerGroupTopicPartitions
except ImportError:  # older confluent-kafka
    from confluent_kafka.admin import ConsumerGroupTopicPartitions

import kafka_peer
from processes import free_port
from tern_process import Tern

KAFKA_VERSION = os.environ.get("TXN_KAFKA_VERSION", "4.4.0")
BROKERS = [b for b in re.split(r"[,\s]+", os.environ.get("TXN_BROKERS", "kafka,tern")) if b]

# The same settings for both brokers: a single node, and timed-out transactions looked for every
# second (Kafka's default is every 10 s).
SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}

# The bound of every single wait (a coordinator call, reading to an offset, a group's offsets).
WAIT = 30

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, tmp_path_factory):
    kind = request.param
    if kind not in ("kafka", "tern"):
        pytest.fail(f"TXN_BROKERS: unknown broker {kind!r} (kafka or tern)")
    d = tmp_path_factory.mktemp(f"txn-{kind}")
    if kind == "kafka":
        try:
            kafka_peer.KafkaJars(KAFKA_VERSION).ensure()
        except RuntimeError as e:
            pytest.skip(f"cannot resolve Apache Kafka {KAFKA_VERSION}: {str(e).splitlines()[0]}")
        b = kafka_peer.KafkaPeer(KAFKA_VERSION, d, jvm_opts=["-Xmx512m"], overrides=SETTINGS)
    else:
        b = Tern(str(d), free_port(), extra=[f"{k}={v}" for k, v in SETTINGS.items()])
    b.start()
    try:
        yield b
    finally:
        gc.collect()  # clients left in reference cycles go while the broker still answers
        b.stop()


# -- helpers -----------------------------------------------------------------------------------------

def uid():
    return uuid.uuid4().hex[:12]


def create_topic(bootstrap, partitions):
    """A new topic with a unique name; returns once every partition has a leader."""
    name = f"txn-{uid()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=WAIT)
    deadline = time.time() + WAIT
    while True:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return name
        assert time.time() < deadline, f"topic {name} has no leaders after {WAIT}s: {t}"
        time.sleep(0.2)


class Delivered:
    """A delivery callback that records (partition, offset, value) or the error of every record."""

    def __init__(self):
        self.ok = []
        self.errors = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.ok.append((msg.partition(), msg.offset(), msg.value().decode()))


def txn_producer(bootstrap, tid, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **conf})
    p.init_transactions(WAIT)
    return p


def plain_produce(bootstrap, topic, records):
    """Non-transactional records [(partition, value)]; returns {value: (partition, offset)}."""
    d = Delivered()
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all"})
    for partition, value in records:
        p.produce(topic, value=value, partition=partition, on_delivery=d)
    assert p.flush(WAIT) == 0, "records not delivered"
    assert not d.errors, d.errors
    return {v: (part, off) for part, off, v in d.ok}


def reader(bootstrap, isolation, **conf):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{uid()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
        **conf,
    })


def positions(consumer, tps):
    return {tp.partition: tp.offset for tp in consumer.position(tps)}


def read_until(consumer, tps, end, out=None, timeout=WAIT):
    """Consumes from an assigned consumer until its position on every partition is at least
    end[partition]; returns ({partition: [(offset, value)]}, {partition: position}).  The position
    only gets there when the consumer has stepped over every record and control record before it."""
    out = out if out is not None else {tp.partition: [] for tp in tps}
    deadline = time.time() + timeout
    while True:
        for m in consumer.consume(num_messages=500, timeout=0.2):
            if m.error():
                raise KafkaException(m.error())
            out[m.partition()].append((m.offset(), m.value().decode()))
        pos = positions(consumer, tps)
        if all(pos[p] >= end[p] for p in end):
            return out, pos
        assert time.time() < deadline, \
            f"position {pos} did not reach {end} within {timeout}s; records read: {out}"


def read_all(bootstrap, topic, partitions, isolation, end):
    """Every record of the topic visible at that isolation level, read from offset 0 until the
    position is end[p] on every partition (the offset after the last record or control record);
    asserts that the position stops exactly there."""
    c = reader(bootstrap, isolation)
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(tps)
    try:
        out, pos = read_until(c, tps, end)
    finally:
        c.close()
    assert pos == end, f"{isolation}: position {pos}, expected {end}"
    return out


def end_offsets(bootstrap, topic, partitions, isolation):
    """ListOffsets(latest) at that isolation level: the high watermark for read_uncommitted, the
    last stable offset for read_committed."""
    c = reader(bootstrap, isolation)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        c.close()


def wait_end_offsets(bootstrap, topic, partitions, isolation, want):
    deadline = time.time() + WAIT
    while True:
        got = end_offsets(bootstrap, topic, partitions, isolation)
        if got == want:
            return
        assert time.time() < deadline, f"{isolation} end offsets {got}, expected {want}"
        time.sleep(0.2)


def group_offsets(bootstrap, group, topic, partitions):
    """The group's committed offsets, asked with require_stable (OffsetFetch v7+ answers
    UNSTABLE_OFFSET_COMMIT while a transaction holds offsets of the partition pending): polled
    until the answer is stable, so an aborted transaction's offsets are already gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    deadline = time.time() + WAIT
    while True:
        try:
            res = admin.list_consumer_group_offsets([req], require_stable=True)[group].result(timeout=WAIT)
            tps = res.topic_partitions
            errors = [tp.error for tp in tps if tp.error is not None]
            if not errors:
                return {tp.partition: tp.offset for tp in tps}
            last = errors
        except KafkaException as e:
            last = e
        assert time.time() < deadline, f"committed offsets of {group}: {last}"
        time.sleep(0.2)


def wait_group_offsets(bootstrap, group, topic, partitions, want):
    deadline = time.time() + WAIT
    while True:
        got = group_offsets(bootstrap, group, topic, partitions)
        if got == want:
            return
        assert time.time() < deadline, f"committed offsets of {group}: {got}, expected {want}"
        time.sleep(0.2)


def raised(call, *args):
    """The KafkaError that call(*args) raises as a KafkaException.  (Not pytest.raises: its
    excinfo keeps the test's frame, and with it the test's producers, alive until a garbage
    collection, which may come after the broker is gone.)"""
    try:
        call(*args)
    except KafkaException as e:
        err = e.args[0]
        assert isinstance(err, KafkaError), e
        return err
    pytest.fail(f"{getattr(call, '__name__', call)}{args} did not fail")


# -- tests ---------------------------------------------------------------------------------------------

def test_commit_abort_commit(broker):
    """Three transactions over two partitions: committed, aborted, committed.  Each writes 5
    records to each partition and ends with one control record on each, so both partitions hold
    t1 at 0..4, a commit marker at 5, t2 at 6..10, an abort marker at 11, t3 at 12..16 and a commit
    marker at 17."""
    bs = broker.bootstrap
    topic = create_topic(bs, 2)
    p = txn_producer(bs, f"tid-{uid()}")
    delivered = Delivered()
    per_txn = 10
    for txn, commit in (("t1", True), ("t2", False), ("t3", True)):
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, value=f"{txn}-{i}", partition=i % 2, on_delivery=delivered)
        if commit:
            p.commit_transaction(WAIT)
        else:
            assert p.flush(WAIT) == 0  # the records reach the log before the abort
            p.abort_transaction(WAIT)
    assert not delivered.errors, delivered.errors

    def layout(txn, base, part):
        return [(base + k, f"{txn}-{2 * k + part}") for k in range(per_txn // 2)]

    expected_all = {part: layout("t1", 0, part) + layout("t2", 6, part) + layout("t3", 12, part)
                    for part in (0, 1)}
    expected_committed = {part: layout("t1", 0, part) + layout("t3", 12, part) for part in (0, 1)}
    # The producer's delivery reports name the same offsets.
    assert sorted(delivered.ok) == sorted((part, off, v) for part in (0, 1) for off, v in expected_all[part])

    end = {0: 18, 1: 18}
    assert read_all(bs, topic, 2, "read_committed", end) == expected_committed
    assert read_all(bs, topic, 2, "read_uncommitted", end) == expected_all
    # Nothing left open: the high watermark and the last stable offset are both past the last marker.
    assert end_offsets(bs, topic, 2, "read_uncommitted") == end
    assert end_offsets(bs, topic, 2, "read_committed") == end


def test_send_offsets_to_transaction(broker):
    """Consume-transform-produce: the group's offsets commit with the output records, an aborted
    round leaves both the offsets and the visible output as they were, and a new member of the
    group starts again at the committed offsets."""
    bs = broker.bootstrap
    parts, m = 2, 20
    src = create_topic(bs, parts)
    dst = create_topic(bs, parts)
    group = f"group-{uid()}"
    in_tps = [TopicPartition(src, p) for p in range(parts)]
    plain_produce(bs, src, [(p, f"in-{p}-{k}") for k in range(m) for p in range(parts)])

    def member():
        c = Consumer({
            "bootstrap.servers": bs,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        })
        c.subscribe([src])
        return c

    def consume(c, n):
        got = []
        deadline = time.time() + WAIT
        while len(got) < n:
            assert time.time() < deadline, f"group member read {len(got)} of {n} records: {got}"
            for msg in c.consume(num_messages=n - len(got), timeout=0.2):
                if msg.error():
                    raise KafkaException(msg.error())
                got.append((msg.partition(), msg.offset(), msg.value().decode()))
        return got

    def transform(c, p, records, commit):
        p.begin_transaction()
        for part, _, value in records:
            p.produce(dst, value=f"out-{value}", partition=part)
        assert p.flush(WAIT) == 0
        assignment = c.assignment()
        assert sorted(tp.partition for tp in assignment) == list(range(parts)), assignment
        p.send_offsets_to_transaction(c.position(assignment), c.consumer_group_metadata(), WAIT)
        if commit:
            p.commit_transaction(WAIT)
        else:
            p.abort_transaction(WAIT)

    def out_records(base, first, part):
        return [(base + k, f"out-in-{part}-{first + k}") for k in range(m)]

    producer = txn_producer(bs, f"tid-{uid()}")

    # Round 1, committed: offsets m on both partitions, m output records per partition + a marker.
    c = member()
    records = consume(c, parts * m)
    assert sorted(records) == sorted((p, k, f"in-{p}-{k}") for p in range(parts) for k in range(m))
    transform(c, producer, records, commit=True)
    wait_group_offsets(bs, group, src, parts, {p: m for p in range(parts)})
    round1 = {p: out_records(0, 0, p) for p in range(parts)}
    assert read_all(bs, dst, parts, "read_committed", {p: m + 1 for p in range(parts)}) == round1

    # Round 2, aborted: m more input records per partition are read and transformed, the offsets
    # (2m) go into the transaction, and the transaction is aborted.
    plain_produce(bs, src, [(p, f"in-{p}-{k}") for k in range(m, 2 * m) for p in range(parts)])
    records = consume(c, parts * m)
    assert sorted(records) == sorted((p, k, f"in-{p}-{k}") for p in range(parts) for k in range(m, 2 * m))
    transform(c, producer, records, commit=False)
    end2 = {p: 2 * m + 2 for p in range(parts)}
    # The abort markers are written: the last stable offset is past them, and read_committed still
    # shows round 1 only, while read_uncommitted shows the aborted output too.
    wait_end_offsets(bs, dst, parts, "read_committed", end2)
    assert read_all(bs, dst, parts, "read_committed", end2) == round1
    assert read_all(bs, dst, parts, "read_uncommitted", end2) == \
        {p: round1[p] + out_records(m + 1, m, p) for p in range(parts)}
    assert group_offsets(bs, group, src, parts) == {p: m for p in range(parts)}
    c.close()

    # Round 3: a new member of the group resumes at the committed offsets (m), reads round 2's
    # input again and commits it.
    c = member()
    records = consume(c, parts * m)
    assert sorted(records) == sorted((p, k, f"in-{p}-{k}") for p in range(parts) for k in range(m, 2 * m))
    transform(c, producer, records, commit=True)
    c.close()
    wait_group_offsets(bs, group, src, parts, {p: 2 * m for p in range(parts)})
    end3 = {p: 3 * m + 3 for p in range(parts)}
    assert read_all(bs, dst, parts, "read_committed", end3) == \
        {p: round1[p] + out_records(2 * m + 2, m, p) for p in range(parts)}


@pytest.mark.parametrize("fenced_on", ["commit", "produce"])
def test_zombie_fencing(broker, fenced_on):
    """Producer A has records in an open transaction when producer B calls init_transactions with
    the same transactional.id: the coordinator aborts A's transaction and bumps the epoch.  A's
    next EndTxn (commit_transaction) or Produce is refused, which librdkafka raises as a fatal
    _FENCED error (Kafka 4.4 answers EndTxn v1 and Produce with INVALID_PRODUCER_EPOCH).  B's
    transaction commits; read_committed never shows A's records."""
    bs = broker.bootstrap
    topic = create_topic(bs, 1)
    tid = f"tid-{uid()}"
    a = txn_producer(bs, tid)
    a.begin_transaction()
    a_delivered = Delivered()
    for i in range(3):
        a.produce(topic, value=f"a-{i}", partition=0, on_delivery=a_delivered)
    assert a.flush(WAIT) == 0
    assert a_delivered.ok == [(0, i, f"a-{i}") for i in range(3)], a_delivered.errors

    b = txn_producer(bs, tid)

    if fenced_on == "produce":
        a.produce(topic, value="a-late", partition=0)
    err = raised(a.commit_transaction, WAIT)
    assert err.fatal() and err.code() == KafkaError._FENCED, err
    # Fatal: the zombie cannot produce anything any more.
    err = raised(a.produce, topic, "a-after")
    assert err.code() == KafkaError._FATAL, err

    b.begin_transaction()
    for i in range(3):
        b.produce(topic, value=f"b-{i}", partition=0)
    b.commit_transaction(WAIT)

    # a-0..a-2 at 0..2, the abort marker B's init_transactions caused at 3, b-0..b-2 at 4..6, the
    # commit marker at 7.  ("a-late" never reaches the log: its Produce is refused.)
    end = {0: 8}
    assert read_all(bs, topic, 1, "read_committed", end) == {0: [(4 + i, f"b-{i}") for i in range(3)]}
    assert read_all(bs, topic, 1, "read_uncommitted", end) == \
        {0: [(i, f"a-{i}") for i in range(3)] + [(4 + i, f"b-{i}") for i in range(3)]}


CRASHING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, tid = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 3000})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(topic, value=f"lost-{i}", partition=0)
assert p.flush(30) == 0
print("in transaction", flush=True)
time.sleep(600)
"""


def test_transaction_timeout_aborts_a_dead_producers_transaction(broker):
    """A producer with transaction.timeout.ms=3000 writes 3 records in a transaction and is killed
    with SIGKILL.  Records produced after them by a plain producer become visible to read_committed
    once the coordinator has aborted the transaction on its own (after the timeout, at its next
    check); the dead producer's records never do.  A new producer with the same transactional.id
    then initializes and commits."""
    bs = broker.bootstrap
    topic = create_topic(bs, 1)
    tid = f"tid-{uid()}"
    child = subprocess.Popen([sys.executable, "-c", CRASHING_PRODUCER, bs, topic, tid],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()  # the child's own waits are bounded (init, flush: 30 s)
        if line.strip() != "in transaction":
            child.kill()
            _, err = child.communicate(timeout=WAIT)
            pytest.fail(f"the transactional producer did not get into a transaction: {line!r}\n{err[-3000:]}")
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=WAIT)
        child.stdout.close()
        child.stderr.close()

    offsets = plain_produce(bs, topic, [(0, "after-0"), (0, "after-1")])
    assert offsets == {"after-0": (0, 3), "after-1": (0, 4)}

    # lost-0..2 at 0..2, after-0..1 at 3..4, the coordinator's abort marker at 5.
    end = {0: 6}
    assert read_all(bs, topic, 1, "read_committed", end) == {0: [(3, "after-0"), (4, "after-1")]}
    assert read_all(bs, topic, 1, "read_uncommitted", end) == \
        {0: [(0, "lost-0"), (1, "lost-1"), (2, "lost-2"), (3, "after-0"), (4, "after-1")]}
    assert end_offsets(bs, topic, 1, "read_committed") == end

    p = txn_producer(bs, tid)
    p.begin_transaction()
    p.produce(topic, value="new-0", partition=0)
    p.commit_transaction(WAIT)
    assert read_all(bs, topic, 1, "read_committed", {0: 8}) == \
        {0: [(3, "after-0"), (4, "after-1"), (6, "new-0")]}


@pytest.mark.parametrize("then", ["commit", "produce"])
def test_timed_out_transaction_fences_its_producer(broker, then):
    """A live producer that lets its transaction run past transaction.timeout.ms (3000): the
    coordinator aborts the transaction and bumps the producer epoch, so the producer's later
    commit_transaction (EndTxn) or Produce is refused with INVALID_PRODUCER_EPOCH, which
    librdkafka raises as a fatal _FENCED error.  Its records never become visible."""
    bs = broker.bootstrap
    topic = create_topic(bs, 1)
    p = txn_producer(bs, f"tid-{uid()}", **{"transaction.timeout.ms": 3000})
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"late-{i}", partition=0)
    assert p.flush(WAIT) == 0
    # late-0..2 at 0..2, the coordinator's abort marker at 3: the last stable offset gets to 4.
    wait_end_offsets(bs, topic, 1, "read_committed", {0: 4})

    if then == "produce":
        p.produce(topic, value="later", partition=0)
    err = raised(p.commit_transaction, WAIT)
    assert err.fatal() and err.code() == KafkaError._FENCED, err

    assert read_all(bs, topic, 1, "read_committed", {0: 4}) == {0: []}
    assert read_all(bs, topic, 1, "read_uncommitted", {0: 4}) == {0: [(i, f"late-{i}") for i in range(3)]}


def test_transaction_timeout_above_broker_maximum(broker):
    """transaction.timeout.ms=1000000 is above the broker's transaction.max.timeout.ms (default
    900000): InitProducerId answers INVALID_TRANSACTION_TIMEOUT, which librdkafka raises from
    init_transactions as a fatal error with that code.  The transactional id stays usable with a
    timeout within the limit."""
    bs = broker.bootstrap
    topic = create_topic(bs, 1)
    tid = f"tid-{uid()}"
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 1_000_000})
    err = raised(p.init_transactions, WAIT)
    assert err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT and err.fatal(), err
    del p

    ok = txn_producer(bs, tid, **{"transaction.timeout.ms": 900_000})
    ok.begin_transaction()
    ok.produce(topic, value="within-limit", partition=0)
    ok.commit_transaction(WAIT)
    assert read_all(bs, topic, 1, "read_committed", {0: 2}) == {0: [(0, "within-limit")]}


def test_longest_transactional_id(broker):
    """A transactional id is a protocol string: 32767 bytes is the longest a request can carry,
    and works like any other (its state record in __transaction_state included); one byte more
    cannot be encoded, and librdkafka's init_transactions fails without reaching a coordinator,
    on both brokers alike."""
    bs = broker.bootstrap
    topic = create_topic(bs, 1)
    longest = "L" * 32767
    p = txn_producer(bs, longest)
    p.begin_transaction()
    p.produce(topic, value="long-id", partition=0)
    p.commit_transaction(WAIT)
    assert read_all(bs, topic, 1, "read_committed", {0: 2}) == {0: [(0, "long-id")]}
    del p
    too_long = Producer({"bootstrap.servers": bs, "transactional.id": "L" * 32768})
    raised(too_long.init_transactions, 5)
    del too_long


def test_read_committed_waits_behind_open_transaction(broker):
    """Producer P leaves records in an open transaction on partition 0; a plain producer appends
    after them there, and writes one record to partition 1.  While P's transaction is open the last
    stable offset of partition 0 stays at P's first offset (0), and a read_committed consumer of
    both partitions gets partition 1's record but nothing of partition 0, not even the plain
    records; once P commits, the same consumer reads P's records and the plain ones, in offset
    order."""
    bs = broker.bootstrap
    topic = create_topic(bs, 2)
    p = txn_producer(bs, f"tid-{uid()}")
    p.begin_transaction()
    delivered = Delivered()
    for i in range(3):
        p.produce(topic, value=f"txn-{i}", partition=0, on_delivery=delivered)
    assert p.flush(WAIT) == 0
    assert delivered.ok == [(0, i, f"txn-{i}") for i in range(3)], delivered.errors
    offsets = plain_produce(bs, topic, [(0, f"plain-{i}") for i in range(3)] + [(1, "free")])
    assert offsets == {**{f"plain-{i}": (0, 3 + i) for i in range(3)}, "free": (1, 0)}

    assert end_offsets(bs, topic, 2, "read_uncommitted") == {0: 6, 1: 1}
    assert end_offsets(bs, topic, 2, "read_committed") == {0: 0, 1: 1}

    tps = [TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)]
    c = reader(bs, "read_committed")
    c.assign(tps)
    try:
        # Partition 1's record shows that the consumer fetches; partition 0 (in the same fetches)
        # stays empty, also for a while after it.
        out, _ = read_until(c, tps, {1: 1})
        deadline = time.time() + 2
        while time.time() < deadline:
            read_until(c, tps, {1: 1}, out)
        assert out == {0: [], 1: [(0, "free")]}, \
            f"read_committed returned records of or behind an open transaction: {out}"
        assert end_offsets(bs, topic, 2, "read_committed") == {0: 0, 1: 1}

        p.commit_transaction(WAIT)
        out, pos = read_until(c, tps, {0: 7, 1: 1}, out)
    finally:
        c.close()
    assert pos == {0: 7, 1: 1}
    assert out == {0: [(i, f"txn-{i}") for i in range(3)] + [(3 + i, f"plain-{i}") for i in range(3)],
                   1: [(0, "free")]}
    assert end_offsets(bs, topic, 2, "read_committed") == {0: 7, 1: 1}
