"""Unauthenticated connections cost the broker little: thousands of connections to a SASL
listener, half sending garbage (closed at once) and half announcing a frame just under
sasl.server.max.receive.size and then stalling, leave the broker's memory well below
what buffering the announced frames would take, and an authenticated client keeps being
served meanwhile."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from client_round_trips import produce_consume_confluent
from security_support import ADMIN_JAAS

from ports import free_port

ANNOUNCED = 500_000  # just under the default sasl.server.max.receive.size (524288)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def garbage_bytes(i: int) -> bytes:
    """Random bytes whose size prefix is negative or at least 16 MiB (a random prefix
    may otherwise announce a frame the broker rightly waits for), or the largest size."""
    if i % 2 == 0:
        return struct.pack(">i", 2**31 - 1)
    data = bytearray(os.urandom(4 + i % 60))
    data[0] |= 0x01
    return bytes(data)


def open_many(port: int, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sockets.append(sock)
    return sockets


def flood(broker_process: Any, tmp_path: Path, count: int) -> None:
    port, plain_port = free_port(), free_port()
    broker = broker_process(
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={ADMIN_JAAS}",
        "--override", "socket.listen.backlog.size=4096",
        port=plain_port,
    )  # fmt: skip
    assert broker.proc is not None
    pid = broker.proc.pid
    # first use of every code path (imports, caches) before the baseline
    warm = open_many(port, 10)
    for sock in warm:
        sock.close()
    time.sleep(0.5)
    before = rss_bytes(pid)
    garbage = open_many(port, count // 2)
    slow = open_many(port, count - count // 2)
    try:
        for i, sock in enumerate(garbage):
            sock.sendall(garbage_bytes(i))
        for sock in slow:
            sock.sendall(struct.pack(">i", ANNOUNCED) + b"\0" * 100)
        # an authenticated client is served while they all wait
        config = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        produce_consume_confluent(config, f"flood-{uuid.uuid4().hex[:6]}", 3)
        growth = rss_bytes(pid) - before
        print(f"broker memory grew {growth / 2**20:.1f} MiB for {count} connections")
        # buffering what was announced would take count/2 * 500 kB; allow 64 kB each
        assert growth < count * 64 * 1024, f"{growth / 2**20:.0f} MiB for {count} connections"
        # every garbage connection was closed by the broker
        for sock in garbage:
            sock.settimeout(30)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1) == b""
    finally:
        for sock in garbage + slow:
            sock.close()
    assert broker.proc.poll() is None


def test_thousands_of_unauthenticated_connections(
    broker_process: Any, tmp_path: Path
) -> None:
    flood(broker_process, tmp_path, 2000)


@pytest.mark.slow
def test_ten_thousand_unauthenticated_connections(broker_process: Any, tmp_path: Path) -> None:
    flood(broker_process, tmp_path, 10_000)
