"""Leader epochs and a Java consumer group across a mirror failover (KIP-320 end to end).

A single-node Apache Kafka 4.4 source is restarted twice between writes, so its topic's batches
span three partition leader epochs (checked with RawKafka).  A consumer group of Kafka's own Java
client (kafka-clients 4.4.0, the small program JAVA_CONSUMER below, compiled with javac at test
time) consumes part of each partition on the source and commits: the committed offsets carry the
leader epoch of the last record consumed (> 0; one partition's offset is exactly the first offset
of the last epoch).  Tern mirrors the topic and syncs the group's offsets
(mirror.metadata.refresh.interval.ms=500): they must arrive with the same leader epochs.  Tern
must answer OffsetForLeaderEpoch (raw v3) as the source does for every epoch up to the highest,
before and after the failover, and lead each partition in an epoch at least as high as its
batches'.  After `tern mirrors --stop`, the Java consumer of the same group, with
auto.offset.reset earliest or latest (the parameter), must resume at exactly the committed
offset on every partition (a failed KIP-320 validation would reset it to 0 or to the end) and
read every remaining record once, with the source's values and leader epochs.

The source (and its topic) starts once for the module; each test has its own Tern and group.
"""

import re
import shutil
import subprocess
import time
import uuid

import pytest

import kafka_peer
import mirror_chain_util as mcu
import mirror_util as mu
from replication_util import metadata_v7
from test_mirror_kafka import (MAIN_VERSION, Sources, compare_topic, consume_all, create_topics,
                               high_watermarks, produce, start_mirror, topic_config)

PARTITIONS = 3
PER_PHASE = 150  # records per partition written in each leader epoch

JAVA_CONSUMER = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** commit BOOTSTRAP GROUP TOPIC P=OFFSET,...: a group member (subscribe) that consumes every
 *  partition from the start up to OFFSET (exclusive), one record per poll, pauses each partition
 *  there and commits its positions (commitSync(): offsets and leader epochs as the client keeps
 *  them).
 *  resume BOOTSTRAP GROUP TOPIC RESET EXPECTED TIMEOUT_MS: a group member with
 *  auto.offset.reset=RESET that reads until EXPECTED records came (then 2 s more, to see
 *  duplicates) or TIMEOUT_MS passed, then commits.
 *  Output lines: COMMITTED p offset epoch | R p offset epoch hex(value) | ASSIGNED p,... | DONE n */
public class EpochConsumer {
    static String hex(byte[] b) {
        if (b == null) return "null";
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.length() == 0 ? "-" : s.toString();
    }

    static void printCommitted(KafkaConsumer<byte[], byte[]> c, String topic) {
        Set<TopicPartition> tps = new TreeSet<>(Comparator.comparingInt(TopicPartition::partition));
        c.partitionsFor(topic).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
        Map<TopicPartition, OffsetAndMetadata> m = c.committed(tps, Duration.ofSeconds(20));
        for (TopicPartition tp : tps) {
            OffsetAndMetadata om = m.get(tp);
            if (om == null) System.out.println("COMMITTED " + tp.partition() + " -1 -1");
            else System.out.println("COMMITTED " + tp.partition() + " " + om.offset() + " "
                                    + om.leaderEpoch().orElse(-1));
        }
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], bootstrap = a[1], group = a[2], topic = a[3];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "epoch-" + mode);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", "read_committed");
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "1000");
        if (mode.equals("commit")) {
            p.put("auto.offset.reset", "earliest");
            p.put("max.poll.records", "1");
        } else {
            p.put("auto.offset.reset", a[4]);
        }
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {}
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    StringBuilder s = new StringBuilder("ASSIGNED");
                    for (TopicPartition tp : tps) s.append(" ").append(tp.partition());
                    System.out.println(s);
                }
            });
            int n = 0;
            if (mode.equals("commit")) {
                Map<Integer, Long> target = new HashMap<>();
                for (String kv : a[4].split(",")) {
                    String[] x = kv.split("=");
                    target.put(Integer.parseInt(x[0]), Long.parseLong(x[1]));
                }
                Set<Integer> done = new HashSet<>();
                long deadline = System.currentTimeMillis() + 60_000;
                while (done.size() < target.size()) {
                    if (System.currentTimeMillis() > deadline) throw new RuntimeException("timed out: done " + done);
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        n++;
                        System.out.println("R " + r.partition() + " " + r.offset() + " "
                                           + r.leaderEpoch().orElse(-1) + " " + hex(r.value()));
                        if (r.offset() + 1 >= target.get(r.partition())) {
                            TopicPartition tp = new TopicPartition(topic, r.partition());
                            c.pause(List.of(tp));
                            done.add(r.partition());
                            System.out.println("POSITION " + r.partition() + " " + c.position(tp));
                        }
                    }
                }
                c.commitSync();
            } else {
                long expected = Long.parseLong(a[5]);
                long deadline = System.currentTimeMillis() + Long.parseLong(a[6]);
                long stopAt = Long.MAX_VALUE;
                while (System.currentTimeMillis() < Math.min(deadline, stopAt)) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        n++;
                        System.out.println("R " + r.partition() + " " + r.offset() + " "
                                           + r.leaderEpoch().orElse(-1) + " " + hex(r.value()));
                    }
                    if (n >= expected && stopAt == Long.MAX_VALUE) stopAt = System.currentTimeMillis() + 2000;
                }
                c.commitSync();
            }
            printCommitted(c, topic);
            System.out.println("DONE " + n);
        }
    }
}
"""

# The Java client's own account of offset validation and resets (KIP-320), for failure messages.
JAVA_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
logger.sub.name = org.apache.kafka.clients.consumer.internals.SubscriptionState
logger.sub.level = info
logger.fetch.name = org.apache.kafka.clients.consumer.internals.OffsetFetcher
logger.fetch.level = info
logger.coord.name = org.apache.kafka.clients.consumer.internals.ConsumerCoordinator
logger.coord.level = info
logger.utils.name = org.apache.kafka.clients.consumer.internals.ConsumerUtils
logger.utils.level = info
logger.ofle.name = org.apache.kafka.clients.consumer.internals.OffsetsForLeaderEpochUtils
logger.ofle.level = debug
"""


class JavaConsumer:
    """EpochConsumer compiled once against Apache Kafka 4.4.0's jars."""

    def __init__(self, work):
        self.jars = kafka_peer.KafkaJars(MAIN_VERSION).ensure()
        self.work = work
        src = work / "EpochConsumer.java"
        src.write_text(JAVA_CONSUMER)
        out = subprocess.run(["javac", "-nowarn", "-d", str(work), "-cp", self.jars.classpath(), str(src)],
                             capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise AssertionError(f"javac EpochConsumer failed:\n{out.stderr}")
        self.log4j = work / "log4j2.properties"
        self.log4j.write_text(JAVA_LOG4J2)

    def run(self, *args, timeout=120):
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile={self.log4j}",
               "-cp", f"{self.work}:{self.jars.classpath()}", "EpochConsumer", *map(str, args)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise AssertionError(f"EpochConsumer {args} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}")
        return Output(p.stdout, p.stderr)


class Output:
    def __init__(self, stdout, stderr):
        self.stdout, self.stderr = stdout, stderr
        self.records = []  # (partition, offset, leader epoch, value bytes or None)
        self.committed = {}  # partition: (offset, leader epoch)
        self.positions = {}
        for line in stdout.splitlines():
            f = line.split()
            if not f:
                continue
            if f[0] == "R":
                value = None if f[4] == "null" else b"" if f[4] == "-" else bytes.fromhex(f[4])
                self.records.append((int(f[1]), int(f[2]), int(f[3]), value))
            elif f[0] == "COMMITTED":
                self.committed[int(f[1])] = (int(f[2]), int(f[3]))
            elif f[0] == "POSITION":
                self.positions[int(f[1])] = int(f[2])

    def validations(self, topic):
        """{partition: (end offset, epoch)} from the client's OffsetsForLeaderEpoch log lines
        (kafka-clients 4.4.0's wording): the committed position's epoch validated with the broker."""
        return {int(p): (int(off), int(e)) for p, off, e in re.findall(
            rf"Handling OffsetsForLeaderEpoch response for {re.escape(topic)}-(\d+)\. Got offset (-?\d+) "
            rf"for epoch (-?\d+)", self.stderr)}

    def committed_positions(self, topic):
        """{partition: (offset, epoch)} the client says it resumed at (its committed offset)."""
        return {int(p): (int(off), int(e)) for p, off, e in re.findall(
            rf"Setting offset for partition {re.escape(topic)}-(\d+) to the committed offset "
            rf"FetchPosition\{{offset=(\d+), offsetEpoch=Optional\[(-?\d+)\]", self.stderr)}

    def client_log(self, n=40):
        """The consumer's log lines about positions, validation and resets."""
        keep = [l for l in self.stderr.splitlines()
                if any(w in l for w in ("esetting", "runcation", "alidat", "offset", "epoch"))]
        return "\n".join(keep[-n:])


# -- the source: three leader epochs ---------------------------------------------------------------

@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A Kafka 4.4 topic of PARTITIONS partitions whose records span three leader epochs:
    PER_PHASE records per partition before the first restart, after it, and after the second."""
    s = Sources(tmp_path_factory.mktemp("epochs-source"))
    try:
        kafka = s.get(MAIN_VERSION)
        topic = f"epochs-{uuid.uuid4().hex[:6]}"
        create_topics(kafka.bootstrap, {topic: (PARTITIONS, None)})
        ends = []
        for phase in range(3):
            if phase:
                kafka.stop()
                time.sleep(1.0)
                kafka.start(timeout=120)
            produce(kafka.bootstrap, topic, PER_PHASE * PARTITIONS, PARTITIONS, start=phase * 10_000,
                    tag=f"phase{phase}", codec=["lz4", "gzip", "zstd"][phase], enable_idempotence=True)
            ends.append(high_watermarks(kafka.bootstrap, topic, PARTITIONS))
        batches = mcu.read_topic_batches(kafka.bootstrap, topic, PARTITIONS)
        yield kafka, topic, batches, ends
    finally:
        s.stop_all()


def phase_epochs(batches, ends):
    """{partition: [epoch of phase 0, 1, 2]}: each phase's batches must share one epoch."""
    out = {}
    for p, bs in batches.items():
        per = []
        for i in range(3):
            lo = ends[i - 1][p] if i else 0
            es = {b.leader_epoch for b in bs if lo <= b.base_offset < ends[i][p]}
            assert len(es) == 1, f"partition {p} phase {i}: batch epochs {es}"
            per.append(es.pop())
        out[p] = per
    return out


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs javac and java (the Java consumer is compiled at test time)")
    return JavaConsumer(tmp_path_factory.mktemp("epoch-consumer"))


@pytest.fixture
def tern(tmp_path):
    t = mcu.start_terns(tmp_path, ["tern"])["tern"]
    try:
        yield t
    finally:
        t.stop()


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_java_consumer_resumes_at_its_committed_offset_after_failover(source, java, tern, tmp_path, reset):
    kafka, topic, src_batches, ends = source
    t0 = time.time()
    epochs = phase_epochs(src_batches, ends)
    print(f"source phases end at {ends}; epochs per phase {epochs}")
    for p, es in epochs.items():
        assert es[0] < es[1] < es[2] and es[1] > 0, \
            f"partition {p}: the source restarts did not raise the leader epoch: {es}"

    # The group consumes part of the source: p0 into the second epoch, p1 into the third, p2 up to
    # exactly the first offset of the third (its last record read is the second epoch's last).
    targets = {0: ends[0][0] + 37, 1: ends[1][1] + 61, 2: ends[1][2]}
    group = f"java-{reset}-{uuid.uuid4().hex[:6]}"
    out = java.run("commit", kafka.bootstrap, group, topic, ",".join(f"{p}={o}" for p, o in targets.items()))
    assert out.positions == targets, f"positions {out.positions}\n{out.client_log()}"
    want = {p: (targets[p], mcu.epoch_of_offset(src_batches[p], targets[p] - 1)) for p in targets}
    assert want == {0: (targets[0], epochs[0][1]), 1: (targets[1], epochs[1][2]), 2: (targets[2], epochs[2][1])}
    assert out.committed == want, f"the Java consumer committed {out.committed}, expected {want}"
    # OffsetFetch through librdkafka sees the same leader epochs.
    assert mcu.committed_with_epochs(kafka.bootstrap, group, topic, PARTITIONS) == want
    assert all(e > 0 for _, e in want.values()), want

    # Tern mirrors the topic and syncs the group's offsets, leader epochs included.
    mirror = f"m-epochs-{reset}"
    start_mirror(tern, kafka, mirror, [topic], tmp_path)
    mu.wait_mirrored(tern.bootstrap, mirror, kafka.bootstrap, [topic], timeout=60)
    batches = compare_topic(kafka, tern, topic, PARTITIONS)
    assert {p: [b.data for b in bs] for p, bs in batches.items()} == \
        {p: [b.data for b in bs] for p, bs in src_batches.items()}, "the source changed under the test"
    mcu.wait_committed_with_epochs(tern.bootstrap, group, topic, want, what="tern")
    print(f"[{time.time() - t0:.0f}s] mirrored; group {group} synced: {want}")

    top = {p: max(es) for p, es in epochs.items()}
    asked = {p: list(range(0, top[p] + 1)) for p in range(PARTITIONS)}
    answers_src = mcu.epoch_end_offsets(kafka.bootstrap, topic, asked)

    def check_tern_epochs(when):
        answers = mcu.epoch_end_offsets(tern.bootstrap, topic, asked)
        diff = {k: {"source": answers_src[k], "tern": answers[k]} for k in answers_src if answers[k] != answers_src[k]}
        assert not diff, f"{when}: OffsetForLeaderEpoch (error, epoch, end offset) differs: {diff}"
        parts = metadata_v7(tern.bootstrap, [topic]).topics[topic].partitions
        low = {p: parts[p].epoch for p in range(PARTITIONS) if parts[p].epoch < top[p]}
        assert not low, f"{when}: tern leads in epochs {low}, below its batches' {top}"
        return {p: parts[p].epoch for p in range(PARTITIONS)}

    before = check_tern_epochs("while mirroring")
    print(f"OffsetForLeaderEpoch on the source: {answers_src}; tern's partition epochs {before}")

    # Failover.
    out_stop = mu.mirrors(tern.bootstrap, "--stop", "--mirror", mirror, "--topics", topic)
    assert "Stopped" in out_stop.stdout, out_stop.stdout
    mcu.wait_states(tern.bootstrap, mirror, topic, "STOPPED")
    assert topic_config(tern.bootstrap, topic).get("mirror.name") == f"{mirror}.stopped"
    after = check_tern_epochs("after the failover")
    assert mcu.committed_with_epochs(tern.bootstrap, group, topic, PARTITIONS) == want
    print(f"[{time.time() - t0:.0f}s] failed over; tern's partition epochs {after}")

    # The Java consumer of the same group resumes on tern at its committed offsets.
    end = high_watermarks(tern.bootstrap, topic, PARTITIONS)
    src_records = {(r[0], r[1]): r[3] for r in consume_all(kafka.bootstrap, topic, PARTITIONS)}
    expected = sum(end[p] - targets[p] for p in range(PARTITIONS))
    out = java.run("resume", tern.bootstrap, group, topic, reset, expected, 60_000)
    first = {}
    for p, off, _, _ in out.records:
        first.setdefault(p, off)
    assert first == targets, (
        f"auto.offset.reset={reset}: the consumer started at {first}, its committed offsets are "
        f"{targets} (ends {end})\nclient log:\n{out.client_log()}")
    seen = [(p, off) for p, off, _, _ in out.records]
    dups = sorted({k for k in seen if seen.count(k) > 1})
    assert not dups, f"records read twice: {dups[:10]}"
    want_keys = sorted((p, o) for p in range(PARTITIONS) for o in range(targets[p], end[p]))
    assert sorted(seen) == want_keys, \
        f"read {len(seen)} records, expected {len(want_keys)}: missing {sorted(set(want_keys) - set(seen))[:10]}"
    wrong = [(p, off) for p, off, _, v in out.records if v != src_records[(p, off)]]
    assert not wrong, f"values differ from the source's at {wrong[:10]}"
    wrong_epoch = [(p, off, e) for p, off, e, _ in out.records if e != mcu.epoch_of_offset(src_batches[p], off)]
    assert not wrong_epoch, f"records with another leader epoch than on the source: {wrong_epoch[:10]}"
    # The client took the committed offsets with their epochs from tern and validated them there
    # with OffsetForLeaderEpoch (KIP-320), getting the source's end offsets of those epochs.
    assert out.committed_positions(topic) == want, f"{out.committed_positions(topic)}\n{out.client_log()}"
    assert out.validations(topic) == {p: (answers_src[(p, e)][2], e) for p, (_, e) in want.items()}, \
        f"{out.validations(topic)}\n{out.client_log()}"
    # Its commit on tern ends at the end of each partition.
    assert {p: o for p, (o, _) in out.committed.items()} == end, out.committed
    print(f"[{time.time() - t0:.0f}s] resumed at {first}, read {len(seen)} records; committed {out.committed}")
