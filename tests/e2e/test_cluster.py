"""Several tern nodes form one cluster the KRaft way: a metadata quorum of voters
(`controller.quorum.voters`, `process.roles`), brokers that register with its active controller,
partitions (one replica each) placed across the brokers, admin requests forwarded to the active
controller from any broker.

Each test starts its own cluster of real `tern server` processes on loopback ports, each node with
its own data dir and log (tmp_path/node-<id>/tern.log, printed on failure), and checks what
clients see:

  1. three combined broker+controller nodes: one cluster id and three brokers from every node,
     a topic's partitions led by all three, 3000 records produced through one node and read
     back through another exactly once, committed group offsets, and
     kafka-metadata-quorum.sh's --status / --replication;
  2. the active controller killed with SIGKILL five times while topics are being created:
     a new leader (of a higher epoch) each time, creates acknowledged after each failover, and
     every acknowledged topic listed by every node afterwards;
  3. a node killed with SIGKILL and started again at once rejoins (its old session has to
     expire first, as in Apache Kafka) with every acknowledged record;
  4. a node whose data dir is wiped rejoins with the cluster's id, lists every topic again and
     serves produce and fetch for the partitions it leads;
  5. three controller-only nodes and two broker-only nodes;
  6. refused nodes: a second broker with a running broker's node.id, and a node formatted for
     another cluster: both exit nonzero, say why, and leave the cluster as it was; a broker-only
     node whose node.id is a voter's is a config error.

The cluster's view is read with raw Metadata v4 requests sent to one node at a time (a client
library would answer from whichever broker it likes) and with Apache Kafka's
kafka-metadata-quorum.sh (org.apache.kafka.tools.MetadataQuorumCommand, via kafka_peer.KafkaJars)."""

import itertools
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_peer import KafkaJars, new_cluster_id
from kafka_wire import Reader, kafka_request
from processes import free_port, kill_process, stop_process
from tern_process import TERN_BIN

COMBINED = "broker,controller"
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"  # bin/kafka-metadata-quorum.sh
START_TIMEOUT = 60  # a node listens once the quorum has elected a leader and it registered


def wait_for(what, predicate, timeout, interval=0.2, diag=lambda: ""):
    """Polls predicate() until it returns something truthy; fails with `what` after timeout."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})\n{diag()}")


def plain(text):
    """Log text without the colour escapes of tern's log lines."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# -- nodes and clusters -----------------------------------------------------------------------------


class Node:
    """One `tern server` process: its ports, data dir (log.dirs) and log file (kept outside the
    data dir, so that wiping the data keeps the log)."""

    def __init__(self, root, node_id, roles, ports, name=None):
        self.node_id = node_id
        self.roles = roles
        self.dir = Path(root) / (name or f"node-{node_id}")
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "tern.log"
        self.port = ports() if "broker" in roles.split(",") else None
        self.controller_port = ports() if "controller" in roles.split(",") else None
        self.voters = ""
        self.extra = {}
        self.proc = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def properties(self):
        listeners = []
        if self.port:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.port}")
        if self.controller_port:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        return {
            "node.id": str(self.node_id),
            "process.roles": self.roles,
            "listeners": ",".join(listeners),
            "controller.quorum.voters": self.voters,
            "log.dirs": str(self.data_dir),
            **self.extra,
        }

    def overrides(self):
        return [a for k, v in self.properties().items() for a in ("--override", f"{k}={v}")]

    def spawn(self):
        """Starts the process without waiting for it to serve."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [TERN_BIN, "server", *self.overrides()]
        with open(self.log_path, "ab") as log:
            log.write(f"===== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def wait_ready(self, timeout=START_TIMEOUT):
        """Waits until the node accepts connections on its client port (a controller-only node:
        its controller port)."""
        port = self.port or self.controller_port
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"node {self.node_id} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"node {self.node_id} did not listen on {port} in {timeout}s:\n{self.tail()}")

    def start(self, timeout=START_TIMEOUT):
        return self.spawn().wait_ready(timeout)

    def wait_exit(self, timeout):
        """The exit code once the process ended, or None if it still runs after timeout."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def terminate(self):
        if self.running:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL if it has not exited after timeout seconds; True if it exited
        on SIGTERM (or was not running)."""
        clean = stop_process(self.proc, timeout)
        self.proc = None
        return clean

    def kill9(self):
        kill_process(self.proc)
        self.proc = None

    def log_text(self):
        """What the process(es) wrote, without the command lines this class put in between."""
        try:
            text = plain(self.log_path.read_text(errors="replace"))
        except OSError:
            return ""
        return "\n".join(l for l in text.splitlines() if not l.startswith("===== "))

    def tail(self, n=40):
        """The last n lines of the log, without the frames of a backtrace (RUST_BACKTRACE=1)
        that would crowd out the error above them."""
        try:
            lines = plain(self.log_path.read_text(errors="replace")).splitlines()
        except OSError:
            return ""
        frame = re.compile(r"^\s+(\d+: |at )|^Stack backtrace:|^stack backtrace:")
        return "\n".join([l for l in lines if not frame.match(l)][-n:])


class Cluster:
    """Nodes sharing one `controller.quorum.voters` (every node with the controller role)."""

    def __init__(self, root, roles, extra=None):
        self.root = Path(root)
        self._ports = set()
        self.nodes = {n: Node(root, n, r, self.new_port) for n, r in sorted(roles.items())}
        for node in self.nodes.values():
            node.extra = dict(extra or {})
        self.voters = ",".join(
            f"{n}@127.0.0.1:{node.controller_port}"
            for n, node in self.nodes.items() if node.controller_port
        )
        for node in self.nodes.values():
            node.voters = self.voters
        self.extra_nodes = []

    def new_port(self):
        while True:
            p = free_port()
            if p not in self._ports:
                self._ports.add(p)
                return p

    def start(self):
        """Starts every process first (none serves before a quorum exists), then waits for all."""
        for node in self.nodes.values():
            node.spawn()
        for node in self.nodes.values():
            node.wait_ready()
        return self

    def add_node(self, node_id, roles, name):
        """A node outside the cluster's own (for the refused joins), with the same voters."""
        node = Node(self.root, node_id, roles, self.new_port, name=name)
        node.voters = self.voters
        self.extra_nodes.append(node)
        return node

    @property
    def broker_ids(self):
        return [n for n, node in self.nodes.items() if node.port]

    def bootstrap(self, *ids):
        return ",".join(self.nodes[n].address for n in (ids or self.broker_ids))

    def stop(self):
        """SIGTERM to the broker-only nodes, then to the rest together; SIGKILL what is left
        after 30 s. Returns the nodes that needed SIGKILL."""
        everyone = self.extra_nodes + list(self.nodes.values())
        unclean = []
        groups = [[n for n in everyone if not n.controller_port],
                  [n for n in everyone if n.controller_port]]
        for group in groups:
            for node in group:
                node.terminate()
            for node in group:
                if not node.stop(timeout=30):
                    unclean.append(node.node_id)
        return unclean

    def report(self):
        for node in self.extra_nodes + list(self.nodes.values()):
            print(f"----- {node.log_path} (last 40 lines) -----")
            print(node.tail())


@pytest.fixture
def make_cluster(tmp_path):
    """make_cluster({node_id: process.roles}) -> a started Cluster, stopped at teardown (its node
    logs are printed there: pytest shows them when the test failed)."""
    clusters = []

    def make(roles, extra=None):
        c = Cluster(tmp_path, roles, extra)
        clusters.append(c)
        try:
            return c.start()
        except RuntimeError as e:
            pytest.fail(f"the cluster did not start: {e}")

    yield make
    for c in clusters:
        unclean = c.stop()
        if unclean:
            print(f"nodes {unclean} did not exit within 30 s of SIGTERM")
        c.report()


def three_combined(make_cluster, extra=None):
    return make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED}, extra)


# -- Metadata, one node at a time ----------------------------------------------------------------------

Metadata = namedtuple("Metadata", "cluster_id controller_id brokers topics")
Topic = namedtuple("Topic", "error partitions")  # partitions: {index: leader}


def metadata(address):
    """Metadata v4 for every topic, answered by the broker at `address` itself."""
    r = Reader(kafka_request(address, 3, 4, struct.pack(">ib", -1, 0)))
    r.int32()  # throttle_time_ms
    brokers = {}
    for _ in range(r.int32()):
        node_id, host, port, _rack = r.int32(), r.string(), r.int32(), r.string()
        brokers[node_id] = (host, port)
    cluster_id = r.string()
    controller_id = r.int32()
    topics = {}
    for _ in range(r.int32()):
        error, name, _internal = r.int16(), r.string(), r.int8()
        partitions = {}
        for _ in range(r.int32()):
            _perr, index, leader = r.int16(), r.int32(), r.int32()
            for _ in range(r.int32()):
                r.int32()  # replicas
            for _ in range(r.int32()):
                r.int32()  # isr
            partitions[index] = leader
        topics[name] = Topic(error, partitions)
    return Metadata(cluster_id, controller_id, brokers, topics)


def try_metadata(address):
    try:
        return metadata(address)
    except OSError:
        return None


def expected_brokers(cluster, ids=None):
    return {n: ("127.0.0.1", cluster.nodes[n].port) for n in (ids or cluster.broker_ids)}


def wait_brokers_everywhere(cluster, timeout=30):
    """Until every broker's Metadata lists exactly the cluster's brokers at their endpoints;
    returns {node: Metadata}."""
    want = expected_brokers(cluster)

    def check():
        mds = {n: try_metadata(cluster.nodes[n].address) for n in cluster.broker_ids}
        if all(md is not None and md.brokers == want for md in mds.values()):
            return mds
        return None

    return wait_for(
        f"every node to list brokers {want}", check, timeout,
        diag=lambda: {n: getattr(try_metadata(cluster.nodes[n].address), "brokers", None)
                      for n in cluster.broker_ids},
    )


def wait_topics_everywhere(cluster, topics, timeout=30, ids=None):
    """Until every broker lists each of `topics` ({name: partition count}) without error and with
    a live leader for every partition; returns {node: Metadata}."""
    ids = ids or cluster.broker_ids
    brokers = set(cluster.broker_ids)

    def missing(md):
        if md is None:
            return ["<no answer>"]
        bad = []
        for name, count in topics.items():
            t = md.topics.get(name)
            if (t is None or t.error != 0 or sorted(t.partitions) != list(range(count))
                    or not set(t.partitions.values()) <= brokers):
                bad.append((name, t))
        return bad

    def check():
        mds = {n: try_metadata(cluster.nodes[n].address) for n in ids}
        return mds if not any(missing(md) for md in mds.values()) else None

    def diag():
        out = []
        for n in ids:
            bad = missing(try_metadata(cluster.nodes[n].address))
            out.append(f"node {n}: {len(bad)} missing or leaderless, e.g. {bad[:5]}")
        return "\n".join(out)

    return wait_for(f"{len(topics)} topics on nodes {ids}", check, timeout, interval=0.5, diag=diag)


# -- kafka-metadata-quorum.sh -----------------------------------------------------------------------


class QuorumTool:
    """kafka-metadata-quorum.sh --bootstrap-server ADDRESS describe --status/--replication, with
    admin timeouts short enough to poll during an election."""

    def __init__(self, dist, tmp_path):
        self.dist = dist
        self.config = Path(tmp_path) / "quorum-tool.properties"
        self.config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n")

    def run(self, address, *what):
        try:
            return self.dist.run(QUORUM_TOOL, "--bootstrap-server", address,
                                 "--command-config", self.config, "describe", *what, timeout=60)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(e.cmd, -1, "", f"timed out: {e}")

    def status(self, address):
        """(CompletedProcess, {field: value}) of describe --status."""
        p = self.run(address, "--status")
        fields = dict(re.findall(r"^(\w+):\s+(.*?)\s*$", p.stdout, re.M)) if p.returncode == 0 else {}
        return p, fields

    def leader(self, address):
        """(leader id, leader epoch, voter ids) from describe --status, or None."""
        p, f = self.status(address)
        if "LeaderId" not in f:
            return None
        voters = {int(v) for v in re.findall(r'"id":\s*(\d+)', f.get("CurrentVoters", ""))}
        return int(f["LeaderId"]), int(f["LeaderEpoch"]), voters

    def replication(self, address):
        """(CompletedProcess, [(node id, log end offset, lag, status)]) of describe --replication."""
        p = self.run(address, "--replication")
        rows = []
        lines = [l.split() for l in p.stdout.splitlines() if l.strip()]
        if p.returncode == 0 and lines and lines[0][0] == "NodeId":
            for f in lines[1:]:
                rows.append((int(f[0]), int(f[2]), int(f[3]), f[-1]))
        return p, rows


@pytest.fixture(scope="session")
def kafka_jars():
    return KafkaJars().ensure()


@pytest.fixture
def quorum(kafka_jars, tmp_path):
    return QuorumTool(kafka_jars, tmp_path)


def check_quorum_describe(quorum, address, cluster_id, voters, observers=None):
    """--status names the cluster, the voters and a leader among them; --replication has a
    Leader row and a Follower row per other voter (and the observers, if given)."""
    p, f = quorum.status(address)
    assert p.returncode == 0, f"describe --status exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    assert f["ClusterId"] == cluster_id, p.stdout
    status_voters = {int(v) for v in re.findall(r'"id":\s*(\d+)', f["CurrentVoters"])}
    assert status_voters == set(voters), p.stdout
    leader = int(f["LeaderId"])
    assert leader in voters, p.stdout
    assert int(f["LeaderEpoch"]) >= 1, p.stdout
    assert int(f["HighWatermark"]) > 0, p.stdout

    p, rows = quorum.replication(address)
    assert p.returncode == 0, f"describe --replication exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    voter_rows = {n: status for n, _, _, status in rows if status in ("Leader", "Follower")}
    assert voter_rows == {n: "Leader" if n == leader else "Follower" for n in voters}, p.stdout
    leo = {n: e for n, e, _, _ in rows}
    assert leo[leader] >= int(f["HighWatermark"]), p.stdout
    if observers is not None:
        assert {n for n, _, _, s in rows if s == "Observer"} == set(observers), p.stdout
    return leader


# -- producing and consuming ----------------------------------------------------------------------------


def produce(bootstrap, topic, indexes, key_of=None, partition_of=None, timeout=60):
    """Idempotent acks=all records value-<i> for i in indexes; every one must be acknowledged.
    Returns {i: (partition, offset)}."""
    acked, errors = {}, []

    def on_delivery(err, msg, i):
        if err is not None:
            errors.append((i, err))
        else:
            acked[i] = (msg.partition(), msg.offset())

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": timeout * 1000,
    })
    for i in indexes:
        kw = {}
        if key_of:
            kw["key"] = key_of(i)
        if partition_of:
            kw["partition"] = partition_of(i)
        p.produce(topic, value=b"value-%d" % i,
                  on_delivery=lambda err, msg, i=i: on_delivery(err, msg, i), **kw)
        p.poll(0)
    left = p.flush(timeout + 10)
    assert left == 0, f"{left} records not delivered"
    assert not errors, errors[:5]
    assert len(acked) == len(indexes)
    return acked


def index_of(msg):
    m = re.fullmatch(rb"value-(\d+)", msg.value() or b"")
    assert m, f"unexpected value {msg.value()!r} at {msg.partition()}/{msg.offset()}"
    return int(m.group(1))


def check_exactly_once(msgs, expected, key_of=None):
    """Every expected record ({i: (partition, offset)}) read exactly once, at its acknowledged
    place, nothing else; offsets strictly increasing per partition in the order read."""
    seen = {}
    last = {}
    for m in msgs:
        i = index_of(m)
        assert i not in seen, f"record {i} read twice: at {seen[i]} and {(m.partition(), m.offset())}"
        seen[i] = (m.partition(), m.offset())
        assert i in expected, f"record {i} read at {seen[i]} was not expected"
        assert seen[i] == expected[i], f"record {i} read at {seen[i]}, acknowledged at {expected[i]}"
        if key_of:
            assert m.key() == key_of(i)
        assert m.offset() > last.get(m.partition(), -1), f"partition {m.partition()} went backwards"
        last[m.partition()] = m.offset()
    missing = sorted(set(expected) - set(seen))
    assert not missing, f"{len(missing)} acknowledged records never read, e.g. {missing[:10]}"


def drain(c, expected, timeout):
    """Consumes until `expected` records came, then one more second (to see that nothing else
    does), or until `timeout`; returns the records."""
    msgs = []
    deadline = time.time() + timeout
    extra_until = None
    while time.time() < deadline and (extra_until is None or time.time() < extra_until):
        for m in c.consume(num_messages=1000, timeout=0.2):
            if m.error():
                raise KafkaException(m.error())
            msgs.append(m)
        if extra_until is None and len(msgs) >= expected:
            extra_until = time.time() + 1
    return msgs


def consume_group(bootstrap, topic, group, expected, timeout=60):
    """Reads `topic` as a member of `group` until `expected` records came (then one more second,
    to see that nothing else does); commits and returns (records, committed {partition: offset})."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    })
    try:
        c.subscribe([topic])
        msgs = drain(c, expected, timeout)
        c.commit(asynchronous=False)
        parts = [TopicPartition(topic, p) for p in sorted({m.partition() for m in msgs})]
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=10)}
        return msgs, committed
    finally:
        c.close()


def consume_assigned(bootstrap, topic, partitions, expected, timeout=60):
    """Reads the partitions from their beginning (no group) until `expected` records came, then
    one more second."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "tern-e2e-cluster-assign",
        "enable.auto.commit": False,
    })
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        msgs = drain(c, expected, timeout)
        return msgs
    finally:
        c.close()


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


# -- the tests ----------------------------------------------------------------------------------------


@pytest.mark.timeout(170)
def test_three_combined_nodes_form_one_cluster(make_cluster, quorum):
    """Every node names the same 22-character cluster id and the three brokers at their
    endpoints; a 6-partition topic created through node 1 has leaders on all three brokers;
    3000 keyed records produced (idempotent, acks=all) through node 2 only are each
    acknowledged, and a consumer group bootstrapped with node 0 only reads every one exactly
    once at its acknowledged offset (offsets increasing per partition, equal keys in one
    partition) and commits offsets that read back. kafka-metadata-quorum.sh names the same
    cluster, the three voters and a leader among them, with one Leader and two Follower rows."""
    cluster = three_combined(make_cluster)

    mds = wait_brokers_everywhere(cluster)
    ids = {md.cluster_id for md in mds.values()}
    assert len(ids) == 1, f"cluster ids differ between nodes: { {n: md.cluster_id for n, md in mds.items()} }"
    cluster_id = ids.pop()
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id or ""), cluster_id
    for md in mds.values():
        assert md.controller_id in cluster.broker_ids, md

    admin_md = AdminClient({"bootstrap.servers": cluster.bootstrap(0)}).list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in admin_md.brokers.values()} == expected_brokers(cluster)
    assert admin_md.cluster_id == cluster_id

    create_topic(cluster.bootstrap(1), "spread", 6)
    mds = wait_topics_everywhere(cluster, {"spread": 6})
    leaders = {n: md.topics["spread"].partitions for n, md in mds.items()}
    assert len({tuple(sorted(p.items())) for p in leaders.values()}) == 1, f"nodes disagree: {leaders}"
    assert set(leaders[0].values()) == {0, 1, 2}, f"leaders not spread over the brokers: {leaders[0]}"

    n = 3000
    key_of = lambda i: b"key-%d" % (i % 300)  # noqa: E731
    acked = produce(cluster.bootstrap(2), "spread", range(n), key_of=key_of)
    assert {p for p, _ in acked.values()} == set(range(6)), "the keys should hit every partition"
    by_key = {}
    for i, (p, _) in acked.items():
        by_key.setdefault(key_of(i), set()).add(p)
    assert all(len(ps) == 1 for ps in by_key.values()), "one key went to several partitions"

    msgs, committed = consume_group(cluster.bootstrap(0), "spread", "cluster-readers", n)
    check_exactly_once(msgs, acked, key_of=key_of)
    ends = {}
    for p, o in acked.values():
        ends[p] = max(ends.get(p, -1), o + 1)
    assert committed == ends, f"committed {committed}, log ends {ends}"

    check_quorum_describe(quorum, cluster.nodes[0].address, cluster_id, voters={0, 1, 2})


class TopicChurn(threading.Thread):
    """Creates topics churn-<n> (1 partition) one after another, about ten a second, through an
    AdminClient bootstrapped with every node, and remembers which were acknowledged. Errors and
    timeouts (during elections) are expected and only recorded."""

    MAX_TOPICS = 400

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.acked = []
        self.failed = []

    def acked_count(self):
        with self.lock:
            return len(self.acked)

    def run(self):
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log.connection.close": False})
        for n in range(self.MAX_TOPICS):
            if self.stop_flag.is_set():
                break
            name = f"churn-{n}"
            try:
                fs = admin.create_topics([NewTopic(name, 1, 1)], request_timeout=10, operation_timeout=10)
                fs[name].result(timeout=20)
                with self.lock:
                    self.acked.append(name)
            except Exception as e:  # noqa: BLE001 - any failure is allowed, and recorded
                with self.lock:
                    self.failed.append((name, repr(e)))
            self.stop_flag.wait(0.1)

    def finish(self):
        self.stop_flag.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the topic-creating thread did not finish"


@pytest.mark.timeout(170)
def test_active_controller_killed_repeatedly_while_topics_are_created(make_cluster, quorum):
    """Five rounds of: find the active controller with kafka-metadata-quorum.sh, kill -9 it, see
    another voter become leader with a higher epoch (asked of the survivors), restart the killed
    node, and see a topic create acknowledged after the failover — while a thread keeps creating
    topics. Afterwards every acknowledged topic is listed, with a leader, by every node, and a
    new topic can still be created and is listed everywhere."""
    cluster = three_combined(make_cluster)
    wait_brokers_everywhere(cluster)
    churn = TopicChurn(cluster.bootstrap())
    churn.start()
    failovers = []
    try:
        wait_for("a first acknowledged topic create", lambda: churn.acked_count() > 0, 30)
        for rnd in range(5):
            via = cluster.nodes[rnd % 3].address
            found = wait_for("the active controller", lambda: quorum.leader(via), 30, interval=0)
            leader, epoch, voters = found
            assert voters == {0, 1, 2} and leader in voters, found
            victim = cluster.nodes[leader]
            victim.kill9()
            killed_at = time.time()
            survivors = [n for n in cluster.nodes if n != leader]
            asks = itertools.count()

            def new_leader():
                ask = survivors[next(asks) % 2]
                got = quorum.leader(cluster.nodes[ask].address)
                return got if got and got[0] != leader else None

            new, new_epoch, _ = wait_for(
                f"round {rnd}: a new leader after killing node {leader} (epoch {epoch})",
                new_leader, 30, interval=0,
                diag=lambda: "\n".join(f"node {n}:\n{cluster.nodes[n].tail(15)}" for n in survivors),
            )
            elected_after = time.time() - killed_at
            failovers.append((leader, epoch, new, new_epoch, round(elected_after, 1)))
            assert new in survivors, failovers
            assert new_epoch > epoch, failovers
            acked_then = churn.acked_count()
            try:
                victim.start()
            except RuntimeError as e:
                pytest.fail(f"round {rnd}: node {leader} did not come back after kill -9: {e}")
            wait_for(
                f"round {rnd}: a topic create acknowledged after the failover to node {new}",
                lambda: churn.acked_count() > acked_then, 30,
                diag=lambda: f"failures so far: {churn.failed[-5:]}",
            )
    finally:
        churn.finish()
    print(f"failovers (killed, epoch, new leader, new epoch, seconds): {failovers}")
    print(f"{len(churn.acked)} creates acknowledged, {len(churn.failed)} failed; "
          f"last failures: {churn.failed[-5:]}")

    wait_brokers_everywhere(cluster)
    wait_topics_everywhere(cluster, {name: 1 for name in churn.acked}, timeout=60)

    create_topic(cluster.bootstrap(), "after-failovers", 3)
    wait_topics_everywhere(cluster, {"after-failovers": 3})


@pytest.mark.timeout(170)
def test_node_killed_and_restarted_at_once_rejoins(make_cluster, quorum):
    """A node that is not the active controller is killed with SIGKILL and started again right
    away, as a service manager would. As with an Apache Kafka broker, which retries its
    registration until the killed process's session has expired (broker.session.timeout.ms), it
    serves again within a minute: every node lists it at its endpoint, the records acknowledged
    before the kill are all still there, and it takes produce for the partitions it leads."""
    cluster = three_combined(make_cluster)
    wait_brokers_everywhere(cluster)
    create_topic(cluster.bootstrap(0), "restarted", 6)
    wait_topics_everywhere(cluster, {"restarted": 6})
    old = produce(cluster.bootstrap(0), "restarted", range(600), partition_of=lambda i: i % 6)

    leader = wait_for("the active controller", lambda: quorum.leader(cluster.nodes[0].address), 30)[0]
    victim = min(n for n in cluster.nodes if n != leader)
    node = cluster.nodes[victim]
    node.kill9()
    try:
        node.start()
    except RuntimeError as e:
        pytest.fail(f"node {victim}, killed with SIGKILL and started again at once, did not rejoin: {e}")

    wait_brokers_everywhere(cluster)
    mds = wait_topics_everywhere(cluster, {"restarted": 6})
    led = sorted(p for p, leader in mds[victim].topics["restarted"].partitions.items() if leader == victim)
    assert led, f"node {victim} leads no partition: {mds[victim].topics['restarted']}"
    new = produce(node.address, "restarted", range(1000, 1000 + 60 * len(led)),
                  partition_of=lambda i: led[i % len(led)])
    expected = {**old, **new}
    msgs = consume_assigned(node.address, "restarted", range(6), len(expected))
    check_exactly_once(msgs, expected)


@pytest.mark.timeout(170)
def test_node_with_wiped_data_dir_rejoins(make_cluster, quorum):
    """A follower voter is stopped, its data dir deleted, and started again with the same config:
    it takes the cluster's id (meta.properties written again), catches up from the leader's
    metadata snapshot (the voters snapshot every 2000 bytes of records here, so the leader's log
    no longer starts at 1), lists every topic created before, and serves produce for the
    partitions it leads (records read back through it at their acknowledged offsets), while
    records on the other brokers' partitions are still all there."""
    cluster = three_combined(
        make_cluster, {"metadata.log.max.record.bytes.between.snapshots": "2000"})
    mds = wait_brokers_everywhere(cluster)
    cluster_id = mds[0].cluster_id

    before = {"before-a": 6, "before-b": 3, "before-c": 1}
    for name, count in before.items():
        create_topic(cluster.bootstrap(0), name, count)
    mds = wait_topics_everywhere(cluster, before)
    old = produce(cluster.bootstrap(0), "before-a", range(600), partition_of=lambda i: i % 6)

    found = wait_for("the active controller", lambda: quorum.leader(cluster.nodes[0].address), 30)
    victim = min(n for n in cluster.nodes if n != found[0])
    node = cluster.nodes[victim]
    assert node.stop(), f"node {victim} did not exit on SIGTERM"
    shutil.rmtree(node.data_dir)
    try:
        node.start()
    except RuntimeError as e:
        pytest.fail(f"node {victim} with a wiped data dir did not start: {e}")

    restarted = node.tail(400).split(f"node.id={victim} ")[-1]
    assert "installing a metadata snapshot from the leader" in restarted, node.tail()
    meta = dict(re.findall(r"^([\w.]+)=(.*)$", (node.data_dir / "meta.properties").read_text(), re.M))
    assert meta.get("cluster.id") == cluster_id, meta
    assert meta.get("node.id") == str(victim), meta

    wait_brokers_everywhere(cluster)
    mds = wait_topics_everywhere(cluster, before, timeout=60)
    led = sorted(p for p, leader in mds[victim].topics["before-a"].partitions.items() if leader == victim)
    assert led, f"node {victim} leads no partition of before-a: {mds[victim].topics['before-a']}"

    new = produce(node.address, "before-a", range(1000, 1000 + 60 * len(led)),
                  partition_of=lambda i: led[i % len(led)])
    assert {p for p, _ in new.values()} == set(led)
    kept = {i: po for i, po in old.items() if po[0] not in led}
    expected = {**kept, **new}
    msgs = consume_assigned(node.address, "before-a", range(6), len(expected))
    check_exactly_once(msgs, expected)


@pytest.mark.timeout(170)
def test_controller_only_and_broker_only_nodes(make_cluster, quorum):
    """Nodes 0-2 are controllers only (a CONTROLLER listener, nothing for clients), nodes 3-4
    brokers only (a PLAINTEXT listener): Metadata from either broker lists exactly brokers 3 and
    4; a topic created through broker 3 is led by both; 2000 records produced through broker 4
    are read back exactly once through broker 3; kafka-metadata-quorum.sh shows voters 0-2 and
    the brokers 3 and 4 as observers."""
    cluster = make_cluster({0: "controller", 1: "controller", 2: "controller",
                            3: "broker", 4: "broker"})
    for n in (0, 1, 2):
        assert cluster.nodes[n].port is None
    mds = wait_brokers_everywhere(cluster)
    assert set(mds) == {3, 4}
    assert all(set(md.brokers) == {3, 4} for md in mds.values())
    cluster_id = mds[3].cluster_id
    assert mds[4].cluster_id == cluster_id and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id or "")

    create_topic(cluster.bootstrap(3), "split-roles", 4)
    mds = wait_topics_everywhere(cluster, {"split-roles": 4})
    assert set(mds[3].topics["split-roles"].partitions.values()) == {3, 4}, mds[3].topics["split-roles"]

    acked = produce(cluster.bootstrap(4), "split-roles", range(2000), key_of=lambda i: b"k%d" % i)
    msgs, committed = consume_group(cluster.bootstrap(3), "split-roles", "split-readers", 2000)
    check_exactly_once(msgs, acked)
    ends = {}
    for p, o in acked.values():
        ends[p] = max(ends.get(p, -1), o + 1)
    assert committed == ends

    check_quorum_describe(quorum, cluster.nodes[3].address, cluster_id, voters={0, 1, 2},
                          observers={3, 4})


@pytest.mark.timeout(170)
def test_second_broker_with_a_running_brokers_node_id_is_refused(make_cluster):
    """Three combined nodes and a broker-only node 3; a second broker-only node started with
    node.id 3 while node 3 runs exits nonzero, saying the node id is registered already, and never
    listens; node 3 keeps its registration (endpoint) and still leads partitions of a topic the
    cluster creates afterwards, which every node lists."""
    cluster = make_cluster({0: COMBINED, 1: COMBINED, 2: COMBINED, 3: "broker"})
    wait_brokers_everywhere(cluster)
    imposter = cluster.add_node(3, "broker", name="node-3-duplicate")
    imposter.spawn()
    code = imposter.wait_exit(START_TIMEOUT)
    log = imposter.log_text()
    assert code is not None, f"the duplicate node 3 still runs after {START_TIMEOUT}s:\n{imposter.tail()}"
    assert code != 0, log
    assert re.search(r"DuplicateBrokerRegistration|DUPLICATE_BROKER_REGISTRATION|node id", log, re.I), log
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", imposter.port)) != 0, "the refused node listens"

    wait_brokers_everywhere(cluster)
    create_topic(cluster.bootstrap(1), "after-duplicate", 8)
    mds = wait_topics_everywhere(cluster, {"after-duplicate": 8})
    assert 3 in mds[3].topics["after-duplicate"].partitions.values(), mds[3].topics["after-duplicate"]


def test_broker_only_node_with_a_voters_node_id_is_refused(tmp_path):
    """process.roles=broker with a node.id that controller.quorum.voters names is a startup
    error naming both settings (as in Apache Kafka), before anything is written or listened on."""
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.run(
        [TERN_BIN, "server",
         "--override", "node.id=1",
         "--override", "process.roles=broker",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"controller.quorum.voters=0@127.0.0.1:{free_port()},1@127.0.0.1:{free_port()}",
         "--override", f"log.dirs={data}"],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode != 0
    err = plain(proc.stderr)
    assert "node.id" in err and "controller.quorum.voters" in err, err
    assert not data.exists() or not any(data.iterdir())


@pytest.mark.timeout(170)
def test_node_formatted_for_another_cluster_is_refused(make_cluster):
    """A broker-only node 3 formatted with `tern format --cluster-id OTHER` exits nonzero when
    started against the running cluster, naming both cluster ids; its meta.properties keeps
    OTHER and the cluster's Metadata never lists broker 3."""
    cluster = three_combined(make_cluster)
    mds = wait_brokers_everywhere(cluster)
    cluster_id = mds[0].cluster_id
    other = new_cluster_id()
    assert other != cluster_id

    stranger = cluster.add_node(3, "broker", name="node-3-foreign")
    stranger.dir.mkdir(parents=True)
    fmt = subprocess.run([TERN_BIN, "format", *stranger.overrides(), "--cluster-id", other],
                         capture_output=True, text=True, timeout=60)
    assert fmt.returncode == 0, f"tern format exited {fmt.returncode}:\n{fmt.stdout}{fmt.stderr}"
    assert other in fmt.stdout, fmt.stdout

    stranger.spawn()
    code = stranger.wait_exit(START_TIMEOUT)
    log = stranger.log_text()
    assert code is not None, f"the foreign node still runs after {START_TIMEOUT}s:\n{stranger.tail()}"
    assert code != 0, log
    assert other in log and cluster_id in log, log
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", stranger.port)) != 0, "the refused node listens"
    meta = (stranger.data_dir / "meta.properties").read_text()
    assert f"cluster.id={other}" in meta, meta

    mds = wait_brokers_everywhere(cluster)
    assert all(3 not in md.brokers for md in mds.values())
