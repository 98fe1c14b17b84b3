"""A real Apache Kafka on this machine: any version's jars from Maven Central, its command-line
tools, and servers started as a single-node or multi-broker cluster on loopback ports (issue 5's
peer harness).

Resolution: a generated pom and `mvn dependency:copy-dependencies` put a version's runtime jars in

    $TERN_CACHE/kafka/<version>/libs        (TERN_CACHE defaults to ~/.cache/tern)

once per version (`libs/.complete` marks a finished resolution, with a sha256 manifest of the jars
beside it; the jars also stay in ~/.m2, so a wiped cache is rebuilt offline first).  4.x takes
`kafka_2.13` and `kafka-tools` with the distribution's log4j2 binding; 2.x and 3.x add their own
logging binding, and 2.1-2.3 get the ZooKeeper 3.5 client, since their 3.4 one does not run on
Java 17 (see README).

Tools: `KafkaJars().run("kafka-topics", "--bootstrap-server", ...)` runs what `bin/kafka-topics.sh`
would (a TOOLS name or any main class; DEFAULT_VERSION, $TERN_KAFKA_VERSION or 4.4.0, unless a
version is given) as `java -cp <libs> <main class>` with a small heap and a class-data-sharing
archive; `tool_command(...)` is the same argv for a process the caller starts itself.

Servers: `KafkaPeer(version, data_dir).start()` formats the storage and starts KRaft in combined
mode (broker and controller in one process) for 3.x/4.x, or starts a ZooKeeper server
(ZooKeeperServerMain, from the same classpath) and a ZooKeeper-mode broker for 2.x.  `start()`
returns once the broker answers ApiVersions and lists itself in Metadata; `stop()` sends SIGTERM
and waits (SIGKILL after 30 s).  The logs (kafka.log, zookeeper.log) stay in the data dir, and a
failed start raises with their tails.

Command line:

    python tests/harness/kafka_peer.py fetch [4.4.0 3.9.1 2.8.2]   (default: DEFAULT_VERSION)
    python tests/harness/kafka_peer.py serve 3.9.1 [--port 9092] [--java /usr/lib/jvm/.../bin/java]
    python tests/harness/kafka_peer.py probe 4.4.0 3.9.1 2.8.2 2.1.1   (start/stop each; a table)
    python tests/harness/kafka_peer.py tool 4.4.0 org.apache.kafka.tools.ProducerPerformance ARGS...
    python tests/harness/kafka_peer.py tool 4.4.0 kafka-topics --bootstrap-server 127.0.0.1:9092 --list
    python tests/harness/kafka_peer.py mirror 127.0.0.1:9092 127.0.0.1:9093   (MirrorMaker 2)

MirrorMaker2(source, target, dir).start() runs a dedicated MirrorMaker 2 between any two bootstrap
addresses (connect-mirror 4.3.1: the newest the Maven mirror here serves).

KafkaCluster(version, data_dir, brokers=3).start() runs a multi-broker KRaft cluster (3.x/4.x): as
many combined broker+controller nodes as brokers, one quorum of that many voters, one cluster id,
loopback ports, 256 MiB heaps; kill(node_id) (SIGKILL), stop_node(node_id), start_node(node_id),
stop(); `bootstrap` lists every broker.  From a shell, until Ctrl-C:

    python tests/harness/kafka_peer.py cluster 4.4.0 [--brokers 3] [--data-dir D]
"""

import argparse
import fcntl
import glob
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import base64
from pathlib import Path

from kafka_wire import broker_serves, metadata_brokers
from processes import free_port, kill_process, stop_process

DEFAULT_VERSION = os.environ.get("TERN_KAFKA_VERSION", "4.4.0")

# The Maven plugin is pinned so that the resolution does not depend on Maven's built-in default.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# Kafka 4.x: (groupId, artifactId, version or None for the Kafka version).  The distribution ships
# an SLF4J binding to log4j2; without one every tool prints SLF4J's "no binding" warning and
# swallows its own log lines.  Same version as Kafka 4.4's log4j-core.
ARTIFACTS_4 = [
    ("org.apache.kafka", "kafka_2.13", None),
    ("org.apache.kafka", "kafka-tools", None),
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
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
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

# What bin/kafka-run-class.sh would give a tool, minus the default heap's GC threads: a small heap,
# the serial collector and C1 only, since a tool in a test is a short-lived process.  Benchmarks
# that measure a tool pass their own options instead.
TOOL_JVM_OPTS = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
]

LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = OUT
"""

LOG4J1 = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
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


def vtuple(version):
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def artifacts(version):
    v = vtuple(version)
    if v >= (4,):
        return list(ARTIFACTS_4)
    scala = "kafka_2.13" if v >= (2, 4) else "kafka_2.12"
    arts = [
        ("org.apache.kafka", scala, None),
        ("org.apache.kafka", "kafka-tools", None),
        # The distribution's binding: log4j 1 API through reload4j (a drop-in log4j 1.2.17).
        ("org.slf4j", "slf4j-reload4j", "1.7.36"),
        ("ch.qos.reload4j", "reload4j", "1.2.25"),
    ]
    if v < (2, 4):
        # ZooKeeper 3.4's client cannot run on Java 17 (see README); 3.5 is wire compatible and is
        # what Kafka 2.4+ ships.  A direct dependency wins over Kafka's transitive 3.4.
        arts.append(("org.apache.zookeeper", "zookeeper", "3.5.9"))
    return arts


def kraft(version):
    return vtuple(version) >= (3,)


def pom_xml(version, arts=None):
    deps = "\n".join(
        "    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>"
        % (g, a, v or version)
        for g, a, v in (arts or artifacts(version))
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by tern tests/harness/kafka_peer.py: Apache Kafka {version}'s runtime classpath -->
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


def find_java(major):
    """The `java` of a JDK with that major version, or None."""
    if major == 17 and shutil.which("java"):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        if re.search(r'version "17[."]', out):
            return shutil.which("java")
    for home in sorted(glob.glob("/usr/lib/jvm/*")):
        java = os.path.join(home, "bin", "java")
        if os.path.isfile(java) and not os.path.islink(home):
            out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
            if re.search(rf'version "{major}[."]', out) or re.search(rf'version "{major}"', out):
                return java
    return None


class KafkaJars:
    """One Apache Kafka version's jars in the cache folder: the broker and its tools, or with
    clients_only just `kafka-clients` and its dependencies ($TERN_CACHE/kafka-clients/<version>),
    or with mirror MirrorMaker 2 ($TERN_CACHE/kafka-mirror/<version>)."""

    def __init__(self, version=DEFAULT_VERSION, cache=None, clients_only=False, mirror=False):
        self.version = version
        self.clients_only = clients_only
        self.mirror = mirror
        kind = "kafka-clients" if clients_only else "kafka-mirror" if mirror else "kafka"
        self.home = Path(cache or cache_root()) / kind / version
        self.libs = self.home / "libs"

    @property
    def artifacts(self):
        if self.clients_only:
            return [("org.apache.kafka", "kafka-clients", None)]
        if self.mirror:
            # MirrorMaker 2 (connect-mirror) with the distribution's logging binding.
            binding = [a for a in artifacts(self.version) if a[1] not in ("kafka_2.13", "kafka_2.12", "kafka-tools", "zookeeper")]
            return [("org.apache.kafka", "connect-mirror", None)] + binding
        return artifacts(self.version)

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
        pom.write_text(pom_xml(self.version, self.artifacts))
        staging = self.home / "libs.partial"
        base = ["mvn", "-B", "-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
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
            raise RuntimeError(f"resolving Apache Kafka {self.version} failed:\n"
                               f"{out.stdout.decode(errors='replace')[-4000:]}")
        if list(staging.glob("slf4j-log4j12-*.jar")):
            # Kafka 2.x brings its own binding (log4j 1.2.17): keep only that one.
            for extra in list(staging.glob("slf4j-reload4j-*.jar")) + list(staging.glob("reload4j-*.jar")):
                extra.unlink()
        jars = sorted(p.name for p in staging.glob("*.jar"))
        for g, a, v in self.artifacts:
            if "reload4j" in a and any(j.startswith("slf4j-log4j12-") for j in jars):
                continue
            if f"{a}-{v or self.version}.jar" not in jars:
                raise RuntimeError(f"{a}-{v or self.version}.jar missing from the resolution: {jars}")
        (staging / "SHA256SUMS").write_text("".join(
            f"{hashlib.sha256((staging / j).read_bytes()).hexdigest()}  {j}\n" for j in jars))
        (staging / "log4j2.properties").write_text(LOG4J2.replace("SYSTEM_OUT", "SYSTEM_ERR")
                                                   .replace("level = info", "level = warn"))
        (staging / ".complete").write_text(f"{self.version}\n")
        shutil.rmtree(self.libs, ignore_errors=True)
        staging.rename(self.libs)

    def classpath(self):
        self.ensure()
        # An explicit, sorted list rather than `libs/*`, so the order never depends on the directory.
        return ":".join(str(p) for p in sorted(self.libs.glob("*.jar")))

    def command(self, main, *args, java=None, jvm_opts=(), log_config=None):
        """`java -cp <libs> main args`; log_config: a log4j (2.x/3.x) or log4j2 (4.x) file."""
        java = java or os.environ.get("JAVA", "java")
        logging = []
        if log_config:
            if vtuple(self.version) >= (4,):
                logging = [f"-Dlog4j2.configurationFile={log_config}"]
            else:
                logging = [f"-Dlog4j.configuration=file:{log_config}"]
        return [java, *jvm_opts, *logging, "-cp", self.classpath(), main, *map(str, args)]

    def _cds(self, java):
        """A dynamic class-data-sharing archive per JDK and jar set (it halves a tool's ~2 s JVM
        start), named by what it depends on, so another JDK or jar set gets its own: the JVM
        options that use it, and None; or, while there is none, the options that write it at exit
        to a temporary file, and (that file, the archive)."""
        real = os.path.realpath(shutil.which(java) or java)
        stamp = f"{real}:{os.stat(real).st_mtime_ns}:{self.classpath()}"
        archive = self.home / f"cds-{hashlib.sha1(stamp.encode()).hexdigest()[:16]}.jsa"
        # The archive's warnings (old class files it skips, an archive that no longer matches)
        # must not reach the tools' stderr, which the tests read.
        quiet = ["-Xlog:cds*=off", "-Xlog:class+path=off"]
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}", *quiet], None
        tmp = self.home / f".cds-{os.getpid()}-{time.time_ns()}.jsa"
        return [f"-XX:ArchiveClassesAtExit={tmp}", *quiet], (tmp, archive)

    def _tool_log_config(self):
        """The tools' logging: warnings and errors to stderr (tools-log4j2.yaml of the
        distribution, as properties; log4j 1 before 4.x)."""
        if vtuple(self.version) >= (4,):
            return self.libs / "log4j2.properties"  # written with the resolution
        path = self.home / "tools-log.properties"
        text = LOG4J1.replace("INFO, stdout", "WARN, stdout") + "log4j.appender.stdout.Target=System.err\n"
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_name(f".{path.name}-{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        return path

    def _tool_argv(self, tool, args, java, jvm_opts, cds):
        main = TOOLS.get(tool, tool)
        opts = TOOL_JVM_OPTS if jvm_opts is None else list(jvm_opts)
        return self.command(main, *args, java=java, jvm_opts=[*opts, *cds],
                            log_config=self._tool_log_config())

    def tool_command(self, tool, *args, java=None, jvm_opts=None):
        """The argv that `bin/<tool>.sh args...` amounts to, for a process the caller starts: tool
        is a TOOLS name or a main class; jvm_opts replace TOOL_JVM_OPTS; the class-data-sharing
        archive when there is one."""
        java = java or os.environ.get("JAVA", "java")
        cds, dump = self._cds(java)
        return self._tool_argv(tool, args, java, jvm_opts, [] if dump else cds)

    def run(self, tool, *args, input=None, timeout=90, check=False, java=None, jvm_opts=None):
        """Runs a tool (as tool_command) to completion; returns the CompletedProcess with text
        stdout and stderr (with check, a RuntimeError with both if it failed).  The first run for
        a JDK and jar set also writes the class-data-sharing archive."""
        java = java or os.environ.get("JAVA", "java")
        self.ensure()
        cds, dump = self._cds(java)
        try:
            proc = subprocess.run(self._tool_argv(tool, args, java, jvm_opts, cds), input=input,
                                  capture_output=True, text=True, timeout=timeout,
                                  stdin=None if input is not None else subprocess.DEVNULL)
            if dump and dump[0].is_file():
                os.replace(dump[0], dump[1])
        finally:
            if dump and dump[0].exists():
                dump[0].unlink()
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(map(str, args))} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc


# -- servers ---------------------------------------------------------------------------------------

# kafka-server-start.sh's defaults (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS).
SERVER_JVM_OPTS = [
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


class KafkaPeer:
    """A real single-node Apache Kafka of the given version: broker (and controller, or a
    ZooKeeper beside it) on loopback ports, data and logs under data_dir."""

    def __init__(self, version, data_dir, port=None, java=None, overrides=None, jvm_opts=None):
        self.version = version
        self.jars = KafkaJars(version)
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.zk_port = free_port()
        self.java = java or os.environ.get("JAVA", "java")
        self.overrides = dict(overrides or {})
        self.jvm_opts = list(SERVER_JVM_OPTS if jvm_opts is None else jvm_opts)
        self.proc = None
        self.zk_proc = None
        self.log_path = self.data_dir / "kafka.log"
        self.zk_log_path = self.data_dir / "zookeeper.log"

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def _properties(self):
        props = {
            "node.id" if kraft(self.version) else "broker.id": "1",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        if kraft(self.version):
            props.update({
                "process.roles": "broker,controller",
                "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            })
            if vtuple(self.version) >= (4,):
                props["share.coordinator.state.topic.replication.factor"] = "1"
                props["share.coordinator.state.topic.min.isr"] = "1"
        else:
            props.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "zookeeper.connect": f"127.0.0.1:{self.zk_port}",
                "zookeeper.connection.timeout.ms": "30000",
            })
        props.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _log_config(self):
        if vtuple(self.version) >= (4,):
            path = self.data_dir / "log4j2.properties"
            path.write_text(LOG4J2)
        else:
            path = self.data_dir / "log4j.properties"
            path.write_text(LOG4J1)
        return path

    def _start_zookeeper(self, deadline):
        zk_dir = self.data_dir / "zookeeper"
        zk_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"dataDir={zk_dir}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\n"
            "tickTime=2000\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n")
        log = open(self.zk_log_path, "ab")
        self.zk_proc = subprocess.Popen(
            self.jars.command("org.apache.zookeeper.server.ZooKeeperServerMain", cfg, java=self.java,
                              jvm_opts=["-Xmx256m"], log_config=self._log_config()),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        while time.time() < deadline:
            if self.zk_proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.zk_proc.returncode}:\n{self.tail(self.zk_log_path)}")
            try:
                with socket.create_connection(("127.0.0.1", self.zk_port), timeout=1) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"zookeeper did not start:\n{self.tail(self.zk_log_path)}")

    def start(self, timeout=90):
        deadline = time.time() + timeout
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.jars.ensure()
        conf = self.data_dir / "server.properties"
        conf.write_text(self._properties())
        log_config = self._log_config()
        try:
            if kraft(self.version):
                if not (self.data_dir / "logs" / "meta.properties").exists():
                    cluster_id = new_cluster_id()
                    fmt = subprocess.run(
                        self.jars.command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", conf,
                                          java=self.java, jvm_opts=["-Xmx256m"], log_config=log_config),
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
                    with open(self.log_path, "a") as f:
                        f.write(f"== kafka-storage format\n{fmt.stdout}{fmt.stderr}")
                    if fmt.returncode != 0:
                        raise RuntimeError(f"kafka-storage format exited {fmt.returncode}:\n{fmt.stdout}{fmt.stderr}")
            else:
                self._start_zookeeper(deadline)
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                self.jars.command("kafka.Kafka", conf, java=self.java, jvm_opts=self.jvm_opts,
                                  log_config=log_config),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"kafka {self.version} exited with {self.proc.returncode}:\n{self.tail()}")
                if broker_serves("127.0.0.1", self.port):
                    return self
                time.sleep(0.3)
            raise RuntimeError(f"kafka {self.version} did not serve in {timeout}s:\n{self.tail()}")
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for attr in ("proc", "zk_proc"):
            stop_process(getattr(self, attr))
            setattr(self, attr, None)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def tail(self, path=None, n=40):
        try:
            lines = Path(path or self.log_path).read_bytes().splitlines()
            return b"\n".join(lines[-n:]).decode(errors="replace")
        except OSError:
            return ""


# MirrorMaker 2 of this version: connect-mirror 4.4.0 is not served by the Maven mirror here, 4.3.1 is.
MIRROR_VERSION = os.environ.get("TERN_MIRROR_VERSION", "4.3.1")


class MirrorMaker2:
    """A dedicated MirrorMaker 2 (org.apache.kafka.connect.mirror.MirrorMaker) replicating every
    topic of cluster `source` to cluster `target` (as `source.<topic>`, the default replication
    policy), with offset syncs and checkpoints every second; config, log and internal topics at
    replication factor 1.  Any two bootstrap addresses: tern, Apache Kafka or one of each."""

    def __init__(self, source_bootstrap, target_bootstrap, work_dir, version=MIRROR_VERSION,
                 java=None, topics=".*", groups=".*", extra=None):
        self.jars = KafkaJars(version, mirror=True)
        self.work_dir = Path(work_dir)
        self.java = java or os.environ.get("JAVA", "java")
        self.props = {
            "clusters": "source, target",
            "source.bootstrap.servers": source_bootstrap,
            "target.bootstrap.servers": target_bootstrap,
            "source->target.enabled": "true",
            "target->source.enabled": "false",
            "source->target.topics": topics,
            "source->target.groups": groups,
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1",
            "emit.heartbeats.interval.seconds": "1",
        }
        self.props.update(extra or {})
        self.proc = None
        self.log_path = self.work_dir / "mirrormaker.log"

    def start(self):
        self.work_dir.mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "mm2.properties"
        conf.write_text("".join(f"{k} = {v}\n" for k, v in self.props.items()))
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        self.proc = subprocess.Popen(
            self.jars.command("org.apache.kafka.connect.mirror.MirrorMaker", conf, java=self.java,
                              jvm_opts=["-Xmx512m"], log_config=log4j),
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise RuntimeError(f"MirrorMaker exited with {self.proc.returncode}:\n{self.tail()}")
        return self

    def stop(self):
        stop_process(self.proc)
        self.proc = None

    def tail(self, n=40):
        try:
            return b"\n".join(self.log_path.read_bytes().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""


# -- command line -----------------------------------------------------------------------------------

def probe(versions, javas):
    """Starts and stops each version under each JDK; returns [(version, java, ok, seconds, why)]."""
    results = []
    for version in versions:
        try:
            KafkaJars(version).ensure()
        except Exception as e:  # noqa: BLE001 -- the reason goes in the table
            results.append((version, "-", False, 0.0, f"resolution failed: {str(e).splitlines()[0]}"))
            continue
        for java_name, java in javas:
            with tempfile.TemporaryDirectory(prefix=f"kafka-probe-{version}-") as d:
                t0 = time.time()
                peer = KafkaPeer(version, d, java=java, jvm_opts=["-Xmx512m"])
                try:
                    peer.start()
                    peer.stop()
                    results.append((version, java_name, True, time.time() - t0, "serves"))
                except Exception as e:  # noqa: BLE001
                    text = str(e)
                    keep = os.path.join(tempfile.gettempdir(), f"kafka-probe-{version}-{java_name}.log")
                    shutil.copy(peer.log_path, keep) if peer.log_path.exists() else None
                    if peer.zk_log_path.exists():
                        shutil.copy(peer.zk_log_path, keep + ".zk")
                    why = next((l for l in text.splitlines() if re.search(r"Exception|Error", l)), text.splitlines()[0])
                    results.append((version, java_name, False, time.time() - t0, f"{why.strip()[:200]} (log: {keep})"))
    return results


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("versions", nargs="*", default=[DEFAULT_VERSION])
    s = sub.add_parser("serve")
    s.add_argument("version")
    s.add_argument("--port", type=int)
    s.add_argument("--java")
    s.add_argument("--data-dir")
    p = sub.add_parser("probe")
    p.add_argument("versions", nargs="+")
    p.add_argument("--java", action="append", help="NAME=PATH; default: java17 and java25 where found")
    m = sub.add_parser("mirror", help="MirrorMaker 2 from one bootstrap address to another until Ctrl-C")
    m.add_argument("source")
    m.add_argument("target")
    m.add_argument("--version", default=MIRROR_VERSION)
    t = sub.add_parser("tool", help="a TOOLS name (kafka-topics, ...) or a main class, until it exits")
    t.add_argument("version")
    t.add_argument("main")
    t.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.cmd == "fetch":
        for v in a.versions:
            print(KafkaJars(v).ensure(quiet=False).libs, flush=True)
    elif a.cmd == "serve":
        d = a.data_dir or tempfile.mkdtemp(prefix=f"kafka-{a.version}-")
        peer = KafkaPeer(a.version, d, port=a.port, java=a.java).start()
        print(f"Apache Kafka {a.version} serving on {peer.bootstrap}; logs in {d}", flush=True)
        try:
            peer.proc.wait()
        except KeyboardInterrupt:
            pass
        finally:
            peer.stop()
    elif a.cmd == "probe":
        javas = [tuple(j.split("=", 1)) for j in a.java] if a.java else \
            [(f"java{m}", p) for m in (17, 25) if (p := find_java(m))]
        for version, java, ok, secs, why in probe(a.versions, javas):
            print(f"| {version} | {java} | {'yes' if ok else 'no'} | {secs:.0f} s | {why} |", flush=True)
    elif a.cmd == "mirror":
        d = tempfile.mkdtemp(prefix="mm2-")
        mm = MirrorMaker2(a.source, a.target, d, version=a.version).start()
        print(f"MirrorMaker 2 {a.version}: {a.source} -> {a.target} (topics as source.<name>); log {mm.log_path}", flush=True)
        try:
            mm.proc.wait()
        except KeyboardInterrupt:
            pass
        finally:
            mm.stop()
    elif a.cmd == "tool":
        cmd = KafkaJars(a.version).command(TOOLS.get(a.main, a.main), *a.args)
        os.execvp(cmd[0], cmd)
    return 0



# -- a multi-broker KRaft cluster -------------------------------------------------------------------

# Small heaps and the C1 compiler only: three JVMs (and whatever the test runs beside them) share a
# small machine, and start in half the time without C2 (start-up is CPU-bound).
CLUSTER_JVM_OPTS = [
    "-Xmx256m", "-Xms256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
]


class KafkaCluster:
    """A real multi-broker Apache Kafka (KRaft, 3.x/4.x): `brokers` combined broker+controller
    nodes (node ids 1..brokers) that form one controller quorum of as many voters, each with its
    own PLAINTEXT and CONTROLLER loopback ports, data dir (node-<id>/) and log (node-<id>/kafka.log),
    all formatted with one cluster id.  Internal topics get replication factor min(3, brokers);
    a killed broker is fenced, and leaves every ISR, after 4 s (broker.session.timeout.ms).

    `start()` returns once every broker lists every broker in Metadata; `kill(node_id)` sends
    SIGKILL, `stop_node(node_id)` SIGTERM, `start_node(node_id)` starts a node again on its data
    and ports (and waits until every running broker lists it); `stop()` stops all.  `bootstrap`
    names all brokers, `address(node_id)` one.  With 3 voters any one node can be killed and the
    quorum goes on (2 of 3).

    Start-up: the servers share a class-data-sharing archive per JDK and jar set
    ($TERN_CACHE/kafka/<version>/cds-cluster-*.jsa: 3 nodes up in ~10 s instead of ~22 s on two
    cores); the first cluster without one has node 1 write it when it is stopped with SIGTERM."""

    def __init__(self, version, data_dir, brokers=3, java=None, overrides=None, jvm_opts=None):
        if not kraft(version):
            raise ValueError(f"KafkaCluster needs KRaft (3.x or later), not {version}")
        self.version = version
        self.jars = KafkaJars(version)
        self.data_dir = Path(data_dir)
        self.node_ids = list(range(1, brokers + 1))
        self.ports = {n: free_port() for n in self.node_ids}
        self.controller_ports = {n: free_port() for n in self.node_ids}
        self.java = java or os.environ.get("JAVA", "java")
        self.overrides = dict(overrides or {})
        self.jvm_opts = list(CLUSTER_JVM_OPTS if jvm_opts is None else jvm_opts)
        self.procs = {}
        self.cluster_id = new_cluster_id()
        self._cds_dump = None  # (temporary file, archive) while node 1 records one

    @property
    def bootstrap(self):
        return ",".join(self.address(n) for n in self.node_ids)

    def address(self, node_id):
        return f"127.0.0.1:{self.ports[node_id]}"

    def node_dir(self, node_id):
        return self.data_dir / f"node-{node_id}"

    def log_path(self, node_id):
        return self.node_dir(node_id) / "kafka.log"

    def pid(self, node_id):
        proc = self.procs.get(node_id)
        return proc.pid if proc and proc.poll() is None else None

    def running(self):
        return [n for n in self.node_ids if self.pid(n)]

    def _properties(self, node_id):
        rf = min(3, len(self.node_ids))
        min_isr = max(1, rf - 1)
        voters = ",".join(f"{n}@127.0.0.1:{self.controller_ports[n]}" for n in self.node_ids)
        props = {
            "node.id": str(node_id),
            "process.roles": "broker,controller",
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]},"
                         f"CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.node_dir(node_id) / "logs"),
            "num.partitions": "1",
            "default.replication.factor": str(rf),
            "offsets.topic.replication.factor": str(rf),
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min_isr),
            "transaction.state.log.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "4000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        }
        if vtuple(self.version) >= (4,):
            props["share.coordinator.state.topic.replication.factor"] = str(rf)
            props["share.coordinator.state.topic.min.isr"] = str(min_isr)
        props.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _log_config(self, node_id):
        if vtuple(self.version) >= (4,):
            path = self.node_dir(node_id) / "log4j2.properties"
            path.write_text(LOG4J2)
        else:
            path = self.node_dir(node_id) / "log4j.properties"
            path.write_text(LOG4J1)
        return path

    def _server_cds(self, node_id):
        """JVM options for the shared server archive (node 1 records it when there is none)."""
        real = os.path.realpath(shutil.which(self.java) or self.java)
        stamp = f"server:{real}:{os.stat(real).st_mtime_ns}:{self.jars.classpath()}"
        archive = self.jars.home / f"cds-cluster-{hashlib.sha1(stamp.encode()).hexdigest()[:16]}.jsa"
        quiet = ["-Xlog:cds*=off", "-Xlog:class+path=off"]
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}", *quiet]
        if node_id != self.node_ids[0]:
            return []
        tmp = self.jars.home / f".cds-cluster-{os.getpid()}-{time.time_ns()}.jsa"
        self._cds_dump = (tmp, archive)
        return [f"-XX:ArchiveClassesAtExit={tmp}", *quiet]

    def _finish_cds(self):
        if self._cds_dump:
            tmp, archive = self._cds_dump
            proc = self.procs.get(self.node_ids[0])
            # 143: the JVM's exit after SIGTERM (128 + 15), which writes the archive first.
            if tmp.is_file() and proc is not None and proc.returncode in (0, 143):
                os.replace(tmp, archive)
            elif tmp.exists():
                tmp.unlink()
            self._cds_dump = None

    def _format(self, nodes):
        """kafka-storage format, one JVM per node in parallel, for nodes not formatted yet."""
        cds, dump = self.jars._cds(self.java)
        jvm = ["-Xmx256m", "-XX:TieredStopAtLevel=1", *([] if dump else cds)]
        running = []
        for n in nodes:
            if (self.node_dir(n) / "logs" / "meta.properties").exists():
                continue
            conf = self.node_dir(n) / "server.properties"
            running.append((n, subprocess.Popen(
                self.jars.command("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", conf,
                                  java=self.java, jvm_opts=jvm, log_config=self._log_config(n)),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)))
        for n, p in running:
            out, _ = p.communicate(timeout=120)
            with open(self.log_path(n), "a") as f:
                f.write(f"== kafka-storage format\n{out}")
            if p.returncode != 0:
                raise RuntimeError(f"kafka-storage format (node {n}) exited {p.returncode}:\n{out}")

    def _configure(self, node_id):
        self.node_dir(node_id).mkdir(parents=True, exist_ok=True)
        (self.node_dir(node_id) / "server.properties").write_text(self._properties(node_id))

    def _launch(self, node_id):
        conf = self.node_dir(node_id) / "server.properties"
        log = open(self.log_path(node_id), "ab")
        try:
            self.procs[node_id] = subprocess.Popen(
                self.jars.command("kafka.Kafka", conf, java=self.java,
                                  jvm_opts=[*self._server_cds(node_id), *self.jvm_opts],
                                  log_config=self._log_config(node_id)),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def _wait(self, nodes, deadline, what):
        """Until every node in `nodes` lists every node of `nodes` in its Metadata."""
        want = set(nodes)
        while time.time() < deadline:
            for n in nodes:
                proc = self.procs.get(n)
                if proc is None or proc.poll() is not None:
                    code = proc.returncode if proc else None
                    raise RuntimeError(f"kafka node {n} exited with {code} ({what}):\n{self.tail(n)}")
            if all(want <= (metadata_brokers("127.0.0.1", self.ports[n]) or set()) for n in nodes):
                return
            time.sleep(0.3)
        raise RuntimeError(f"kafka cluster did not come up ({what}):\n" +
                           "\n".join(f"-- node {n}\n{self.tail(n)}" for n in nodes))

    def start(self, timeout=120):
        deadline = time.time() + timeout
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.jars.ensure()
        try:
            for n in self.node_ids:
                self._configure(n)
            self._format(self.node_ids)
            for n in self.node_ids:
                self._launch(n)
            self._wait(self.node_ids, deadline, "start")
            return self
        except BaseException:
            self.stop(graceful=False)
            raise

    def start_node(self, node_id, timeout=90):
        """Starts a stopped or killed node again; returns once every running node lists it."""
        if self.pid(node_id):
            return self
        self._configure(node_id)
        self._format([node_id])
        self._launch(node_id)
        self._wait(self.running(), time.time() + timeout, f"restart of node {node_id}")
        return self

    def kill(self, node_id):
        """kill -9 one node."""
        kill_process(self.procs.get(node_id))

    def stop_node(self, node_id, timeout=30):
        """SIGTERM one node (SIGKILL after `timeout`)."""
        stop_process(self.procs.get(node_id), timeout)

    def stop(self, graceful=True, timeout=30):
        """Stops every node: SIGTERM to all at once (SIGKILL after `timeout`), or SIGKILL."""
        live = [p for p in self.procs.values() if p.poll() is None]
        for p in live:
            if graceful:
                p.send_signal(signal.SIGTERM)
            else:
                p.kill()
        deadline = time.time() + timeout
        for p in live:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._finish_cds()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def tail(self, node_id, n=40):
        try:
            lines = self.log_path(node_id).read_bytes().splitlines()
            return b"\n".join(lines[-n:]).decode(errors="replace")
        except OSError:
            return ""


def cluster_main(argv):
    """`kafka_peer.py cluster VERSION [--brokers 3] [--data-dir D]`: a cluster until Ctrl-C."""
    ap = argparse.ArgumentParser(prog="kafka_peer.py cluster")
    ap.add_argument("version")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--data-dir")
    ap.add_argument("--java")
    a = ap.parse_args(argv)
    d = a.data_dir or tempfile.mkdtemp(prefix=f"kafka-cluster-{a.version}-")
    cluster = KafkaCluster(a.version, d, brokers=a.brokers, java=a.java).start()
    print(f"Apache Kafka {a.version}, {a.brokers} brokers, serving on {cluster.bootstrap}; "
          f"logs in {d}/node-*/kafka.log", flush=True)
    try:
        while any(p.poll() is None for p in cluster.procs.values()):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["cluster"]:
        sys.exit(cluster_main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
