"""What one connection may cost, against a real broker process: frame buffers follow the
bytes that arrive, and Kafka's connection settings (`max.connections`,
`max.connections.per.ip` and its overrides, `max.connection.creation.rate`,
`connections.max.idle.ms`, `queued.max.request.bytes`) are enforced."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from kafka_wire import WireClient, split_bootstrap

pytestmark = pytest.mark.timeout(120)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc/<pid>/status (VmRSS, in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def served(bootstrap: str) -> bool:
    """Whether a new connection gets a Metadata answer."""
    with WireClient(bootstrap) as client:
        return client.metadata([])["brokers"] != []


def test_size_prefixes_alone_allocate_nothing_large(broker_process: Any) -> None:
    proc = broker_process()
    assert proc.proc is not None
    assert served(proc.bootstrap)
    before = rss_bytes(proc.proc.pid)
    hostile = []
    for _ in range(8):
        sock = socket.create_connection(split_bootstrap(proc.bootstrap))
        sock.sendall(struct.pack(">i", 100 << 20))  # 100 MiB announced, nothing sent
        hostile.append(sock)
    try:
        # The broker has read every prefix once it has answered a later connection.
        for _ in range(3):
            assert served(proc.bootstrap)
        grown = rss_bytes(proc.proc.pid) - before
        # Allocating what was announced would take 800 MiB.
        assert grown < 100 << 20, f"RSS grew by {grown >> 20} MiB"
    finally:
        for sock in hostile:
            sock.close()
