"""Startup configuration as a new user meets it: security settings that Tern does not implement
are a startup error naming them (fail closed, nothing is served), other Kafka settings that
Tern ignores are named once in a warning."""

import os
import socket
import subprocess
import tempfile

from processes import free_port
from tern_process import TERN_BIN, Tern


def start_refused(args, timeout=30):
    with tempfile.TemporaryDirectory(prefix="tern-config-") as d:
        proc = subprocess.run(
            [TERN_BIN, "server", "--override", f"log.dirs={d}/logs", *args],
            capture_output=True,
            timeout=timeout,
        )
        return proc.returncode, proc.stderr.decode(errors="replace"), os.listdir(d)


def refuses_connections(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_sasl_listener_with_a_foreign_authorizer_is_a_startup_error_naming_each_setting():
    port = free_port()
    code, err, files = start_refused([
        "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", "authorizer.class.name=com.example.ThirdPartyAuthorizer",
        "--override", "super.users=admin",
    ])
    assert code != 0
    assert "SASL_PLAINTEXT" in err and "sasl.enabled.mechanisms" in err, err
    # Kafka's own authorizer classes are implemented; any other class is refused by name, and
    # so is a super user that is not a `User:` principal.
    assert "com.example.ThirdPartyAuthorizer" in err and "super.users" in err, err
    assert refuses_connections(port), "nothing may listen on the refused port"
    assert files == [], "no data dir is created for a refused config"


def test_each_security_setting_alone_is_refused():
    port = free_port()
    for setting in [
        f"listeners=SSL://127.0.0.1:{port}",  # no keystore
        f"listeners=SASL_SSL://127.0.0.1:{port}",
        "ssl.keystore.password=changeit",
        "ssl.cipher.suites=TLS_AES_128_GCM_SHA256",
        "sasl.kerberos.service.name=kafka",
        "allow.everyone.if.no.acl.found=false",
        "principal.builder.class=com.example.PrincipalBuilder",
    ]:
        args = ["--override", setting]
        if not setting.startswith("listeners="):
            args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
        code, err, _ = start_refused(args)
        key = setting.split("=", 1)[0]
        assert code != 0, f"{setting} was accepted"
        assert (key if key != "listeners" else setting.split("=", 1)[1]) in err, err
        assert refuses_connections(port)


def test_ignored_kafka_settings_are_named_once_and_the_broker_serves():
    with tempfile.TemporaryDirectory(prefix="tern-e2e-") as d:
        t = Tern(d, free_port(), extra=["num.network.threads=3", "num.io.threads=8"]).start()
        try:
            from confluent_kafka.admin import AdminClient

            md = AdminClient({"bootstrap.servers": t.bootstrap}).list_topics(timeout=10)
            assert md.brokers, "the broker serves"
        finally:
            t.stop()
        log = open(t.log_path, encoding="utf-8", errors="replace").read()
        warnings = [l for l in log.splitlines() if "ignoring Kafka settings" in l]
        assert len(warnings) == 1, warnings
        assert "num.network.threads" in warnings[0] and "num.io.threads" in warnings[0]
