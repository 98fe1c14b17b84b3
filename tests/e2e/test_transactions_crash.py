"""Tern killed with SIGKILL while transactions are open (test_transactions.py's helpers and
settings; tern only, since the test kills the broker):

A committed transaction, then two transactions left open with their records acknowledged: one
with a 4 s transaction.timeout.ms, one with 120 s. Tern is killed with SIGKILL and started again on
the same data. The coordinator reloads both from `__transaction_state`: the first is aborted by
its timeout (the last stable offset moves to the second one's first offset), the second by its
producer starting again (init_transactions fences and aborts it). A read_committed consumer then
reads exactly the committed records at their offsets (and the new producer's committed
transaction after them); read_uncommitted shows the open transactions' records as well, each
followed by its abort marker."""

import gc

import pytest
from confluent_kafka import Producer

from processes import free_port
from tern_process import Tern
from test_transactions import (
    SETTINGS,
    WAIT,
    Delivered,
    create_topic,
    read_all,
    txn_producer,
    uid,
    wait_end_offsets,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def tern_txn(tmp_path):
    t = Tern(str(tmp_path), free_port(), extra=[f"{k}={v}" for k, v in SETTINGS.items()])
    t.start()
    try:
        yield t
    finally:
        gc.collect()
        t.stop()


def produce_in_txn(p, topic, values):
    d = Delivered()
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=d)
    assert p.flush(WAIT) == 0
    assert not d.errors, d.errors
    return [off for _, off, _ in d.ok]


def test_kill9_with_open_transactions(tern_txn):
    bs = tern_txn.bootstrap
    topic = create_topic(bs, 1)
    a_id, b_id = f"crash-a-{uid()}", f"crash-b-{uid()}"

    a = txn_producer(bs, a_id, **{"transaction.timeout.ms": 4000})
    assert produce_in_txn(a, topic, ["committed-0", "committed-1", "committed-2"]) == [0, 1, 2]
    a.commit_transaction(WAIT)  # commit marker at 3
    assert produce_in_txn(a, topic, ["open-a-0", "open-a-1", "open-a-2"]) == [4, 5, 6]
    b = txn_producer(bs, b_id, **{"transaction.timeout.ms": 120000})
    assert produce_in_txn(b, topic, ["open-b-0", "open-b-1", "open-b-2"]) == [7, 8, 9]

    tern_txn.kill9()
    for p in (a, b):
        p.purge()
    del a, b
    gc.collect()
    tern_txn.start()

    # A's transaction times out: its abort marker (10) ends it, and the last stable offset stops at
    # B's first record, still open.
    wait_end_offsets(bs, topic, 1, "read_committed", {0: 7})
    wait_end_offsets(bs, topic, 1, "read_uncommitted", {0: 11})
    # B's producer starts again: its open transaction is aborted (marker 11) before it gets its
    # new epoch, and its next transaction commits (records 12-14, marker 15).
    b2 = txn_producer(bs, b_id)
    wait_end_offsets(bs, topic, 1, "read_committed", {0: 12})
    assert produce_in_txn(b2, topic, ["after-0", "after-1", "after-2"]) == [12, 13, 14]
    b2.commit_transaction(WAIT)

    end = {0: 16}
    committed = read_all(bs, topic, 1, "read_committed", end)
    assert committed == {0: [(0, "committed-0"), (1, "committed-1"), (2, "committed-2"),
                             (12, "after-0"), (13, "after-1"), (14, "after-2")]}
    everything = read_all(bs, topic, 1, "read_uncommitted", end)
    assert everything == {0: [(0, "committed-0"), (1, "committed-1"), (2, "committed-2"),
                              (4, "open-a-0"), (5, "open-a-1"), (6, "open-a-2"),
                              (7, "open-b-0"), (8, "open-b-1"), (9, "open-b-2"),
                              (12, "after-0"), (13, "after-1"), (14, "after-2")]}
    # A plain producer's records are visible at once: nothing is left open.
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"plain", partition=0)
    assert plain.flush(WAIT) == 0
    wait_end_offsets(bs, topic, 1, "read_committed", {0: 17})
