"""A `tern server` process for the end-to-end tests, the soak and the benchmarks.

    Tern(data_dir, port=None, extra=(), binary=None).start()

serves PLAINTEXT on 127.0.0.1:<port> (a free one by default) with its logs under
<data_dir>/logs and its output in <data_dir>/tern.log; `extra` adds `--override key=value`
settings after those two (so it may replace them).  The binary is `binary`, else TERN_BIN: the
TERN_BIN environment variable or target/release/tern (a script may assign
`tern_process.TERN_BIN` before it creates its Terns).
"""

import os
import socket
import subprocess
import time
from pathlib import Path

from kafka_wire import broker_serves
from processes import free_port, kill_process, stop_process

TERN_BIN = os.environ.get("TERN_BIN", "target/release/tern")


class Tern:
    """A tern server process that tests can stop, kill -9 and restart on the same data."""

    def __init__(self, data_dir, port=None, extra=(), binary=None):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.extra = list(extra)
        self.binary = binary or TERN_BIN
        self.proc = None
        self.log_path = self.data_dir / "tern.log"
        # Seconds to wait for the listener at start and for a clean exit at stop (benchmarks
        # with thousands of partitions need more).
        self.start_timeout = 30
        self.stop_timeout = 30

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def command(self):
        args = [
            self.binary,
            "server",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}/logs",
        ]
        for kv in self.extra:
            args += ["--override", kv]
        return args

    def start(self, serving=False):
        """Starts tern and waits until it accepts connections on its port, or with serving=True
        until it answers ApiVersions and lists itself in Metadata (kafka_wire.broker_serves)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tern exited with {self.proc.returncode}: {self.tail()}")
            if serving:
                if broker_serves("127.0.0.1", self.port):
                    return self
                time.sleep(0.1)
                continue
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"tern did not start {'serving' if serving else 'listening'}: {self.tail()}")

    def stop(self):
        """SIGTERM, then SIGKILL after stop_timeout seconds."""
        stop_process(self.proc, self.stop_timeout)
        self.proc = None

    def kill9(self):
        kill_process(self.proc)
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def tail(self, n=40):
        try:
            return b"\n".join(self.log_path.read_bytes().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""
