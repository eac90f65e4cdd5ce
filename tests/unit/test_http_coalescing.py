"""The HTTP services' one-write-per-answer transport (`cli/http_coalescing.py`): what is
written in one turn of the event loop leaves in one write at the end of the turn, a close
writes what is kept first; and uvicorn over it answers keep-alive requests, a streamed
body and `Connection: close` in full."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus.cli.http_coalescing import CoalescingHttpToolsProtocol, CoalescingTransport


class RecordingTransport(asyncio.Transport):
    """An asyncio transport that keeps what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


def test_writes_of_one_turn_leave_as_one_write() -> None:
    async def scenario() -> RecordingTransport:
        recording = RecordingTransport()
        transport = CoalescingTransport(recording, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        assert recording.writes == []
        await asyncio.sleep(0)
        assert recording.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
        transport.write(b"last")
        transport.close()  # what is kept leaves before the close
        assert recording.writes[-1] == b"last" and recording.closed
        await asyncio.sleep(0)  # the turn's callback finds nothing left to write
        assert len(recording.writes) == 2
        assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
        return recording

    asyncio.run(scenario())


async def streaming_app(scope: Any, receive: Any, send: Any) -> None:
    """Answers every path with its own name, in three body messages."""
    if scope["type"] != "http":
        return
    body = scope["path"].encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % (3 * len(body)))]})
    for more in (True, True, False):
        await send({"type": "http.response.body", "body": body, "more_body": more})


@pytest.fixture(name="server")
def server_fixture() -> Iterator[AsgiServer]:
    server = serve_in_thread(streaming_app, "coalescing server", http=CoalescingHttpToolsProtocol)
    yield server
    server.stop()


def read_answer(stream: Any) -> tuple[bytes, bytes]:
    status = stream.readline()
    length = 0
    while (line := stream.readline()) != b"\r\n":
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return status, stream.read(length)


def test_uvicorn_over_it_answers_keep_alive_and_close_in_full(server: AsgiServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        for path in ("/a", "/bb", "/ccc"):
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert read_answer(stream) == (b"HTTP/1.1 200 OK\r\n", path.encode() * 3)
        sock.sendall(b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_answer(stream) == (b"HTTP/1.1 200 OK\r\n", b"/last" * 3)
        assert stream.read() == b""  # then the server closed the connection
