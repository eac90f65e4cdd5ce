"""Where each length, count, varint, tagged-field section and fixed-size field of an
encoded request sits: the map the structural mutations work from.

`request_layout(frame)` walks a request frame (size prefix included) with the generated
message tables, the way the broker's reader does, and returns `Span`s with positions in
the frame. It reads the primitives with `logbus.protocol.types`, so a frame it walks is a
frame the broker's codec decodes too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from logbus.protocol import codec, schema
from logbus.protocol import types as t

# the positions of a field spec's entries in the generated tables (schema.FieldSpec)
NAME, TYPE, VERSIONS, NULLABLE, TAG, TAGGED, FLEX, DEFAULT, FIELDS = range(9)

FIXED_SIZES = {
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
}


@dataclass(frozen=True)
class Span:
    """One piece of the frame.

    kind: "length" (a string/bytes/records length prefix), "count" (an array count),
    "tags" (a tagged-field section's count), "tag" (one tagged field: its tag, size and
    content), "fixed" (a fixed-size field), "records" (a records field's content),
    "null_marker" (a nullable struct's marker).
    `compact`: the prefix is an unsigned varint (flexible versions); otherwise `width`
    bytes. `value`: the number the prefix holds (-1 for null).
    """

    kind: str
    start: int
    end: int
    path: str
    ftype: str = ""
    compact: bool = False
    width: int = 0
    value: int = 0
    # for "tag": where the size varint and the content start
    size_at: int = 0
    content_at: int = 0


def in_range(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class _Walker:
    def __init__(self, buf: memoryview, version: int) -> None:
        self.buf = buf
        self.version = version
        self.spans: list[Span] = []

    def prefix(self, kind: str, pos: int, path: str, compact: bool, wide: bool) -> tuple[int, int]:
        n, end = t.read_length(self.buf, pos, compact, wide)
        width = end - pos
        self.spans.append(Span(kind, pos, end, path, compact=compact, width=width, value=n))
        return n, end

    def tags(self, pos: int, path: str, known: dict[int, tuple[Any, ...]], flexible: bool) -> int:
        count, after = t.read_uvarint(self.buf, pos)
        self.spans.append(Span("tags", pos, after, path, compact=True, value=count))
        pos = after
        for _ in range(count):
            start = pos
            tag, pos = t.read_uvarint(self.buf, pos)
            size_at = pos
            size, pos = t.read_uvarint(self.buf, pos)
            end = pos + size
            if end > len(self.buf):
                raise ValueError("tagged field past the end")
            self.spans.append(
                Span("tag", start, end, f"{path}.<tag {tag}>", value=tag, size_at=size_at,
                     content_at=pos)
            )
            spec = known.get(tag)
            if spec is not None:
                self.value(spec, pos, f"{path}.{spec[NAME]}", flexible)
            pos = end
        return pos

    def struct(self, fields: tuple[Any, ...], pos: int, path: str, flexible: bool) -> int:
        tagged: dict[int, tuple[Any, ...]] = {}
        for spec in fields:
            if flexible and spec[TAG] is not None and in_range(spec[TAGGED], self.version):
                tagged[spec[TAG]] = spec
            elif in_range(spec[VERSIONS], self.version) and spec[TAG] is None:
                pos = self.value(spec, pos, f"{path}.{spec[NAME]}" if path else spec[NAME],
                                 flexible)
        if flexible:
            pos = self.tags(pos, path or "<body>", tagged, flexible)
        return pos

    def value(self, spec: tuple[Any, ...], pos: int, path: str, flexible: bool) -> int:
        ftype: str = spec[TYPE]
        own = spec[FLEX]
        compact = flexible if own == "inherit" else in_range(own, self.version)
        if ftype.startswith("[]"):
            n, pos = self.prefix("count", pos, path, compact, wide=True)
            elem = ftype[2:]
            for i in range(max(n, 0)):
                if elem == "struct":
                    pos = self.struct(spec[FIELDS], pos, f"{path}[{i}]", flexible)
                else:
                    pos = self.primitive(elem, pos, f"{path}[{i}]", compact)
            return pos
        if ftype == "struct":
            if in_range(spec[NULLABLE], self.version):
                marker, after = t.read_int8(self.buf, pos)
                self.spans.append(Span("null_marker", pos, after, path, "int8", width=1,
                                       value=marker))
                if marker < 0:
                    return after
                pos = after
            return self.struct(spec[FIELDS], pos, path, flexible)
        return self.primitive(ftype, pos, path, compact)

    def primitive(self, ftype: str, pos: int, path: str, compact: bool) -> int:
        if ftype in FIXED_SIZES:
            end = pos + FIXED_SIZES[ftype]
            if end > len(self.buf):
                raise ValueError("fixed field past the end")
            self.spans.append(Span("fixed", pos, end, path, ftype, width=end - pos))
            return end
        n, pos = self.prefix("length", pos, path, compact, wide=ftype != "string")
        self.spans[-1] = _with_type(self.spans[-1], ftype)
        if n < 0:
            return pos
        if ftype == "records":
            self.spans.append(Span("records", pos, pos + n, path, ftype, value=n))
        return pos + n


def _with_type(span: Span, ftype: str) -> Span:
    return Span(span.kind, span.start, span.end, span.path, ftype, span.compact, span.width,
                span.value)


def request_layout(frame: bytes) -> list[Span]:
    """The spans of a well-formed request frame (4-byte size prefix included)."""
    buf = memoryview(frame)
    api_key, version, _cid = codec.peek_request_header(buf[4:])
    walker = _Walker(buf, version)
    header_version = codec.request_header_version(api_key, version)
    for name, width, at in (("api_key", 2, 4), ("api_version", 2, 6), ("correlation_id", 4, 8)):
        walker.spans.append(Span("fixed", at, at + width, f"header.{name}", f"int{width * 8}",
                                 width=width))
    pos = 12
    if header_version >= 1:
        n, pos = walker.prefix("length", pos, "header.client_id", compact=False, wide=False)
        pos += max(n, 0)
    if header_version >= 2:
        pos = walker.tags(pos, "header", {}, True)
    message = schema.request(api_key)
    end = walker.struct(message.fields, pos, "", message.is_flexible(version))
    if end != len(frame):
        raise ValueError(f"layout ends at {end}, the frame at {len(frame)}")
    return walker.spans
