"""ACL sync (the spec's metadata manager): ACLs on the mirrored topics, synced groups and
transactional ids are copied from the source (a Tern and a real Apache Kafka 4.4, both running
Kafka's StandardAuthorizer), follow the source as it adds and removes them, respect
`mirror.acls.include` and `.exclude`, and stop being synced when a topic fails over. Cluster ACLs and ACLs
on topics the mirror does not mirror are never copied. Clients here are confluent-kafka's
admin API (librdkafka), as the super user `User:ANONYMOUS` on PLAINTEXT listeners."""

import time

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

import kafka_peer
import mirror_util as mu
from processes import free_port
from tern_process import Tern
from test_mirror_kafka import TERN_OVERRIDES, produce

AUTHORIZER = [
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
]
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER, ResourceType.TRANSACTIONAL_ID
READ, WRITE, ALTER = AclOperation.READ, AclOperation.WRITE, AclOperation.ALTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def binding(rtype, name, pattern, principal, op, perm=ALLOW):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def key(b):
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
            b.operation.name, b.permission_type.name)


def create_acls(bootstrap, bindings):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_acls(bindings).values():
        f.result(30)


def delete_acls(bootstrap, bindings):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                b.operation, b.permission_type) for b in bindings]
    for f in admin.delete_acls(filters).values():
        f.result(30)


def acls(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    return {key(b) for b in admin.describe_acls(everything).result(30)}


def wait_acls(bootstrap, want, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = acls(bootstrap)
        if got == want:
            return
        if time.time() > deadline:
            raise AssertionError(f"ACLs on {bootstrap}: {sorted(got)}\nwanted {sorted(want)}")
        time.sleep(0.5)


def make_topics(bootstrap, names):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)


@pytest.fixture
def source(tmp_path):
    d = tmp_path / "source"
    d.mkdir()
    t = Tern(str(d), free_port(), AUTHORIZER).start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture
def tern(tmp_path):
    d = tmp_path / "dest"
    d.mkdir()
    t = Tern(str(d), free_port(), TERN_OVERRIDES + AUTHORIZER).start()
    try:
        yield t
    finally:
        t.stop()


# What the source holds; which of it the mirror of "orders" and "order-lines" copies.
ORDERS_READ = binding(T, "orders", LIT, "User:bob", READ)
ORDER_PREFIX = binding(T, "order", PRE, "User:carol", WRITE)
ANY_TOPIC_DENY = binding(T, "*", LIT, "User:mallory", READ, DENY)
GROUP_READ = binding(G, "app-billing", LIT, "User:bob", READ)
TXN_WRITE = binding(X, "billing-tx", LIT, "User:bob", WRITE)
NOT_MIRRORED = binding(T, "local-only", LIT, "User:bob", READ)
OTHER_GROUP = binding(G, "ops-tools", LIT, "User:bob", READ)
CLUSTER_ALTER = binding(C, "kafka-cluster", LIT, "User:bob", ALTER)
COPIED = [ORDERS_READ, ORDER_PREFIX, ANY_TOPIC_DENY, GROUP_READ, TXN_WRITE]
NOT_COPIED = [NOT_MIRRORED, OTHER_GROUP, CLUSTER_ALTER]


def test_acls_follow_a_tern_source_until_failover(source, tern, tmp_path):
    make_topics(source.bootstrap, ["orders", "order-lines", "local-only"])
    produce(source.bootstrap, "orders", 50, 1)
    create_acls(source.bootstrap, COPIED + NOT_COPIED)
    # An ACL of the destination's own, on a topic it does not mirror, is left alone throughout.
    own = binding(T, "dest-local", LIT, "User:dora", READ)
    create_acls(tern.bootstrap, [own])
    mu.create_mirror(tern.bootstrap, "acl", source.bootstrap, str(tmp_path),
                     mirror_groups_include="app-.*")
    mu.mirrors(tern.bootstrap, "--start", "--mirror", "acl", "--topics", "orders,order-lines")
    want = {key(b) for b in COPIED + [own]}
    wait_acls(tern.bootstrap, want)
    mu.wait_mirrored(tern.bootstrap, "acl", source.bootstrap, ["orders"], timeout=60)
    mu.compare_partition(source.bootstrap, tern.bootstrap, "orders", 0)

    # The source drops one ACL and adds another: the destination follows.
    delete_acls(source.bootstrap, [ORDER_PREFIX])
    lines_read = binding(T, "order-lines", LIT, "User:erin", READ)
    create_acls(source.bootstrap, [lines_read])
    want = (want - {key(ORDER_PREFIX)}) | {key(lines_read)}
    wait_acls(tern.bootstrap, want)

    # Failover of "orders": its ACLs stay as they are and are no longer synced.
    mu.mirrors(tern.bootstrap, "--stop", "--mirror", "acl", "--topics", "orders")
    delete_acls(source.bootstrap, [ORDERS_READ])
    late = binding(T, "orders", LIT, "User:frank", WRITE)
    create_acls(source.bootstrap, [late])
    # "order-lines" is still mirrored: a change on it is still synced, which proves passes ran.
    lines_write = binding(T, "order-lines", LIT, "User:erin", WRITE)
    create_acls(source.bootstrap, [lines_write])
    want |= {key(lines_write)}
    wait_acls(tern.bootstrap, want)
    time.sleep(5)  # two more refresh intervals (2 s)
    got = acls(tern.bootstrap)
    assert key(ORDERS_READ) in got and key(late) not in got, sorted(got)


def test_acls_include_narrows_the_sync(source, tern, tmp_path):
    make_topics(source.bootstrap, ["orders"])
    create_acls(source.bootstrap, COPIED + NOT_COPIED)
    mu.create_mirror(tern.bootstrap, "narrow", source.bootstrap, str(tmp_path),
                     mirror_groups_include="app-.*",
                     mirror_acls_include="TOPIC;*;READ;ALLOW,*;*;*;*;User:b.b",
                     mirror_acls_exclude="TRANSACTIONAL_ID")
    mu.mirrors(tern.bootstrap, "--start", "--mirror", "narrow", "--topics", "orders")
    # TOPIC READ ALLOW: orders/bob; any ACL of User:bob in scope: the group (and the txn id,
    # which mirror.acls.exclude takes out again).
    wait_acls(tern.bootstrap, {key(b) for b in [ORDERS_READ, GROUP_READ]})
    # A rule that does not parse is refused on create, naming the field.
    path = tmp_path / "bad.properties"
    path.write_text(f"bootstrap.servers={source.bootstrap}\nmirror.acls.include=TOPIC;*;FLY\n")
    out = mu.mirrors(tern.bootstrap, "--create", "--mirror", "bad", "--mirror-config", str(path),
                     check=False)
    assert out.returncode != 0 and "operation" in (out.stdout + out.stderr), out


def test_acls_from_a_real_kafka_source(tern, tmp_path):
    version = "4.4.0"
    try:
        kafka_peer.KafkaJars(version).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {version}: {str(e).splitlines()[0]}")
    peer = kafka_peer.KafkaPeer(version, tmp_path / "kafka", overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }, jvm_opts=["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
    peer.start(timeout=120)
    try:
        make_topics(peer.bootstrap, ["orders", "order-lines", "local-only"])
        produce(peer.bootstrap, "orders", 50, 1)
        create_acls(peer.bootstrap, COPIED + NOT_COPIED)
        mu.create_mirror(tern.bootstrap, "kacl", peer.bootstrap, str(tmp_path),
                         mirror_groups_include="app-.*")
        mu.mirrors(tern.bootstrap, "--start", "--mirror", "kacl", "--topics", "orders,order-lines")
        wait_acls(tern.bootstrap, {key(b) for b in COPIED}, timeout=60)
        mu.wait_mirrored(tern.bootstrap, "kacl", peer.bootstrap, ["orders"], timeout=60)
        mu.compare_partition(peer.bootstrap, tern.bootstrap, "orders", 0)
    finally:
        peer.stop()
