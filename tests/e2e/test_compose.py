"""The DR demo's docker-compose.yml and Dockerfile, checked without a Docker engine.

tests/compose_check loads the compose file with compose-go (the loader Docker Compose uses) and
names what `docker compose up` would trip on. Here: its unit tests pass, the real file has no
problem, and a copy with a clashing host port is refused with the clash named. The Go modules
come from the Go proxy on the first run, then from the module cache.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "compose_check"

needs_go = pytest.mark.skipif(shutil.which("go") is None,
                              reason="go is not on PATH: the compose-file checker is a Go program")


def go_env():
    env = dict(os.environ)
    # The module lives in tests/compose_check, not in a go.work that some parent directory
    # might hold.
    env["GOWORK"] = "off"
    settings = subprocess.run(["go", "env", "GOFLAGS", "GOCACHE", "GOMODCACHE"], env=env,
                              capture_output=True, text=True).stdout.split("\n")
    flags, gocache, gomodcache = (settings + ["", "", ""])[:3]
    # go.mod and go.sum are committed: -mod=mod (which rewrites them) or -mod=vendor (there is no
    # vendor directory) in the caller's GOFLAGS must not apply.
    env["GOFLAGS"] = " ".join([f for f in flags.split() if not f.startswith("-mod=")] + ["-mod=readonly"])
    # Without HOME (some CI runners) Go has no default caches (`go env` says "off" or nothing);
    # use Tern's cache directory then.
    cache = Path(os.environ.get("TERN_CACHE", Path.home() / ".cache" / "tern"))
    if gocache.strip() in ("", "off"):
        env["GOCACHE"] = str(cache / "go-build")
    if not gomodcache.strip():
        env["GOMODCACHE"] = str(cache / "go-mod")
    return env


def run_check(compose):
    # `go -C`: the checker's go.mod is in its own directory, not at the repository root.
    return subprocess.run(["go", "-C", str(CHECK), "run", ".", str(compose)], cwd=ROOT, env=go_env(),
                          capture_output=True, text=True, timeout=600)


@needs_go
def test_checker_unit_tests_pass():
    r = subprocess.run(["go", "test", "./..."], cwd=CHECK, env=go_env(), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_go
def test_demo_compose_file_has_no_problem():
    r = run_check(ROOT / "docker-compose.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'project "tern-dr-demo", 7 services' in r.stdout and r.stdout.rstrip().endswith("no problems")


@needs_go
def test_a_clashing_host_port_is_refused(tmp_path):
    text = (ROOT / "docker-compose.yml").read_text()
    broken = text.replace('"9090:9090"', '"9644:9090"')  # Prometheus on Tern's metrics port
    assert broken != text
    # The copy's build context and bind mounts must resolve, so only the clash is wrong.
    (tmp_path / "demo").symlink_to(ROOT / "demo")
    (tmp_path / "Dockerfile").symlink_to(ROOT / "Dockerfile")
    (tmp_path / "docker-compose.yml").write_text(broken)
    r = run_check(tmp_path / "docker-compose.yml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["host port 9644/tcp is published more than once: prometheus, tern"], r.stdout


def test_image_builds_and_runs_tern():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "cargo build --release -p tern-broker --bin tern" in dockerfile
    assert re.search(r'^ENTRYPOINT \["tern"\]$', dockerfile, re.M)
    assert re.search(r'^CMD \["server", ', dockerfile, re.M)


def test_docker_story_script_parses():
    story = ROOT / "demo" / "dr-story.sh"
    assert os.access(story, os.X_OK)
    r = subprocess.run(["bash", "-n", str(story)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # It drives the services the compose file defines.
    compose = (ROOT / "docker-compose.yml").read_text()
    for service in ("tern", "producer", "consumer"):
        assert re.search(rf"^  {service}:$", compose, re.M), service
