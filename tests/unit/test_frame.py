"""FrameAssembler: bytes in (the way a BufferedProtocol receives them), frames out."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.common.network.frame_stream import accept_frame_stream
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import GROWTH_STEP, SIZE_PREFIX, FrameAssembler, FrameTooLarge


def framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(body)) + body for body in bodies)


def receive(assembler: FrameAssembler, data: bytes, cuts: list[int] | None = None) -> list[bytes]:
    """Deliver `data` as a socket would: each read takes at most what get_buffer() offers
    and stops at the next cut (positions in `data`); returns the frames, as bytes."""
    frames = []
    stops = sorted({c for c in (cuts or []) if 0 < c < len(data)} | {len(data)})
    pos = 0
    for stop in stops:
        while pos < stop:
            buf = assembler.get_buffer()
            assert len(buf) > 0, "get_buffer() offered no room"
            n = min(len(buf), stop - pos)
            buf[:n] = data[pos : pos + n]
            pos += n
            frames += [bytes(f) for f in assembler.buffer_updated(n)]
    return frames


BODIES = [b"", b"a", b"xyz" * 7, bytes(range(256)) * 3, b"\x00" * 40, b"tail"]
STREAM = framed(*BODIES)


@pytest.mark.parametrize("scratch_size", [8, 13, 64, 1024, 64 * 1024])
def test_frames_split_at_every_byte_boundary(scratch_size: int) -> None:
    for cut in range(len(STREAM) + 1):
        assembler = FrameAssembler(10_000, scratch_size=scratch_size)
        assert receive(assembler, STREAM, [cut]) == BODIES, f"cut at {cut}"
        assert assembler.pending == 0


@pytest.mark.parametrize("scratch_size", [8, 64, 64 * 1024])
def test_frames_byte_by_byte(scratch_size: int) -> None:
    assembler = FrameAssembler(10_000, scratch_size=scratch_size)
    assert receive(assembler, STREAM, list(range(len(STREAM)))) == BODIES


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=300), max_size=12),
    st.lists(st.integers(0, 4000), max_size=20),
    st.sampled_from([8, 20, 100, 64 * 1024]),
)
def test_any_split_gives_the_frames_back(
    bodies: list[bytes], cuts: list[int], scratch_size: int
) -> None:
    assembler = FrameAssembler(10_000, scratch_size=scratch_size)
    assert receive(assembler, framed(*bodies), cuts) == bodies
    assert assembler.pending == 0


def test_many_small_frames_arrive_in_one_read() -> None:
    bodies = [bytes([i % 256]) * (i % 50) for i in range(300)]
    data = framed(*bodies)
    assembler = FrameAssembler(10_000)
    buf = assembler.get_buffer()
    assert len(buf) >= len(data)
    buf[: len(data)] = data
    assert [bytes(f) for f in assembler.buffer_updated(len(data))] == bodies


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    body = bytes(range(256)) * 1000
    data = framed(body, b"next")
    assembler = FrameAssembler(1 << 20, scratch_size=1024)
    first = assembler.get_buffer()
    first[:1024] = data[:1024]
    assert assembler.buffer_updated(1024) == []
    # Once the size is known, the rest of the frame goes straight to its final place:
    # reads are offered exactly what is left of it.
    rest = assembler.get_buffer()
    assert len(rest) == len(body) - (1024 - SIZE_PREFIX)
    assert assembler.pending == 1024
    assert receive(assembler, data[1024:]) == [body, b"next"]


def test_a_size_prefix_alone_allocates_no_more_than_a_growth_step() -> None:
    assembler = FrameAssembler(200 << 20, scratch_size=1024)
    prefix = struct.pack(">i", 100 << 20)
    assert receive(assembler, prefix + b"x" * 100) == []
    assert assembler.announced == SIZE_PREFIX + (100 << 20)
    assert 0 < assembler.allocated <= 100 + GROWTH_STEP
    assert len(assembler.get_buffer()) <= GROWTH_STEP


def test_a_frame_buffer_grows_with_the_bytes_received() -> None:
    body = bytes(range(251)) * (5 * GROWTH_STEP // 251)
    data = framed(body, b"next")
    assembler = FrameAssembler(len(body), scratch_size=1024)
    pos = 0
    frames: list[bytes] = []
    while pos < len(data):
        buf = assembler.get_buffer()
        n = min(len(buf), len(data) - pos, 300_000)
        buf[:n] = data[pos : pos + n]
        pos += n
        frames += [bytes(f) for f in assembler.buffer_updated(n)]
        if assembler.allocated:
            # never more than twice what has arrived, plus one step
            assert assembler.allocated <= 2 * assembler.pending + GROWTH_STEP
    assert frames == [body, b"next"]


def test_a_frame_buffer_is_reused_only_when_nothing_refers_to_it() -> None:
    assembler = FrameAssembler(1 << 20, scratch_size=64)
    one, two, three = (bytes([n]) * 5000 for n in (1, 2, 3))
    held = _frames(assembler, framed(one))
    part = held[0][100:200]  # a view of the frame keeps its memory too
    del held
    received = _frames(assembler, framed(two) + framed(three))
    # The first frame's memory was not handed out again while a view of it lived.
    assert bytes(part) == one[100:200]
    assert [bytes(f) for f in received] == [two, three]
    first_buffer = id(part.obj)  # an id, not a reference: that would keep it in use
    del part, received
    again = _frames(assembler, framed(three))
    assert id(again[0].obj) == first_buffer, "a released buffer was not reused"
    assert [bytes(f) for f in again] == [three]


def _frames(assembler: FrameAssembler, data: bytes) -> list[memoryview]:
    frames: list[memoryview] = []
    pos = 0
    while pos < len(data):
        buf = assembler.get_buffer()
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        frames += assembler.buffer_updated(n)
    return frames


def test_frames_are_writable_and_independent() -> None:
    assembler = FrameAssembler(1 << 20, scratch_size=64)
    frames = _frames(assembler, framed(b"small", b"L" * 1000, b"small"))
    frames[0][0:1] = b"S"  # the broker rewrites offsets in place
    frames[1][0:1] = b"l"
    assert [bytes(f) for f in frames] == [b"Small", b"l" + b"L" * 999, b"small"]


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    assembler = FrameAssembler(10)
    assert receive(assembler, framed(b"0123456789")) == [b"0123456789"]
    assert assembler.error is None


@pytest.mark.parametrize("cut", [0, 3, 6, 8, 11])
def test_oversize_frame_is_refused_on_its_size_alone(cut: int) -> None:
    assembler = FrameAssembler(10)
    data = framed(b"ok", b"fine") + struct.pack(">i", 11) + b"x" * 11 + framed(b"after")
    # The frames before the bad size are still delivered, none after it.
    assert receive(assembler, data, [cut]) == [b"ok", b"fine"]
    assert isinstance(assembler.error, FrameTooLarge)
    assert str(assembler.error) == "frame of 11 bytes is larger than the maximum of 10"
    assert assembler.buffer_updated(len(assembler.get_buffer())) == []


def test_huge_frame_is_refused_without_allocating_it() -> None:
    assembler = FrameAssembler(100 * 1024 * 1024)
    assert receive(assembler, struct.pack(">i", 2**31 - 1) + b"\0" * 16) == []
    assert isinstance(assembler.error, FrameTooLarge)


def test_negative_size_is_a_protocol_error() -> None:
    assembler = FrameAssembler(10)
    assert receive(assembler, framed(b"a") + struct.pack(">i", -5)) == [b"a"]
    assert isinstance(assembler.error, ProtocolError)
    assert str(assembler.error) == "negative frame size -5"


def test_frame_below_the_minimum_is_a_protocol_error() -> None:
    assembler = FrameAssembler(100, min_frame_size=4)
    assert receive(assembler, framed(b"abcd", b"abc")) == [b"abcd"]
    assert str(assembler.error) == "frame of 3 bytes is shorter than the minimum of 4"


@pytest.mark.parametrize("scratch_size", [16, 64 * 1024])
def test_pending_counts_a_partial_frame(scratch_size: int) -> None:
    assembler = FrameAssembler(1000, scratch_size=scratch_size)
    data = framed(b"x" * 100)
    for cut in range(len(data)):
        assembler = FrameAssembler(1000, scratch_size=scratch_size)
        assert receive(assembler, data[:cut]) == []
        assert assembler.pending == cut


def test_scratch_size_must_hold_a_size_prefix() -> None:
    with pytest.raises(ValueError, match="too small"):
        FrameAssembler(10, scratch_size=4)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_write_after_the_connection_closed_is_a_connection_error(loop_kind: str) -> None:
    """A response written after the peer left (the broker's connection then closes as
    for any lost peer), not uvloop's RuntimeError escaping the connection's task."""

    async def main() -> None:
        ours, theirs = socket.socketpair()
        stream = await accept_frame_stream(ours, 1024)
        stream.write_chunks([b"\0\0\0\1x"])  # open: written
        assert theirs.recv(5) == b"\0\0\0\1x"
        stream.abort()
        await asyncio.sleep(0)
        for write in (lambda: stream.write_chunks([b"late"]), lambda: stream.write(b"late")):
            with pytest.raises(ConnectionResetError):
                write()
        theirs.close()

    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(main())
    else:
        asyncio.run(main())
