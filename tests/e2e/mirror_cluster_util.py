"""Helpers for test_mirror_into_cluster.py: mirroring from Apache Kafka into a cluster of
several Tern brokers.

- The mirror state RPCs spoken raw to exactly one broker: ReadMirrorStates (100),
  WriteMirrorStates (101) and DescribeClusterMirrors (99), all version 0 and flexible (request
  header v2, response header v1, compact strings and arrays, a tagged-field section after every
  struct), after the schemas in protocol/schemas/mirror, with Tern's tagged fields:
    WriteMirrorStatePartition  tag 0 retry_attempt INT16, tag 1 error_message
                               COMPACT_NULLABLE_STRING, tag 2 last_mirrored_offset INT64,
                               tag 3 previous_state INT8, tag 4 leader_epoch INT32 (the writer's
                               leader epoch of that mirror partition);
    ReadMirrorStatePartition   tag 0 last_mirrored_offset INT64 (absent: -1);
    DescribeClusterMirrorsRequest tag 2 local_only BOOL (brokers asking each other; not sent here).
- coordinator_partition(): mirror/src/state.rs's hash (Java's String.hashCode of
  "<mirror>:<topic id as Kafka prints it>:<partition>", Kafka's Utils.abs, modulo the partition
  count of __mirror_state): the leader of that __mirror_state partition coordinates the mirror
  partition.
- `tern mirrors --describe --json` asked of one node, tolerating a node that does not answer.
- Reading a mirror topic back from a Tern cluster: high watermarks from each partition's leader,
  (offset, key, value) records, raw batches compared with mirror_util.compare_partition.
- KeyedNumberedProducer: replication_util.NumberedProducer with a key per record.

Nothing here starts or stops Tern nodes: the test uses test_cluster.py's Cluster/Node."""

import base64
import json
import struct
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

import mirror_util as mu
from kafka_wire import NO_TAGS, Reader, compact_array, compact_string, kafka_request, tags
from replication_util import VALUE, NumberedProducer, agreed_partitions, try_metadata_v7
from test_cluster import plain

# Kafka error codes.
NONE = 0
NOT_COORDINATOR = 16
FENCED_LEADER_EPOCH = 74

# Api keys of the mirror RPCs spoken raw here (protocol/src/mirror/messages.rs).
DESCRIBE_CLUSTER_MIRRORS = 99
READ_MIRROR_STATES = 100
WRITE_MIRROR_STATES = 101

# Partition state ids (mirror/src/state.rs MirrorPartitionState::id).
STATE_IDS = {"UNKNOWN": -1, "PREPARING": 0, "MIRRORING": 2, "PAUSED": 4, "STOPPING": 5,
             "STOPPED": 6, "FAILED": 7}
STATE_NAMES = {v: k for k, v in STATE_IDS.items()}
STATE_NAMES.update({1: "PREPARING", 3: "PAUSED"})

MIRROR_STATE_TOPIC = "__mirror_state"
MIRROR_STATE_DEFAULT_PARTITIONS = 50  # mirror/src/config.rs: mirror.state.topic.num.partitions


# -- the coordinator of a mirror partition ---------------------------------------------------------


def java_string_hash(s):
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (h * 31 + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def uuid_base64(topic_id):
    """Kafka's Uuid.toString of 16 bytes: URL-safe base64 without padding."""
    assert len(topic_id) == 16, topic_id
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def coordinator_partition(mirror, topic_id, partition, num_partitions):
    """The __mirror_state partition whose leader coordinates (mirror, topic id, partition)."""
    h = java_string_hash(f"{mirror}:{uuid_base64(topic_id)}:{partition}")
    h = 0 if h == -(1 << 31) else abs(h)  # Kafka's Utils.abs
    return h % max(num_partitions, 1)


def _check_hash():
    # The values of mirror/src/state.rs's own unit test, and Kafka's Uuid(0, 1).
    assert java_string_hash("abc") == 96354
    assert uuid_base64(bytes(15) + b"\x01") == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert java_string_hash("\u00e9t\u00e9") == 233 * 961 + 116 * 31 + 233


_check_hash()


def topic_id(bootstrap, topic):
    """The topic's id as 16 bytes, from DescribeTopics (confluent_kafka's Uuid, whose str() is
    standard base64, where Kafka prints URL-safe base64)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    uid = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30).topic_id
    del admin
    raw = struct.pack(">qq", uid.get_most_significant_bits(), uid.get_least_significant_bits())
    assert uuid_base64(raw) == str(uid).replace("+", "-").replace("/", "_"), (raw, str(uid))
    return raw


def mirror_state_leaders(address):
    """{__mirror_state partition: leader} as the broker at `address` reports it (None: it does not
    answer or does not list the topic)."""
    md = try_metadata_v7(address, [MIRROR_STATE_TOPIC])
    t = md and md.topics.get(MIRROR_STATE_TOPIC)
    if not t or t.error != NONE or not t.partitions:
        return None
    return {p: s.leader for p, s in t.partitions.items()}


def coordinators(cluster, mirror, tid, partitions, ids):
    """{partition: (coordinator partition, its leader)} if the brokers `ids` agree on every
    __mirror_state leader and each is live; else None."""
    views = [mirror_state_leaders(cluster.nodes[n].address) for n in ids]
    if any(v is None for v in views) or any(v != views[0] for v in views):
        return None
    leaders = views[0]
    n = len(leaders)
    out = {}
    for p in partitions:
        cp = coordinator_partition(mirror, tid, p, n)
        if leaders.get(cp, -1) not in ids:
            return None
        out[p] = (cp, leaders[cp])
    return out


def mirror_rpc(address, api_key, body, timeout=15):
    """One flexible v0 request to exactly the broker at `address` (request header v2: header v1
    and an empty tagged-field section); a kafka_wire.Reader over the response body (after
    response header v1's tagged fields)."""
    r = Reader(kafka_request(address, api_key, 0, NO_TAGS + body, timeout=timeout))
    r.tags()  # response header v1
    return r


def _head(r):
    return r.int32(), r.int16(), r.compact_string()  # throttle, error code, error message


# ReadMirrorStates (100)


def read_mirror_states(address, mirror, topics, timeout=15):
    """topics: {name: [partitions]}. Returns (error code, error message, {(topic, partition):
    {error, state, state_name, previous_state, retry_attempt, error_message, last_mirror_epoch,
    last_mirrored_offset (tag 0; -1 when absent), tags}})."""
    body = (compact_string(mirror)
            + compact_array(sorted(topics.items()), lambda t: (
                compact_string(t[0])
                + compact_array(t[1], lambda p: struct.pack(">i", p) + NO_TAGS)
                + NO_TAGS))
            + NO_TAGS)
    r = mirror_rpc(address, READ_MIRROR_STATES, body, timeout)
    _throttle, error, message = _head(r)
    out = {}

    def partition(topic):
        index, epoch, state, perr, prev, retry = (r.int32(), r.int32(), r.int8(), r.int16(),
                                                  r.int8(), r.int16())
        msg = r.compact_string()
        extra = r.tags()
        lmo = struct.unpack(">q", extra[0])[0] if 0 in extra else -1
        out[(topic, index)] = {
            "error": perr, "state": state, "state_name": STATE_NAMES.get(state, state),
            "previous_state": prev, "retry_attempt": retry, "error_message": msg,
            "last_mirror_epoch": epoch, "last_mirrored_offset": lmo, "tags": sorted(extra)}

    def topic():
        name = r.compact_string()
        r.compact_array(lambda: partition(name))
        r.tags()

    r.compact_array(topic)
    r.tags()
    assert r.done(), f"ReadMirrorStates from {address}: {len(r.buf) - r.pos} bytes left over"
    return error, message, out


# WriteMirrorStates (101)


def write_partition(index, state, last_mirror_epoch=-1, retry_attempt=None, error_message=None,
                    last_mirrored_offset=None, previous_state=None, leader_epoch=None):
    """One WriteMirrorStatePartition; the Tern tagged fields only when given."""
    fields = {}
    if retry_attempt is not None:
        fields[0] = struct.pack(">h", retry_attempt)
    if error_message is not None:
        fields[1] = compact_string(error_message)
    if last_mirrored_offset is not None:
        fields[2] = struct.pack(">q", last_mirrored_offset)
    if previous_state is not None:
        fields[3] = struct.pack(">b", previous_state)
    if leader_epoch is not None:
        fields[4] = struct.pack(">i", leader_epoch)
    return struct.pack(">iib", index, last_mirror_epoch, state) + tags(fields)


def write_mirror_states(address, mirror, topics, stopped_topics=(), timeout=15):
    """topics: {name: [write_partition(...) bytes]}. Returns (error code, error message,
    {(topic, partition): (error code, error message)})."""
    body = (compact_string(mirror)
            + compact_array(sorted(topics.items()), lambda t: (
                compact_string(t[0]) + compact_array(t[1], lambda p: p) + NO_TAGS))
            + compact_array(stopped_topics, compact_string)
            + NO_TAGS)
    r = mirror_rpc(address, WRITE_MIRROR_STATES, body, timeout)
    _throttle, error, message = _head(r)
    out = {}

    def partition(topic):
        index, perr = r.int32(), r.int16()
        out[(topic, index)] = (perr, r.compact_string())
        r.tags()

    def topic():
        name = r.compact_string()
        r.compact_array(lambda: partition(name))
        r.tags()

    r.compact_array(topic)
    r.tags()
    assert r.done(), f"WriteMirrorStates from {address}: {len(r.buf) - r.pos} bytes left over"
    return error, message, out


# DescribeClusterMirrors (99)


def describe_cluster_mirrors(address, mirrors=(), timeout=30):
    """Returns (error code, error message, {mirror: (error code, {(topic, partition): {source,
    destination, lag, state, retry_attempt, error_message}})})."""
    body = compact_array(mirrors, compact_string) + b"\x00" + NO_TAGS
    r = mirror_rpc(address, DESCRIBE_CLUSTER_MIRRORS, body, timeout)
    _throttle, error, message = _head(r)
    out = {}

    def partition(rows, topic):
        index, src, dst, lag = r.int32(), r.int64(), r.int64(), r.int64()
        state, retry, msg = r.compact_string(), r.int16(), r.compact_string()
        r.tags()
        rows[(topic, index)] = {"source": src, "destination": dst, "lag": lag, "state": state,
                                "retry_attempt": retry, "error_message": msg}

    def topic(rows):
        name = r.compact_string()
        r.compact_array(lambda: partition(rows, name))
        r.tags()

    def mirror():
        merr, name, _ops = r.int16(), r.compact_string(), r.int32()
        rows = {}
        r.compact_array(lambda: topic(rows))
        r.tags()
        out[name] = (merr, rows)

    r.compact_array(mirror)
    r.tags()
    assert r.done(), f"DescribeClusterMirrors from {address}: {len(r.buf) - r.pos} bytes left over"
    return error, message, out


# -- `tern mirrors --describe` asked of one node ---------------------------------------------------


def describe_rows(address, mirror, topic):
    """{partition: row} of `tern mirrors --bootstrap-server <address> --describe --mirror M
    --json` for `topic`, or a string saying why there is none (exit code and output)."""
    try:
        p = mu.mirrors(address, "--describe", "--mirror", mirror, "--json", check=False, timeout=30)
    except Exception as e:  # noqa: BLE001 - a timeout is an answer too
        return f"{address}: {e!r}"
    if p.returncode != 0:
        return f"{address}: exit {p.returncode}: {(p.stdout + p.stderr).strip()[-400:]}"
    try:
        rows = json.loads(p.stdout)
    except ValueError:
        return f"{address}: not JSON: {p.stdout[-400:]!r}"
    return {r["partition"]: r for r in rows if r["topic"] == topic}


def describe_everywhere(cluster, mirror, topic, ids):
    """{node: describe_rows(...)} for each node in `ids`."""
    return {n: describe_rows(cluster.nodes[n].address, mirror, topic) for n in ids}


def short_rows(rows):
    """A one-line view of describe_rows' answer."""
    if isinstance(rows, str):
        return rows
    return ", ".join(f"{p}:{r['state']} dst={r['destinationOffset']} src={r['sourceOffset']} "
                     f"lag={r['lag']}" + (f" err={r['errorMessage']!r}" if r.get("errorMessage") else "")
                     for p, r in sorted(rows.items()))


# -- reading a topic back from a Tern cluster -------------------------------------------------------


def leaders(cluster, topic, ids):
    """{partition: leader node id} agreed by the brokers `ids`, or None."""
    parts = agreed_partitions(cluster, topic, ids)
    if not parts or any(s.leader not in ids for s in parts.values()):
        return None
    return {p: s.leader for p, s in parts.items()}


def tern_high_watermarks(cluster, topic, partitions, ids):
    """{partition: high watermark} asked of each partition's leader (ListOffsets v1), or None
    while leaders are unknown or a leader does not answer."""
    lead = leaders(cluster, topic, ids)
    if lead is None:
        return None
    out = {}
    try:
        for p in partitions:
            with mu.RawKafka(cluster.nodes[lead[p]].address, timeout=5) as k:
                out[p] = k.latest(topic, p)
    except (OSError, struct.error, mu.KafkaProtocolError):
        return None
    return out


def source_ends(bootstrap, topic, partitions):
    """{partition: high watermark} of a (single-broker) source."""
    with mu.RawKafka(bootstrap) as k:
        return k.list_offsets(topic, list(partitions), mu.LATEST)


def read_records(bootstrap, topic, ends, timeout=60):
    """{partition: [(offset, key, value)]} of every record below ends[partition], read from the
    beginning by a fresh consumer (no group offsets)."""
    got = {p: [] for p in ends}
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "tern-e2e-mirror-cluster-read",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p, e in ends.items() if e > 0])
        deadline = time.time() + timeout

        def behind():
            return {p: (got[p][-1][0] + 1 if got[p] else 0, e) for p, e in ends.items()
                    if (got[p][-1][0] + 1 if got[p] else 0) < e}

        while behind() and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error():
                    raise KafkaException(m.error())
                if m.offset() < ends[m.partition()]:
                    got[m.partition()].append((m.offset(), m.key(), m.value()))
        left = behind()
        assert not left, (f"reading {topic} from {bootstrap}: partitions (position, end) {left} "
                          f"not read to their end in {timeout}s")
    finally:
        c.close()
    return got


def records_difference(src, dst):
    """A description of how two [(offset, key, value)] lists differ, or None."""
    if src == dst:
        return None
    src_offsets, dst_offsets = [r[0] for r in src], [r[0] for r in dst]
    missing = sorted(set(src_offsets) - set(dst_offsets))
    extra = sorted(set(dst_offsets) - set(src_offsets))
    doubled = len(dst_offsets) - len(set(dst_offsets))
    first = next((i for i, (a, b) in enumerate(zip(src, dst)) if a != b), min(len(src), len(dst)))
    return (f"{len(dst)} records on tern, {len(src)} on the source; missing offsets {missing[:20]}, "
            f"extra offsets {extra[:20]}, {doubled} doubled; first difference at index {first}: "
            f"source {src[first] if first < len(src) else None} vs tern "
            f"{dst[first] if first < len(dst) else None}")


# -- the producer ---------------------------------------------------------------------------------


class KeyedNumberedProducer(NumberedProducer):
    """replication_util.NumberedProducer (idempotent, acks=all, b"v-%08d" values, record i to
    partition i % partitions, acked/failed kept) with key b"k-%08d" % i on every record."""

    def run(self):
        p = Producer(self.conf)
        while not self.stop_flag.is_set() and not self.fatal:
            i = self.next
            try:
                p.produce(self.topic, key=b"k-%08d" % i, value=VALUE % i,
                          partition=i % self.partitions, on_delivery=self._delivered)
            except BufferError:
                p.poll(0.1)
                continue
            self.next += 1
            p.poll(0)
            if self.next % 10 == 0:
                self.stop_flag.wait(10 / self.rate)
        self.unflushed = p.flush(100)


# -- diagnostics ----------------------------------------------------------------------------------


def mirror_log_lines(node, n=40):
    """The last n mirror-related lines of a node's log."""
    try:
        lines = plain(node.log_path.read_text(errors="replace")).splitlines()
    except OSError:
        return ""
    keep = [l for l in lines if "mirror" in l.lower()]
    return "\n".join(keep[-n:])


def cluster_mirror_logs(cluster, n=25):
    return "\n".join(f"--- node {i} ({node.log_path}), mirror lines:\n{mirror_log_lines(node, n)}"
                     for i, node in cluster.nodes.items())
