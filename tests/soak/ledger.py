"""What the soak's workload did, as the clients saw it: the checker's only source of truth.

Every thread of the workload writes here (under one lock); the checker reads it at the end.
A record is identified by its writer (one producer instance: `w1.3` is writer thread 1's fourth
producer, `s17` the producer of scratch topic 17) and its sequence number in that writer.
"""

import hashlib
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field


def record_value(writer, seq):
    """A record's value: its identity and a filler derived from it, so that the checker can tell a
    corrupted record from a good one (60 to 180 bytes)."""
    digest = hashlib.sha1(f"{writer}/{seq}".encode()).hexdigest()
    return f"{writer}|{seq}|{digest * (1 + seq % 3)}".encode()


def record_key(writer, seq):
    return f"{writer}-{seq % 64}".encode()


def parse_value(value):
    """(writer, seq) of a record written by record_value, or None when it is not one."""
    try:
        writer, seq, _ = value.decode().split("|", 2)
        seq = int(seq)
    except (AttributeError, UnicodeDecodeError, ValueError):
        return None
    return (writer, seq) if record_value(writer, seq) == value else None


@dataclass
class CommitHistory:
    """One (group, topic, partition): the highest offset whose commit was acknowledged, and the
    committed offsets read back (time, offset)."""
    acked_max: int = -1
    acked_count: int = 0
    reads: list = field(default_factory=list)


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.started = time.monotonic()
        # (writer, seq) -> (topic, partition) of every record handed to a producer.
        self.sent = {}
        # (topic, partition) -> {offset: (writer, seq)} of every acknowledged record.
        self.acked = defaultdict(dict)
        # (writer, seq) acknowledged without an offset (librdkafka's report of a duplicate the
        # broker no longer knows the offset of): present exactly once somewhere in its partition.
        self.acked_without_offset = set()
        self.acked_count = 0
        self.delivery_errors = defaultdict(int)   # error name -> count (unacknowledged records)
        self.fatal_producer_errors = []           # (writer, error): an idempotent producer gave up
        # Consumer groups.
        self.commits = defaultdict(CommitHistory)  # (group, topic, partition) -> CommitHistory
        self.commit_failures = defaultdict(int)
        self.consumed = defaultdict(set)           # (group, topic, partition) -> offsets processed
        # Topic churn: topic -> state; only acknowledged requests give checkable facts.
        self.created = set()         # CreateTopics acknowledged
        self.create_in_doubt = set()  # CreateTopics failed (may or may not exist)
        self.deleted = set()         # DeleteTopics acknowledged
        self.delete_in_doubt = set()  # DeleteTopics failed (may or may not exist)
        # Faults.
        self.kills = 0
        self.restarts = 0
        self.restart_times = []
        # The mirror's source.
        self.mirror_produced = 0
        # Violations found while running (the checker adds its own at the end).
        self.violations = []

    def elapsed(self):
        return time.monotonic() - self.started

    def violation(self, text):
        with self.lock:
            self.violations.append(f"[{self.elapsed():7.1f}s] {text}")

    # -- producers ---------------------------------------------------------------------------------

    def sending(self, writer, seq, topic, partition):
        with self.lock:
            self.sent[(writer, seq)] = (topic, partition)

    def delivered(self, writer, seq, topic, partition, offset):
        if offset < 0:
            with self.lock:
                self.acked_without_offset.add((writer, seq))
                self.acked_count += 1
            return
        with self.lock:
            previous = self.acked[(topic, partition)].get(offset)
            self.acked[(topic, partition)][offset] = (writer, seq)
            self.acked_count += 1
        if previous is not None:
            self.violation(f"{topic}-{partition} offset {offset} acknowledged twice: "
                           f"{previous} and {(writer, seq)}")

    def delivery_failed(self, error_name):
        with self.lock:
            self.delivery_errors[error_name] += 1

    def producer_fatal(self, writer, error):
        with self.lock:
            self.fatal_producer_errors.append((writer, error))

    # -- consumer groups ---------------------------------------------------------------------------

    def processed(self, group, topic, partition, offset):
        with self.lock:
            self.consumed[(group, topic, partition)].add(offset)

    def commit_acked(self, group, topic, partition, offset):
        with self.lock:
            h = self.commits[(group, topic, partition)]
            h.acked_max = max(h.acked_max, offset)
            h.acked_count += 1

    def commit_failed(self, reason):
        with self.lock:
            self.commit_failures[reason] += 1

    def acked_commit_floor(self, group):
        """{(topic, partition): highest acknowledged committed offset} of a group, now."""
        with self.lock:
            return {(t, p): h.acked_max for (g, t, p), h in self.commits.items() if g == group}

    def commit_read(self, group, topic, partition, offset):
        with self.lock:
            self.commits[(group, topic, partition)].reads.append((self.elapsed(), offset))

    # -- topics and faults -------------------------------------------------------------------------

    def topic_created(self, topic, acknowledged):
        with self.lock:
            (self.created if acknowledged else self.create_in_doubt).add(topic)

    def topic_deleted(self, topic, acknowledged):
        with self.lock:
            (self.deleted if acknowledged else self.delete_in_doubt).add(topic)

    def topics_expected(self):
        """(must exist, must not exist) from what was acknowledged so far."""
        with self.lock:
            must_exist = self.created - self.deleted - self.delete_in_doubt
            return must_exist, set(self.deleted)

    def killed(self):
        with self.lock:
            self.kills += 1

    def restarted(self):
        with self.lock:
            self.restarts += 1
            self.restart_times.append(self.elapsed())
