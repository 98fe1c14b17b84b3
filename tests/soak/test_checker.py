"""The checker's record pass on made-up logs: it must name each kind of violation the soak looks
for (`~/.cache/tern/venv/bin/python -m pytest -q tests/soak/test_checker.py`, no broker)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "e2e"), str(HERE.parent / "harness")]

from checker import Violations, check_partition  # noqa: E402
from ledger import Ledger, record_key, record_value  # noqa: E402

TOPIC = "t"


def ledger_with(acked):
    """A ledger where writer `w` sent seqs 0-9 to partition 0 and `acked` {offset: seq} were
    acknowledged."""
    ledger = Ledger()
    for seq in range(10):
        ledger.sending("w", seq, TOPIC, 0)
    for offset, seq in acked.items():
        ledger.delivered("w", seq, TOPIC, 0, offset)
    return ledger


def log_of(seqs, start=0):
    headers = lambda s: (("writer", b"w"), ("seq", str(s).encode()))  # noqa: E731
    return [(start + i, record_key("w", s), record_value("w", s), headers(s)) for i, s in enumerate(seqs)]


def check(ledger, records, high=None, log_start=0):
    violations = Violations()
    high = log_start + len(records) if high is None else high
    found, unacked = check_partition(ledger, TOPIC, 0, log_start, high, records, violations, {}, {})
    return found, unacked, violations


def test_a_good_log_passes():
    found, unacked, violations = check(ledger_with({0: 0, 1: 1, 2: 2}), log_of([0, 1, 2, 3]))
    assert (found, unacked, list(violations)) == (3, 1, [])


def test_a_lost_record_is_named():
    _, _, violations = check(ledger_with({0: 0, 1: 1, 2: 2}), log_of([0, 1]))
    assert any("acknowledged at offset 2, not there" in v for v in violations), violations


def test_a_duplicate_is_named():
    _, _, violations = check(ledger_with({0: 0, 1: 1}), log_of([0, 1, 1]))
    assert any("duplicate of ('w', 1)" in v for v in violations), violations


def test_reordering_is_named():
    _, _, violations = check(ledger_with({}), log_of([0, 2, 1]))
    assert any("reordered" in v for v in violations), violations


def test_a_record_at_another_offset_than_acknowledged_is_named():
    _, _, violations = check(ledger_with({0: 0, 1: 2}), log_of([0, 1, 2]))
    assert any("offset 1: holds ('w', 1), acknowledged for ('w', 2)" in v for v in violations), violations


def test_a_gap_and_a_corrupt_record_are_named():
    records = log_of([0, 1, 2])
    records[1] = (1, records[1][1], records[1][2][:-1] + b"x", records[1][3])
    del records[2]
    _, _, violations = check(ledger_with({}), records, high=3)
    assert any("not a record the workload wrote" in v for v in violations), violations
    assert any("read up to 2, high watermark 3" in v for v in violations), violations


def test_an_offset_acknowledged_twice_is_named():
    ledger = ledger_with({0: 0})
    ledger.delivered("w", 1, TOPIC, 0, 0)
    assert any("acknowledged twice" in v for v in ledger.violations), ledger.violations
