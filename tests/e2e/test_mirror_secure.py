"""Cluster mirroring from a secured source: the mirror's own `security.protocol`, `sasl.*` and
`ssl.*` configs (Kafka's client names, PEM stores).

1. A Tern source that serves only SASL_SSL with SCRAM-SHA-512 (and a CA of this test's own)
   mirrored into a Tern: every partition the same batches byte for byte; the password appears
   in no `tern mirrors` output, no DescribeConfigs answer and no log line of either broker.
2. A real Apache Kafka 4.4 source with a SASL_SSL (SCRAM-SHA-512) listener, mirrored over it;
   both brokers run Kafka's StandardAuthorizer, and the source's ACLs on the mirrored topic
   (a literal and a prefixed one) are synced to the destination over that same listener.
3. The bad cases: a wrong password, a CA that does not sign the source's certificate, and SASL
   spoken to a PLAINTEXT-only port: `--start` fails naming the cause, never the password.
"""

import tempfile

import pytest
from confluent_kafka.admin import (AdminClient, ConfigResource, NewTopic, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

import kafka_peer
import mirror_util as mu
from processes import free_port
from tern_process import Tern
from test_mirror_acls import (AUTHORIZER, LIT, PRE, READ, WRITE, T, binding,
                              create_acls, key, wait_acls)
from test_mirror_kafka import TERN_OVERRIDES, produce
from tls_util import CA

SECRET = "s3cret-Mirror-Pass"
ADMIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="admin" password="admin-pw" user_admin="admin-pw";'
)
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="mirror" password="{SECRET}";')


@pytest.fixture(scope="module")
def pki():
    with tempfile.TemporaryDirectory(prefix="tern-mirror-pki-") as d:
        ca = CA(d)
        yield {"ca": ca, "server": ca.issue("server", "localhost", server=True),
               "other_ca": CA(d, "Other CA")}


def add_scram_user(admin_conf, user, password):
    admin = AdminClient(admin_conf)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     password.encode())
    ])
    for f in futures.values():
        f.result(30)


def sasl_ssl_mirror_config(bootstrap, ca_path, jaas=SCRAM_JAAS):
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_jaas_config": jaas,
        "ssl_truststore_type": "PEM",
        "ssl_truststore_location": ca_path,
    }


def assert_no_secret(tern, mirror, *outputs):
    for text in outputs:
        assert SECRET not in text
    shown = mu.mirrors(tern.bootstrap, "--describe", "--mirror", mirror).stdout
    shown += mu.mirrors(tern.bootstrap, "--list").stdout
    assert SECRET not in shown
    # DescribeConfigs of the cluster mirror resource (type 64) withholds sasl.jaas.config.
    with mu.RawKafka(tern.bootstrap) as r:
        body = (b"\x00\x00\x00\x01" + b"\x40" + len(mirror).to_bytes(2, "big") + mirror.encode()
                + b"\xff\xff\xff\xff" + b"\x00")
        raw = r.request(32, 1, body)
    assert b"sasl.jaas.config" in raw and b"bootstrap.servers" in raw, raw
    assert SECRET.encode() not in raw
    with open(tern.log_path, "rb") as f:
        assert SECRET.encode() not in f.read()


@pytest.fixture
def secured_tern(pki, tmp_path):
    """A Tern whose only client listener is SASL_SSL (a PLAINTEXT one on loopback for the test's
    own raw reads and the admin)."""
    d = tmp_path / "source"
    d.mkdir()
    plain, secure = free_port(), free_port()
    t = Tern(str(d), plain, extra=[
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pki['server']['pem']}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={ADMIN_JAAS}",
    ]).start()
    t.secure_bootstrap = f"127.0.0.1:{secure}"
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture
def tern(tmp_path):
    d = tmp_path / "dest"
    d.mkdir()
    t = Tern(str(d), free_port(), TERN_OVERRIDES).start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture
def authz_tern(tmp_path):
    """The destination with Kafka's StandardAuthorizer (super.users=User:ANONYMOUS: the test's
    own PLAINTEXT clients and `tern mirrors` may do everything)."""
    d = tmp_path / "dest"
    d.mkdir()
    t = Tern(str(d), free_port(), TERN_OVERRIDES + AUTHORIZER).start()
    try:
        yield t
    finally:
        t.stop()


def make_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_tern_source_over_sasl_ssl_scram(secured_tern, tern, pki, tmp_path):
    add_scram_user({"bootstrap.servers": secured_tern.bootstrap}, "mirror", SECRET)
    make_topic(secured_tern.bootstrap, "secure-orders", 3)
    produce(secured_tern.bootstrap, "secure-orders", 900, 3, codec="zstd")
    created = mu.create_mirror(tern.bootstrap, "sec", secured_tern.secure_bootstrap, str(tmp_path),
                               **sasl_ssl_mirror_config(secured_tern.secure_bootstrap,
                                                        pki["ca"].path))
    started = mu.mirrors(tern.bootstrap, "--start", "--mirror", "sec", "--topics", "secure-orders")
    assert "Started" in started.stdout, started.stdout
    # Progress is checked against the source's PLAINTEXT port (same broker, same log).
    mu.wait_mirrored(tern.bootstrap, "sec", secured_tern.bootstrap, ["secure-orders"], timeout=60)
    produce(secured_tern.bootstrap, "secure-orders", 300, 3, start=900, codec="lz4")
    mu.wait_mirrored(tern.bootstrap, "sec", secured_tern.bootstrap, ["secure-orders"], timeout=60)
    for p in range(3):
        batches = mu.compare_partition(secured_tern.bootstrap, tern.bootstrap, "secure-orders", p)
        assert batches
    assert_no_secret(tern, "sec", created.stdout + created.stderr,
                     started.stdout + started.stderr)
    with open(secured_tern.log_path, "rb") as f:
        assert SECRET.encode() not in f.read()


def test_bad_credentials_and_trust_are_refused_without_leaking(secured_tern, tern, pki, tmp_path):
    add_scram_user({"bootstrap.servers": secured_tern.bootstrap}, "mirror", "the-right-one")
    make_topic(secured_tern.bootstrap, "secure-bad", 1)
    cases = {
        # The wrong password: the source's SASL error.
        "wrongpw": (secured_tern.secure_bootstrap, pki["ca"].path, "authentication"),
        # A CA that did not sign the source's certificate: the TLS handshake fails.
        "untrusted": (secured_tern.secure_bootstrap, pki["other_ca"].path, "tls"),
        # TLS and SASL spoken to a PLAINTEXT port.
        "plainport": (secured_tern.bootstrap, pki["ca"].path, "tls"),
    }
    for name, (bootstrap, ca, expect) in cases.items():
        created = mu.create_mirror(tern.bootstrap, name, bootstrap, str(tmp_path),
                                   **sasl_ssl_mirror_config(bootstrap, ca))
        out = mu.mirrors(tern.bootstrap, "--start", "--mirror", name, "--topics", "secure-bad",
                         check=False, timeout=60)
        text = out.stdout + out.stderr
        assert out.returncode != 0, f"{name}: {text}"
        assert expect in text.lower(), f"{name}: {text}"
        assert_no_secret(tern, name, created.stdout + created.stderr, text)
    # The source serves its good clients all along.
    assert AdminClient({"bootstrap.servers": secured_tern.bootstrap}).list_topics(timeout=10).brokers


def test_real_kafka_source_over_sasl_ssl(pki, authz_tern, tmp_path):
    """Apache Kafka 4.4 with a SASL_SSL (SCRAM-SHA-512) listener and the StandardAuthorizer
    (super users: ANONYMOUS for this test's PLAINTEXT admin, `mirror` for the mirror's SCRAM
    login), with ACLs on the mirrored topic, mirrored into a Tern that runs the StandardAuthorizer
    too: the same batches byte for byte, the source's ACLs on the topic (and only those) on the
    destination, and the password in no output. `mirror.groups.include` is left at its default."""
    tern = authz_tern
    version = "4.4.0"
    try:
        kafka_peer.KafkaJars(version).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {version}: {str(e).splitlines()[0]}")
    plain, secure = free_port(), free_port()
    peer = kafka_peer.KafkaPeer(version, tmp_path / "kafka", port=plain, overrides={
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure},"
                      "CONTROLLER://127.0.0.1:{controller}"),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
        "listener.security.protocol.map":
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["server"]["pem"],
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:mirror",
    }, jvm_opts=["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
    # KafkaPeer fills the controller port in its own listeners; put ours in place of the marker.
    peer.overrides["listeners"] = peer.overrides["listeners"].format(controller=peer.controller_port)
    peer.start(timeout=120)
    try:
        add_scram_user({"bootstrap.servers": peer.bootstrap}, "mirror", SECRET)
        make_topic(peer.bootstrap, "kafka-secure", 2)
        produce(peer.bootstrap, "kafka-secure", 600, 2, codec="gzip")
        topic_acls = [binding(T, "kafka-secure", LIT, "User:bob", READ),
                      binding(T, "kafka-", PRE, "User:carol", WRITE)]
        create_acls(peer.bootstrap, topic_acls)  # over PLAINTEXT, as User:ANONYMOUS
        wait_acls(peer.bootstrap, {key(b) for b in topic_acls})
        created = mu.create_mirror(tern.bootstrap, "ksec", f"127.0.0.1:{secure}", str(tmp_path),
                                   **sasl_ssl_mirror_config(f"127.0.0.1:{secure}",
                                                            pki["ca"].path))
        started = mu.mirrors(tern.bootstrap, "--start", "--mirror", "ksec", "--topics",
                             "kafka-secure")
        assert "Started" in started.stdout, started.stdout
        mu.wait_mirrored(tern.bootstrap, "ksec", peer.bootstrap, ["kafka-secure"], timeout=90)
        for p in range(2):
            assert mu.compare_partition(peer.bootstrap, tern.bootstrap, "kafka-secure", p)
        # The source's ACLs on the mirrored topic, read over SASL_SSL as User:mirror, are on the
        # destination, and nothing else is.
        wait_acls(tern.bootstrap, {key(b) for b in topic_acls}, timeout=60)
        assert_no_secret(tern, "ksec", created.stdout + created.stderr,
                         started.stdout + started.stderr)
    finally:
        peer.stop()
