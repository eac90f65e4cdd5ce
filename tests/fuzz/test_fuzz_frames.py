"""Frames that lie about their own size: the size prefix announces more than is sent (the
broker must not allocate it all at once, and must close when the client gives up), or an
impossible size. Memory stays bounded and the broker keeps answering others."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from fuzz_broker import HANG_BOUND_S, RSS_BOUND_KB, Fuzzer, read_frames
from fuzz_fixtures import fuzzed_fixture  # noqa: F401  (the `fuzzed` fixture)

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=HANG_BOUND_S)


@pytest.mark.parametrize("size", [100 * MIB, 2**31 - 1, -1, -(2**31), 0, 1, 7])
def test_size_prefix_lies_then_the_client_half_closes(fuzzed: Any, size: int) -> None:
    """Whatever the prefix says, a client that stops sending is answered or closed."""
    broker, _world = fuzzed
    fuzzer = Fuzzer(broker)
    with _connect(broker.port) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00\x00\x00\x00\x07" * 2)
        sock.shutdown(socket.SHUT_WR)
        frames, closed = read_frames(sock, time.monotonic() + HANG_BOUND_S)
    assert closed or frames, f"size prefix {size}: neither answered nor closed"
    assert not fuzzer.broker_problems()
    fuzzer.finish()


def test_announced_frames_are_not_allocated_up_front(fuzzed: Any) -> None:
    """Eight connections each announcing a 100 MiB request (and sending 16 bytes of it)
    must not cost the broker 800 MiB: a buffer grows with the bytes that arrive."""
    broker, _world = fuzzed
    fuzzer = Fuzzer(broker)
    socks = [_connect(broker.port) for _ in range(8)]
    try:
        for sock in socks:
            sock.sendall(struct.pack(">i", 100 * MIB) + b"\x00\x03\x00\x0c\x00\x00\x00\x01" * 2)
        # every announced frame is now pending; the broker must still answer others
        problems = fuzzer.broker_problems()
    finally:
        for sock in socks:
            sock.close()
    peak = broker.peak_rss_kb()
    assert peak < RSS_BOUND_KB, f"peak RSS {peak} kB with 8 announced 100 MiB frames"
    assert not problems, problems
    fuzzer.finish()
