"""Time to replace a killed active controller in a three-node Tern cluster.

Starts three combined nodes (broker + controller) on loopback, then repeatedly kills the
active controller with SIGKILL and measures, from the kill:
  - elected: until a survivor logs "this node is now the active controller" (its log's
    timestamp, so the client's polling does not blur it);
  - writable: until a CreateTopics sent to the survivors succeeds (a new active controller
    that has applied the log of earlier terms, so metadata operations continue), polled from
    the moment of the kill with short timeouts.
The killed node is restarted before the next round. Prints median and max over the rounds.

    python bench/controller_failover/run.py --tern target/release/tern --rounds 20

Needs confluent-kafka (tests/e2e/requirements.txt). Not a test: timing belongs here.
"""

import argparse
import datetime
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "harness"))
from processes import free_port, kill_process, stop_process  # noqa: E402


class Node:
    def __init__(self, tern, node_id, data_dir, voters, port, controller_port):
        self.tern, self.node_id, self.data_dir = tern, node_id, data_dir
        self.voters, self.port, self.controller_port = voters, port, controller_port
        self.proc = None

    def start(self):
        args = [
            self.tern, "server",
            "--override", f"node.id={self.node_id}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "--override", f"controller.quorum.voters={self.voters}",
            "--override", f"log.dirs={self.data_dir}",
        ]
        log = open(self.log_path(), "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def wait_listening(self, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} did not start")

    def kill9(self):
        kill_process(self.proc)

    def stop(self):
        stop_process(self.proc, timeout=20)

    def log_path(self):
        return os.path.join(self.data_dir, "..", f"node-{self.node_id}.log")

    def activations(self):
        """Wall-clock times (s since the epoch) at which this node became the active controller."""
        pattern = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z.*now the active controller")
        times = []
        with open(self.log_path(), errors="replace") as f:
            for line in f:
                m = pattern.search(re.sub(r"\x1b\[[0-9;]*m", "", line))
                if m:
                    ts = datetime.datetime.fromisoformat(m.group(1)[:26]).replace(tzinfo=datetime.timezone.utc)
                    times.append(ts.timestamp())
        return times

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", default=os.environ.get("TERN_BIN", "target/release/tern"))
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tern-failover-")
    cports = [free_port() for _ in range(3)]
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in enumerate(cports))
    nodes = []
    for i in range(3):
        d = os.path.join(root, f"data-{i}")
        os.makedirs(d)
        nodes.append(Node(args.tern, i, d, voters, free_port(), cports[i]))
    for n in nodes:
        n.start()
    for n in nodes:
        n.wait_listening()
    elected, writable = [], []
    try:
        for r in range(args.rounds):
            # The active controller is the node that most recently logged becoming it (Metadata
            # and DescribeCluster name the broker asked, as in KRaft).
            latest = {}
            while not latest:
                latest = {n.node_id: max(n.activations(), default=0) for n in nodes}
                latest = {k: v for k, v in latest.items() if v > 0}
                time.sleep(0.05)
            active = max(latest, key=latest.get)
            victim = nodes[active]
            survivors = [n for n in nodes if n is not victim]
            admin = AdminClient({"bootstrap.servers": ",".join(s.bootstrap for s in survivors),
                                 "socket.timeout.ms": 1000})
            admin.list_topics(timeout=10)
            t_kill = time.time()
            t0 = time.monotonic()
            victim.kill9()
            while True:
                f = admin.create_topics([NewTopic(f"round-{r}", 1, 1)], operation_timeout=2,
                                        request_timeout=2)
                try:
                    f[f"round-{r}"].result(timeout=3)
                    break
                except Exception as e:
                    # An attempt that timed out on the client may still have been done.
                    if "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
                        break
                    time.sleep(0.005)
            t_writable = time.monotonic() - t0
            became = [t for s in survivors for t in s.activations() if t > t_kill]
            t_elected = min(became) - t_kill if became else float("nan")
            elected.append(t_elected)
            writable.append(t_writable)
            print(f"round {r}: killed node {victim.node_id}; elected after {t_elected*1000:.0f} ms, "
                  f"writable after {t_writable*1000:.0f} ms", flush=True)
            victim.start()
            victim.wait_listening()
    finally:
        for n in nodes:
            n.stop()
    ms = lambda xs: f"median {statistics.median(xs)*1000:.0f} ms, max {max(xs)*1000:.0f} ms"
    print(f"{args.rounds} kills: new controller elected {ms(elected)}; metadata writable {ms(writable)}")


if __name__ == "__main__":
    sys.exit(main())
