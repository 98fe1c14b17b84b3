"""Classic consumer groups at the edges, Tern beside Apache Kafka 4.4 in the same run.

Each scenario runs the same timed steps with confluent-kafka (librdkafka) consumers against both
brokers and records what the members see and when; the test requires the same observations, and
moments within a tolerance (the brokers' timers, not the clients', decide them):

- a member that stops polling leaves after max.poll.interval.ms, and the other gets its
  partitions at the rebalance that follows, not before;
- a member that dies without leaving is expired after session.timeout.ms;
- a static member (group.instance.id) that restarts within its session gets its partitions back,
  and the other member sees the same rebalance events at the same moments (with librdkafka both
  brokers rebalance once here);
- cooperative-sticky: a third member joining makes each of the two revoke only what moves.
"""

import multiprocessing
import os
import signal
import tempfile
import time

import pytest
import kafka_peer
from group_util import consumer, create_topic

TOLERANCE_S = 2.5
PEER_VERSION = os.environ.get("TERN_COMPAT_PEER", "4.4.0")


@pytest.fixture(scope="module")
def brokers(tern_module):
    """Tern (the module's) and a real Apache Kafka started for this module."""
    try:
        kafka_peer.KafkaJars(PEER_VERSION, clients_only=False).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {PEER_VERSION}: {str(e).splitlines()[0]}")
    with tempfile.TemporaryDirectory(prefix="timing-kafka-") as d:
        kafka = kafka_peer.KafkaPeer(PEER_VERSION, d, jvm_opts=["-Xmx512m"])
        kafka.start()
        try:
            yield {"tern": tern_module.bootstrap, "kafka": kafka.bootstrap}
        finally:
            kafka.stop()


def member(bootstrap, group, **extra):
    """A classic-protocol member that may go 30 s between polls unless told otherwise."""
    return consumer(bootstrap, group, **{"max.poll.interval.ms": 30000, **extra})


class Watched:
    """A member whose assignment changes are recorded with the time they were seen."""

    def __init__(self, name, consumer, topic):
        self.name = name
        self.c = consumer
        self.events = []  # (seconds since the scenario's mark, "assign"/"revoke", partitions)
        self.mark = time.time()
        consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"))

    def _on(self, kind):
        # The client applies the (incremental) assignment itself after the callback.
        def callback(consumer, partitions):
            parts = sorted(p.partition for p in partitions)
            self.events.append((round(time.time() - self.mark, 1), kind, parts))

        return callback

    def owned(self):
        return sorted(p.partition for p in self.c.assignment())

    def poll(self):
        self.c.poll(0.05)


def settle(members, want, timeout=60):
    """Polls until the members own `want` partitions each (in order)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for m in members:
            m.poll()
        if [len(m.owned()) for m in members] == want:
            return
    raise AssertionError(f"never settled at {want}: {[m.owned() for m in members]}")


def mark(members):
    now = time.time()
    for m in members:
        m.mark = now
        m.events.clear()


def poll_until(members, done, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline and not done():
        for m in members:
            m.poll()


def first_time(m, kind, size):
    """When `m` was first seen with an event of `kind` leaving it `size` partitions."""
    for t, k, parts in m.events:
        if k == kind and (kind != "assign" or len(parts) == size):
            return t
    return None


def scenario_max_poll_interval(bootstrap, tag):
    topic, group = f"mpi-{tag}", f"g-mpi-{tag}"
    create_topic(bootstrap, topic, 4)
    slow = Watched("slow", member(bootstrap, group, **{"max.poll.interval.ms": 8000}), topic)
    other = Watched("other", member(bootstrap, group), topic)
    try:
        settle([slow, other], [2, 2])
        mark([slow, other])
        # `slow` stops polling; `other` keeps on.
        poll_until([other], lambda: len(other.owned()) == 4, 40)
        moved = first_time(other, "assign", 4)
        return {"other owns": other.owned(), "moved after": moved}
    finally:
        other.c.close()
        slow.c.close()


def _crashing_member(bootstrap, group, topic, ready):
    c = member(bootstrap, group)
    c.subscribe([topic])
    while True:
        c.poll(0.1)
        if len(c.assignment()) == 2:
            ready.set()


def scenario_session_expiry(bootstrap, tag):
    topic, group = f"exp-{tag}", f"g-exp-{tag}"
    create_topic(bootstrap, topic, 4)
    ctx = multiprocessing.get_context("spawn")  # no librdkafka threads forked
    ready = ctx.Event()
    proc = ctx.Process(
        target=_crashing_member, args=(bootstrap, group, topic, ready), daemon=True
    )
    proc.start()
    survivor = Watched("survivor", member(bootstrap, group), topic)
    try:
        deadline = time.time() + 60
        while not (ready.is_set() and len(survivor.owned()) == 2) and time.time() < deadline:
            survivor.poll()
        assert len(survivor.owned()) == 2, survivor.owned()
        # Let the group settle: the other member has heartbeated since it got its partitions.
        for _ in range(20):
            survivor.poll()
        mark([survivor])
        os.kill(proc.pid, signal.SIGKILL)
        poll_until([survivor], lambda: len(survivor.owned()) == 4, 40)
        return {"survivor owns": survivor.owned(), "took over after": first_time(survivor, "assign", 4)}
    finally:
        proc.kill()
        survivor.c.close()


def scenario_static_restart(bootstrap, tag):
    topic, group = f"static-{tag}", f"g-static-{tag}"
    create_topic(bootstrap, topic, 4)
    a = Watched("a", member(bootstrap, group, **{"group.instance.id": "a"}), topic)
    b = Watched("b", member(bootstrap, group, **{"group.instance.id": "b"}), topic)
    try:
        settle([a, b], [2, 2])
        before = a.owned()
        for _ in range(20):
            a.poll()
            b.poll()
        mark([b])
        a.c.close()  # a static member does not leave on close
        time.sleep(1)
        a = Watched("a", member(bootstrap, group, **{"group.instance.id": "a"}), topic)
        settle([a, b], [2, 2])
        back = a.owned()
        # Long enough for a rebalance to have reached b if one had started.
        poll_until([a, b], lambda: False, 4)
        return {"a back on its partitions": back == before, "b saw": b.events, "b owns": len(b.owned())}
    finally:
        a.c.close()
        b.c.close()


def scenario_cooperative(bootstrap, tag):
    topic, group = f"coop-{tag}", f"g-coop-{tag}"
    create_topic(bootstrap, topic, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Watched(name, member(bootstrap, group, **conf), topic) for name in ("a", "b")]
    try:
        settle(members, [3, 3])
        before = {m.name: m.owned() for m in members}
        mark(members)
        c = Watched("c", member(bootstrap, group, **conf), topic)
        settle(members + [c], [2, 2, 2])
        revoked = {
            m.name: sorted(p for t, k, ps in m.events if k == "revoke" for p in ps) for m in members
        }
        kept = {m.name: set(before[m.name]) <= set(m.owned()) | set(revoked[m.name]) for m in members}
        return {
            "revoked counts": sorted(len(r) for r in revoked.values()),
            "kept the rest": all(kept.values()),
            "final": sorted(len(m.owned()) for m in members + [c]),
        }
    finally:
        for m in members + ([c] if "c" in locals() else []):
            m.c.close()


def same_events(tern, kafka):
    """The same (kind, partitions) events in the same order, each within TOLERANCE_S."""
    if [e[1:] for e in tern] != [e[1:] for e in kafka]:
        return False
    return all(abs(a[0] - b[0]) <= TOLERANCE_S for a, b in zip(tern, kafka))


def compare(results, timed, events=()):
    """The same observations on both brokers; the timed ones within TOLERANCE_S."""
    tern, kafka = results["tern"], results["kafka"]
    assert tern.keys() == kafka.keys()
    for key in tern:
        if key in events:
            assert same_events(tern[key], kafka[key]), f"{key}: {results}"
        elif key in timed:
            assert tern[key] is not None and kafka[key] is not None, results
            assert abs(tern[key] - kafka[key]) <= TOLERANCE_S, f"{key}: {results}"
        else:
            assert tern[key] == kafka[key], f"{key}: {results}"


def run_both(brokers, scenario):
    results = {name: scenario(bootstrap, name) for name, bootstrap in brokers.items()}
    print(scenario.__name__, results)
    return results


def test_max_poll_interval_moves_partitions_at_the_rebalance_after_the_leave(brokers):
    results = run_both(brokers, scenario_max_poll_interval)
    compare(results, timed={"moved after"})
    assert results["kafka"]["other owns"] == [0, 1, 2, 3]
    # Not before the slow member's max.poll.interval.ms (8 s) ran out.
    assert results["tern"]["moved after"] >= 7.5, results


def test_a_member_that_dies_is_expired_after_its_session(brokers):
    results = run_both(brokers, scenario_session_expiry)
    compare(results, timed={"took over after"})
    assert results["tern"]["took over after"] >= 5.5, results


def test_a_static_member_restarting_within_its_session_gets_its_partitions_back(brokers):
    results = run_both(brokers, scenario_static_restart)
    compare(results, timed=set(), events={"b saw"})
    assert results["tern"]["a back on its partitions"], results
    assert results["tern"]["b owns"] == 2


def test_cooperative_sticky_revokes_only_what_moves(brokers):
    results = run_both(brokers, scenario_cooperative)
    compare(results, timed=set())
    assert results["tern"]["final"] == [2, 2, 2]
