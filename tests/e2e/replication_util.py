"""Helpers for test_replication.py: raw requests that show one broker's own view (Metadata v7 with
leader epochs, replicas and ISR; CreateTopics v2; Fetch v11 with a replica id; FindCoordinator
v1), waits on the cluster's replication state, a producer and a consumer that run in threads while
nodes are killed, the read-back checker, and the byte comparison of replicas' segment files.

Nothing here starts or stops nodes: the tests use test_cluster.py's Cluster/Node for that."""

import json
import re
import struct
import subprocess
import threading
import time
from collections import namedtuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafka_wire import Reader, kafka_request
from kafka_wire import array as _array
from kafka_wire import int32 as _int32
from kafka_wire import string as _str
from test_cluster import wait_for

# Kafka error codes the tests look for.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_ENOUGH_REPLICAS = 19
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

# Broker overrides for every replication test: a fenced broker (no heartbeat for 6 s) loses its
# leaderships, and a follower that has not caught up for 4 s leaves the ISR.
REPLICATION_EXTRA = {
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
}

VALUE = b"v-%08d"
VALUE_RE = re.compile(rb"v-(\d{8})")


def number_of(value):
    """The sequence number of a b"v-%08d" value (None for anything else)."""
    m = VALUE_RE.fullmatch(value or b"")
    return int(m.group(1)) if m else None


# -- raw requests -------------------------------------------------------------------------------------


PartitionState = namedtuple("PartitionState", "error leader epoch replicas isr offline")
TopicState = namedtuple("TopicState", "error partitions")  # partitions: {index: PartitionState}
MetadataV7 = namedtuple("MetadataV7", "brokers controller_id topics")


def metadata_v7(address, topics=None, timeout=5):
    """Metadata v7 answered by the broker at `address` itself, never creating topics: brokers
    {id: (host, port)}, controller id, topics {name: TopicState}; replicas and isr as sorted
    tuples would hide order, so they are kept as the broker sent them."""
    body = (_int32(-1) if topics is None else _array(topics, _str)) + struct.pack(">b", 0)
    r = Reader(kafka_request(address, 3, 7, body, timeout=timeout))
    r.int32()  # throttle_time_ms
    brokers = {}
    for _ in range(r.int32()):
        node_id, host, port, _rack = r.int32(), r.string(), r.int32(), r.string()
        brokers[node_id] = (host, port)
    r.string()  # cluster_id
    controller_id = r.int32()
    out = {}
    for _ in range(r.int32()):
        error, name, _internal = r.int16(), r.string(), r.int8()
        parts = {}
        for _ in range(r.int32()):
            perr, index, leader, epoch = r.int16(), r.int32(), r.int32(), r.int32()
            replicas, isr, offline = r.array(r.int32), r.array(r.int32), r.array(r.int32)
            parts[index] = PartitionState(perr, leader, epoch, tuple(replicas or ()),
                                          tuple(isr or ()), tuple(offline or ()))
        out[name] = TopicState(error, parts)
    return MetadataV7(brokers, controller_id, out)


def try_metadata_v7(address, topics=None, timeout=5):
    try:
        return metadata_v7(address, topics, timeout)
    except (OSError, struct.error):
        return None


def create_topics_raw(address, topics, timeout_ms=15000, validate_only=False):
    """CreateTopics v2 to exactly this broker. topics: [(name, num_partitions, replication_factor,
    {partition: [broker ids]}, {config: value})]; returns {name: (error code, error message)}."""

    def assignment(item):
        p, ids = item
        return _int32(p) + _array(ids, _int32)

    def topic(t):
        name, partitions, rf, assignments, configs = t
        return (_str(name) + struct.pack(">ih", partitions, rf)
                + _array(sorted((assignments or {}).items()), assignment)
                + _array(sorted((configs or {}).items()), lambda kv: _str(kv[0]) + _str(kv[1])))

    body = _array(topics, topic) + struct.pack(">ib", timeout_ms, 1 if validate_only else 0)
    r = Reader(kafka_request(address, 19, 2, body, timeout=timeout_ms / 1000 + 10))
    r.int32()  # throttle_time_ms
    out = {}
    for _ in range(r.int32()):
        name, error, message = r.string(), r.int16(), r.string()
        out[name] = (error, message)
    return out


FetchResult = namedtuple("FetchResult", "error partition_error high_watermark records")


def fetch_v11(address, topic, partition, replica_id, current_leader_epoch, fetch_offset,
              max_bytes=1 << 20):
    """One sessionless Fetch v11 (replica_id in the body: a follower's node id, or -1 for a
    consumer) for one partition, answered at once (max_wait 0, min_bytes 0). Returns the top-level
    error, the partition's error, its high watermark and its records (bytes or None)."""
    part = struct.pack(">iiqqi", partition, current_leader_epoch, fetch_offset,
                       0 if replica_id >= 0 else -1, max_bytes)
    body = (struct.pack(">iiiibii", replica_id, 0, 0, max_bytes, 0, 0, -1)
            + _array([topic], lambda t: _str(t) + _array([part], lambda x: x))
            + _int32(0)  # forgotten_topics_data
            + _str(""))  # rack_id
    r = Reader(kafka_request(address, 1, 11, body))
    r.int32()  # throttle_time_ms
    error = r.int16()
    r.int32()  # session_id
    found = FetchResult(error, None, None, None)
    for _ in range(r.int32()):
        name = r.string()
        for _ in range(r.int32()):
            index, perr, hw = r.int32(), r.int16(), r.int64()
            r.int64()  # last_stable_offset
            r.int64()  # log_start_offset
            r.array(lambda: (r.int64(), r.int64()))  # aborted_transactions
            r.int32()  # preferred_read_replica
            records = r.bytes_()
            if name == topic and index == partition:
                found = FetchResult(error, perr, hw, records)
    return found


def find_coordinator(address, group):
    """FindCoordinator v1 (a group) to exactly this broker: (error code, coordinator node id)."""
    r = Reader(kafka_request(address, 10, 1, _str(group) + struct.pack(">b", 0)))
    r.int32()  # throttle_time_ms
    error = r.int16()
    r.string()  # error_message
    node = r.int32()
    return error, node


# -- the cluster's replication state ----------------------------------------------------------------


def agreed_partitions(cluster, topic, ids):
    """{partition: PartitionState} of `topic` if every broker in `ids` answers, knows the topic and
    they all report the same; else None."""
    views = []
    for n in ids:
        md = try_metadata_v7(cluster.nodes[n].address, [topic])
        if md is None or topic not in md.topics or md.topics[topic].error != NONE:
            return None
        views.append(md.topics[topic].partitions)
    return views[0] if all(v == views[0] for v in views) else None


def views(cluster, topic, ids):
    """Each broker's view of `topic`, for failure messages."""
    out = []
    for n in ids:
        md = try_metadata_v7(cluster.nodes[n].address, [topic])
        out.append(f"node {n}: {md.topics.get(topic) if md else '<no answer>'}")
    return "\n".join(out)


def full_isr(parts, count, rf):
    """Whether `parts` has partitions 0..count-1, each without error, with rf replicas all in
    the ISR and a leader among them."""
    if parts is None or sorted(parts) != list(range(count)):
        return False
    return all(
        p.error == NONE and len(p.replicas) == rf and set(p.isr) == set(p.replicas)
        and p.leader in p.replicas
        for p in parts.values()
    )


def wait_isr_full(cluster, topic, count, rf, ids=None, timeout=60):
    """Until every broker in `ids` (default: all) reports every partition of `topic` with all rf
    replicas in sync; returns {partition: PartitionState}."""
    ids = list(ids or cluster.broker_ids)
    return wait_for(
        f"every partition of {topic} to have all {rf} replicas in the ISR, as nodes {ids} see it",
        lambda: (lambda parts: parts if full_isr(parts, count, rf) else None)(
            agreed_partitions(cluster, topic, ids)),
        timeout, interval=0.3, diag=lambda: views(cluster, topic, ids))


def leader_of(cluster, topic, partition, ids, timeout=30):
    """The PartitionState of topic/partition once the brokers in `ids` agree on a leader."""
    def check():
        parts = agreed_partitions(cluster, topic, ids)
        p = parts and parts.get(partition)
        return p if p and p.leader >= 0 else None

    return wait_for(f"a leader of {topic}/{partition} agreed by nodes {ids}", check, timeout,
                    diag=lambda: views(cluster, topic, ids))


def wait_new_leader(cluster, topic, partition, old, ids, timeout=45):
    """Until the brokers in `ids` agree that topic/partition has a leader other than old.leader,
    with a higher leader epoch; returns its PartitionState."""
    def check():
        parts = agreed_partitions(cluster, topic, ids)
        p = parts and parts.get(partition)
        if p and p.leader >= 0 and p.leader != old.leader and p.epoch > old.epoch:
            return p
        return None

    return wait_for(
        f"a new leader of {topic}/{partition} (was node {old.leader}, epoch {old.epoch}) on nodes {ids}",
        check, timeout, interval=0.3, diag=lambda: views(cluster, topic, ids))


def create_topic_raw_ok(cluster, name, partitions, rf, configs=None, assignments=None, via=None):
    """Creates a topic with a raw CreateTopics v2 (through node `via`, default the first broker)
    and fails the test with the broker's own error if it is refused."""
    via = cluster.broker_ids[0] if via is None else via
    if assignments:
        partitions, rf = -1, -1
    got = create_topics_raw(cluster.nodes[via].address,
                            [(name, partitions, rf, assignments or {}, configs or {})])
    error, message = got.get(name, (None, "no answer for the topic"))
    if error != NONE:
        pytest.fail(f"CreateTopics {name} (partitions {partitions}, replication factor {rf}, "
                    f"assignments {assignments}) was refused: error {error}: {message}")


# -- clients in threads --------------------------------------------------------------------------------


class NumberedProducer(threading.Thread):
    """An idempotent acks=all producer sending b"v-%08d" values, record i to partition
    i % partitions, about `rate` records a second, until finish(). Every delivery report is kept:
    acked {value: (partition, offset)}, failed {value: error}; fatal errors (the idempotent
    producer gives up) in `fatal`, client-level errors (broker down...) in `errors`."""

    def __init__(self, bootstrap, topic, partitions, rate=300, first=0, conf=None):
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate, self.next = topic, partitions, rate, first
        self.conf = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 90000,
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": self._error,
            **(conf or {}),
        }
        self.lock = threading.Lock()
        self.acked, self.failed, self.fatal, self.errors = {}, {}, [], []
        self.stop_flag = threading.Event()
        self.unflushed = None

    def _error(self, err):
        with self.lock:
            (self.fatal if err.fatal() else self.errors).append(str(err))

    def _delivered(self, err, msg):
        with self.lock:
            if err is not None:
                self.failed[msg.value()] = str(err)
            else:
                self.acked[msg.value()] = (msg.partition(), msg.offset())

    def run(self):
        p = Producer(self.conf)
        while not self.stop_flag.is_set() and not self.fatal:
            i = self.next
            try:
                p.produce(self.topic, value=VALUE % i, partition=i % self.partitions,
                          on_delivery=self._delivered)
            except BufferError:
                p.poll(0.1)
                continue
            self.next += 1
            p.poll(0)
            if self.next % 10 == 0:
                self.stop_flag.wait(10 / self.rate)
        self.unflushed = p.flush(100)

    def acked_count(self, partition=None):
        with self.lock:
            if partition is None:
                return len(self.acked)
            return sum(1 for p, _ in self.acked.values() if p == partition)

    def wait_acked(self, what, more, partition=None, timeout=60):
        """Until `more` records beyond those acknowledged now are acknowledged (on `partition`)."""
        target = self.acked_count(partition) + more
        wait_for(what, lambda: self.acked_count(partition) >= target, timeout,
                 diag=lambda: self.summary())

    def finish(self):
        """Stops producing and waits for every delivery report (the flush)."""
        self.stop_flag.set()
        self.join(timeout=110)
        assert not self.is_alive(), "the producing thread did not finish its flush"
        print(f"producer: {self.summary()}")

    def summary(self):
        with self.lock:
            return (f"{self.next} sent, {len(self.acked)} acknowledged, {len(self.failed)} failed "
                    f"(e.g. {list(self.failed.items())[:3]}), fatal {self.fatal[:3]}, "
                    f"client errors {len(self.errors)} (last {self.errors[-3:]}), "
                    f"unflushed {self.unflushed}")

    def check_all_delivered(self):
        """An idempotent producer with a 90 s delivery timeout against a cluster that keeps
        min.insync.replicas live replicas gets every record acknowledged."""
        assert self.unflushed == 0, self.summary()
        assert not self.fatal, self.summary()
        assert not self.failed, self.summary()
        assert len(self.acked) == self.next, self.summary()


# Errors of a consumer's partition that mean a record it could read is gone (or was never there).
BAD_CONSUMER_ERRORS = {
    code for code in (
        getattr(KafkaError, "_AUTO_OFFSET_RESET", None),
        getattr(KafkaError, "_LOG_TRUNCATION", None),
        getattr(KafkaError, "OFFSET_OUT_OF_RANGE", None),
    ) if code is not None
}


class WatermarkWatcher(threading.Thread):
    """A consumer (assign, from the beginning, no commits, auto.offset.reset=error) that reads
    the topic while nodes fail. It records every record it reads, and after each poll each
    partition's high watermark as the fetch responses reported it (librdkafka's cached
    watermarks); `violations` collects high watermarks that went down, consumed offsets that went
    down, and offset resets or log truncations the client reported."""

    def __init__(self, bootstrap, topic, partitions):
        super().__init__(daemon=True)
        self.topic, self.partitions = topic, list(partitions)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": "tern-e2e-replication-watcher",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000,
            "fetch.wait.max.ms": 200,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": lambda err: self.errors.append(str(err)),
        }
        self.lock = threading.Lock()
        self.seen = []  # (partition, offset, value)
        self.last = {}  # partition -> last offset read
        self.hw = {}  # partition -> highest high watermark seen
        self.hw_history = {p: [] for p in self.partitions}  # [(seconds since start, hw)] changes
        self.violations, self.errors = [], []
        self.stop_flag = threading.Event()
        self.started_at = time.time()

    def run(self):
        c = Consumer(self.conf)
        try:
            c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions])
            while not self.stop_flag.is_set():
                msgs = c.consume(num_messages=500, timeout=0.2)
                with self.lock:
                    for m in msgs:
                        self._record(m)
                    for p in self.partitions:
                        try:
                            _lo, hi = c.get_watermark_offsets(TopicPartition(self.topic, p), cached=True)
                        except KafkaException:
                            continue
                        if hi is None or hi < 0:
                            continue
                        prev = self.hw.get(p)
                        if prev is not None and hi < prev:
                            self.violations.append(
                                f"partition {p}: high watermark went back from {prev} to {hi} "
                                f"at {time.time() - self.started_at:.1f}s")
                        if prev is None or hi != prev:
                            self.hw_history[p].append((round(time.time() - self.started_at, 1), hi))
                        self.hw[p] = max(hi, prev if prev is not None else hi)
        finally:
            c.close()

    def _record(self, m):
        if m.error():
            code = m.error().code()
            if code in BAD_CONSUMER_ERRORS:
                self.violations.append(f"partition {m.partition()}: {m.error()}")
            elif code != KafkaError._PARTITION_EOF:
                self.errors.append(str(m.error()))
            return
        p, o = m.partition(), m.offset()
        if o <= self.last.get(p, -1):
            self.violations.append(f"partition {p}: read offset {o} after offset {self.last[p]}")
        self.last[p] = max(o, self.last.get(p, -1))
        self.seen.append((p, o, m.value()))

    def positions(self):
        with self.lock:
            return {p: self.last.get(p, -1) + 1 for p in self.partitions}

    def finish(self, ends, timeout=60):
        """Waits until it has read up to `ends` ({partition: offset}), then stops it."""
        try:
            wait_for(f"the watching consumer to read up to {ends}",
                     lambda: all(self.positions()[p] >= e for p, e in ends.items()), timeout,
                     diag=lambda: f"positions {self.positions()}, errors {self.errors[-5:]}")
        finally:
            self.stop_flag.set()
            self.join(timeout=30)
        print(f"watcher: read {len(self.seen)} records; high watermark changes per partition: "
              f"{ {p: len(h) for p, h in self.hw_history.items()} }; client errors "
              f"{len(self.errors)} (last {self.errors[-3:]})")

    def check(self, final):
        """No violation, and every record it read is in the final read at the same place with
        the same value (what a consumer saw below the high watermark never disappears)."""
        assert not self.violations, (
            f"{len(self.violations)} violations, e.g. {self.violations[:10]}\n"
            f"high watermarks seen: { {p: h[-20:] for p, h in self.hw_history.items()} }")
        at = {(p, o): v for p, recs in final.items() for o, v in recs}
        gone = [(p, o, v) for p, o, v in self.seen if at.get((p, o)) != v]
        assert not gone, (f"{len(gone)} records the consumer read during the failures are not "
                          f"in the final log at that offset, e.g. "
                          f"{[(p, o, v, at.get((p, o))) for p, o, v in gone[:10]]}")


class GroupReader(threading.Thread):
    """A member of consumer group `group` (subscribe, auto.offset.reset=earliest, no auto commit)
    that commits synchronously after each batch it processed. It keeps every record read, the
    offsets of every acknowledged commit (`best`: the highest per partition), and after each
    commit reads the committed offsets back (OffsetFetch); `violations` collects committed offsets
    read back below an offset whose commit had been acknowledged before."""

    def __init__(self, bootstrap, topic, partitions, group):
        super().__init__(daemon=True)
        self.topic, self.partitions = topic, list(partitions)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": lambda err: self.errors.append(str(err)),
        }
        self.lock = threading.Lock()
        self.seen = []  # (partition, offset, value)
        self.best = {}  # partition -> highest acknowledged committed offset
        self.commits = []  # (time, {partition: offset}) acknowledged
        self.fetches = []  # (time, {partition: offset}) read back
        self.commit_failures, self.violations, self.errors = [], [], []
        self.stop_flag = threading.Event()

    def run(self):
        c = Consumer(self.conf)
        tps = [TopicPartition(self.topic, p) for p in self.partitions]
        dirty = False  # records processed whose commit was not acknowledged yet
        try:
            c.subscribe([self.topic])
            while not self.stop_flag.is_set():
                msgs = c.consume(num_messages=200, timeout=0.5)
                good = []
                for m in msgs:
                    if m.error():
                        self.errors.append(str(m.error()))
                    else:
                        good.append((m.partition(), m.offset(), m.value()))
                if good:
                    dirty = True
                    with self.lock:
                        self.seen.extend(good)
                if not dirty:
                    continue
                try:
                    done = c.commit(asynchronous=False)
                except KafkaException as e:
                    if e.args[0].code() == KafkaError._NO_OFFSET:
                        dirty = False
                    else:
                        self.commit_failures.append((time.time(), str(e)))
                    continue
                dirty = False
                acked = {tp.partition: tp.offset for tp in done or []
                         if tp.error is None and tp.offset >= 0}
                with self.lock:
                    for p, o in acked.items():
                        self.best[p] = max(o, self.best.get(p, -1))
                    self.commits.append((time.time(), acked))
                    before = dict(self.best)
                try:
                    back = c.committed(tps, timeout=5)
                except KafkaException:
                    continue
                now = time.time()
                read = {tp.partition: tp.offset for tp in back if tp.error is None}
                with self.lock:
                    self.fetches.append((now, read))
                    for p, o in read.items():
                        if p in before and o < before[p]:
                            self.violations.append(
                                f"partition {p}: committed offset read back as {o} after a commit "
                                f"of {before[p]} was acknowledged")
        finally:
            c.close()

    def seen_values(self):
        with self.lock:
            return {v for _, _, v in self.seen}

    def best_offsets(self):
        with self.lock:
            return dict(self.best)

    def commits_after(self, t):
        with self.lock:
            return [o for when, o in self.commits if when > t]

    def fetches_after(self, t):
        with self.lock:
            return [o for when, o in self.fetches if when > t]

    def finish(self):
        self.stop_flag.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the group consumer thread did not stop"


# -- reading back and checking ------------------------------------------------------------------------


def high_watermarks(bootstrap, topic, partitions, timeout=30):
    """{partition: high watermark} from ListOffsets (latest), retried while leaders move."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tern-e2e-replication-ends"})
    try:
        def ask():
            try:
                return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                        for p in partitions}
            except KafkaException:
                return None
        return wait_for(f"the high watermarks of {topic}", ask, timeout)
    finally:
        c.close()


def read_all(bootstrap, topic, partitions, timeout=60):
    """Every record of the partitions from their beginning to their high watermark, read by a
    fresh consumer: ({partition: [(offset, value)]}, {partition: high watermark})."""
    ends = high_watermarks(bootstrap, topic, partitions)
    got = {p: [] for p in partitions}
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "tern-e2e-replication-check",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
    })
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.time() + timeout

        def behind():
            return {p: (got[p][-1][0] + 1 if got[p] else 0, e) for p, e in ends.items()
                    if (got[p][-1][0] + 1 if got[p] else 0) < e}

        while behind() and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error():
                    raise KafkaException(m.error())
                got[m.partition()].append((m.offset(), m.value()))
        if behind():
            pytest.fail(f"reading {topic} back: partitions (position, high watermark) {behind()} "
                        f"not read to their end in {timeout}s")
    finally:
        c.close()
    return got, ends


def check_acked(read, acked, failed=(), number=number_of):
    """read: {partition: [(offset, value)]} (a whole log); acked: {value: (partition, offset)}.
    Every acknowledged value is read exactly once, at its acknowledged partition and offset;
    offsets increase and values' numbers increase along each partition (the producer's order);
    no value appears twice; nothing is read that was neither acknowledged nor failed (a failed
    send may or may not have been written)."""
    where, problems = {}, []
    for p, recs in sorted(read.items()):
        last_offset, last_n = -1, -1
        for offset, value in recs:
            n = number(value)
            if n is None:
                problems.append(f"unexpected value {value!r} at {p}/{offset}")
                continue
            if offset <= last_offset:
                problems.append(f"partition {p}: offset {offset} read after {last_offset}")
            if n <= last_n:
                problems.append(f"partition {p}: {value!r} at offset {offset} after record number {last_n}")
            if value in where:
                problems.append(f"{value!r} appears twice: at {where[value]} and {(p, offset)}")
            where[value] = (p, offset)
            last_offset, last_n = offset, n
    assert not problems, f"{len(problems)} problems in the log, e.g. {problems[:10]}"
    missing = sorted(v for v in acked if v not in where)
    # librdkafka may acknowledge a record without its offset (-1001, or None from the Python
    # client) when a request timed out and a retry succeeded: then only its partition is checked.
    def placed(v):
        (p, offset), (wp, woffset) = acked[v], where[v]
        return p == wp and (offset is None or offset < 0 or offset == woffset)

    misplaced = sorted((v, acked[v], where[v]) for v in acked if v in where and not placed(v))
    unexpected = sorted(v for v in where if v not in acked and v not in failed)
    assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records are not in the log, "
                         f"e.g. {[(v, acked[v]) for v in missing[:10]]}")
    assert not misplaced, (f"{len(misplaced)} acknowledged records are elsewhere than their "
                           f"acknowledged (partition, offset), e.g. {misplaced[:10]}")
    assert not unexpected, (f"{len(unexpected)} records in the log were never sent or acknowledged, "
                            f"e.g. {[(v, where[v]) for v in unexpected[:10]]}")


# -- replicas on disk -----------------------------------------------------------------------------------


def segment_files(node, topic, partition):
    """{file name: bytes} of the partition's .log segment files on this node (None: no dir)."""
    d = node.data_dir / f"{topic}-{partition}"
    if not d.is_dir():
        return None
    return {f.name: f.read_bytes() for f in sorted(d.glob("*.log"))}


def _first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else None


def replica_differences(cluster, topic, partitions, ids):
    """[description] of every partition whose .log files differ between the nodes `ids`."""
    out = []
    for p in partitions:
        files = {n: segment_files(cluster.nodes[n], topic, p) for n in ids}
        ref = files[ids[0]]
        if any(f is None for f in files.values()):
            out.append(f"{topic}-{p}: no partition dir on nodes "
                       f"{[n for n, f in files.items() if f is None]}")
            continue
        if all(f == ref for f in files.values()):
            continue
        detail = []
        for n, f in files.items():
            sizes = {name: len(b) for name, b in f.items()}
            diff = {name: _first_difference(ref[name], b) if name in ref else "only here"
                    for name, b in f.items() if ref.get(name) != b}
            detail.append(f"node {n}: sizes {sizes}, first differing byte vs node {ids[0]} {diff}")
        out.append(f"{topic}-{p}: " + "; ".join(detail))
    return out


def wait_replicas_identical(cluster, topic, partitions, ids, timeout=30):
    """Until, for each partition, the .log segment files (names and bytes) are the same on every
    node in `ids` (the followers have fetched up to the leader's log end); and not empty."""
    wait_for(f"byte-identical .log segments of {topic} on nodes {ids}",
             lambda: not replica_differences(cluster, topic, partitions, ids), timeout, interval=0.5,
             diag=lambda: "\n".join(replica_differences(cluster, topic, partitions, ids)))
    for p in partitions:
        size = sum(len(b) for b in segment_files(cluster.nodes[ids[0]], topic, p).values())
        assert size > 0, f"{topic}-{p} has no data on disk"


# -- Apache Kafka's VerifiableProducer -------------------------------------------------------------------

VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"  # bin/kafka-verifiable-producer.sh


class VerifiableProducer:
    """org.apache.kafka.tools.VerifiableProducer run as a process; its JSON lines (one per
    acknowledged or failed send) are read by a thread: acked {value: (partition, offset)},
    failed {value: exception}."""

    def __init__(self, dist, bootstrap, topic, max_messages, throughput, config, stderr_path):
        self.cmd = dist.tool_command(
            VERIFIABLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
            "--max-messages", max_messages, "--throughput", throughput, "--acks", "-1",
            "--command-config", config)
        self.stderr_path = stderr_path
        self.lock = threading.Lock()
        self.acked, self.failed, self.duplicate_acks, self.other = {}, {}, [], []
        self.tool_data = None
        self.proc = None
        self.reader = None

    def start(self):
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.stderr,
                                     stdin=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                self.other.append(line.rstrip())
                continue
            name = ev.get("name")
            with self.lock:
                if name == "producer_send_success":
                    v = ev["value"].encode()
                    if v in self.acked:
                        self.duplicate_acks.append(ev)
                    self.acked[v] = (ev["partition"], ev["offset"])
                elif name == "producer_send_error":
                    self.failed[(ev.get("value") or "").encode()] = (ev.get("exception"), ev.get("message"))
                elif name == "tool_data":
                    self.tool_data = ev

    def acked_count(self, partition=None):
        with self.lock:
            if partition is None:
                return len(self.acked)
            return sum(1 for p, _ in self.acked.values() if p == partition)

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"VerifiableProducer did not finish in {timeout}s: {self.summary()}\n"
                        f"{self.stderr_tail()}")
        self.reader.join(timeout=10)
        self.stderr.close()
        return code

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr_tail(self, n=30):
        try:
            with open(self.stderr_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def summary(self):
        with self.lock:
            return (f"{len(self.acked)} acknowledged, {len(self.failed)} failed "
                    f"(e.g. {list(self.failed.items())[:3]}), tool data {self.tool_data}, "
                    f"duplicate acks {self.duplicate_acks[:3]}, other output {self.other[:5]}")
