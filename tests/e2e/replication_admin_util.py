"""Helpers for test_replication_admin.py: Apache Kafka's admin tools (kafka-leader-election.sh,
kafka-reassign-partitions.sh, kafka-log-dirs.sh) run through kafka_peer.KafkaJars and their output
parsed; a raw ListPartitionReassignments v0 answered by one broker; kafka-python's admin client
for the requests whose error codes the Java tools would hide or refuse to send; waits on one
partition's state as every broker asked reports it; the placement of librdkafka's implicitly
acknowledged records; a cluster fixture with per-node settings; a network of namespaces on its
own subnet for the network-partition test.

Nothing here starts or stops tern nodes except the cluster fixtures (test_cluster.py's Cluster
and test_cluster_partition.py's NetnsNode do the work)."""

import json
import os
import re
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from kafka_wire import NO_TAGS, Reader, kafka_request
from replication_util import agreed_partitions, views
from test_cluster import Cluster, wait_for
from test_cluster_partition import Network, NetnsCluster, sh

LEADER_ELECTION = "kafka-leader-election"  # org.apache.kafka.tools.LeaderElectionCommand
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # bin/kafka-reassign-partitions.sh
LOG_DIRS = "kafka-log-dirs"  # org.apache.kafka.tools.LogDirsCommand

# Admin client settings for every tool: a request to a broker that does not answer is retried
# elsewhere after 6 s (a frozen broker), a whole call gives up after 40 s.
TOOL_CONFIG = """\
request.timeout.ms=6000
default.api.timeout.ms=40000
socket.connection.setup.timeout.ms=2000
socket.connection.setup.timeout.max.ms=5000
reconnect.backoff.max.ms=1000
"""


class AdminTools:
    """Apache Kafka's admin tools with --command-config TOOL_CONFIG; every run is printed
    (command, exit code, output), so a failing test shows what the tools said."""

    def __init__(self, dist, tmp_path):
        self.dist = dist
        self.dir = Path(tmp_path) / "admin-tools"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "admin.properties"
        self.config.write_text(TOOL_CONFIG)
        self.runs = 0

    def run(self, tool, *args, timeout=80):
        self.runs += 1
        try:
            p = self.dist.run(tool, *args, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"{tool} {' '.join(map(str, args))} did not finish in {timeout}s "
                        f"(stdout so far: {e.stdout!r})")
        print(f"$ {tool.rsplit('.', 1)[-1]} {' '.join(map(str, args))}\n"
              f"exit {p.returncode}\n--- stdout\n{p.stdout.rstrip()}\n--- stderr\n{p.stderr.rstrip()}\n---")
        return p

    # -- kafka-leader-election.sh --------------------------------------------------------------

    def elect_preferred(self, bootstrap, topic=None, partition=None):
        """--election-type PREFERRED for one partition, or --all-topic-partitions (topic None)."""
        where = (["--topic", topic, "--partition", partition] if topic is not None
                 else ["--all-topic-partitions"])
        p = self.run(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--command-config",
                     self.config, "--election-type", "PREFERRED", *where)
        return p, election_report(p.stdout)

    # -- kafka-reassign-partitions.sh ----------------------------------------------------------

    def plan_file(self, plan):
        """Writes a reassignment JSON ({(topic, partition): [broker ids]}) and returns its path."""
        self.runs += 1
        path = self.dir / f"reassignment-{self.runs}.json"
        path.write_text(json.dumps({
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                           for (t, p), r in sorted(plan.items())],
        }))
        return path

    def reassign(self, bootstrap, action, plan):
        """--execute, --verify or --cancel with a reassignment JSON built from `plan`."""
        return self.run(REASSIGN, "--bootstrap-server", bootstrap, "--command-config", self.config,
                        f"--{action}", "--reassignment-json-file", self.plan_file(plan))

    # -- kafka-log-dirs.sh -------------------------------------------------------------------

    def describe_log_dirs(self, bootstrap, *args):
        """--describe; (CompletedProcess, the JSON document it printed or None)."""
        p = self.run(LOG_DIRS, "--bootstrap-server", bootstrap, "--command-config", self.config,
                     "--describe", *args)
        doc = None
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                doc = json.loads(line)
        return p, doc


def election_report(stdout):
    """What LeaderElectionCommand printed: {"succeeded": {tp}, "noop": {tp}, "failed": {tp:
    message}}, partitions as "topic-partition" (TopicPartition.toString)."""
    out = {"succeeded": set(), "noop": set(), "failed": {}}
    for line in stdout.splitlines():
        m = re.match(r"Successfully completed leader election \(\w+\) for partitions (.*)$", line)
        if m:
            out["succeeded"] |= {s.strip() for s in m.group(1).split(",") if s.strip()}
        m = re.match(r"Valid replica already elected for partitions (.*)$", line)
        if m:
            out["noop"] |= {s.strip() for s in m.group(1).split(",") if s.strip()}
        m = re.match(r"Error completing leader election \(\w+\) for partition: (\S+): (.*)$", line)
        if m:
            out["failed"][m.group(1)] = m.group(2)
    return out


def list_reassignments_raw(address, timeout=10):
    """ListPartitionReassignments v0 (all partitions) answered by exactly this broker:
    (error code, {(topic, partition): (replicas, adding, removing)})."""
    # Request header v2 is header v1 and its (empty) tagged fields; the body: timeout_ms, a null
    # topics array (every partition), no tagged fields.
    body = NO_TAGS + struct.pack(">i", 10000) + b"\x00" + NO_TAGS
    r = Reader(kafka_request(address, 46, 0, body, timeout=timeout))
    r.tags()  # response header v1's tagged fields
    r.int32()  # throttle_time_ms
    error = r.int16()
    r.compact_string()  # error_message
    out = {}

    def ids():
        return tuple(r.compact_array(r.int32) or ())

    def partition(topic):
        index = r.int32()
        replicas, adding, removing = ids(), ids(), ids()
        r.tags()
        out[(topic, index)] = (replicas, adding, removing)

    def topic():
        name = r.compact_string()
        r.compact_array(lambda: partition(name))
        r.tags()

    r.compact_array(topic)
    return error, out


def wait_reassignments(cluster, ids, what, predicate, timeout=30):
    """Until every broker in `ids` answers ListPartitionReassignments without error, they all
    answer the same and predicate(answer) holds; returns the answer."""
    def ask():
        got = []
        for n in ids:
            try:
                got.append(list_reassignments_raw(cluster.nodes[n].address))
            except (OSError, struct.error):
                return None
        if any(e != 0 for e, _ in got) or any(g != got[0] for g in got):
            return None
        return [got[0][1]] if predicate(got[0][1]) else None  # a list: {} is an answer too

    def diag():
        out = []
        for n in ids:
            try:
                out.append(f"node {n}: {list_reassignments_raw(cluster.nodes[n].address)}")
            except (OSError, struct.error) as e:
                out.append(f"node {n}: {e!r}")
        return "\n".join(out)

    return wait_for(f"ListPartitionReassignments: {what} (nodes {list(ids)})", ask, timeout,
                    interval=0.3, diag=diag)[0]


def with_implicit_acks_placed(read, acked):
    """librdkafka's idempotent producer reports a record delivered with no offset (None) when a
    request of it timed out (persistence unknown) and a later request of the same partition
    succeeded: the earlier records were persisted then ("implicit ack", librdkafka's
    rd_kafka_handle_idempotent_Produce_success). Such a record is acknowledged on its partition
    at an offset the client never learnt; this takes the offset where the read found it on that
    partition (check_acked then still requires it exactly once, in order) and leaves the others
    None (missing or misplaced for check_acked). Returns (acked with offsets, the implicit ones)."""
    found = {}
    for p, recs in read.items():
        for offset, value in recs:
            found.setdefault(value, (p, offset))
    implicit = {v: where for v, where in acked.items() if where[1] is None}
    placed = dict(acked)
    for v, (p, _) in implicit.items():
        if v in found and found[v][0] == p:
            placed[v] = found[v]
    return placed, implicit


def admin_client(bootstrap):
    """kafka-python's KafkaAdminClient with short timeouts."""
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                            reconnect_backoff_max_ms=1000, client_id="tern-e2e-replication-admin")


# -- one partition's state, agreed by the brokers asked ------------------------------------------------


def wait_partition(cluster, topic, partition, ids, what, predicate, timeout=45):
    """Until the brokers `ids` agree on topic/partition's state (Metadata v7) and
    predicate(state) holds; returns the state."""
    def check():
        parts = agreed_partitions(cluster, topic, ids)
        p = parts and parts.get(partition)
        return p if p and predicate(p) else None

    return wait_for(f"{topic}/{partition}: {what} (as nodes {list(ids)} agree)", check, timeout,
                    interval=0.3, diag=lambda: views(cluster, topic, ids))


# -- clusters with per-node settings ---------------------------------------------------------------------


@pytest.fixture
def make_custom_cluster(tmp_path):
    """Like test_cluster.py's make_cluster, with per-node overrides: make(roles, extra,
    per_node={node id: {property: value}}) -> a started Cluster, stopped at teardown (node logs
    printed there)."""
    clusters = []

    def make(roles, extra=None, per_node=None):
        c = Cluster(tmp_path, roles, extra)
        for n, props in (per_node or {}).items():
            c.nodes[n].extra.update(props)
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


# -- network namespaces on a subnet of their own -------------------------------------------------------------

ADMIN_SUBNET = "10.233.0"  # test_cluster_partition.py uses 10.231.0: both may run at once


class AdminNetwork(Network):
    """test_cluster_partition.py's Network (a bridge, a namespace and veth per node; cut = the
    host side of a node's veth down) on ADMIN_SUBNET."""

    def __init__(self, ids):
        super().__init__(ids)
        self.run = "a" + uuid.uuid4().hex[:3]
        self.bridge = f"ternbr{self.run}"

    def ip(self, n):
        return f"{ADMIN_SUBNET}.{n + 1}"

    def setup(self):
        if os.geteuid() != 0 or shutil.which("ip") is None:
            pytest.skip("a network partition needs root (CAP_NET_ADMIN) and iproute2's `ip netns`")
        taken = sh("ip", "-o", "addr", "show", "to", f"{ADMIN_SUBNET}.0/24", check=False).stdout.strip()
        if taken:
            pytest.fail(f"{ADMIN_SUBNET}.0/24 is in use already (a leftover run?):\n{taken}")
        first = sh("ip", "netns", "add", self.ns(self.ids[0]), check=False)
        if first.returncode != 0:
            pytest.skip(f"cannot create network namespaces (needs root and `ip netns`): "
                        f"{first.stderr.strip()}")
        self.created_ns.append(self.ns(self.ids[0]))
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.created_links.append(self.bridge)
        sh("ip", "addr", "add", f"{ADMIN_SUBNET}.254/24", "dev", self.bridge)
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


@pytest.fixture
def netns_cluster_factory(tmp_path):
    """make(extra) -> three combined nodes, each in its own network namespace, with the broker
    overrides `extra`; processes stopped and namespaces, veths and bridge deleted at teardown,
    whatever happened."""
    made = []

    def make(extra):
        net = AdminNetwork([0, 1, 2])
        made.append([net, None])
        net.setup()
        cluster = NetnsCluster(tmp_path, net)
        for node in cluster.nodes.values():
            node.extra = dict(extra)
        made[-1][1] = cluster
        try:
            cluster.start()
        except RuntimeError as e:
            pytest.fail(f"the cluster did not start: {e}")
        return cluster

    yield make
    for net, cluster in made:
        try:
            if cluster is not None:
                for n in net.ids:
                    sh("ip", "link", "set", net.host_veth(n), "up", check=False)
                for node in cluster.nodes.values():
                    node.terminate()
                unclean = [n for n, node in cluster.nodes.items() if not node.stop(timeout=15)]
                if unclean:
                    print(f"nodes {unclean} did not exit within 15 s of SIGTERM")
                cluster.report()
        finally:
            net.teardown()
