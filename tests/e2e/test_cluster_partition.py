"""A network partition of a three-node tern cluster: the side with a majority of the metadata
quorum's voters elects a new active controller and goes on creating topics and taking records,
the cut-off node never becomes the active controller, and after the partition heals it rejoins as
a follower with everything the majority did meanwhile.

Each node runs in its own network namespace (tern-p<N>-<run>), reached through a veth pair whose
host side is a port of a bridge in the root namespace; the bridge has 10.231.0.254/24 and node N
has 10.231.0.<N+1>, so the test process talks to every node directly. Taking the host side of a
node's veth down cuts that node off in both directions (from the other nodes and from the test),
taking it up again heals the partition. Needs root (CAP_NET_ADMIN): skipped otherwise.

What is checked, in order (the one test below):

  1. a topic created through node 0 (AdminClient), records produced to every partition, the
     active controller and its epoch from kafka-metadata-quorum.sh describe --status;
  2. the active controller is cut off;
  3. within 20 s a majority node reports another leader with a higher epoch, both majority nodes
     agree on it, CreateTopics sent to each majority node are acknowledged, records produced
     (acks=all) to the partitions led by majority brokers are read back at their acknowledged
     offsets; once broker.session.timeout.ms (9 s) has passed, the majority's Metadata lists
     the two majority brokers and not the cut-off one, a topic created then has every partition
     led by a majority broker, and more records produced to the majority's partitions are read
     back too;
  4. for the whole partition (at least 12 s, many election timeouts) the majority never reports
     the cut-off node as the active controller (raw Metadata every 0.2 s, describe --status),
     keeps listing both majority brokers, and the cut-off node's log gains no "this node is now
     the active controller" line;
  5. after healing, within 30 s every node (the formerly cut-off one included) lists the three
     brokers and every acknowledged topic with a live leader, all three report one and the same
     leader and epoch, and a CreateTopics sent to the formerly cut-off node is acknowledged;
  6. every record acknowledged (before and during the partition) is read back exactly once, in
     order, through the formerly cut-off node.

Node logs: tmp_path/node-<id>/tern.log, the last lines printed at teardown (shown on failure)."""

import itertools
import os
import re
import socket
import struct
import subprocess
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from kafka_wire import Reader, kafka_request
from tern_process import TERN_BIN
from test_cluster import (
    COMBINED,
    START_TIMEOUT,
    Cluster,
    Node,
    QuorumTool,
    check_exactly_once,
    consume_assigned,
    create_topic,
    index_of,
    kafka_jars,  # noqa: F401 - the session fixture QuorumTool needs
    plain,
    produce,
    try_metadata,
    wait_for,
    wait_topics_everywhere,
)

SUBNET = "10.231.0"
BRIDGE_ADDR = f"{SUBNET}.254"
CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
CUT_AT_LEAST = 12  # seconds the partition lasts: many election timeouts (1-2 s each)
ACTIVE = re.compile(r"this node is now the active controller.*?term=(\d+)")


def sh(*args, check=True):
    """Runs an `ip` command; its CompletedProcess (raises on failure when check)."""
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p


# -- namespaces, bridge and nodes ---------------------------------------------------------------------


class Network:
    """One bridge in the root namespace and a namespace per node, named for this run."""

    def __init__(self, ids):
        self.run = uuid.uuid4().hex[:4]
        self.bridge = f"ternbr{self.run}"
        self.ids = list(ids)
        self.created_ns, self.created_links = [], []

    def ns(self, n):
        return f"tern-p{n}-{self.run}"

    def host_veth(self, n):
        return f"tpv{self.run}h{n}"

    def ip(self, n):
        return f"{SUBNET}.{n + 1}"

    def setup(self):
        taken = sh("ip", "-o", "addr", "show", "to", f"{SUBNET}.0/24", check=False).stdout.strip()
        if taken:
            pytest.fail(f"{SUBNET}.0/24 is in use already (a leftover run?):\n{taken}")
        first = sh("ip", "netns", "add", self.ns(self.ids[0]), check=False)
        if first.returncode != 0:
            pytest.skip(f"cannot create network namespaces: {first.stderr.strip()}")
        self.created_ns.append(self.ns(self.ids[0]))
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.created_links.append(self.bridge)
        sh("ip", "addr", "add", f"{BRIDGE_ADDR}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for n in self.ids:
            ns, host, inner = self.ns(n), self.host_veth(n), f"tpv{self.run}n{n}"
            if ns not in self.created_ns:
                sh("ip", "netns", "add", ns)
                self.created_ns.append(ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
            self.created_links.append(host)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{self.ip(n)}/24", "dev", inner)
            sh("ip", "-n", ns, "link", "set", inner, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "set", host, "master", self.bridge)
            sh("ip", "link", "set", host, "up")
        return self

    def cut(self, n):
        sh("ip", "link", "set", self.host_veth(n), "down")

    def heal(self, n):
        sh("ip", "link", "set", self.host_veth(n), "up")

    def teardown(self):
        for ns in self.created_ns:
            sh("ip", "netns", "del", ns, check=False)
        for link in reversed(self.created_links):
            if sh("ip", "link", "show", link, check=False).returncode == 0:
                sh("ip", "link", "del", link, check=False)


class NetnsNode(Node):
    """A combined node listening on its namespace's address, started with `ip netns exec`."""

    def __init__(self, root, node_id, ns, ip):
        super().__init__(root, node_id, COMBINED, lambda: None)
        self.ns, self.ip = ns, ip
        self.port, self.controller_port = CLIENT_PORT, CONTROLLER_PORT

    @property
    def address(self):
        return f"{self.ip}:{self.port}"

    def properties(self):
        props = super().properties()
        props["listeners"] = f"PLAINTEXT://{self.ip}:{self.port},CONTROLLER://{self.ip}:{self.controller_port}"
        return props

    def spawn(self):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.dir.mkdir(parents=True, exist_ok=True)
        args = ["ip", "netns", "exec", self.ns, os.path.abspath(TERN_BIN), "server", *self.overrides()]
        with open(self.log_path, "ab") as log:
            log.write(f"===== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection((self.ip, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"node {self.node_id} did not listen on {self.address} in {timeout}s:\n{self.tail()}")

    def log_size(self):
        return self.log_path.stat().st_size

    def log_since(self, offset):
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return plain(f.read().decode(errors="replace"))


class NetnsCluster(Cluster):
    def __init__(self, root, net):
        self.root = Path(root)
        self.net = net
        self.nodes = {n: NetnsNode(root, n, net.ns(n), net.ip(n)) for n in net.ids}
        self.voters = ",".join(f"{n}@{node.ip}:{node.controller_port}" for n, node in self.nodes.items())
        for node in self.nodes.values():
            node.voters = self.voters
        self.extra_nodes = []


@pytest.fixture
def partitioned_cluster(tmp_path):
    """Three combined nodes, each in its own network namespace; processes killed and namespaces,
    veths and bridge deleted at teardown, whatever happened."""
    net = Network([0, 1, 2])
    cluster = None
    try:
        net.setup()
        cluster = NetnsCluster(tmp_path, net)
        try:
            cluster.start()
        except RuntimeError as e:
            pytest.fail(f"the cluster did not start: {e}")
        yield cluster
    finally:
        if cluster is not None:
            for n in net.ids:
                sh("ip", "link", "set", net.host_veth(n), "up", check=False)
            for node in cluster.nodes.values():
                node.terminate()
            unclean = [n for n, node in cluster.nodes.items() if not node.stop(timeout=10)]
            if unclean:
                print(f"nodes {unclean} did not exit within 10 s of SIGTERM")
            cluster.report()
        net.teardown()


@pytest.fixture
def quorum(kafka_jars, tmp_path):  # noqa: F811
    """kafka-metadata-quorum.sh with timeouts short enough for a cluster with an unreachable node."""
    tool = QuorumTool(kafka_jars, tmp_path)
    tool.config.write_text(
        "request.timeout.ms=3000\ndefault.api.timeout.ms=6000\n"
        "socket.connection.setup.timeout.ms=1000\nsocket.connection.setup.timeout.max.ms=2000\n")
    return tool


# -- requests to one node -------------------------------------------------------------------------------


def create_topic_at(address, name, partitions, timeout_ms=8000):
    """CreateTopics v2 sent to exactly this node (which forwards it to the active controller):
    (error code, message)."""
    n = name.encode()
    body = (struct.pack(">i", 1) + struct.pack(">h", len(n)) + n
            + struct.pack(">ihii", partitions, 1, 0, 0) + struct.pack(">ib", timeout_ms, 0))
    try:
        r = Reader(kafka_request(address, 19, 2, body, timeout=timeout_ms / 1000 + 5))
    except OSError as e:
        return None, repr(e)
    r.int32()  # throttle_time_ms
    assert r.int32() == 1
    got, code, message = r.string(), r.int16(), r.string()
    assert got == name, got
    return code, message


def create_acked(address, base, partitions, timeout, failures):
    """Sends CreateTopics to this node until one is acknowledged (error 0), each attempt with a
    new name (a timed-out attempt may still have created its topic); the acknowledged name.
    Failed attempts are appended to `failures`."""
    attempt = itertools.count()

    def create():
        k = next(attempt)
        name = base if k == 0 else f"{base}-retry{k}"
        code, message = create_topic_at(address, name, partitions)
        if code != 0:
            failures.append((name, address, code, message))
            return None
        return name

    return wait_for(f"CreateTopics {base} sent to {address} to be acknowledged", create, timeout,
                    interval=0.5, diag=lambda: failures[-3:])


def wait_listed(nodes, topics, timeout=30):
    """Until each node's Metadata lists each of `topics` ({name: partition count}) without
    error, leaders or not."""
    def listed(md):
        return md is not None and all(
            name in md.topics and md.topics[name].error == 0
            and sorted(md.topics[name].partitions) == list(range(count))
            for name, count in topics.items())

    wait_for(f"{sorted(topics)} listed by nodes {[n.node_id for n in nodes]}",
             lambda: all(listed(try_metadata(n.address)) for n in nodes), timeout, interval=0.5,
             diag=lambda: {n.node_id: getattr(try_metadata(n.address), "topics", None) for n in nodes})


def fencing_diag(nodes, marks):
    """Each node's Metadata brokers and its log lines about heartbeats and fencing since `marks`."""
    out = []
    for node in nodes:
        lines = [l for l in node.log_since(marks[node.node_id]).splitlines()
                 if re.search(r"heartbeat|fenc|regist|active controller", l)]
        out.append(f"node {node.node_id} lists brokers {brokers_of(try_metadata(node.address))}; "
                   f"its log since the cut:\n" + "\n".join(lines[-15:]))
    return "\n".join(out)


def brokers_of(md):
    return None if md is None else set(md.brokers)


def log_time(line):
    """The UTC time (epoch seconds) at the start of a tern log line, or None."""
    m = re.match(r"\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z", line)
    if not m:
        return None
    stamp = m.group(1)
    if "." in stamp:
        head, frac = stamp.split(".")
        stamp = f"{head}.{frac[:6]}"
    return datetime.fromisoformat(stamp + "+00:00").timestamp()


class ControllerWatch(threading.Thread):
    """Asks each majority node for the quorum's leader (DescribeQuorum through
    kafka-metadata-quorum.sh, a JVM per call) over and over and remembers every leader reported.
    Metadata's controller id is no witness: like KRaft brokers, a Tern broker names itself."""

    def __init__(self, nodes, quorum):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.quorum = quorum
        self.stop_flag = threading.Event()
        self.samples = []  # (node, leader id)
        self.unanswered = 0

    def run(self):
        while not self.stop_flag.is_set():
            for node in self.nodes:
                got = self.quorum.leader(node.address)
                if got is None:
                    self.unanswered += 1
                else:
                    self.samples.append((node.node_id, got[0]))
            self.stop_flag.wait(0.2)

    def finish(self):
        self.stop_flag.set()
        self.join(timeout=30)
        assert not self.is_alive()


# -- the test ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(150)
def test_partitioned_active_controller_cannot_lead_and_majority_goes_on(partitioned_cluster, quorum):
    """The active controller of three combined nodes is cut off the network for at least 12 s
    (see the module docstring for the whole sequence): the two others elect a new leader of a
    higher epoch within 20 s and keep acknowledging CreateTopics and acks=all records, they never
    report the cut-off node as leader again during the partition, and the cut-off node never
    logs that it became the active controller; healed, it rejoins as a follower within 30 s (all
    topics, one leader everywhere), takes a CreateTopics itself, and every acknowledged record is
    read back exactly once, in order."""
    cluster = partitioned_cluster
    net = cluster.net
    ids = sorted(cluster.nodes)
    every_broker = set(ids)

    # 1. a topic, records in every partition, the active controller
    wait_for("every node to list the three brokers",
             lambda: all(brokers_of(try_metadata(cluster.nodes[n].address)) == every_broker for n in ids),
             30, diag=lambda: {n: brokers_of(try_metadata(cluster.nodes[n].address)) for n in ids})
    create_topic(cluster.nodes[0].address, "before-cut", 6)
    mds = wait_topics_everywhere(cluster, {"before-cut": 6})
    leaders_before = mds[0].topics["before-cut"].partitions
    assert set(leaders_before.values()) == every_broker, f"not spread over the brokers: {leaders_before}"
    before = produce(cluster.bootstrap(), "before-cut", range(600), partition_of=lambda i: i % 6)

    old, old_epoch, voters = wait_for("the active controller",
                                      lambda: quorum.leader(cluster.nodes[0].address), 30)
    assert voters == every_broker and old in voters, (old, old_epoch, voters)
    isolated = cluster.nodes[old]
    majority = [cluster.nodes[n] for n in ids if n != old]
    majority_ids = {m.node_id for m in majority}
    majority_bootstrap = ",".join(m.address for m in majority)

    # 2. cut it off
    log_mark = isolated.log_size()
    majority_marks = {m.node_id: m.log_size() for m in majority}
    cut_at = time.time()
    net.cut(old)

    # 3. the majority elects a new leader and goes on
    asks = itertools.count()

    def new_leader():
        via = majority[next(asks) % 2]
        got = quorum.leader(via.address)
        return got if got and got[0] != old else None

    new, new_epoch, _ = wait_for(
        f"a new leader among {sorted(majority_ids)} after cutting off node {old} (epoch {old_epoch})",
        new_leader, 20, interval=0,
        diag=lambda: "\n".join(f"node {m.node_id}:\n{m.tail(15)}" for m in majority))
    seen_new_after = time.time() - cut_at
    assert new in majority_ids, (new, new_epoch)
    assert new_epoch > old_epoch, (old_epoch, new_epoch)
    elected = [(log_time(l), int(ACTIVE.search(l).group(1)))
               for l in cluster.nodes[new].log_since(majority_marks[new]).splitlines() if ACTIVE.search(l)]
    assert elected and elected[-1][1] == new_epoch, \
        f"node {new} did not log becoming the active controller for term {new_epoch}: {elected}"
    elected_after = elected[-1][0] - cut_at if elected[-1][0] else None
    print(f"cut off node {old} (epoch {old_epoch}) at {time.strftime('%H:%M:%S', time.gmtime(cut_at))} UTC; "
          f"node {new} elected for epoch {new_epoch} {elected_after and round(elected_after, 1)} s later "
          f"(seen by describe --status after {seen_new_after:.1f} s)")

    wait_for(f"both majority nodes to name node {new} as the quorum's leader",
             lambda: all((quorum.leader(m.address) or (None,))[0] == new for m in majority), 20)
    watch = ControllerWatch(majority, quorum)
    watch.start()
    acked_topics = {"before-cut": 6}
    failed_creates = []
    try:
        for k, m in enumerate(majority):
            name = create_acked(m.address, f"during-cut-{k}", 3, 20, failed_creates)
            acked_topics[name] = 3
        # listed by the majority; partitions placed on broker {old} before it was fenced may
        # have no leader until it heals
        wait_listed(majority, {n: c for n, c in acked_topics.items() if n.startswith("during")})

        led_by_majority = sorted(p for p, l in leaders_before.items() if l in majority_ids)
        expected_majority = {i: po for i, po in before.items() if po[0] in led_by_majority}

        def produce_on_majority(indexes):
            acked = produce(majority_bootstrap, "before-cut", indexes, timeout=20,
                            partition_of=lambda i: led_by_majority[i % len(led_by_majority)])
            assert {p for p, _ in acked.values()} == set(led_by_majority)
            expected_majority.update(acked)
            msgs = consume_assigned(majority_bootstrap, "before-cut", led_by_majority,
                                    len(expected_majority), timeout=20)
            check_exactly_once(msgs, expected_majority)
            return acked

        during = produce_on_majority(range(1000, 1300))

        # broker.session.timeout.ms (9 s) after the cut: the cut-off broker is fenced, the
        # majority's brokers are not
        wait_for(f"the majority's Metadata to list brokers {sorted(majority_ids)}: broker {old} fenced, "
                 f"the majority's own brokers not",
                 lambda: all(brokers_of(try_metadata(m.address)) == majority_ids for m in majority),
                 20, interval=0.5, diag=lambda: fencing_diag(majority, majority_marks))
        fenced_after = time.time() - cut_at
        other = next(m for m in majority if m.node_id != new)
        name = create_acked(other.address, "after-fence", 4, 20, failed_creates)
        acked_topics[name] = 4
        mds = wait_topics_everywhere(cluster, {name: 4}, ids=sorted(majority_ids))
        for n, md in mds.items():
            assert set(md.topics[name].partitions.values()) <= majority_ids, \
                f"node {n}: {name} created while broker {old} was fenced has partitions on it: {md.topics[name]}"
        during.update(produce_on_majority(range(2000, 2300)))

        # 4. the partition lasts; the majority keeps its leader, the cut-off node does not lead
        while time.time() - cut_at < CUT_AT_LEAST:
            got = quorum.leader(majority[0].address)
            assert got is None or got[0] != old, f"the majority reports node {old} as leader: {got}"
            listed = {m.node_id: brokers_of(try_metadata(m.address)) for m in majority}
            assert all(b == majority_ids for b in listed.values()), \
                f"{time.time() - cut_at:.1f} s after the cut: {fencing_diag(majority, majority_marks)}"
            time.sleep(0.5)
        got = quorum.leader(majority[1].address)
        assert got and got[:2] == (new, new_epoch), f"the leader changed during the partition: {got}"
    finally:
        watch.finish()
    partition_lasted = time.time() - cut_at
    reported = sorted({c for _, c in watch.samples})
    assert watch.samples, "no DescribeQuorum answered by the majority during the partition"
    assert old not in reported, \
        f"the majority reported node {old} as controller during the partition: " \
        f"{[s for s in watch.samples if s[1] == old][:5]} of {len(watch.samples)} samples"
    assert set(reported) <= majority_ids, reported
    minority_log = isolated.log_since(log_mark)
    became = [l for l in minority_log.splitlines() if ACTIVE.search(l)]
    assert not became, f"node {old}, cut off, became the active controller:\n" + "\n".join(became)

    # 5. heal: the cut-off node rejoins as a follower
    net.heal(old)
    healed_at = time.time()
    mds = wait_topics_everywhere(cluster, acked_topics, timeout=30, ids=[old])
    wait_for("every node to list the three brokers again",
             lambda: all(brokers_of(try_metadata(cluster.nodes[n].address)) == every_broker for n in ids),
             30, diag=lambda: {n: brokers_of(try_metadata(cluster.nodes[n].address)) for n in ids})
    rejoined_after = time.time() - healed_at
    print(f"healed after {partition_lasted:.1f} s; node {old} rejoined {rejoined_after:.1f} s later")

    views = {n: quorum.leader(cluster.nodes[n].address) for n in ids}
    assert all(v is not None for v in views.values()), views
    assert len({v[:2] for v in views.values()}) == 1, f"the nodes report different leaders: {views}"
    final_leader, final_epoch, _ = views[old]
    # Metadata names a live broker as controller (the one asked, as KRaft brokers do).
    controller_ids = {n: try_metadata(cluster.nodes[n].address).controller_id for n in ids}
    assert controller_ids == {n: n for n in ids}, controller_ids

    name = create_acked(isolated.address, "after-heal", 3, 15, failed_creates)
    acked_topics[name] = 3

    # 6. everything acknowledged is everywhere
    wait_topics_everywhere(cluster, acked_topics, timeout=30)
    expected = {**before, **during}
    msgs = consume_assigned(isolated.address, "before-cut", range(6), len(expected))
    check_exactly_once(msgs, expected)
    order = {}
    for m in msgs:
        order.setdefault(m.partition(), []).append(index_of(m))
    assert all(v == sorted(v) for v in order.values()), "records read out of their produce order"

    print(f"cut off node {old} (epoch {old_epoch}); node {new} elected for epoch {new_epoch} "
          f"{elected_after and round(elected_after, 1)} s after the cut (seen by describe --status after "
          f"{seen_new_after:.1f} s); broker {old} fenced after {fenced_after:.1f} s; partition lasted "
          f"{partition_lasted:.1f} s ({len(watch.samples)} DescribeQuorum samples, controllers {reported}); "
          f"rejoined {rejoined_after:.1f} s after healing; leader afterwards {final_leader} "
          f"(epoch {final_epoch}); failed creates during the cut: {failed_creates}")
