"""Mutations of a valid request frame, one family per kind of lie.

Each family takes the frame (size prefix included), its layout (`fuzz_layout`) and a
`random.Random`, and returns the mutated frame and a one-line description. The size prefix
is always recomputed: a frame that lies about its own size is `test_fuzz_frames`' subject,
here the broker always has the whole frame and must answer or close at once.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

from fuzz_layout import Span

from logbus.records.varint import encode_unsigned_varint

Family = Callable[[bytes, list[Span], random.Random], tuple[bytes, str] | None]


def reframe(body: bytes | bytearray) -> bytes:
    return struct.pack(">i", len(body)) + bytes(body)


def splice(frame: bytes, start: int, end: int, new: bytes) -> bytes:
    return reframe(frame[4:start] + new + frame[end:])


def prefix_bytes(span: Span, n: int) -> bytes:
    """A length/count prefix holding `n` (-1: null) in the span's encoding; for a compact
    prefix, values below -1 wrap to the largest a 5-byte varint holds."""
    if span.compact:
        return encode_unsigned_varint(n + 1 if n >= -1 else 2**32 - 1)
    fmt = ">h" if span.width == 2 else ">i"
    limit = 2 ** (span.width * 8 - 1)
    return struct.pack(fmt, max(-limit, min(limit - 1, n)))


def _length_like(kind: str) -> Family:
    def mutate(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str] | None:
        candidates = [s for s in spans if s.kind == kind]
        if not candidates:
            return None
        span = rng.choice(candidates)
        n = span.value
        new = rng.choice((-2, -1, n + 1, n - 1, 2**31 - 1, 2**15 - 1, 2**31 // 2, n + 100))
        raw = prefix_bytes(span, new)
        return splice(frame, span.start, span.end, raw), f"{kind} of {span.path}: {n} -> {new}"

    return mutate


lengths = _length_like("length")
counts = _length_like("count")

VARINT_KINDS = ("length", "count", "tags")


def varints(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str] | None:
    """A varint written too long (overlong but legal, or longer than 5 bytes), with its
    high bits set, or never terminated."""
    candidates = [s for s in spans if s.compact and s.kind in VARINT_KINDS]
    candidates += [s for s in spans if s.kind == "tag"]
    if not candidates:
        return None
    span = rng.choice(candidates)
    start, end = span.start, span.end
    if span.kind == "tag":  # the tag number or the size of a tagged field
        start = rng.choice((span.start, span.size_at))
        end = span.size_at if start == span.start else span.content_at
    original = frame[start:end]
    value = 0
    for i, b in enumerate(original):
        value |= (b & 0x7F) << (7 * i)
    how = rng.choice(("overlong5", "overlong6", "overlong10", "high-bits", "unterminated"))
    if how == "unterminated":
        # continuation bits to the end of the frame
        rest = len(frame) - start
        return reframe(frame[4:start] + b"\xff" * rest), f"varint of {span.path} unterminated"
    if how == "high-bits":
        raw = b"\xff\xff\xff\xff\x7f"
    else:
        width = {"overlong5": 5, "overlong6": 6, "overlong10": 10}[how]
        raw = bytes(((value >> (7 * i)) & 0x7F) | 0x80 for i in range(width - 1))
        raw += bytes([(value >> (7 * (width - 1))) & 0x7F])
    return splice(frame, start, end, raw), f"varint of {span.path} ({value}) written {how}"


def tagged_fields(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str] | None:
    """Unknown tags, duplicate tags, sizes that lie, counts that lie."""
    sections = [s for s in spans if s.kind == "tags"]
    if not sections:
        return None
    section = rng.choice(sections)
    how = rng.choice(("unknown", "unknown", "size-too-big", "size-too-small", "count-lie",
                      "duplicate", "huge-tag"))
    count = section.value
    if how in ("unknown", "huge-tag", "duplicate"):
        tag = rng.choice((10, 100, 2**20)) if how != "huge-tag" else 2**32 - 1
        content = rng.randbytes(rng.choice((0, 1, 4, 40)))
        field = encode_unsigned_varint(tag) + encode_unsigned_varint(len(content)) + content
        extra = 2 if how == "duplicate" else 1
        raw = encode_unsigned_varint(count + extra) + field * extra
        return (splice(frame, section.start, section.end, raw),
                f"{how} tagged field {tag} ({len(content)} bytes) at {section.path}")
    if how == "count-lie":
        new = rng.choice((count + 1, count + 2, 2**31, 2**32 - 1))
        return (splice(frame, section.start, section.end, encode_unsigned_varint(new)),
                f"tagged field count at {section.path}: {count} -> {new}")
    # a tagged field whose size is wrong: add one, then make its size lie
    content = rng.randbytes(rng.choice((1, 4, 16)))
    size = len(content) + rng.choice((1, 100, 2**28)) if how == "size-too-big" else 0
    if how == "size-too-small":
        size = max(0, len(content) - rng.choice((1, len(content))))
    field = encode_unsigned_varint(77) + encode_unsigned_varint(size) + content
    raw = encode_unsigned_varint(count + 1) + field
    return (splice(frame, section.start, section.end, raw),
            f"tagged field 77 of {len(content)} bytes claiming {size} at {section.path}")


def truncate(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str] | None:
    body = frame[4:]
    cut = rng.randrange(0, len(body))
    return reframe(body[:cut]), f"body cut to {cut} of {len(body)} bytes"


def trailing_junk(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str]:
    junk = rng.choice((
        rng.randbytes(rng.choice((1, 5, 64))),
        b"\xff" * 8,
        b"\x00" * 4,
        b"\x01\x0a\x05hello",  # something shaped like a tagged-field section
    ))
    return reframe(frame[4:] + junk), f"{len(junk)} junk bytes appended: {junk[:16].hex()}"


def _is_work_count(span: Span) -> bool:
    return span.kind == "fixed" and span.path.rsplit(".", 1)[-1] in WORK_COUNTS


def byte_flips(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str]:
    body = bytearray(frame[4:])
    # positions in the body (the frame less its size prefix) outside the work counts
    counts = {i - 4 for s in spans if _is_work_count(s) for i in range(s.start, s.end)}
    allowed = [i for i in range(min(8, len(body) - 1), len(body)) if i not in counts]
    flips = []
    for _ in range(rng.choice((1, 1, 2, 4))):
        at = rng.choice(allowed)
        bit = 1 << rng.randrange(8)
        body[at] ^= bit
        flips.append(f"{at}^{bit:#x}")
    return reframe(body), "flipped " + ",".join(flips)


INT_EXTREMES = {
    1: (-128, 127, -1, 0, 1),
    2: (-(2**15), 2**15 - 1, -1, 0, 1),
    4: (-(2**31), 2**31 - 1, -1, 0, 1, 2**30),
    8: (-(2**63), 2**63 - 1, -1, 0, 1, 2**62),
}
# Counts of work a request asks for: huge values are test_fuzz_admin_counts' subject (they
# can take seconds each on an unbounded broker), not the small budget's.
WORK_COUNTS = ("num_partitions", "count", "replication_factor")


def int_values(frame: bytes, spans: list[Span], rng: random.Random) -> tuple[bytes, str] | None:
    candidates = [
        s for s in spans
        if s.kind == "fixed" and s.ftype.startswith("int") and not s.path.startswith("header.api")
        and not _is_work_count(s)
    ]
    if not candidates:
        return None
    span = rng.choice(candidates)
    value = rng.choice(INT_EXTREMES[span.width])
    fmt = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}[span.width]
    return splice(frame, span.start, span.end, struct.pack(fmt, value)), f"{span.path} = {value}"


FAMILIES: dict[str, Family] = {
    "lengths": lengths,
    "counts": counts,
    "varints": varints,
    "tagged_fields": tagged_fields,
    "truncate": truncate,
    "trailing_junk": trailing_junk,
    "byte_flips": byte_flips,
    "int_values": int_values,
}
