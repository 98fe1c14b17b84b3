"""Local server processes for the tests and benchmarks: a free loopback port to give one, and
stopping or killing one (a `subprocess.Popen`).  Every Tern and Apache Kafka process of the
harness (tern_process.py, kafka_peer.py) and of the test modules goes through these."""

import signal
import socket
import subprocess


def free_port():
    """A loopback TCP port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc, timeout=30):
    """SIGTERM a child process if it still runs; SIGKILL it after `timeout` seconds.  True if it
    exited on SIGTERM (or was not running), False if it needed SIGKILL."""
    if proc is None or proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


def kill_process(proc):
    """SIGKILL (kill -9) a child process if it still runs, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
