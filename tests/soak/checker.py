"""The soak's checker: reads everything back once the workload has stopped and compares it with
the ledger. Each check returns its figures and adds what it finds wrong to `violations`."""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

import mirror_util as mu
from ledger import parse_value, record_key
from workload import client_conf, read_committed_offsets

MAX_VIOLATIONS = 1000  # past this many, the rest only count


class Violations(list):
    def add(self, text):
        if len(self) < MAX_VIOLATIONS:
            self.append(text)


def topic_partitions(bootstrap):
    """{topic: partition count} of every topic Tern lists (internal ones left out)."""
    md = AdminClient(client_conf(bootstrap)).list_topics(timeout=30)
    return {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")}


def read_partitions(bootstrap, partitions, timeout):
    """Every record of the partitions, from the log start to the high watermark as it is when
    the read starts: {(topic, partition): (log start, high watermark, [(offset, key, value,
    headers)])}."""
    consumer = Consumer(client_conf(bootstrap, **{"group.id": "soak-checker", "enable.auto.commit": False,
                                                  "auto.offset.reset": "earliest"}))
    try:
        marks = {tp: consumer.get_watermark_offsets(TopicPartition(*tp), timeout=30) for tp in partitions}
        out = {tp: (low, high, []) for tp, (low, high) in marks.items()}
        pending = {tp for tp, (low, high) in marks.items() if high > low}
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in pending])
        deadline = time.time() + timeout
        while pending:
            if time.time() > deadline:
                raise AssertionError(f"reading back: no end of {sorted(pending)[:5]} in {timeout}s")
            for m in consumer.consume(num_messages=1000, timeout=1.0):
                if m.error():
                    raise AssertionError(f"reading back {m.topic()}-{m.partition()}: {m.error()}")
                tp = (m.topic(), m.partition())
                out[tp][2].append((m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
                if m.offset() >= marks[tp][1] - 1:
                    pending.discard(tp)
        return out
    finally:
        consumer.close()


def check_partition(ledger, topic, partition, log_start, high, records, violations, seen, last_seq):
    """One partition's records against the ledger; returns (acknowledged records found at
    their offsets, unacknowledged records present). `seen` and `last_seq` span partitions."""
    where = f"{topic}-{partition}"
    acked = ledger.acked.get((topic, partition), {})
    found = set()
    unacked = 0
    if log_start != 0:
        violations.add(f"{where}: log starts at {log_start}, not 0 (nothing deletes records)")
    expected_offset = log_start
    for offset, key, value, headers in records:
        if offset != expected_offset:
            violations.add(f"{where}: offset {offset} follows {expected_offset - 1} (offsets must be "
                           f"contiguous and increasing)")
        expected_offset = offset + 1
        ident = parse_value(value)
        if ident is None:
            violations.add(f"{where} offset {offset}: not a record the workload wrote: {value[:60]!r}")
            continue
        writer, seq = ident
        expected_headers = (("writer", writer.encode()), ("seq", str(seq).encode()))
        if key != record_key(writer, seq) or headers != expected_headers:
            violations.add(f"{where} offset {offset}: {ident} has key {key!r}, headers {headers}")
        if ledger.sent.get(ident) != (topic, partition):
            violations.add(f"{where} offset {offset}: {ident} was sent to {ledger.sent.get(ident)}")
        if ident in seen:
            violations.add(f"{where} offset {offset}: duplicate of {ident}, first at {seen[ident]}")
            continue
        seen[ident] = (topic, partition, offset)
        previous = last_seq.get((writer, topic, partition), -1)
        if seq <= previous:
            violations.add(f"{where} offset {offset}: {ident} after seq {previous} of the same "
                           f"producer (reordered)")
        last_seq[(writer, topic, partition)] = max(seq, previous)
        expected = acked.get(offset)
        if expected == ident:
            found.add(offset)
        elif expected is not None:
            violations.add(f"{where} offset {offset}: holds {ident}, acknowledged for {expected}")
        elif ident in ledger.acked_without_offset:
            found.add(offset)
        else:
            unacked += 1
    if expected_offset != high:
        violations.add(f"{where}: read up to {expected_offset}, high watermark {high}")
    for offset, ident in sorted(acked.items()):
        if offset not in found:
            violations.add(f"{where}: {ident} acknowledged at offset {offset}, not there (log "
                           f"[{log_start}, {high}))")
    return len(found), unacked


def check_records(ledger, bootstrap, violations, exclude=(), timeout=600):
    """Every topic Tern has (but `exclude`, the mirror's), read from the beginning: each
    acknowledged record exactly once at its acknowledged offset, in sequence order per producer
    and partition, nothing corrupt."""
    topics = {t: n for t, n in topic_partitions(bootstrap).items() if t not in exclude}
    for (topic, partition) in ledger.acked:
        if topic not in topics and topic not in ledger.deleted | ledger.delete_in_doubt:
            violations.add(f"topic {topic} with acknowledged records is missing")
    partitions = [(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    logs = read_partitions(bootstrap, partitions, timeout)
    seen, last_seq = {}, {}
    found = unacked = 0
    for (topic, partition), (low, high, records) in sorted(logs.items()):
        f, u = check_partition(ledger, topic, partition, low, high, records, violations, seen, last_seq)
        found += f
        unacked += u
    for ident in sorted(ledger.acked_without_offset):
        topic = ledger.sent[ident][0]
        if ident not in seen and topic in topics:
            violations.add(f"{ident} acknowledged (offset not reported), missing from {ledger.sent[ident]}")
    in_deleted_topics = sum(len(offsets) for (t, _), offsets in ledger.acked.items() if t not in topics)
    in_deleted_topics += sum(1 for i in ledger.acked_without_offset if ledger.sent[i][0] not in topics)
    return {"topics read": len(topics), "records read": sum(len(r) for _, _, r in logs.values()),
            "acknowledged read back": found, "unacknowledged present": unacked,
            "acknowledged in deleted topics": in_deleted_topics,
            "high watermarks": {f"{t}-{p}": hw for (t, p), (_, hw, _) in logs.items()}}


def check_commits(ledger, bootstrap, group, partitions, high_watermarks, violations):
    """The group's committed offsets at the end: not below any acknowledged commit, not past the
    log end, and every offset below them processed by some member (at least once)."""
    consumer = Consumer(client_conf(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        deadline = time.time() + 60
        final = None
        while final is None and time.time() < deadline:
            final = read_committed_offsets(consumer, partitions)
    finally:
        consumer.close()
    if final is None:
        violations.add(f"group {group}: committed offsets could not be read at the end")
        return {}
    for (topic, partition), offset in sorted(final.items()):
        where = f"group {group} {topic}-{partition}"
        history = ledger.commits.get((group, topic, partition))
        ledger.commit_read(group, topic, partition, offset)
        if history and offset < history.acked_max:
            violations.add(f"{where}: committed {offset} at the end, below the acknowledged "
                           f"{history.acked_max}")
        high = high_watermarks.get(f"{topic}-{partition}", 0)
        if offset > high:
            violations.add(f"{where}: committed {offset}, past the log end {high}")
        processed = ledger.consumed.get((group, topic, partition), set())
        missing = [o for o in range(max(offset, 0)) if o not in processed]
        if missing:
            violations.add(f"{where}: committed {offset} but offsets {missing[:10]} "
                           f"({len(missing)}) were never processed")
    commits = [h for (g, _, _), h in ledger.commits.items() if g == group]
    return {"commits acknowledged": sum(h.acked_count for h in commits),
            "committed offsets read": sum(len(h.reads) for h in commits),
            "final committed": sum(max(o, 0) for o in final.values())}


def check_mirror(tern_bootstrap, kafka_bootstrap, mirror, topic, partitions, produced, violations,
                 timeout=300):
    """Waits for the mirror to catch up, then compares every batch byte for byte (offsets, keys,
    values, headers, timestamps: the whole batch) per partition."""
    try:
        mu.wait_mirrored(tern_bootstrap, mirror, kafka_bootstrap, [topic], timeout=timeout)
    except AssertionError as e:
        violations.add(f"mirror {mirror}: {e}")
        return {}
    compared = 0
    for p in range(partitions):
        try:
            batches = mu.compare_partition(kafka_bootstrap, tern_bootstrap, topic, p)
        except (AssertionError, mu.KafkaProtocolError) as e:
            violations.add(f"mirror {mirror}: {e}")
            continue
        compared += sum(b.record_count for b in batches)
    if compared != produced:
        violations.add(f"mirror {mirror}: {compared} records compared, {produced} acknowledged by Kafka")
    return {"mirror records compared": compared}


def check_topics(ledger, bootstrap, violations):
    """Acknowledged creations exist, acknowledged deletions stay deleted."""
    must_exist, must_not_exist = ledger.topics_expected()
    try:
        present = set(topic_partitions(bootstrap))
    except KafkaException as e:
        violations.add(f"topics could not be listed at the end: {e}")
        return {}
    for topic in sorted(must_exist - present):
        violations.add(f"topic {topic}: creation acknowledged, missing at the end")
    for topic in sorted(must_not_exist & present):
        violations.add(f"topic {topic}: deletion acknowledged, present at the end")
    return {"topics created": len(ledger.created), "topics deleted": len(ledger.deleted),
            "topic requests in doubt": len(ledger.create_in_doubt) + len(ledger.delete_in_doubt)}
