"""The Redis 7 Streams peer: XADD in pipelines of 1000 for writes, XRANGE and XREADGROUP
COUNT 1000 for reads, the same values as the Kafka load.

redis-py spends ~20 us of Python per command, which would make the client the bottleneck
(about 40 MB/s of XADD here), so the load uses a raw RESP connection instead: each
pipeline's bytes are encoded once and resent, and replies are parsed by hiredis (C)."""

from __future__ import annotations

import socket
import time
from typing import Any

try:
    import hiredis
except ImportError:  # reported as "not available" when a Redis row runs
    hiredis = None

from bench.core import Metrics
from bench.load_kafka import VALUE_POOL, ReadClock, make_values
from bench.progress import Progress
from bench.systems import Unavailable

PIPELINE = 1000
FIELD = b"v"


def encode(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class RespConnection:
    """One blocking connection speaking RESP2; replies parsed by hiredis."""

    def __init__(self, port: int) -> None:
        if hiredis is None:
            raise Unavailable("hiredis is not installed (pip install -e '.[bench]')")
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RespConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> Any:
        while True:
            result = self.reader.gets()
            if result is not False:
                if isinstance(result, hiredis.ReplyError):
                    raise RuntimeError(f"redis error: {result}")
                return result
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("redis closed the connection")
            self.reader.feed(data)

    def call(self, *args: bytes) -> Any:
        self.send(encode(*args))
        return self.reply()


def xadd_command(key: str, value: bytes) -> bytes:
    return encode(b"XADD", key.encode(), b"*", FIELD, value)


def xadd(port: int, key: str, value_size: int, total_bytes: int, progress: Progress,
         pipeline: int = PIPELINE) -> Metrics:
    """XADD `total_bytes` of values in pipelines of `pipeline` commands, one pipeline in
    flight (send it, read its replies)."""
    values = make_values(value_size)
    count = max(1, total_bytes // value_size)
    mask = VALUE_POOL - 1
    batch = b"".join(xadd_command(key, values[i & mask]) for i in range(pipeline))
    progress.begin(f"XADD {count:,} x {value_size} B", count)
    with RespConnection(port) as conn:
        start = time.perf_counter()
        sent = 0
        while sent < count:
            n = min(pipeline, count - sent)
            conn.send(batch if n == pipeline else b"".join(
                xadd_command(key, values[i & mask]) for i in range(n)))
            for _ in range(n):
                conn.reply()
            sent += n
            progress.advance(n, n * value_size)
        elapsed = time.perf_counter() - start
    progress.end()
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "seconds": elapsed, "records": float(count)}


def _entry_bytes(entries: list[Any]) -> int:
    total = 0
    for _id, fields in entries:
        total += len(fields[1])
    return total


def xrange(port: int, key: str, expected: int, value_size: int, progress: Progress) -> Metrics:
    progress.begin(f"XRANGE {expected:,} x {value_size} B", expected)
    clock = ReadClock(expected)
    low = b"-"
    with RespConnection(port) as conn:
        while not clock.done():
            entries = conn.call(b"XRANGE", key.encode(), low, b"+", b"COUNT", b"%d" % PIPELINE)
            if not entries:
                raise RuntimeError(f"stream {key} ended after {clock.records} of {expected}")
            clock.add(len(entries), _entry_bytes(entries))
            low = b"(" + entries[-1][0]
            progress.advance(len(entries), len(entries) * value_size)
    progress.end()
    return clock.metrics(value_size)


def xreadgroup(port: int, key: str, expected: int, value_size: int, progress: Progress,
               group: str) -> Metrics:
    """A fresh consumer group from the start of the stream, NOACK (no pending-entries list
    to grow, like a Kafka consumer that commits nothing)."""
    progress.begin(f"XREADGROUP {expected:,} x {value_size} B", expected)
    clock = ReadClock(expected)
    with RespConnection(port) as conn:
        conn.call(b"XGROUP", b"CREATE", key.encode(), group.encode(), b"0")
        request = encode(b"XREADGROUP", b"GROUP", group.encode(), b"bench", b"COUNT",
                         b"%d" % PIPELINE, b"NOACK", b"STREAMS", key.encode(), b">")
        try:
            while not clock.done():
                conn.send(request)
                reply = conn.reply()
                if not reply:
                    raise RuntimeError(f"stream {key} ended after {clock.records} of {expected}")
                entries = reply[0][1]
                clock.add(len(entries), _entry_bytes(entries))
                progress.advance(len(entries), len(entries) * value_size)
        finally:
            progress.end()
            conn.call(b"XGROUP", b"DESTROY", key.encode(), group.encode())
    return clock.metrics(value_size)


def delete(port: int, key: str) -> None:
    with RespConnection(port) as conn:
        conn.call(b"DEL", key.encode())
