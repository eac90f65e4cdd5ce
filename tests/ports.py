"""Listening ports for the servers tests start as processes (brokers, ZooKeeper, proxies).

A port chosen by binding port 0 comes from the kernel's ephemeral range, which every
outgoing connection on the machine also draws from: between the choice and the server's own
bind, another test's client or broker may take it, and the server dies with "Address already
in use" (or, worse, the test talks to somebody else's server). So each pytest-xdist worker
takes ports from its own slice below the ephemeral range (Linux's starts at 32768), where
nothing but that worker allocates, and skips any that a bind shows in use.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

_FIRST = 10_000
_SLICE = 2_500  # ports per worker: workers gw0 .. gw8 fit below 32768
_lock = threading.Lock()


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) % 9 if digits.isdigit() else 0


_start = _FIRST + _worker_index() * _SLICE
# Start each worker process somewhere new in its slice, so a re-run soon after does not meet
# the previous run's ports still in TIME_WAIT.
_offset = os.getpid() % _SLICE
_cursor = itertools.cycle(
    [*range(_start + _offset, _start + _SLICE), *range(_start, _start + _offset)]
)


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port of this worker's slice that nothing listens on or connects from now."""
    with _lock:
        for _ in range(_SLICE):
            port = next(_cursor)
            if bindable(port):
                return port
    raise RuntimeError("no free port left in this worker's slice")


def free_port_range(count: int) -> int:
    """A port p of this worker's slice with p .. p+count-1 all free now."""
    with _lock:
        for _ in range(_SLICE):
            base = next(_cursor)
            if base + count <= _start + _SLICE and all(bindable(base + i) for i in range(count)):
                for _ in range(count - 1):  # the next free_port() starts after the range
                    next(_cursor)
                return base
    raise RuntimeError(f"no {count} consecutive free ports left in this worker's slice")
