"""A TCP proxy that a test controls, for network faults without netem.

Modes: `pass` forwards bytes both ways; `blackhole` keeps every connection open and accepts new
ones but forwards nothing (a partition, or a peer that accepts connections and never answers);
`reset` closes every connection at once and closes new ones as they arrive (a peer that is down);
`delay` forwards every chunk `delay_s` seconds late (a slow link: netem's delay without netem).
A short `blackhole` followed by `pass` is a stall: the bytes held meanwhile flow on afterwards.
"""

import select
import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_port, host="127.0.0.1"):
        self.target = (host, target_port)
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.mode = "pass"
        self.delay_s = 0.0
        self.lock = threading.Lock()
        self.pairs = []
        self.accepted = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def set_mode(self, mode, delay_s=0.0):
        assert mode in ("pass", "blackhole", "reset", "delay")
        with self.lock:
            self.mode = mode
            self.delay_s = delay_s
            pairs = list(self.pairs) if mode == "reset" else []
        for pair in pairs:
            self._close(pair)

    def close(self):
        self.closed = True
        self.listener.close()
        with self.lock:
            pairs = list(self.pairs)
        for pair in pairs:
            self._close(pair)

    def _close(self, pair):
        for s in pair:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()
            except OSError:
                pass
        with self.lock:
            if pair in self.pairs:
                self.pairs.remove(pair)

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == "reset":
                self._close((client,))
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            pair = (client, upstream)
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair):
        client, upstream = pair
        other = {client: upstream, upstream: client}
        try:
            while not self.closed:
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                if self.mode == "blackhole":
                    time.sleep(0.2)  # hold the bytes: nothing is read, nothing forwarded
                    continue
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    if self.mode == "delay":
                        time.sleep(self.delay_s)
                    other[s].sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            self._close(pair)
