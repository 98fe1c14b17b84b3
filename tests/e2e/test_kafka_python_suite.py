"""kafka-python's own integration suite against tern and against Apache Kafka (issue 5).

The suite is test/integration of kafka-python's PyPI source distribution (the version pinned in
tests/e2e/requirements.txt), downloaded once with pip and unpacked into
$TERN_CACHE/kafka-python-src (TERN_CACHE defaults to ~/.cache/tern).  It is run as its own pytest
process, once against a real tern and once against a real Apache Kafka 4.4.0
(tests/harness/kafka_peer.py), both on loopback, the two runs side by side.  The suite is pointed
at a running broker the way its conftest provides for:

    KAFKA_VERSION=4.4.0 KAFKA_URI=PLAINTEXT://127.0.0.1:<port> KAFKA_ROOT=<any existing dir> \
        python -m pytest test/integration --ignore=test/integration/test_ssl_integration.py \
        --timeout=<s> --timeout-method=signal --junitxml=<file>      (cwd: the unpacked sdist)

KAFKA_VERSION (the broker version the tests assume; also the clients' api_version, which they
lower to what ApiVersions reports) is required or every integration test skips itself; KAFKA_URI
makes the `kafka_broker` fixture an external broker; KAFKA_ROOT only has to exist (the fixture
checks for a Kafka distribution there even when it starts none).  Left out:
test_ssl_integration.py, which always starts its own SSL broker from a Kafka distribution;
test_sasl_integration.py skips itself under KAFKA_URI.

The sdist lacks two files of kafka-python's repository that test/integration imports, so this
file writes stand-ins next to the unpacked tests: test/__init__.py (empty; without it `test`
is the standard library's package) and test/service.py (ExternalService, the do-nothing handle
the fixture keeps for an external broker; SpawnedService refuses, since no broker is spawned).

Both brokers get the broker settings of kafka-python's own test template
(servers/resources/default/kafka.properties in its repository) that matter to the tests: node
id 0 (test_create_partitions assigns replicas to broker 0), 4 partitions for auto-created
topics, 2 offsets-topic partitions, group.min.session.timeout.ms=1000, no initial rebalance
delay, and the template's authorizer (StandardAuthorizer, everyone allowed when no ACL matches),
so the ACL test runs as the suite intends.

The assertion: every test that passes on Kafka passes on tern, except KNOWN_TERN_GAPS (each with
the reason); an entry there that passes on tern, or is no longer in the suite, fails the test
too, so the list stays honest.  Tests that fail on both brokers are reported, not asserted, and
so is a test that loses METADATA_RACE, a race inside kafka-python (recognised from the test's
log) in every one of its RACE_RERUNS reruns on that broker.
Outputs (junit XML, the suite's output, the broker logs, summary.txt) of the last run are kept in
$TERN_CACHE/kafka-python-suite/.  Skipped with the reason when PyPI, Maven Central, java or mvn
is missing.  About 1-1.5 min on this 2-core machine (most of it starting Kafka).
"""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import kafka_peer
from processes import free_port
from tern_process import Tern

HERE = Path(__file__).resolve().parent

PEER_VERSION = os.environ.get("TERN_KP_SUITE_PEER", "4.4.0")
# The broker version the suite is told (KAFKA_VERSION): both brokers are run as "Kafka 4.4".
SUITE_KAFKA_VERSION = os.environ.get("TERN_KP_SUITE_KAFKA_VERSION", "4.4.0")
# Every test takes under 2 s on Kafka here; the timeout only cuts short a client that retries
# forever.
PER_TEST_TIMEOUT = int(os.environ.get("TERN_KP_SUITE_TEST_TIMEOUT", "15"))
RUN_TIMEOUT = 420

# kafka-python's test template settings that matter here (see the module docstring).
COMMON_BROKER_CONFIG = {
    "node.id": "0",
    "num.partitions": "4",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "offsets.commit.timeout.ms": "500",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

# Tests of the suite that pass on Apache Kafka and fail on tern: "<file>::<test>" -> the reason.
# SUPPORTED_APIS is in broker/src/handlers/mod.rs; "not served" = not in it, so kafka-python raises
# IncompatibleBrokerVersion before sending anything.
KNOWN_TERN_GAPS = {}

# A kafka-python race that makes a consumer wait out the per-test timeout on any broker; a broker
# that answers within a millisecond (tern) makes it likelier.  It is recognised from the test's own
# log (shows_metadata_race), and such a test is run again on that broker (RACE_RERUNS times at most)
# so that its real outcome is still compared.
METADATA_RACE = (
    "the consumer subscribes on the main thread while its IO thread bootstraps; when the bootstrap "
    "Metadata answer (asked before the subscription, for no topics) arrives after subscribe(), "
    "ClusterMetadata.update_metadata sets _need_update = False and drops the subscription's "
    "request_update(), so no metadata for the topic is fetched until metadata_max_age_ms (5 min) "
    "and the consumer waits out the per-test timeout. The Java client versions its update requests")
RACE_RERUNS = 3

_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d+ +\w+ +(\d+):(\S+) +(\S+) +(.*)$")


def failure_sections(output):
    """{test name as pytest prints it (function name and parameters): its failure section}."""
    parts = re.split(r"^_{3,} (\S+) _{3,}$", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def shows_metadata_race(section):
    """True when a failure section's log shows METADATA_RACE: after the main thread subscribed, a
    consumer's IO thread applied exactly one Metadata answer, for no topics, assigned nothing, and
    never asked again."""
    lines = [m.groups() for m in map(_LOG_LINE.match, section.splitlines()) if m]
    # subscribe() logs a list, the constructor's topics a tuple.
    subscribed = any(re.match(r"Updating subscribed topics to: [\[(]'", msg) for _, _, _, msg in lines)
    # By thread name: Python reuses the ident of a finished thread (the topic creator's IO thread).
    empty_assigners = {name for _, name, _, msg in lines if msg == "Updated partition assignment: []"}
    for thread in empty_assigners:
        mine = [msg for _, name, _, msg in lines if name == thread]
        updates = [msg for msg in mine if msg.startswith("Updated metadata: ")]
        assigned = [msg for msg in mine if msg.startswith("Updated partition assignment: ")]
        if (subscribed and len(updates) == 1 and ", topics: 0," in updates[0]
                and assigned == ["Updated partition assignment: []"]):
            return True
    return False


def raced_tests(result, output):
    """Test ids of `result` that failed by METADATA_RACE, judged from the suite's output."""
    sections = failure_sections(output)
    # Any failure: a consumer without metadata times out, or returns nothing where the test
    # expected an error (test_kafka_consumer_unsupported_encoding: DID NOT RAISE).
    return sorted(t for t, (o, _) in result.items()
                  if o == "failed" and shows_metadata_race(sections.get(t.split("::")[-1], "")))


SHIM_MARK = "# tern: stand-in for kafka-python's test/service.py, which its sdist does not ship"
SERVICE_SHIM = SHIM_MARK + '''
"""Only what test/integration/fixtures.py uses for an external broker (KAFKA_URI)."""


class ExternalService:
    def __init__(self, host, port):
        self.host = host
        self.port = port

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("tern's run of this suite starts no broker from here: set KAFKA_URI")
'''


def kafka_python_version():
    for line in (HERE / "requirements.txt").read_text().splitlines():
        m = re.match(r"\s*kafka-python\s*==\s*([^\s#;]+)", line)
        if m:
            return m.group(1)
    raise RuntimeError("kafka-python is not pinned in tests/e2e/requirements.txt")


def suite_source():
    """The unpacked sdist with the two stand-in files, downloaded once into the cache."""
    version = kafka_python_version()
    root = kafka_peer.cache_root() / "kafka-python-src"
    src = root / f"kafka_python-{version}"
    if not (src / ".tern-unpacked").is_file():
        root.mkdir(parents=True, exist_ok=True)
        sdist = root / f"kafka_python-{version}.tar.gz"
        if not sdist.is_file():
            with tempfile.TemporaryDirectory(dir=root, prefix=".download-") as d:
                proc = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                     "--no-binary", ":all:", "--no-deps", "--dest", d, f"kafka-python=={version}"],
                    capture_output=True, text=True, timeout=300)
                got = list(Path(d).glob("kafka[-_]python-*.tar.gz"))
                if proc.returncode != 0 or not got:
                    last = (proc.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
                    pytest.skip(f"cannot download kafka-python {version}'s sdist from PyPI: {last}")
                shutil.move(str(got[0]), sdist)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".unpack-"))
        try:
            with tarfile.open(sdist) as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(tmp, filter="data")
                else:
                    tar.extractall(tmp)
            (unpacked,) = [p for p in tmp.iterdir() if p.is_dir()]
            if src.exists():
                shutil.rmtree(src)
            unpacked.rename(src)
            (src / ".tern-unpacked").write_text(f"{sdist.name}\n")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not (src / "test" / "integration" / "conftest.py").is_file():
        pytest.fail(f"{src} has no test/integration/conftest.py: the sdist's layout changed")
    init = src / "test" / "__init__.py"
    if not init.exists():
        init.write_text("")
    service = src / "test" / "service.py"
    if not service.exists() or service.read_text().startswith(SHIM_MARK):
        service.write_text(SERVICE_SHIM)
    return src


def has_pytest_timeout():
    try:
        import pytest_timeout  # noqa: F401
    except ImportError:
        return False
    return True


def start_suite(src, bootstrap, out_dir, tests=None):
    """Starts the suite (or only `tests`, ids as outcomes() gives them) against `bootstrap`;
    returns the Popen (output in out_dir)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    kafka_root = out_dir / "kafka-root"
    kafka_root.mkdir(exist_ok=True)
    selection = ([f"test/integration/{t}" for t in tests] if tests else
                 ["test/integration", "--ignore=test/integration/test_ssl_integration.py"])
    cmd = [sys.executable, "-m", "pytest", *selection,
           "-p", "no:cacheprovider", "-q", "-rfE", "--tb=short",
           "-o", "log_level=INFO", "-o", "junit_family=xunit2",
           f"--junitxml={out_dir / 'junit.xml'}"]
    if has_pytest_timeout():
        # signal, not the sdist's thread method: that one ends the whole run at the first timeout.
        cmd += [f"--timeout={PER_TEST_TIMEOUT}", "--timeout-method=signal"]
    else:
        cmd += ["-o", "addopts=--durations=10"]  # the sdist's addopts need pytest-timeout
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({
        "KAFKA_VERSION": SUITE_KAFKA_VERSION,
        "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
        "KAFKA_ROOT": str(kafka_root),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    env.pop("PYTHONPATH", None)
    (out_dir / "command.txt").write_text(
        f"cd {src}\n" + " ".join(f"{k}={env[k]}" for k in ("KAFKA_VERSION", "KAFKA_URI", "KAFKA_ROOT"))
        + " " + " ".join(cmd) + "\n")
    out = open(out_dir / "output.txt", "wb")
    return subprocess.Popen(cmd, cwd=src, env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def wait_suite(proc, deadline):
    try:
        proc.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return False
    return True


def outcomes(junit):
    """{"<file>::<test>": ("passed"|"failed"|"skipped", message)} from a junit XML file."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").removeprefix("test.integration.")
        parts = module.split(".")
        name = f"{parts[0]}.py::" + "::".join(parts[1:] + [case.get("name")])
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = (child.get("message") or "").splitlines()[0][:300] if child.get("message") else ""
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        result[name] = (outcome, message)
    return result


def tail(path, n=40):
    try:
        return b"\n".join(Path(path).read_bytes().splitlines()[-n:]).decode(errors="replace")
    except OSError:
        return ""


def counts(res):
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome, _ in res.values():
        c[outcome] += 1
    return c


@pytest.fixture(scope="module")
def suite_src():
    return suite_source()


@pytest.fixture(scope="module")
def brokers():
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: Apache Kafka {PEER_VERSION} needs a JDK and Maven")
    try:
        kafka_peer.KafkaJars(PEER_VERSION).ensure()
    except RuntimeError as e:
        pytest.skip(f"cannot resolve Apache Kafka {PEER_VERSION} from Maven: {str(e).splitlines()[0]}")
    with tempfile.TemporaryDirectory(prefix="kp-suite-") as d:
        port = free_port()
        # advertised.listeners set as kafka_peer sets it for Kafka (the suite describes it).
        tern = Tern(os.path.join(d, "tern"), port,
                    extra=[f"{k}={v}" for k, v in COMMON_BROKER_CONFIG.items()]
                    + [f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}"])
        os.makedirs(tern.data_dir)
        kafka = kafka_peer.KafkaPeer(PEER_VERSION, os.path.join(d, "kafka"), jvm_opts=["-Xmx768m"])
        kafka.overrides.update(COMMON_BROKER_CONFIG)
        kafka.overrides["controller.quorum.voters"] = f"0@127.0.0.1:{kafka.controller_port}"
        try:
            tern.start()
            kafka.start()
            yield {"tern": tern, "kafka": kafka}
        finally:
            tern.stop()
            kafka.stop()
            keep = kafka_peer.cache_root() / "kafka-python-suite"
            for name, log in (("tern", tern.log_path), ("kafka", kafka.log_path)):
                if os.path.isfile(log) and (keep / name).is_dir():
                    shutil.copyfile(log, keep / name / "broker.log")


def test_kafka_python_integration_suite(suite_src, brokers):
    src = suite_src
    keep = kafka_peer.cache_root() / "kafka-python-suite"
    shutil.rmtree(keep, ignore_errors=True)
    started = time.time()
    procs = {name: start_suite(src, b.bootstrap, keep / name) for name, b in brokers.items()}
    deadline = time.time() + RUN_TIMEOUT
    finished = {}
    threads = [threading.Thread(target=lambda n=n, p=p: finished.__setitem__(n, wait_suite(p, deadline)))
               for n, p in procs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - started

    results = {}
    for name in procs:
        junit = keep / name / "junit.xml"
        if not finished[name] or not junit.is_file():
            pytest.fail(f"kafka-python's suite against {name} did not finish in {RUN_TIMEOUT}s or "
                        f"wrote no junit XML (exit {procs[name].returncode}):\n"
                        f"{tail(keep / name / 'output.txt')}")
        results[name] = outcomes(junit)
    kafka_res, tern_res = results["kafka"], results["tern"]
    if counts(kafka_res)["passed"] < 30:
        pytest.fail(f"only {counts(kafka_res)['passed']} tests passed on Apache Kafka: the harness is "
                    f"broken, not tern:\n{tail(keep / 'kafka' / 'output.txt')}")

    # Tests that lost METADATA_RACE run again on the same broker, so their real outcome counts.
    rerun_lines, races = [], []
    for name, res in results.items():
        raced = raced_tests(res, (keep / name / "output.txt").read_text(errors="replace"))
        for attempt in range(1, RACE_RERUNS + 1):
            if not raced:
                break
            out_dir = keep / name / f"rerun-{attempt}"
            proc = start_suite(src, brokers[name].bootstrap, out_dir, raced)
            if not wait_suite(proc, time.time() + RUN_TIMEOUT) or not (out_dir / "junit.xml").is_file():
                pytest.fail(f"rerun {attempt} of {raced} on {name} did not finish:\n"
                            f"{tail(out_dir / 'output.txt')}")
            again = outcomes(out_dir / "junit.xml")
            for t in raced:
                rerun_lines.append(f"  {name}: {t} lost the kafka-python metadata race; rerun {attempt}: "
                                   f"{again.get(t, ('missing', ''))[0]}")
            res.update(again)
            raced = raced_tests(again, (out_dir / "output.txt").read_text(errors="replace"))
        races += [(name, t) for t in raced]

    kafka_passed = {t for t, (o, _) in kafka_res.items() if o == "passed"}
    raced = {t for _, t in races}
    gaps = {t for t in kafka_passed - raced if tern_res.get(t, ("missing", ""))[0] != "passed"}
    unexpected = sorted(gaps - KNOWN_TERN_GAPS.keys())
    now_passing = sorted(t for t in KNOWN_TERN_GAPS if tern_res.get(t, ("", ""))[0] == "passed")
    vanished = sorted(t for t in KNOWN_TERN_GAPS if t not in kafka_res and t not in tern_res)
    not_on_kafka = sorted(t for t in KNOWN_TERN_GAPS
                          if t in kafka_res and t not in kafka_passed and t not in now_passing)
    both_fail = sorted(t for t, (o, _) in tern_res.items()
                       if o == "failed" and kafka_res.get(t, ("",))[0] == "failed")

    lines = [f"kafka-python {kafka_python_version()} test/integration, {elapsed:.0f}s (both runs side by side)"]
    for name in ("kafka", "tern"):
        c = counts(results[name])
        lines.append(f"  {name:5}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    lines.append(f"  known tern gaps seen failing: {len(gaps & KNOWN_TERN_GAPS.keys())}/{len(KNOWN_TERN_GAPS)}")
    for t in both_fail:
        lines.append(f"  fails on both brokers: {t}")
    lines += rerun_lines
    for name, t in races:
        lines.append(f"  lost the kafka-python metadata race on {name} in every rerun: {t}")
    for t in not_on_kafka:
        lines.append(f"  KNOWN_TERN_GAPS entry that did not pass on Kafka this run: {t}")
    summary = "\n".join(lines)
    (keep / "summary.txt").write_text(summary + "\n")
    print(summary)

    problems = []
    for t in unexpected:
        outcome, message = tern_res.get(t, ("missing", "not run on tern"))
        problems.append(f"passes on Kafka, {outcome} on tern: {t}: {message}")
    for t in now_passing:
        problems.append(f"passes on tern now, remove it from KNOWN_TERN_GAPS: {t}")
    for t in vanished:
        problems.append(f"not in kafka-python's suite any more, remove it from KNOWN_TERN_GAPS: {t}")
    assert not problems, (
        "\n".join(problems) + f"\n\n{summary}\n(outputs, junit XML and broker logs in {keep})")
