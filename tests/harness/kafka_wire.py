"""The harness's raw Kafka client: requests framed by hand, sent to exactly one broker, for what
the client libraries hide (one broker's own view, leader epochs, replica fetches, Tern's mirror
RPCs, record batches as stored) and for telling that a broker serves.

- Encoders: `string` (STRING / NULLABLE_STRING), `array`, `int32`; for the flexible versions
  `uvarint`, `compact_string`, `compact_array`, `tags` and `NO_TAGS`.
- `Reader`: walks a response body (fixed-width fields with `take(fmt)`, strings, bytes, arrays,
  and the flexible versions' varints, compact strings and arrays, tagged fields).
- `request(sock, ...)`: one request (request header v1) on an open connection; the response
  after its correlation id.  `kafka_request(address, ...)`: the same on a connection of its own.
  `Connection`: one connection for several requests.  A flexible request puts `NO_TAGS` (request
  header v2's tagged fields) before its body and reads its response header's with `Reader.tags()`.
- `metadata_brokers(host, port)`: the node ids a broker lists in Metadata; `broker_serves`: that
  it answers ApiVersions and lists at least one broker.
"""

import socket
import struct

CLIENT_ID = "tern-harness"


# -- encoding ---------------------------------------------------------------------------------------


def string(s):
    """STRING, or NULLABLE_STRING's null for None."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def array(items, encode):
    items = list(items)
    return struct.pack(">i", len(items)) + b"".join(encode(i) for i in items)


def int32(v):
    return struct.pack(">i", v)


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_array(items, encode):
    items = list(items)
    return uvarint(len(items) + 1) + b"".join(encode(i) for i in items)


def tags(fields):
    """A tagged-field section of {tag: encoded value} (ascending tags)."""
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


NO_TAGS = tags({})


# -- decoding ---------------------------------------------------------------------------------------


class Reader:
    """A response body read front to back (`buf`, position `pos`)."""

    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        """The struct format's value (a tuple when it has several)."""
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def int8(self):
        return self.take(">b")

    def int16(self):
        return self.take(">h")

    def int32(self):
        return self.take(">i")

    def int64(self):
        return self.take(">q")

    def bool(self):
        return self.take(">b") != 0

    def string(self):
        n = self.int16()
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self):
        n = self.int32()
        if n < 0:
            return None
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def array(self, item):
        n = self.int32()
        return None if n < 0 else [item() for _ in range(n)]

    # The flexible versions.

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(">B")
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def compact_array(self, item):
        n = self.uvarint() - 1
        return None if n < 0 else [item() for _ in range(n)]

    def tags(self):
        """{tag: raw bytes} of a tagged-field section."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self.buf[self.pos:self.pos + size]
            self.pos += size
        return out

    def done(self):
        return self.pos == len(self.buf)


# -- requests ---------------------------------------------------------------------------------------


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def request(sock, api_key, version, body, correlation_id=1, client_id=CLIENT_ID):
    """One request (request header v1) on an open connection; the response after its correlation
    id (an OSError if the response carries another)."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + string(client_id)
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    data = recv_exact(sock, size)
    got = struct.unpack_from(">i", data)[0]
    if got != correlation_id:
        raise OSError(f"correlation id {got}, expected {correlation_id}")
    return data[4:]


def connect(address, timeout):
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def kafka_request(address, api_key, version, body, timeout=10, client_id=CLIENT_ID):
    """One request on a connection of its own to exactly the broker at `address` (host:port);
    the response body after the correlation id."""
    with connect(address, timeout) as s:
        return request(s, api_key, version, body, client_id=client_id)


class Connection:
    """One connection to the broker at `address` (host:port) for several requests."""

    def __init__(self, address, timeout=15):
        self.address = address
        self.sock = connect(address, timeout)
        self.correlation = 0

    def request(self, api_key, version, body):
        self.correlation += 1
        return request(self.sock, api_key, version, body, self.correlation)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- does it serve? ---------------------------------------------------------------------------------


def metadata_brokers(host, port, timeout=2.0):
    """The node ids a broker lists in Metadata (non-flexible versions 1..8), or None."""
    try:
        with connect(f"{host}:{port}", timeout) as s:
            r = Reader(request(s, 18, 0, b"", 1))
            error, count = r.take(">hi")
            if error != 0:
                return None
            ranges = {}
            for _ in range(count):
                k, lo, hi = r.take(">hhh")
                ranges[k] = (lo, hi)
            lo, hi = ranges.get(3, (0, 0))
            version = max(lo, 1)
            if version > min(hi, 8):
                return None
            req = int32(0)  # an empty topic list: brokers only
            if version >= 4:
                req += b"\x00"
            if version >= 8:
                req += b"\x00\x00"
            r = Reader(request(s, 3, version, req, 2))
            if version >= 3:
                r.int32()  # throttle_time_ms
            ids = set()
            for _ in range(r.int32()):
                ids.add(r.int32())
                r.string()  # host
                r.int32()  # port
                r.string()  # rack
            return ids
    except (OSError, struct.error):
        return None


def broker_serves(host, port, timeout=2.0):
    """True when the broker answers ApiVersions and its Metadata lists at least one broker."""
    return bool(metadata_brokers(host, port, timeout))
