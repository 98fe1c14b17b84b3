"""Apache Kafka's jars from Maven Central, cached outside the clone, and its command-line tools.

The seed of the peer harness (issue 5): a given Apache Kafka version's jars (`kafka_2.13` and
`kafka-tools` with their runtime dependencies) are resolved once per version, through a generated pom
and `mvn dependency:copy-dependencies`, into

    $TERN_CACHE/kafka/<version>/libs        (TERN_CACHE defaults to ~/.cache/tern)

and the tools that `bin/kafka-*.sh` start are run as `java -cp <libs> <main class>`.  A finished
resolution is marked by `libs/.complete` (with a sha256 manifest of the jars beside it) and is
never redone; the jars also land in ~/.m2, so a wiped cache folder is rebuilt offline first.

Used by the tests (`KafkaDist().run("kafka-topics", "--bootstrap-server", ...)`) and from a shell:

    python tests/e2e/kafka_dist.py fetch [--version 4.4.0]
    python tests/e2e/kafka_dist.py kafka-topics --bootstrap-server 127.0.0.1:9092 --list
    python tests/e2e/kafka_dist.py server DATA_DIR [PORT]    (a real Kafka until Ctrl-C)

KafkaServer starts a real single-node Apache Kafka 4.x (KRaft) for comparisons; the tool tests
run against one instead of tern with TERN_E2E_PEER=kafka (see conftest.py).
"""

import base64
import fcntl
import hashlib
import signal
import socket
import tempfile
import time
import uuid
import os
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_VERSION = os.environ.get("TERN_KAFKA_VERSION", "4.4.0")

# The Maven plugin is pinned so that the resolution does not depend on Maven's built-in default.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# (groupId, artifactId, version or None for the Kafka version)
ARTIFACTS = [
    ("org.apache.kafka", "kafka_2.13", None),
    ("org.apache.kafka", "kafka-tools", None),
    # Kafka's distribution ships an SLF4J binding to log4j2; without one every tool prints SLF4J's
    # "no binding" warning and swallows its own log lines.  Same version as Kafka 4.4's log4j-core.
    ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5"),
]

# Main classes of bin/kafka-*.sh in Kafka 4.x (bin/kafka-run-class.sh <class>).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-server-start": "kafka.Kafka",
    "connect-mirror-maker": "org.apache.kafka.connect.mirror.MirrorMaker",
}

# What bin/kafka-run-class.sh would do for a tool, minus the 256 MiB default heap's GC threads:
# a small heap, the serial collector and C1 only, since every tool is a short-lived process.
JVM_OPTS = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    # The class-data-sharing archive below: its warnings (old class files it skips, an archive that
    # no longer matches) must not reach the tools' stderr, which the tests read.
    "-Xlog:cds*=off",
    "-Xlog:class+path=off",
]

# tools-log4j2.yaml of the distribution, as properties: warnings and errors to stderr.
LOG4J2 = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""


def new_cluster_id():
    """A random cluster id in Kafka's form (URL-safe base64 of 16 bytes). Like Kafka's
    Uuid.randomUuid, never one starting with '-', which kafka-storage would take for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def cache_root():
    return Path(os.environ.get("TERN_CACHE") or Path.home() / ".cache" / "tern")


def pom_xml(version):
    deps = "\n".join(
        "    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>"
        % (g, a, v or version)
        for g, a, v in ARTIFACTS
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by tern tests/e2e/kafka_dist.py: Apache Kafka {version}'s runtime classpath -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.tern.harness</groupId>
  <artifactId>apache-kafka-dist</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


class KafkaDist:
    """One Apache Kafka version's jars in the cache folder, and its tools."""

    def __init__(self, version=DEFAULT_VERSION, cache=None):
        self.version = version
        self.home = Path(cache or cache_root()) / "kafka" / version
        self.libs = self.home / "libs"

    # -- resolution -------------------------------------------------------------------------------

    @property
    def complete(self):
        return (self.libs / ".complete").is_file()

    def ensure(self, quiet=True):
        """Resolves the jars unless a finished resolution is cached; returns self."""
        if self.complete:
            return self
        self.home.mkdir(parents=True, exist_ok=True)
        # One resolver at a time per version (parallel test workers, two CI jobs on one machine).
        with open(self.home / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.complete:
                self._resolve(quiet)
        return self

    def _resolve(self, quiet):
        if shutil.which("mvn") is None:
            raise RuntimeError("mvn is required to resolve Apache Kafka's jars (apt-get install maven)")
        pom = self.home / "pom.xml"
        pom.write_text(pom_xml(self.version))
        staging = self.home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        base = [
            "mvn", "-B", "-f", str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        if quiet:
            base.insert(1, "-q")
        # ~/.m2 usually has everything already: try offline first, then go to Maven Central.
        out = None
        for extra in (["-o"], []):
            shutil.rmtree(staging, ignore_errors=True)
            out = subprocess.run(base + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if out.returncode == 0:
                break
        else:
            raise RuntimeError(
                f"resolving Apache Kafka {self.version} failed:\n{out.stdout.decode(errors='replace')[-4000:]}"
            )
        jars = sorted(p.name for p in staging.glob("*.jar"))
        for g, a, v in ARTIFACTS:
            if f"{a}-{v or self.version}.jar" not in jars:
                raise RuntimeError(f"{a}-{v or self.version}.jar missing from the resolution: {jars}")
        manifest = "".join(
            f"{hashlib.sha256((staging / j).read_bytes()).hexdigest()}  {j}\n" for j in jars
        )
        (staging / "SHA256SUMS").write_text(manifest)
        (staging / "log4j2.properties").write_text(LOG4J2)
        (staging / ".complete").write_text(f"{self.version}\n")
        shutil.rmtree(self.libs, ignore_errors=True)
        staging.rename(self.libs)

    # -- running ----------------------------------------------------------------------------------

    def classpath(self):
        self.ensure()
        # An explicit, sorted list rather than `libs/*`, so the order never depends on the directory.
        return ":".join(str(p) for p in sorted(self.libs.glob("*.jar")))

    def _cds_archive(self, java, classpath):
        """The dynamic class-data-sharing archive for this JVM and classpath (it halves a tool's
        ~2 s start); named by what it depends on, so another JDK or jar set gets its own."""
        real = shutil.which(java) or java
        try:
            real = os.path.realpath(real)
            stamp = f"{real}:{os.stat(real).st_mtime_ns}:{classpath}"
        except OSError:
            return None
        return self.home / f"cds-{hashlib.sha1(stamp.encode()).hexdigest()[:16]}.jsa"

    def command(self, tool, *args, jvm_opts=(), log4j=None, _dump_to=None):
        """The argv that `bin/<tool>.sh args...` amounts to; tool is a TOOLS name or a main class."""
        main = TOOLS.get(tool, tool)
        java = os.environ.get("JAVA", "java")
        classpath = self.classpath()
        cds = []
        archive = self._cds_archive(java, classpath)
        if _dump_to is not None:
            cds = [f"-XX:ArchiveClassesAtExit={_dump_to}"]
        elif archive is not None and archive.is_file():
            cds = [f"-XX:SharedArchiveFile={archive}"]
        return [
            java,
            *JVM_OPTS,
            *cds,
            *jvm_opts,
            f"-Dlog4j2.configurationFile={log4j or self.libs / 'log4j2.properties'}",
            "-cp", classpath,
            main,
            *[str(a) for a in args],
        ]

    def run(self, tool, *args, input=None, timeout=90, check=False, jvm_opts=()):
        """Runs a tool to completion; returns the CompletedProcess with text stdout and stderr.
        The first run for a JDK and jar set also writes the class-data-sharing archive."""
        archive = self._cds_archive(os.environ.get("JAVA", "java"), self.classpath())
        dump_to = None
        if archive is not None and not archive.is_file():
            fd, dump_to = tempfile.mkstemp(prefix=".cds-", suffix=".jsa", dir=self.home)
            os.close(fd)
            os.unlink(dump_to)
        try:
            proc = self._run(tool, args, input, timeout, jvm_opts, dump_to)
            if dump_to is not None and os.path.isfile(dump_to):
                os.replace(dump_to, archive)
        finally:
            if dump_to is not None and os.path.exists(dump_to):
                os.unlink(dump_to)
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(map(str, args))} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def _run(self, tool, args, input, timeout, jvm_opts, dump_to):
        return subprocess.run(
            self.command(tool, *args, jvm_opts=jvm_opts, _dump_to=dump_to),
            input=input,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=None if input is not None else subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaServer:
    """A real single-node Apache Kafka (KRaft, combined broker and controller, node.id 1) on a
    loopback port with its own data dir: formatted, started, waited for, stopped.  Its log stays in
    the data dir (kafka.log) for failures.  The 4.x line; 2.x/3.x (ZooKeeper) are not handled yet."""

    def __init__(self, data_dir, dist=None, port=None, overrides=None):
        self.dist = dist or KafkaDist()
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.overrides = dict(overrides or {})
        self.proc = None
        self.log_path = self.data_dir / "kafka.log"

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def _properties(self):
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start(self, timeout=60):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "server.properties"
        conf.write_text(self._properties())
        if not (self.data_dir / "logs" / "meta.properties").exists():
            cluster_id = new_cluster_id()
            self.dist.run("kafka-storage", "format", "-t", cluster_id, "-c", conf, check=True)
        log4j = self.data_dir / "log4j2.properties"
        log4j.write_text(LOG4J2.replace("SYSTEM_ERR", "SYSTEM_OUT").replace("level = warn", "level = info"))
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.dist.command("kafka-server-start", conf, jvm_opts=["-Xmx512m"], log4j=log4j),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}: {self.tail()}")
            if b"Kafka Server started" in self.log_path.read_bytes():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"kafka did not start in {timeout}s: {self.tail()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def tail(self, n=40):
        try:
            return b"\n".join(self.log_path.read_bytes().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""


def main(argv):
    version = DEFAULT_VERSION
    if len(argv) >= 2 and argv[0] == "--version":
        version, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\ntools:", " ".join(sorted(TOOLS)))
        return 0
    dist = KafkaDist(version)
    if argv[0] == "server":
        server = KafkaServer(argv[1], dist, port=int(argv[2]) if len(argv) > 2 else None).start()
        print(f"Apache Kafka {version} serving on {server.bootstrap}; log {server.log_path}", flush=True)
        try:
            server.proc.wait()
        except KeyboardInterrupt:
            server.stop()
        return 0
    if argv[0] == "fetch":
        if len(argv) >= 3 and argv[1] == "--version":
            dist = KafkaDist(argv[2])
        dist.ensure(quiet=False)
        print(dist.libs)
        return 0
    cmd = dist.command(argv[0], *argv[1:])
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
