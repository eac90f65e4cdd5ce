"""Broker shutdown with connections in every state: it must neither hang on a peer that
stops reading nor leave sockets behind for the garbage collector (a ResourceWarning fails
the suite)."""

from __future__ import annotations

import gc
import select
import socket
import time
from typing import Any

from kafka_wire import split_bootstrap
from logbus.protocol import ApiKey, codec


def api_versions_request(correlation_id: int) -> bytes:
    header = codec.RequestHeader(ApiKey.API_VERSIONS, 3, correlation_id, "stalled")
    body = {"client_software_name": "stalled", "client_software_version": "1"}
    return codec.encode_request(header, body)


def fill_until_blocked(sock: socket.socket) -> int:
    """Pipeline requests without reading answers until the broker stops taking them: a
    send that cannot proceed for a whole second means the broker is stuck writing to us.
    Requests go in pre-encoded blocks, so the kernel buffers fill fast even when the test
    process is slow (tracing, a loaded machine)."""
    sock.setblocking(False)
    block = b"".join(api_versions_request(i) for i in range(1, 257))
    sent = 0
    pending = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not pending:
            pending = block
        try:
            n = sock.send(pending)
            sent += n
            pending = pending[n:]
        except BlockingIOError:
            _, writable, _ = select.select([], [sock], [], 1.0)
            if not writable:
                return sent
    raise AssertionError("the broker kept reading requests from a peer that never reads")


def read_until_closed(sock: socket.socket) -> None:
    """Drain what the broker sent; returns at EOF or reset, raises TimeoutError if the
    broker keeps the connection open."""
    sock.setblocking(True)
    sock.settimeout(10)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        pass


def test_stop_drops_a_peer_that_does_not_read(broker_factory: Any) -> None:
    running = broker_factory(socket_send_buffer_bytes="4096")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.connect(split_bootstrap(running.bootstrap))
    try:
        assert fill_until_blocked(sock) > 0
        running.stop()  # raises TimeoutError if the broker waits for the peer to read
        read_until_closed(sock)
    finally:
        sock.close()
    gc.collect()


def test_stop_with_idle_half_open_and_just_accepted_connections(broker_factory: Any) -> None:
    running = broker_factory()
    address = split_bootstrap(running.bootstrap)
    idle = socket.create_connection(address)
    half = socket.create_connection(address)
    half.sendall(api_versions_request(1)[:7])  # a frame that never completes
    # Connections the broker has not got round to setting up when the stop begins.
    fresh = [socket.create_connection(address) for _ in range(20)]
    peers = [idle, half, *fresh]
    try:
        running.stop()
        for peer in peers:
            read_until_closed(peer)
    finally:
        for peer in peers:
            peer.close()
    gc.collect()
