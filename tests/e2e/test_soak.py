"""The soak with a checker (tests/soak/soak.py), short: 100 s of the mixed workload (idempotent
producers, a consumer group committing, topic churn, a mirror from Apache Kafka 4.4) while Tern
is killed with SIGKILL every 12-20 s; then the checker reads everything back. About two and a
half minutes in all. SOAK_SEED picks another kill schedule; the work dir (logs of Tern, Kafka and
the clients) stays under pytest's tmp_path after a failure."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tern_process import TERN_BIN

SOAK = Path(__file__).resolve().parents[1] / "soak" / "soak.py"
DURATION = 100
KILL_EVERY = (12, 20)

pytestmark = pytest.mark.timeout(900)


def run_soak(tmp_path, seed):
    summary_path = tmp_path / "summary.json"
    cmd = [sys.executable, str(SOAK), "--duration", str(DURATION), "--seed", str(seed),
           "--tern-bin", TERN_BIN, "--kill-every", *map(str, KILL_EVERY),
           "--work-dir", str(tmp_path / "work"), "--summary-json", str(summary_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=800)
    output = proc.stdout + proc.stderr
    print(output)
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return proc.returncode, summary, output


def test_soak_short(tmp_path):
    seed = int(os.environ.get("SOAK_SEED", "18"))
    returncode, summary, output = run_soak(tmp_path, seed)
    assert summary is not None, f"the soak ended without a summary (exit {returncode}):\n{output[-4000:]}"
    assert summary["violations"] == 0, f"seed {seed}: {summary['first violation']}\n{output[-4000:]}"
    assert returncode == 0, output[-4000:]
    # The workload did work: records written and read back, kills, commits, topics, the mirror.
    assert summary["kills"] >= 3 and summary["restarts"] == summary["kills"], summary
    assert summary["records acknowledged"] > 10_000, summary
    assert summary["records read back"] == \
        summary["records acknowledged"] - summary["acknowledged in deleted topics"], summary
    assert summary["group commits acknowledged"] > 100, summary
    assert summary["committed offsets checked"] > 50, summary
    assert summary["topics created"] >= 5 and summary["topics deleted"] >= 3, summary
    assert summary["mirror records compared"] == summary["mirror records produced"] > 2000, summary
