"""FrameStream over real loopback TCP sockets, on asyncio's own event loop and on uvloop
(the broker's default): frames in order, flow control, bad sizes, EOF, drain."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop
from consumer_data import wait_until

from logbus.common.network.frame_stream import (
    FrameStream,
    MemoryPool,
    accept_frame_stream,
    open_frame_stream,
)
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import FrameTooLarge

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(body)) + body for body in bodies)


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    def run(coro: Coroutine[Any, Any, Any]) -> Any:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:
            return runner.run(coro)

    return run


async def connected(
    max_frame_size: int = 1 << 24, max_queued_bytes: int = 1, pool: MemoryPool | None = None
) -> tuple[FrameStream, socket.socket]:
    """A FrameStream serving one end of a loopback TCP connection; the other end is a
    plain non-blocking socket the test drives."""
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        peer = socket.socket()
        peer.setblocking(False)
        await loop.sock_connect(peer, server.getsockname())
        sock, _ = await loop.sock_accept(server)
    stream = await accept_frame_stream(
        sock, max_frame_size, max_queued_bytes=max_queued_bytes, memory_pool=pool
    )
    return stream, peer


async def closed(stream: FrameStream, peer: socket.socket) -> None:
    stream.abort()
    await stream.wait_closed()
    peer.close()


def test_frames_of_every_size_arrive_whole_and_in_order(run: Any) -> None:
    bodies = [b"", b"x", b"small" * 100, bytes(range(256)) * 4000, b"y" * 70_000, b"end"]

    async def main() -> None:
        stream, peer = await connected()
        loop = asyncio.get_running_loop()
        sender = asyncio.create_task(loop.sock_sendall(peer, framed(*bodies)))
        got = []
        for _ in bodies:
            frame = await stream.read_frame()
            assert frame is not None
            got.append(bytes(frame))
        await sender
        assert got == bodies
        peer.shutdown(socket.SHUT_WR)
        assert await stream.read_frame() is None  # the peer closed at a frame boundary
        await closed(stream, peer)

    run(main())


def test_reading_pauses_while_frames_wait_and_resumes_as_they_are_read(run: Any) -> None:
    body_size = 100_000
    bodies = [bytes([n]) * body_size for n in range(40)]
    bound = 250_000

    async def main() -> None:
        stream, peer = await connected(max_queued_bytes=bound)
        loop = asyncio.get_running_loop()
        sender = asyncio.create_task(loop.sock_sendall(peer, framed(*bodies)))
        # Nobody reads: the stream stops reading once `bound` bytes of frames wait.
        await wait_until(lambda: stream.queued_bytes >= bound)
        await wait_until(lambda: not stream.transport.is_reading())
        assert stream.queued_bytes < bound + body_size
        got = []
        for _ in bodies:
            frame = await stream.read_frame()
            assert frame is not None
            assert stream.queued_bytes < bound + body_size
            got.append(bytes(frame))
        await sender
        assert got == bodies
        assert stream.transport.is_reading()
        await closed(stream, peer)

    run(main())


def test_a_bad_size_stops_reading_after_the_frames_before_it(run: Any) -> None:
    async def main() -> None:
        stream, peer = await connected(max_frame_size=1000)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(peer, framed(b"first", b"second") + struct.pack(">i", 1001))
        assert await stream.read_frame() == b"first"
        assert await stream.read_frame() == b"second"
        with pytest.raises(FrameTooLarge):
            await stream.read_frame()
        assert not stream.transport.is_reading()
        await closed(stream, peer)

    run(main())


def test_a_negative_size_is_a_protocol_error(run: Any) -> None:
    async def main() -> None:
        stream, peer = await connected()
        await asyncio.get_running_loop().sock_sendall(peer, struct.pack(">i", -1))
        with pytest.raises(ProtocolError, match="negative"):
            await stream.read_frame()
        await closed(stream, peer)

    run(main())


@pytest.mark.parametrize("size", [3, 1000, 300_000])
def test_eof_in_the_middle_of_a_frame(run: Any, size: int) -> None:
    async def main() -> None:
        stream, peer = await connected()
        loop = asyncio.get_running_loop()
        data = framed(b"whole", b"z" * size)
        await loop.sock_sendall(peer, data[:-1])
        peer.shutdown(socket.SHUT_WR)
        assert await stream.read_frame() == b"whole"
        with pytest.raises(asyncio.IncompleteReadError):
            await stream.read_frame()
        await closed(stream, peer)

    run(main())


def test_the_peer_vanishing_ends_reading_and_writing(run: Any) -> None:
    async def main() -> None:
        stream, peer = await connected()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()  # a reset, not an orderly close
        with pytest.raises(ConnectionResetError):
            await stream.read_frame()
        await stream.wait_closed()
        with pytest.raises(ConnectionResetError):
            await stream.drain()

    run(main())


def test_drain_waits_for_a_slow_reader_and_every_byte_arrives(run: Any) -> None:
    payload = bytes(range(256)) * 40_000  # 10 MB: far beyond the socket buffers

    async def main() -> None:
        stream, peer = await connected()
        loop = asyncio.get_running_loop()
        stream.write(payload)
        drained = asyncio.create_task(stream.drain())
        await asyncio.sleep(0)
        received = bytearray()
        while len(received) < len(payload):
            chunk = await loop.sock_recv(peer, 1 << 20)
            assert chunk, "the stream closed early"
            received += chunk
        await drained
        assert received == payload
        stream.close()
        await stream.wait_closed()
        assert await loop.sock_recv(peer, 1) == b""
        peer.close()

    run(main())


def test_client_side_open_frame_stream(run: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        with socket.create_server(("127.0.0.1", 0)) as server:
            server.setblocking(False)
            host, port = server.getsockname()
            stream = await open_frame_stream(host, port, 100, min_frame_size=4)
            peer, _ = await loop.sock_accept(server)
        await loop.sock_sendall(peer, framed(b"\0\0\0\1ok", b"no"))
        assert await stream.read_frame() == b"\0\0\0\1ok"
        with pytest.raises(ProtocolError, match="shorter than the minimum"):
            await stream.read_frame()
        await closed(stream, peer)

    run(main())


def test_written_chunks_arrive_in_order_even_if_the_caller_changes_them(run: Any) -> None:
    small = [b"head", bytearray(b"tiny"), memoryview(b"view")]
    large = bytearray(range(256)) * 40_000  # 10 MB: the socket cannot take it at once
    large_view = memoryview(bytearray(b"v" * 100_000))
    chunks = [*small, large, b"mid" * 10, large_view, bytes(70_000), b"end"]
    expected = b"".join(bytes(c) for c in chunks)

    async def main() -> None:
        stream, peer = await connected()
        loop = asyncio.get_running_loop()
        stream.write_chunks(chunks)
        large[:] = bytes(len(large))  # a producer may reuse its buffers once written
        large_view[:] = bytes(len(large_view))
        received = bytearray()
        while len(received) < len(expected):
            chunk = await loop.sock_recv(peer, 1 << 20)
            assert chunk, "the stream closed early"
            received += chunk
        await stream.drain()
        assert received == expected
        await closed(stream, peer)

    run(main())


def test_a_shared_memory_pool_holds_frames_back_until_one_is_released(run: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        pool = MemoryPool(100_000)
        first, first_peer = await connected(pool=pool)
        second, second_peer = await connected(pool=pool)
        try:
            # larger than the pool: it passes alone
            sender = asyncio.create_task(loop.sock_sendall(first_peer, framed(b"a" * 150_000)))
            assert bytes(await first.read_frame() or b"") == b"a" * 150_000
            await sender
            assert pool.used == 150_004
            await loop.sock_sendall(second_peer, framed(b"b" * 10, b"c" * 10))
            await wait_until(lambda: pool.waiting == 1)
            reading = asyncio.ensure_future(second.read_frame())
            await asyncio.sleep(0.05)
            assert not reading.done(), "a frame was read while the pool was used up"
            await loop.sock_sendall(first_peer, framed(b"next"))
            # asking for the next frame releases the last one: the second stream reads
            assert bytes(await first.read_frame() or b"") == b"next"
            assert bytes(await reading or b"") == b"b" * 10
            assert bytes(await second.read_frame() or b"") == b"c" * 10
            assert pool.waiting == 0
        finally:
            await closed(first, first_peer)
            await closed(second, second_peer)
        # a closed stream gives back everything it held
        assert pool.used == 0

    run(main())
