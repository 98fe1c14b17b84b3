"""The DR drill of the docker-compose demo, run without Docker by demo/dr_story.py.

The script starts Apache Kafka 3.9.1 and Tern on loopback and tells the story end to end: mirror,
lag in /metrics down to 0, group offsets synced, verify equal, failover with its report, the
billing consumer resuming on Tern exactly at its committed offsets (once each, in order, bytes
equal), verify naming the offset where writes on both sides parted, and the fail back after which
verify is equal again. The script checks every step itself and exits 1 naming the first that
failed; here it must exit 0 having told every step.
"""

import os
import subprocess
import sys
from pathlib import Path

from tern_process import TERN_BIN

ROOT = Path(__file__).resolve().parents[2]


def test_dr_story_runs_start_to_end():
    p = subprocess.run([sys.executable, str(ROOT / "demo" / "dr_story.py"), "--tern-bin",
                        os.path.abspath(TERN_BIN)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = p.stdout
    assert p.returncode == 0, out + p.stderr[-3000:]
    for line in ("lag in /metrics: 0 records over 3 partitions",
                 "group billing's offsets synced to Tern: {0: 500, 1: 500, 2: 500}",
                 "[3] verify: equal",
                 "0 records not mirrored",
                 "consumer resumed at committed offsets {0: 500, 1: 500, 2: 500} on Tern and read the 1500 records",
                 "verify exits 2, the sides parted at {0: 1000, 1: 1000, 2: 1000}",
                 "[7] fail back: Tern dropped its drill writes",
                 "[done] the drill passed"):
        assert line in out, f"missing {line!r} in:\n{out}"
    lags = [l for l in out.splitlines() if l.startswith("[2] lag in /metrics:")]
    assert len(lags) >= 2, "the initial copy's lag was never seen above 0"
