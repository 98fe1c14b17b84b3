"""The DR demo's docker-compose.yml, checked without a Docker engine.

tests/compose_check loads the file with compose-go (the Compose specification's loader, which
Docker Compose uses) and reports what `docker compose up` would trip on: a file that does not
parse or validate, a service with neither image nor build, a build context or Dockerfile or
bind-mounted file that is missing, depends_on naming an unknown service, two services publishing
one host port. Here: its own unit tests pass, the real file has no problem, and a copy with a
clashing host port is refused with the clash named. The Go module comes from the Go proxy
(cached in the Go module cache after the first run).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "compose_check"

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")


def run_check(compose, cwd=CHECK):
    return subprocess.run(["go", "run", ".", str(compose)], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_checker_unit_tests_pass():
    r = subprocess.run(["go", "test", "./..."], cwd=CHECK, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_demo_compose_file_has_no_problem():
    r = run_check(ROOT / "docker-compose.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'project "tern-dr-demo", 7 services, no problems' in r.stdout


def test_a_clashing_host_port_is_refused(tmp_path):
    text = (ROOT / "docker-compose.yml").read_text()
    # Prometheus publishes the port Tern's metrics use.
    broken = text.replace('"9090:9090"', '"9644:9090"')
    assert broken != text
    (tmp_path / "demo").symlink_to(ROOT / "demo")
    (tmp_path / "Dockerfile").symlink_to(ROOT / "Dockerfile")
    (tmp_path / "docker-compose.yml").write_text(broken)
    r = run_check(tmp_path / "docker-compose.yml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip().splitlines() == ["host port :9644/tcp published by [prometheus tern]"], r.stdout


def test_image_runs_the_tern_binary_it_builds():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "cargo build --release -p tern-broker --bin tern" in dockerfile
    assert re.search(r"^FROM debian:bookworm-slim$", dockerfile, re.M), "a small runtime stage"
    assert 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' in dockerfile
    entry = ROOT / "demo" / "docker-entrypoint.sh"
    assert os.access(entry, os.X_OK)
    assert subprocess.run(["sh", "-n", str(entry)]).returncode == 0
    story = ROOT / "demo" / "dr-story.sh"
    assert os.access(story, os.X_OK) and subprocess.run(["bash", "-n", str(story)]).returncode == 0
