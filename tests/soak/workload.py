"""The soak's workload: threads that write, consume, commit, create and delete topics, feed the
mirror's source and kill Tern, each recording what it was told into the Ledger.

Every client here rides through Tern's restarts on its own (librdkafka reconnects and retries);
a request that fails while Tern is down is counted, never retried by hand, so that what the
ledger calls acknowledged is exactly what Tern acknowledged.
"""

import logging
import random
import threading
import time
import traceback

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ledger import record_key, record_value
from tern_process import Tern

# Long enough for a record to wait out any restart (librdkafka retries it until then).
MESSAGE_TIMEOUT_MS = 300_000

# librdkafka's own log (every kill makes each client log its refused connections): the soak sends
# it to a file in its work dir rather than to the terminal.
CLIENT_LOG = logging.getLogger("soak.clients")


def client_conf(bootstrap, **conf):
    """A client configuration with librdkafka's log going to CLIENT_LOG."""
    return {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, **conf}


class Worker(threading.Thread):
    """A daemon thread that runs `work()` until `stop()`; an exception ends the soak (a harness
    failure, not a violation), kept in `failure`."""

    def __init__(self, name, ledger):
        super().__init__(name=name, daemon=True)
        self.ledger = ledger
        self.stopping = threading.Event()
        self.failure = None

    def run(self):
        try:
            self.work()
        except Exception:  # noqa: BLE001 -- reported by the soak's main loop
            self.failure = traceback.format_exc()

    def stop(self):
        self.stopping.set()

    def pause(self, seconds):
        """Sleeps unless stopped first; True when stopped."""
        return self.stopping.wait(seconds)


def idempotent_producer(bootstrap, on_error=None):
    conf = client_conf(bootstrap, **{
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
    })
    if on_error:
        conf["error_cb"] = on_error
    return Producer(conf)


def produce_tracked(ledger, producer, writer, seq, topic, partition):
    """Hands one record to the producer; its delivery report goes to the ledger."""

    def report(err, msg):
        if err is None:
            ledger.delivered(writer, seq, msg.topic(), msg.partition(), msg.offset())
        else:
            ledger.delivery_failed(err.name())

    ledger.sending(writer, seq, topic, partition)
    value = record_value(writer, seq)
    headers = [("writer", writer.encode()), ("seq", str(seq).encode())]
    while True:
        try:
            producer.produce(topic, value=value, key=record_key(writer, seq), partition=partition,
                             headers=headers, on_delivery=report)
            return
        except BufferError:  # the local queue is full while Tern is down: wait for room
            producer.poll(0.1)


class TopicWriter(Worker):
    """An idempotent acks=all producer writing `rate` records/s to random partitions of the
    soak's topics. Every `rotate` seconds (random within the range) it flushes and starts a new
    producer, so that many producer ids live across kills."""

    def __init__(self, index, ledger, bootstrap, partitions_by_topic, rate, rotate, seed):
        super().__init__(f"writer-{index}", ledger)
        self.index = index
        self.bootstrap = bootstrap
        self.targets = [(t, p) for t, n in sorted(partitions_by_topic.items()) for p in range(n)]
        self.rate = rate
        self.rotate = rotate
        self.rng = random.Random(seed)
        self.generation = 0
        self.fatal = threading.Event()

    def writer_name(self):
        return f"w{self.index}.{self.generation}"

    def on_client_error(self, err):
        if err.fatal():
            self.ledger.producer_fatal(self.writer_name(), str(err))
            self.fatal.set()

    def work(self):
        while not self.stopping.is_set():
            self.write_one_generation()
            self.generation += 1

    def write_one_generation(self):
        producer = idempotent_producer(self.bootstrap, self.on_client_error)
        writer = self.writer_name()
        self.fatal.clear()
        rotate_at = time.monotonic() + self.rng.uniform(*self.rotate)
        next_send = time.monotonic()
        seq = 0
        while not self.stopping.is_set() and not self.fatal.is_set() and time.monotonic() < rotate_at:
            topic, partition = self.rng.choice(self.targets)
            produce_tracked(self.ledger, producer, writer, seq, topic, partition)
            seq += 1
            producer.poll(0)
            next_send += 1.0 / self.rate
            delay = next_send - time.monotonic()
            if delay > 0:
                self.pause(delay)
        # Everything handed over is delivered (or times out) before the producer goes away; a
        # fatal producer has nothing more to deliver.
        remaining = producer.flush(0 if self.fatal.is_set() else MESSAGE_TIMEOUT_MS / 1000)
        if remaining:
            self.ledger.delivery_failed(f"left in flight ({remaining})")


class GroupMember(Worker):
    """A consumer in a group: processes what it polls, then commits synchronously what it
    processed (the offsets the client stored for its current assignment)."""

    def __init__(self, index, ledger, bootstrap, group, topics):
        super().__init__(f"{group}-member-{index}", ledger)
        self.group = group
        self.consumer = Consumer(client_conf(bootstrap, **{
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
        }))
        self.consumer.subscribe(topics)

    def work(self):
        try:
            while not self.stopping.is_set():
                messages = self.consumer.consume(num_messages=200, timeout=0.5)
                if self.process(messages):
                    self.commit()
        finally:
            self.consumer.close()

    def process(self, messages):
        """Records what was processed; True when there is something to commit."""
        any_record = False
        for m in messages:
            if m.error():
                continue  # transient errors (the broker went away): the client recovers
            self.ledger.processed(self.group, m.topic(), m.partition(), m.offset())
            any_record = True
        return any_record

    def commit(self):
        try:
            committed = self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            self.ledger.commit_failed(e.args[0].name())
            return
        for tp in committed or ():
            if tp.error is None and tp.offset >= 0:
                self.ledger.commit_acked(self.group, tp.topic, tp.partition, tp.offset)
            elif tp.error is not None:
                self.ledger.commit_failed(tp.error.name())


def read_committed_offsets(consumer, partitions, timeout=10):
    """{(topic, partition): committed offset (-1 for none)} through OffsetFetch, or None when
    the broker did not answer."""
    try:
        tps = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout)
    except KafkaException:
        return None
    if any(tp.error is not None for tp in tps):
        return None
    return {(tp.topic, tp.partition): max(tp.offset, -1) for tp in tps}


class CommitWatcher(Worker):
    """Reads a group's committed offsets every `interval` seconds and checks them against what
    was acknowledged before the read started and what was read before: never lower."""

    def __init__(self, ledger, bootstrap, group, partitions, interval=2.0):
        super().__init__(f"{group}-watcher", ledger)
        self.group = group
        self.partitions = partitions
        self.interval = interval
        self.reads = 0
        self.last_read = {}
        self.consumer = Consumer(client_conf(bootstrap, **{"group.id": group, "enable.auto.commit": False}))

    def work(self):
        try:
            while not self.pause(self.interval):
                self.check_once()
        finally:
            self.consumer.close()

    def check_once(self):
        floor = self.ledger.acked_commit_floor(self.group)
        offsets = read_committed_offsets(self.consumer, self.partitions)
        if offsets is None:
            return
        self.reads += 1
        for tp, offset in offsets.items():
            self.ledger.commit_read(self.group, *tp, offset)
            if offset < floor.get(tp, -1):
                self.ledger.violation(f"group {self.group} {tp[0]}-{tp[1]}: committed offset read "
                                      f"{offset}, below the acknowledged commit {floor[tp]}")
            if offset < self.last_read.get(tp, -1):
                self.ledger.violation(f"group {self.group} {tp[0]}-{tp[1]}: committed offset went "
                                      f"back from {self.last_read[tp]} to {offset}")
            self.last_read[tp] = max(offset, self.last_read.get(tp, -1))


class TopicChurn(Worker):
    """Every few seconds: creates a scratch topic, writes `records` records to it with its own
    idempotent producer, and deletes the scratch topic created `keep` steps before. Checks on
    each step that every acknowledged creation (not deleted since) exists and every
    acknowledged deletion stays deleted."""

    def __init__(self, ledger, bootstrap, seed, every=(3.0, 6.0), keep=2, records=20):
        super().__init__("topic-churn", ledger)
        self.bootstrap = bootstrap
        self.rng = random.Random(seed)
        self.every = every
        self.keep = keep
        self.records = records
        self.admin = AdminClient(client_conf(bootstrap))
        self.live = []  # scratch topics not yet deleted, oldest first
        self.next_id = 0
        self.checks = 0

    def work(self):
        try:
            self.churn()
        finally:
            self.admin = None  # its connections close now, not when Tern has gone at the end

    def churn(self):
        while not self.pause(self.rng.uniform(*self.every)):
            self.check_topics()
            topic = f"scratch-{self.next_id}"
            self.next_id += 1
            if self.create(topic):
                self.write(topic)
            self.live.append(topic)
            if len(self.live) > self.keep:
                self.delete(self.live.pop(0))

    def create(self, topic):
        future = self.admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic]
        try:
            future.result(timeout=20)
        except KafkaException:
            self.ledger.topic_created(topic, acknowledged=False)
            return False
        self.ledger.topic_created(topic, acknowledged=True)
        return True

    def write(self, topic):
        producer = idempotent_producer(self.bootstrap)
        writer = f"s{topic.split('-')[1]}"
        for seq in range(self.records):
            produce_tracked(self.ledger, producer, writer, seq, topic, seq % 2)
        # Whatever is not delivered in time is dropped before the topic may be deleted
        # (purged records count as unacknowledged: present at most once).
        if producer.flush(30):
            producer.purge()
            producer.flush(5)

    def delete(self, topic):
        future = self.admin.delete_topics([topic], operation_timeout=10)[topic]
        try:
            future.result(timeout=20)
        except KafkaException:
            self.ledger.topic_deleted(topic, acknowledged=False)
            return
        self.ledger.topic_deleted(topic, acknowledged=True)

    def check_topics(self):
        """Compares Tern's topic list with what was acknowledged (skipped when Tern is down)."""
        must_exist, must_not_exist = self.ledger.topics_expected()
        try:
            present = set(self.admin.list_topics(timeout=10).topics)
        except KafkaException:
            return
        self.checks += 1
        for topic in sorted(must_exist - present):
            self.ledger.violation(f"topic {topic}: creation acknowledged, missing from metadata")
        for topic in sorted(must_not_exist & present):
            self.ledger.violation(f"topic {topic}: deletion acknowledged, present in metadata")


class MirrorSourceWriter(Worker):
    """Writes to the mirror's source topic on Kafka: keys, values, headers and timestamps that
    vary (some null), lz4-compressed, `rate` records/s."""

    def __init__(self, ledger, bootstrap, topic, partitions, rate):
        super().__init__("mirror-source-writer", ledger)
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.failures = []
        self.producer = Producer(client_conf(bootstrap, **{"enable.idempotence": True, "acks": "all",
                                                           "linger.ms": 20, "compression.type": "lz4"}))

    def report(self, err, _msg):
        if err is None:
            with self.ledger.lock:
                self.ledger.mirror_produced += 1
        else:
            self.failures.append(err.name())

    def work(self):
        i = 0
        next_send = time.monotonic()
        while not self.stopping.is_set():
            key = None if i % 13 == 5 else f"key-{i}".encode()
            value = None if i % 29 == 7 else (f"m-{i}-" + "abcdefgh" * (i % 17)).encode()
            headers = [("idx", str(i).encode()), ("empty", b"")] if i % 3 else []
            self.producer.produce(self.topic, key=key, value=value, headers=headers,
                                  partition=i % self.partitions, on_delivery=self.report)
            self.producer.poll(0)
            i += 1
            next_send += 1.0 / self.rate
            delay = next_send - time.monotonic()
            if delay > 0:
                self.pause(delay)
        if self.producer.flush(60):
            self.failures.append("mirror source producer did not flush")
        self.producer = None


class CrashableTern(Tern):
    """tern_process's Tern, plus a start cut short by SIGKILL: while it opens and recovers its logs
    and loads its coordinators (about the first 3 s here), or just after it listens."""

    def start_and_kill(self, after):
        starting = threading.Thread(target=self._start_unless_killed, daemon=True)
        starting.start()
        while self.proc is None and starting.is_alive():
            time.sleep(0.005)
        time.sleep(after)
        proc = self.proc
        if proc is not None:
            proc.kill()
        starting.join()
        if proc is not None:
            proc.wait()
        self.proc = None

    def _start_unless_killed(self):
        try:
            self.start()
        except RuntimeError:
            pass  # it exited (killed) before it listened, as intended


class Killer(Worker):
    """Kills Tern with SIGKILL at random moments (`every` seconds apart, seeded) and starts it
    again on the same data dir and port after a short pause. A share of the restarts is itself
    killed within its first seconds (`during_start`) before Tern starts for good."""

    def __init__(self, ledger, tern, seed, every, down=(0.2, 2.0), during_start=0.25):
        super().__init__("killer", ledger)
        self.tern = tern
        self.rng = random.Random(seed)
        self.every = every
        self.down = down
        self.during_start = during_start
        self.schedule = []  # (seconds into the soak, seconds down, seconds into a start killed or None)
        self.kills_during_start = 0

    def work(self):
        while not self.pause(self.rng.uniform(*self.every)):
            down = self.rng.uniform(*self.down)
            early = self.rng.uniform(0.1, 3.5) if self.rng.random() < self.during_start else None
            self.schedule.append((round(self.ledger.elapsed(), 1), round(down, 2),
                                  early and round(early, 2)))
            self.tern.kill9()
            self.ledger.killed()
            time.sleep(down)
            if early is not None:
                self.tern.start_and_kill(early)
                self.kills_during_start += 1
                time.sleep(self.rng.uniform(*self.down))
            try:
                self.tern.start()
            except RuntimeError as e:
                self.ledger.violation(f"tern did not start again after kill {self.ledger.kills}: {e}")
                raise
            self.ledger.restarted()
