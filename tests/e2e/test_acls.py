"""ACLs with tools nobody here wrote: Apache Kafka 4.x's kafka-acls adds, lists and removes ACLs
on a tern running the StandardAuthorizer (super.users=User:admin, PLAIN users on a
SASL_PLAINTEXT listener), and confluent-kafka (librdkafka) as a user without a grant gets
TOPIC_AUTHORIZATION_FAILED, then produces and consumes once kafka-acls granted it."""

import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from processes import free_port
from tern_process import Tern

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def acl_tern():
    with tempfile.TemporaryDirectory(prefix="tern-acls-") as d:
        port = free_port()
        t = Tern(
            d,
            port,
            extra=[
                f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users=User:admin",
            ],
        ).start()
        try:
            yield t
        finally:
            t.stop()


def conf(bootstrap, user):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


@pytest.fixture(scope="module")
def acls_tool(acl_tern, tmp_path_factory):
    """Runs kafka-acls against tern as the super user admin."""
    from kafka_peer import KafkaJars

    dist = KafkaJars().ensure()
    admin = tmp_path_factory.mktemp("acls") / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
    )

    def run(*args):
        out = dist.run(
            "kafka-acls", "--bootstrap-server", acl_tern.bootstrap,
            "--command-config", str(admin), *args,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    return run


def produce_error(bootstrap, user, topic):
    """The error of one produced message (None when it was delivered)."""
    results = []
    p = Producer({**conf(bootstrap, user), "message.timeout.ms": 10000, "retries": 0})
    p.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    p.flush(15)
    assert results, "no delivery report"
    return results[0]


def test_kafka_acls_adds_lists_and_removes_acls_and_clients_obey_them(acl_tern, acls_tool):
    bootstrap = acl_tern.bootstrap
    topic = "acl-orders"
    admin = AdminClient(conf(bootstrap, "admin"))  # kept: a dropped client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    # Without a grant: TOPIC_AUTHORIZATION_FAILED, and nothing is appended.
    err = produce_error(bootstrap, "alice", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    alice = AdminClient(conf(bootstrap, "alice"))
    md = alice.list_topics(timeout=10)
    assert topic not in md.topics or md.topics[topic].error is not None, md.topics

    # kafka-acls grants alice produce and consume (WRITE, DESCRIBE, CREATE on the topic; READ
    # on topic and group), lists them back.
    acls_tool("--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    acls_tool("--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic,
              "--group", "acl-g")
    listed = acls_tool("--list", "--topic", topic)
    for op in ("WRITE", "READ", "DESCRIBE", "CREATE"):
        assert f"principal=User:alice, host=*, operation={op}, permissionType=ALLOW" in listed, listed
    listed = acls_tool("--list", "--group", "acl-g")
    assert "operation=READ" in listed, listed

    assert produce_error(bootstrap, "alice", topic) is None
    c = Consumer({**conf(bootstrap, "alice"), "group.id": "acl-g", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = None
    deadline = time.time() + 30
    while got is None and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert not m.error(), m.error()
            got = m.value()
    c.close()
    assert got == b"v"

    # A DENY beats the ALLOW; removing it restores access.
    acls_tool("--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", topic)
    err = produce_error(bootstrap, "alice", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    acls_tool("--remove", "--force", "--deny-principal", "User:alice", "--operation", "Write",
              "--topic", topic)
    assert produce_error(bootstrap, "alice", topic) is None

    # Removing every ACL of the topic takes the grant away again.
    acls_tool("--remove", "--force", "--topic", topic)
    assert "User:alice" not in acls_tool("--list", "--topic", topic)
    err = produce_error(bootstrap, "alice", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_prefixed_acls_from_kafka_acls(acl_tern, acls_tool):
    bootstrap = acl_tern.bootstrap
    admin = AdminClient(conf(bootstrap, "admin"))
    for t in ("pay-eu", "pay-us", "other"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
    acls_tool("--add", "--allow-principal", "User:alice", "--operation", "Write",
              "--topic", "pay-", "--resource-pattern-type", "prefixed")
    listed = acls_tool("--list", "--topic", "pay-", "--resource-pattern-type", "prefixed")
    assert "patternType=PREFIXED" in listed, listed
    assert produce_error(bootstrap, "alice", "pay-eu") is None
    assert produce_error(bootstrap, "alice", "pay-us") is None
    err = produce_error(bootstrap, "alice", "other")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # Metadata shows alice only the topics she may describe (WRITE implies DESCRIBE).
    alice = AdminClient(conf(bootstrap, "alice"))
    names = set(alice.list_topics(timeout=10).topics)
    assert {"pay-eu", "pay-us"} <= names and "other" not in names, names


def test_non_super_user_cannot_manage_acls(acl_tern):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    admin = AdminClient(conf(acl_tern.bootstrap, "alice"))
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([binding])[binding].result(10)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, e.value
