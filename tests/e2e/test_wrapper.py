"""The README's first command, `./tern`: it builds Tern when needed and runs a copy whose debug
info is split off (tens of megabytes, not hundreds).

Run where the test command built Tern already ($CARGO_TARGET_DIR/release/tern exists, as
tests/run.sh leaves it), so the wrapper's build is a no-op; skipped otherwise, since a first build
takes a quarter of an hour. `./tern random-uuid` must print a Kafka-style cluster id through the
split copy, which must be under 100 MB with its debug info in tern.debug beside it, and a second
call must reuse the copy rather than split it again.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("CARGO_TARGET_DIR")


@pytest.mark.skipif(not TARGET or not (Path(TARGET) / "release" / "tern").exists(),
                    reason="needs a built tern under $CARGO_TARGET_DIR")
def test_wrapper_runs_a_split_copy_of_the_built_binary(tmp_path):
    def wrapper(*args):
        r = subprocess.run([str(ROOT / "tern"), *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"./tern {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r.stdout.strip()

    cluster_id = wrapper("random-uuid")
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id), f"not a cluster id: {cluster_id!r}"
    dist = Path(TARGET) / "release" / "stripped"
    run, debug = dist / "tern", dist / "tern.debug"
    built = Path(TARGET) / "release" / "tern"
    size = run.stat().st_size
    assert size < 100 * 2**20, f"the binary users run is {size / 2**20:.0f} MiB"
    assert debug.exists() and debug.stat().st_size > size, "the debug info is not kept beside it"
    assert built.stat().st_size > size, "the copy is not smaller than the build"
    mtime = run.stat().st_mtime_ns
    assert "Usage: tern" in wrapper("--help")
    assert run.stat().st_mtime_ns == mtime, "an unchanged build was split again"
