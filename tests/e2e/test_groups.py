"""Consumer groups with real clients: partitions split across members, rebalances when one
leaves, committed offsets survive restarts (clean and kill -9), groups stay independent."""

import time

import pytest

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import group_util
from group_util import consumer

PARTITIONS = 6


def create_topic(bootstrap, name, partitions=PARTITIONS):
    group_util.create_topic(bootstrap, name, partitions)


def produce(bootstrap, topic, start, n):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(30) == 0


def poll_once(consumers, seen):
    """One round of polling every consumer; records go into `seen` (key -> consumer name)."""
    for name, c in consumers.items():
        for m in c.consume(num_messages=500, timeout=0.1):
            if m.error():
                raise KafkaException(m.error())
            key = int(m.key())
            assert key not in seen, f"record {key} consumed twice ({seen[key]} and {name})"
            seen[key] = name


def poll_until(consumers, seen, expected_count, timeout=60):
    """Polls all consumers round-robin until `seen` holds expected_count keys."""
    deadline = time.time() + timeout
    while len(seen) < expected_count and time.time() < deadline:
        poll_once(consumers, seen)
    return seen


def test_three_members_split_partitions_and_take_over_when_one_leaves(tern):
    create_topic(tern.bootstrap, "split")
    produce(tern.bootstrap, "split", 0, 6000)
    consumers = {n: consumer(tern.bootstrap, "g-split") for n in ("a", "b", "c")}
    for c in consumers.values():
        c.subscribe(["split"])
    # Let the group settle with all three members; records polled meanwhile count too.
    seen = {}
    deadline = time.time() + 30
    while time.time() < deadline:
        poll_once(consumers, seen)
        sizes = [len(c.assignment()) for c in consumers.values()]
        if sizes == [2, 2, 2]:
            break
    assert sorted(len(c.assignment()) for c in consumers.values()) == [2, 2, 2]
    owned = [tp.partition for c in consumers.values() for tp in c.assignment()]
    assert sorted(owned) == list(range(PARTITIONS))
    seen = poll_until(consumers, seen, 6000)
    assert len(seen) == 6000
    for c in consumers.values():
        c.commit(asynchronous=False)
    # One member leaves: the other two take over its partitions.
    consumers.pop("c").close()
    deadline = time.time() + 30
    while time.time() < deadline:
        poll_once(consumers, seen)
        if sum(len(c.assignment()) for c in consumers.values()) == PARTITIONS:
            break
    assert sum(len(c.assignment()) for c in consumers.values()) == PARTITIONS
    produce(tern.bootstrap, "split", 6000, 3000)
    seen = poll_until(consumers, seen, 9000)
    assert len(seen) == 9000
    assert set(seen[k] for k in range(6000, 9000)) <= {"a", "b"}
    for c in consumers.values():
        c.close()


def committed(bootstrap, group, topic):
    c = consumer(bootstrap, group)
    tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    c.close()
    return {tp.partition: tp.offset for tp in tps}


def consume_and_commit(bootstrap, group, topic, count):
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    seen = poll_until({"x": c}, {}, count)
    c.commit(asynchronous=False)
    c.close()
    return seen


def test_committed_offsets_survive_clean_restart_and_kill_9(tern):
    create_topic(tern.bootstrap, "commits")
    produce(tern.bootstrap, "commits", 0, 600)
    consume_and_commit(tern.bootstrap, "g-commit", "commits", 600)
    before = committed(tern.bootstrap, "g-commit", "commits")
    assert before == {p: 100 for p in range(PARTITIONS)}
    tern.restart()
    assert committed(tern.bootstrap, "g-commit", "commits") == before
    produce(tern.bootstrap, "commits", 600, 600)
    # The group resumes at its committed offsets: only the new records arrive.
    seen = consume_and_commit(tern.bootstrap, "g-commit", "commits", 600)
    assert sorted(seen) == list(range(600, 1200))
    tern.kill9()
    tern.start()
    assert committed(tern.bootstrap, "g-commit", "commits") == {p: 200 for p in range(PARTITIONS)}


def test_two_groups_keep_independent_offsets(tern):
    create_topic(tern.bootstrap, "shared")
    produce(tern.bootstrap, "shared", 0, 1200)
    consume_and_commit(tern.bootstrap, "g-one", "shared", 1200)
    # g-two commits only partition 0 at offset 50.
    c = consumer(tern.bootstrap, "g-two")
    c.commit(offsets=[TopicPartition("shared", 0, 50)], asynchronous=False)
    c.close()
    assert committed(tern.bootstrap, "g-one", "shared") == {p: 200 for p in range(PARTITIONS)}
    two = committed(tern.bootstrap, "g-two", "shared")
    assert two[0] == 50
    assert all(two[p] < 0 for p in range(1, PARTITIONS))


def test_kafka_python_group_consumer(tern):
    from kafka import KafkaConsumer

    create_topic(tern.bootstrap, "kp-group")
    produce(tern.bootstrap, "kp-group", 0, 1200)
    c = KafkaConsumer(
        "kp-group",
        bootstrap_servers=tern.bootstrap,
        group_id="kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = set()
    deadline = time.time() + 60
    while len(got) < 1200 and time.time() < deadline:
        for _, msgs in c.poll(timeout_ms=500).items():
            got.update(int(m.key) for m in msgs)
    c.commit()
    c.close()
    assert got == set(range(1200))
    assert committed(tern.bootstrap, "kp", "kp-group") == {p: 200 for p in range(PARTITIONS)}


def split_with_java(bootstrap, topic, consumers, java_out, n=3000):
    """Produces n records to `topic` and reads them with `consumers` while a Java console
    consumer of the same group prints its share (key TAB value) to `java_out`: every record
    reaches exactly one member, and the Java member gets some."""
    produce(bootstrap, topic, 0, n)
    seen = {}
    java_keys = []
    deadline = time.time() + 60
    while time.time() < deadline:
        poll_once(consumers, seen)
        java_keys = [int(l.split("\t")[0]) for l in java_out.read_text().splitlines() if "\t" in l]
        if len(seen) + len(java_keys) >= n:
            break
    assert len(java_keys) == len(set(java_keys)), "the Java member saw a record twice"
    assert not set(java_keys) & set(seen), "a record went to two members"
    assert set(java_keys) | set(seen) == set(range(n))
    assert java_keys, "the Java member got no partition"


def test_java_and_librdkafka_members_share_one_group(tern, tmp_path):
    """A Kafka 4.x console consumer and two confluent-kafka consumers form one group: the six
    partitions are split among all three and every record is consumed exactly once."""
    import subprocess

    from kafka_peer import KafkaJars

    create_topic(tern.bootstrap, "mixed")
    dist = KafkaJars().ensure()
    out_path = tmp_path / "java.out"
    java = subprocess.Popen(
        dist.tool_command(
            "kafka-console-consumer", "--bootstrap-server", tern.bootstrap, "--topic", "mixed",
            "--group", "g-mixed", "--from-beginning", "--property", "print.key=true",
        ),
        stdout=open(out_path, "w"),
        stderr=subprocess.DEVNULL,
    )
    consumers = {n: consumer(tern.bootstrap, "g-mixed") for n in ("a", "b")}
    try:
        for c in consumers.values():
            c.subscribe(["mixed"])
        admin = AdminClient({"bootstrap.servers": tern.bootstrap})
        deadline = time.time() + 60
        members = []
        while time.time() < deadline:
            for c in consumers.values():
                c.poll(0.1)
            desc = admin.describe_consumer_groups(["g-mixed"])["g-mixed"].result(timeout=10)
            members = desc.members
            if len(members) == 3 and str(desc.state).endswith("STABLE") and all(
                len(c.assignment()) == 2 for c in consumers.values()
            ):
                break
        assert len(members) == 3, f"group has {len(members)} members"
        assert sorted(len(c.assignment()) for c in consumers.values()) == [2, 2]
        split_with_java(tern.bootstrap, "mixed", consumers, out_path)
    finally:
        java.terminate()
        java.wait(timeout=30)
        for c in consumers.values():
            c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_commit_in_revoke_callback_during_rebalance_leaves_no_duplicates(tern_module, protocol):
    """A member commits its positions from its revoke callback while the group rebalances (as
    the Java consumer's auto-commit does before every rejoin). Kafka accepts that commit (the
    classic group while it prepares the rebalance, the KIP-848 group while the member revokes
    at its epoch), so the partitions' next owner starts where the first member stopped: across
    the rebalance every record is consumed exactly once. Runs against Kafka too
    (TERN_E2E_PEER=kafka)."""
    bootstrap = tern_module.bootstrap
    topic, group = f"revoke-commit-{protocol}", f"g-revoke-commit-{protocol}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, 0, 1200)
    commit_errors = []
    consumed = []  # (key, member) in consumption order

    def on_revoke(c):
        def revoke(consumer_, partitions):
            try:
                consumer_.commit(asynchronous=False)
            except KafkaException as e:
                if e.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed to commit
                    commit_errors.append(str(e))

        return revoke

    def poll(name, c):
        for m in c.consume(num_messages=500, timeout=0.1):
            if m.error():
                raise KafkaException(m.error())
            consumed.append((int(m.key()), name))

    a = consumer(bootstrap, group, protocol)
    a.subscribe([topic], on_revoke=on_revoke(a))
    deadline = time.time() + 60
    while len(consumed) < 1200 and time.time() < deadline:
        poll("a", a)
    assert len(consumed) == 1200, f"a consumed {len(consumed)} of 1200"
    # `a` has consumed everything but committed nothing yet; b joins and takes half of the
    # partitions, which it must start at the offsets a committed while revoking them.
    b = consumer(bootstrap, group, protocol)
    b.subscribe([topic], on_revoke=on_revoke(b))
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            poll("a", a)
            poll("b", b)
            if len(a.assignment()) == 3 and len(b.assignment()) == 3:
                break
        assert (len(a.assignment()), len(b.assignment())) == (3, 3)
        produce(bootstrap, topic, 1200, 600)
        deadline = time.time() + 60
        while len(consumed) < 1800 and time.time() < deadline:
            poll("a", a)
            poll("b", b)
        # Give a duplicate the chance to show up.
        for _ in range(10):
            poll("a", a)
            poll("b", b)
    finally:
        a.close()
        b.close()
    assert commit_errors == [], f"commits refused during the rebalance: {commit_errors}"
    keys = [k for k, _ in consumed]
    duplicates = sorted(k for k in set(keys) if keys.count(k) > 1)
    assert duplicates == [], f"{len(duplicates)} records consumed twice, e.g. {duplicates[:5]}"
    assert set(keys) == set(range(1800))
    assert {k for k, who in consumed if who == "b"} <= set(range(1200, 1800))


def test_consumer_protocol_members_split_take_over_and_resume(tern_module):
    """KIP-848 consumers (librdkafka with group.protocol=consumer): three members get two of
    the six partitions each and every record once; when one leaves, the other two take its
    partitions; after all close, a new member resumes at the committed offsets. The group is
    described as Kafka 4 describes it. Runs against Kafka too (TERN_E2E_PEER=kafka)."""
    bootstrap = tern_module.bootstrap
    topic, group = "kip848-split", "g-kip848-split"
    create_topic(bootstrap, topic)
    consumers = {n: consumer(bootstrap, group, "consumer") for n in ("a", "b", "c")}
    for c in consumers.values():
        c.subscribe([topic])
    seen = {}
    # Records come once the group is settled: nothing is committed yet, so a partition that
    # moved after its first owner read from it would be read again (by Kafka's rules too).
    deadline = time.time() + 60
    while time.time() < deadline:
        poll_once(consumers, seen)
        if sorted(len(c.assignment()) for c in consumers.values()) == [2, 2, 2]:
            break
    assert sorted(len(c.assignment()) for c in consumers.values()) == [2, 2, 2]
    produce(bootstrap, topic, 0, 3000)
    poll_until(consumers, seen, 3000)
    assert len(seen) == 3000
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])["g-kip848-split"].result(timeout=10)
    assert len(desc.members) == 3
    assert str(desc.type).endswith("CONSUMER"), desc.type
    owned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
    assert owned == list(range(PARTITIONS))
    listed = admin.list_consumer_groups().result(timeout=10).valid
    assert any(g.group_id == group and str(g.type).endswith("CONSUMER") for g in listed)

    for c in consumers.values():
        c.commit(asynchronous=False)
    consumers.pop("c").close()
    produce(bootstrap, topic, 3000, 600)
    deadline = time.time() + 60
    while time.time() < deadline:
        poll_once(consumers, seen)
        if len(seen) == 3600 and sorted(len(c.assignment()) for c in consumers.values()) == [3, 3]:
            break
    assert set(seen) == set(range(3600))
    assert sorted(len(c.assignment()) for c in consumers.values()) == [3, 3]
    for c in consumers.values():
        c.commit(asynchronous=False)
        c.close()

    produce(bootstrap, topic, 3600, 300)
    late = consumer(bootstrap, group, "consumer")
    late.subscribe([topic])
    try:
        resumed = poll_until({"late": late}, {}, 300)
        for _ in range(5):
            poll_once({"late": late}, resumed)
    finally:
        late.close()
    assert sorted(resumed) == list(range(3600, 3900)), "the group did not resume where it committed"


def test_java_consumer_protocol_member_shares_a_group_with_librdkafka(tern_module, tmp_path):
    """A Kafka 4.x console consumer with group.protocol=consumer and a confluent-kafka member
    of the same protocol split the six partitions, every record goes to exactly one of them,
    and kafka-consumer-groups.sh --describe shows both members. Runs against Kafka too
    (TERN_E2E_PEER=kafka)."""
    import subprocess

    from kafka_peer import KafkaJars

    bootstrap = tern_module.bootstrap
    topic, group = "kip848-java", "g-kip848-java"
    create_topic(bootstrap, topic)
    dist = KafkaJars().ensure()
    out_path = tmp_path / "java.out"
    java = subprocess.Popen(
        dist.tool_command(
            "kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
            "--group", group, "--from-beginning", "--property", "print.key=true",
            "--consumer-property", "group.protocol=consumer",
        ),
        stdout=open(out_path, "w"),
        stderr=subprocess.DEVNULL,
    )
    rd = consumer(bootstrap, group, "consumer")
    try:
        rd.subscribe([topic])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.time() + 90
        members = []
        while time.time() < deadline:
            rd.poll(0.1)
            desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
            members = desc.members
            if len(members) == 2 and len(rd.assignment()) == 3 and str(desc.state).endswith("STABLE"):
                break
        assert len(members) == 2, f"group has {len(members)} members"
        assert len(rd.assignment()) == 3
        split_with_java(bootstrap, topic, {"rd": rd}, out_path)
        described = subprocess.run(
            dist.tool_command(
                "kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe",
                "--group", group, "--members",
            ),
            capture_output=True, text=True, timeout=120,
        )
        assert described.returncode == 0, described.stderr
        rows = [l for l in described.stdout.splitlines() if l.startswith(group)]
        assert len(rows) == 2, described.stdout
        assert sorted(int(r.split()[-1]) for r in rows) == [3, 3], described.stdout
    finally:
        java.terminate()
        java.wait(timeout=30)
        rd.close()


def test_consumer_protocol_members_keep_their_partitions_across_a_restart(tern):
    """KIP-848 consumers while the broker restarts: the group's membership is stored in
    __consumer_offsets as Kafka stores it, so after the restart both members carry on at their
    epochs with the partitions they had. Neither sees a revocation or a lost assignment, and
    every record written across the restart is read once."""
    bootstrap = tern.bootstrap
    topic, group = "kip848-restart", "g-kip848-restart"
    create_topic(bootstrap, topic)
    events = {"a": [], "b": []}

    def member(name):
        c = consumer(bootstrap, group, "consumer")
        c.subscribe([topic],
                    on_assign=lambda _, ps: events[name].append(("assign", sorted(p.partition for p in ps))),
                    on_revoke=lambda _, ps: events[name].append(("revoke", sorted(p.partition for p in ps))),
                    on_lost=lambda _, ps: events[name].append(("lost", sorted(p.partition for p in ps))))
        return c

    consumers = {n: member(n) for n in ("a", "b")}
    seen = {}

    def poll():
        for name, c in consumers.items():
            for m in c.consume(num_messages=500, timeout=0.1):
                if m.error():
                    continue  # the broker is away for a moment; librdkafka retries
                key = int(m.key())
                assert key not in seen, f"record {key} consumed twice ({seen[key]} and {name})"
                seen[key] = name

    deadline = time.time() + 60
    while time.time() < deadline:
        poll()
        if sorted(len(c.assignment()) for c in consumers.values()) == [3, 3]:
            break
    before = {n: sorted(p.partition for p in c.assignment()) for n, c in consumers.items()}
    assert sorted(len(v) for v in before.values()) == [3, 3], before
    produce(bootstrap, topic, 0, 600)
    deadline = time.time() + 60
    while len(seen) < 600 and time.time() < deadline:
        poll()
    assert len(seen) == 600
    settled = {n: list(e) for n, e in events.items()}

    tern.restart()
    produce(bootstrap, topic, 600, 600)
    deadline = time.time() + 60
    while len(seen) < 1200 and time.time() < deadline:
        poll()
    # A few more seconds of heartbeats at the restored epochs.
    end = time.time() + 5
    while time.time() < end:
        poll()
    try:
        assert set(seen) == set(range(1200))
        after = {n: sorted(p.partition for p in c.assignment()) for n, c in consumers.items()}
        assert after == before
        assert events == settled, f"the restart moved partitions: {events}"
    finally:
        for c in consumers.values():
            c.close()
