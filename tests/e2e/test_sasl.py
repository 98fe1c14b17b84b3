"""SASL with clients nobody here wrote: Apache Kafka's kafka-configs creates SCRAM users over a
SASL/PLAIN admin login, then confluent-kafka (librdkafka), kafka-python and the Java console
consumer authenticate with SCRAM-SHA-512 / SCRAM-SHA-256 and read back what was produced. Wrong
passwords are refused, and a few thousand failed logins leave no connection or memory behind."""

import os
import socket
import struct
import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from processes import free_port
from tern_process import Tern

ADMIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


@pytest.fixture(scope="module")
def sasl_tern():
    with tempfile.TemporaryDirectory(prefix="tern-sasl-") as d:
        port = free_port()
        t = Tern(
            d,
            port,
            extra=[
                f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={ADMIN_JAAS}",
            ],
        ).start()
        try:
            yield t
        finally:
            t.stop()


def sasl_conf(bootstrap, mechanism, user, password):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def java_client_config(tmp_path, name, mechanism, user, password):
    module = {
        "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    }.get(mechanism, "org.apache.kafka.common.security.scram.ScramLoginModule")
    path = tmp_path / name
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={module} required username="{user}" password="{password}";\n'
    )
    return str(path)


@pytest.fixture(scope="module")
def scram_users(sasl_tern, tmp_path_factory):
    """alice (SCRAM-SHA-512 and -256) and bob (SCRAM-SHA-256), created with kafka-configs, one
    mechanism per call: like Kafka's controller, Tern refuses two changes of one user in one
    request (DUPLICATE_RESOURCE)."""
    from kafka_peer import KafkaJars

    dist = KafkaJars().ensure()
    tmp = tmp_path_factory.mktemp("sasl")
    admin = java_client_config(tmp, "admin.properties", "PLAIN", "admin", "admin-secret")
    for user, config in [
        ("alice", "SCRAM-SHA-512=[password=alice-secret]"),
        ("alice", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"),
        ("bob", "SCRAM-SHA-256=[password=bob-secret]"),
    ]:
        out = dist.run(
            "kafka-configs", "--bootstrap-server", sasl_tern.bootstrap, "--command-config", admin,
            "--alter", "--entity-type", "users", "--entity-name", user, "--add-config", config,
            check=True,
        )
        assert f"Completed updating config for user {user}" in out.stdout, out.stdout + out.stderr
    described = dist.run(
        "kafka-configs", "--bootstrap-server", sasl_tern.bootstrap, "--command-config", admin,
        "--describe", "--entity-type", "users", "--entity-name", "alice", check=True,
    ).stdout
    assert "SCRAM-SHA-512=iterations=4096" in described, described
    assert "SCRAM-SHA-256=iterations=8192" in described, described
    return {"dist": dist, "admin": admin, "tmp": tmp}


def test_librdkafka_scram_sha_512_produces_and_consumes(sasl_tern, scram_users):
    conf = sasl_conf(sasl_tern.bootstrap, "SCRAM-SHA-512", "alice", "alice-secret")
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("sasl-orders", 3, 1)])["sasl-orders"].result(30)
    p = Producer({**conf, "linger.ms": 5})
    for i in range(3000):
        p.produce("sasl-orders", key=str(i).encode(), value=f"order-{i}".encode(), partition=i % 3)
        p.poll(0)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "sasl-g", "auto.offset.reset": "earliest"})
    c.subscribe(["sasl-orders"])
    got = {}
    deadline = time.time() + 60
    while len(got) < 3000 and time.time() < deadline:
        for m in c.consume(500, 0.5):
            assert not m.error(), m.error()
            got[int(m.key())] = m.value()
    c.close()
    assert got == {i: f"order-{i}".encode() for i in range(3000)}


def test_kafka_python_scram_sha_256_reads_back(sasl_tern, scram_users):
    from kafka import KafkaConsumer, KafkaProducer

    conf = dict(
        bootstrap_servers=sasl_tern.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    producer = KafkaProducer(**conf)
    for i in range(200):
        producer.send("sasl-kp", key=str(i).encode(), value=f"kp-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("sasl-kp", auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    got = {int(m.key): m.value for m in consumer}
    consumer.close()
    assert got == {i: f"kp-{i}".encode() for i in range(200)}


def test_java_console_consumer_with_scram_reads_back(sasl_tern, scram_users):
    conf = sasl_conf(sasl_tern.bootstrap, "SCRAM-SHA-512", "alice", "alice-secret")
    p = Producer(conf)
    for i in range(50):
        p.produce("sasl-java", key=str(i).encode(), value=f"j-{i}".encode())
    assert p.flush(30) == 0
    client = java_client_config(scram_users["tmp"], "alice.properties", "SCRAM-SHA-512", "alice", "alice-secret")
    out = scram_users["dist"].run(
        "kafka-console-consumer", "--bootstrap-server", sasl_tern.bootstrap, "--topic", "sasl-java",
        "--from-beginning", "--max-messages", "50", "--timeout-ms", "30000",
        "--consumer.config", client, "--property", "print.key=true", check=True,
    )
    lines = [l for l in out.stdout.splitlines() if "\t" in l]
    assert sorted(int(l.split("\t")[0]) for l in lines) == list(range(50))


def test_wrong_passwords_and_unknown_users_are_refused(sasl_tern, scram_users):
    for mechanism, user, password in [
        ("SCRAM-SHA-512", "alice", "not-her-password"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),  # bob has no SCRAM-SHA-512 credential
        ("SCRAM-SHA-256", "mallory", "x"),
        ("PLAIN", "admin", "admin-wrong"),
    ]:
        errors = []
        conf = sasl_conf(sasl_tern.bootstrap, mechanism, user, password)
        admin = AdminClient({**conf, "error_cb": errors.append})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        admin.poll(1)  # serves error_cb
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), (
            f"{user}/{mechanism}: {errors}"
        )
        assert any("Invalid" in e.str() for e in errors), errors


def frame(api_key, version, correlation, body):
    header = struct.pack(">hhih", api_key, version, correlation, 4) + b"evil"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def failed_plain_login(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        mech = b"PLAIN"
        s.sendall(frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
        size = struct.unpack(">i", s.recv(4))[0]
        s.recv(size)
        token = b"\0admin\0guess"
        s.sendall(frame(36, 0, 2, struct.pack(">i", len(token)) + token))
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break  # the broker closed the connection
            data += chunk
        # SaslAuthenticate v0 reply: size, correlation id, then error code 58.
        assert data[8:10] == struct.pack(">h", 58), data


def proc_fds_and_rss(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return fds, rss


def test_thousands_of_failed_logins_leave_nothing_behind(sasl_tern, scram_users):
    pid = sasl_tern.proc.pid
    for _ in range(200):
        failed_plain_login(sasl_tern.port)
    time.sleep(0.5)
    fds_before, rss_before = proc_fds_and_rss(pid)
    for _ in range(3000):
        failed_plain_login(sasl_tern.port)
    time.sleep(1)
    fds_after, rss_after = proc_fds_and_rss(pid)
    assert fds_after <= fds_before + 2, (fds_before, fds_after)
    assert rss_after - rss_before < 16 * 1024, f"RSS grew {rss_before} -> {rss_after} KiB"
    # And the broker still serves a good login.
    conf = sasl_conf(sasl_tern.bootstrap, "SCRAM-SHA-256", "bob", "bob-secret")
    assert AdminClient(conf).list_topics(timeout=10).brokers


def test_format_with_add_scram_gives_a_sasl_only_broker_its_first_user(tmp_path):
    """`tern format --add-scram` (kafka-storage.sh format's option) stores the first SCRAM user
    before the first start, so a broker with only a SCRAM listener can be logged into at all."""
    import subprocess

    from tern_process import TERN_BIN

    port = free_port()
    logs = f"{tmp_path}/logs"
    fmt = [TERN_BIN, "format", "--override", f"log.dirs={logs}"]
    out = subprocess.run(fmt + ["--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", "--add-scram",
                                "SCRAM-SHA-512=[name=alice,password=alice-first]"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "alice-first" not in out.stdout + out.stderr
    # A second format of the same dirs is refused, as Kafka's is.
    again = subprocess.run(fmt, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "already formatted" in again.stderr, again.stderr
    bad = subprocess.run(fmt + ["--ignore-formatted", "--add-scram", "SCRAM-SHA-1=[name=a,password=b]"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "SCRAM-SHA-1" in bad.stderr, bad.stderr
    t = Tern(str(tmp_path), port, extra=[
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]).start()
    try:
        md = AdminClient(sasl_conf(t.bootstrap, "SCRAM-SHA-512", "alice", "alice-first")).list_topics(timeout=15)
        assert md.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
        errors = []
        wrong = AdminClient({**sasl_conf(t.bootstrap, "SCRAM-SHA-512", "alice", "nope"),
                             "error_cb": errors.append})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=4)
        wrong.poll(1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    finally:
        t.stop()
