"""The generic codec: compiles a generated message table, for one version, into a reader
and a writer of plain dicts (snake_case field names, nested structs as dicts).

Decoding fills every field the message defines, with its default where the version lacks
it, so handlers read any field without caring about the version. Unknown tagged fields are
skipped. Encoding takes missing keys as defaults and leaves out what the version lacks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any
from uuid import UUID

from logbus.protocol import types as t
from logbus.protocol.errors import ProtocolError
from logbus.protocol.messages import MESSAGES

FieldSpec = tuple[Any, ...]
Writer = t.Writer
FieldWriter = Callable[[t.Writer, Any], None]
StructReader = Callable[[memoryview, int], tuple[dict[str, Any], int]]
StructWriter = Callable[[t.Writer, Mapping[str, Any]], None]

_NAME, _TYPE, _VERSIONS, _NULLABLE, _TAG, _TAGGED, _FLEX, _DEFAULT, _FIELDS = range(9)
UUID_ZERO = UUID(int=0)

_FIXED = {
    "int8": t.INT8,
    "int16": t.INT16,
    "uint16": t.UINT16,
    "int32": t.INT32,
    "uint32": t.UINT32,
    "int64": t.INT64,
    "float64": t.FLOAT64,
}
_FIXED_READERS = {
    "int8": t.read_int8,
    "int16": t.read_int16,
    "uint16": t.read_uint16,
    "int32": t.read_int32,
    "uint32": t.read_uint32,
    "int64": t.read_int64,
    "float64": t.read_float64,
    "bool": t.read_bool,
    "uuid": t.read_uuid,
}


def _in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def _default(spec: FieldSpec) -> Any:
    if spec[_TYPE] == "struct":
        return {f[_NAME]: _default(f) for f in spec[_FIELDS]}
    if spec[_TYPE] == "uuid":
        return UUID_ZERO
    default = spec[_DEFAULT]
    if isinstance(default, tuple):
        return []
    return default


class Message:
    """One message definition; `reader(v)` and `writer(v)` are compiled once per version."""

    def __init__(self, module: Any) -> None:
        self.name: str = module.NAME
        self.type: str = module.TYPE
        self.api_key: int | None = module.API_KEY
        self.valid_versions: tuple[int, int] = module.VALID_VERSIONS
        self.flexible_versions: tuple[int, int] | None = module.FLEXIBLE_VERSIONS
        self.fields: tuple[FieldSpec, ...] = module.FIELDS
        self._readers: dict[int, StructReader] = {}
        self._writers: dict[int, StructWriter] = {}

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible_versions, version)

    def supports(self, version: int) -> bool:
        return self.valid_versions[0] <= version <= self.valid_versions[1]

    def reader(self, version: int) -> StructReader:
        r = self._readers.get(version)
        if r is None:
            r = _struct_reader(self.fields, version, self.is_flexible(version))
            self._readers[version] = r
        return r

    def writer(self, version: int) -> StructWriter:
        w = self._writers.get(version)
        if w is None:
            w = _struct_writer(self.fields, version, self.is_flexible(version))
            self._writers[version] = w
        return w

    def decode(self, data: bytes | memoryview, version: int) -> dict[str, Any]:
        """Decode a whole body; trailing bytes after it are tolerated."""
        value, _ = self.reader(version)(memoryview(data), 0)
        return value

    def encode(self, value: Mapping[str, Any], version: int) -> bytes:
        w = t.Writer()
        self.writer(version)(w, value)
        return w.getvalue()

    def defaults(self) -> dict[str, Any]:
        return {f[_NAME]: _default(f) for f in self.fields}


@cache
def message(name: str) -> Message:
    for msg_name, module, _key, _type in MESSAGES:
        if msg_name == name:
            return Message(importlib.import_module(f"logbus.protocol.messages.{module}"))
    raise KeyError(name)


@cache
def _by_key() -> dict[tuple[int, str], str]:
    return {(key, mtype): name for name, _m, key, mtype in MESSAGES if key is not None}


def request(api_key: int) -> Message:
    return message(_by_key()[(api_key, "request")])


def response(api_key: int) -> Message:
    return message(_by_key()[(api_key, "response")])


def known_api_keys() -> list[int]:
    return sorted(key for key, mtype in _by_key() if mtype == "request")


# --- compilation ------------------------------------------------------------------------


def _field_flexible(spec: FieldSpec, version: int, flexible: bool) -> bool:
    own = spec[_FLEX]
    if own == "inherit":
        return flexible
    return _in(own, version)


def _value_reader(spec: FieldSpec, version: int, flexible: bool) -> t.Reader:
    ftype: str = spec[_TYPE]
    compact = _field_flexible(spec, version, flexible)
    nullable = _in(spec[_NULLABLE], version)
    if ftype.startswith("[]"):
        elem_type = ftype[2:]
        if elem_type == "struct":
            elem: t.Reader = _struct_reader(spec[_FIELDS], version, flexible)
        else:
            elem = _primitive_reader(elem_type, compact, False)
        return t.make_array_reader(elem, compact, nullable)
    if ftype == "struct":
        inner = _struct_reader(spec[_FIELDS], version, flexible)
        if not nullable:
            return inner

        def read_nullable_struct(buf: memoryview, pos: int) -> tuple[Any, int]:
            marker, pos = t.read_int8(buf, pos)
            if marker < 0:
                return None, pos
            return inner(buf, pos)

        return read_nullable_struct
    return _primitive_reader(ftype, compact, nullable)


def _primitive_reader(ftype: str, compact: bool, nullable: bool) -> t.Reader:
    if ftype in _FIXED_READERS:
        return _FIXED_READERS[ftype]
    if ftype == "string":
        return t.make_string_reader(compact, nullable)
    if ftype == "bytes":
        return t.make_bytes_reader(compact, nullable, as_view=False)
    if ftype == "records":
        return t.make_bytes_reader(compact, nullable, as_view=True)
    raise ValueError(f"unknown field type {ftype}")


def _struct_reader(fields: tuple[FieldSpec, ...], version: int, flexible: bool) -> StructReader:
    regular: list[tuple[str, t.Reader]] = []
    tagged: dict[int, tuple[str, t.Reader]] = {}
    defaults: dict[str, Any] = {}
    for spec in fields:
        name = spec[_NAME]
        if flexible and spec[_TAG] is not None and _in(spec[_TAGGED], version):
            tagged[spec[_TAG]] = (name, _value_reader(spec, version, flexible))
            defaults[name] = _default(spec)
        elif _in(spec[_VERSIONS], version) and spec[_TAG] is None:
            regular.append((name, _value_reader(spec, version, flexible)))
        else:
            defaults[name] = _default(spec)
    mutable = {k for k, v in defaults.items() if isinstance(v, (list, dict))}

    def read(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        out = dict(defaults)
        for key in mutable:
            value = out[key]
            out[key] = [] if isinstance(value, list) else dict(value)
        for name, reader in regular:
            out[name], pos = reader(buf, pos)
        if flexible:
            pos = read_tagged_fields(buf, pos, tagged, out)
        return out, pos

    return read


def read_tagged_fields(
    buf: memoryview, pos: int, tagged: dict[int, tuple[str, t.Reader]], out: dict[str, Any]
) -> int:
    count, pos = t.read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = t.read_uvarint(buf, pos)
        size, pos = t.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise ProtocolError("tagged field runs past the end of the message")
        known = tagged.get(tag)
        if known is not None:
            name, reader = known
            out[name], _ = reader(buf[:end], pos)
        pos = end
    return pos


def _value_writer(spec: FieldSpec, version: int, flexible: bool) -> FieldWriter:
    ftype: str = spec[_TYPE]
    compact = _field_flexible(spec, version, flexible)
    if ftype.startswith("[]"):
        elem_type = ftype[2:]
        if elem_type == "struct":
            elem: FieldWriter = _struct_writer(spec[_FIELDS], version, flexible)
        else:
            elem = _primitive_writer(elem_type, compact)

        def write_array(w: t.Writer, value: Any) -> None:
            if value is None:
                t.write_length(w, -1, compact, wide=True)
                return
            t.write_length(w, len(value), compact, wide=True)
            for item in value:
                elem(w, item)

        return write_array
    if ftype == "struct":
        inner = _struct_writer(spec[_FIELDS], version, flexible)
        if not _in(spec[_NULLABLE], version):
            return inner

        def write_nullable_struct(w: t.Writer, value: Any) -> None:
            if value is None:
                w.pack(t.INT8, -1)
            else:
                w.pack(t.INT8, 1)
                inner(w, value)

        return write_nullable_struct
    return _primitive_writer(ftype, compact)


def _primitive_writer(ftype: str, compact: bool) -> FieldWriter:
    if ftype in _FIXED:
        s = _FIXED[ftype]
        return lambda w, v: w.pack(s, v)
    if ftype == "bool":
        return lambda w, v: w.pack(t.INT8, 1 if v else 0)
    if ftype == "uuid":
        return lambda w, v: w.write(UUID_ZERO.bytes if v is None else v.bytes)
    if ftype == "string":

        def write_string(w: t.Writer, v: Any) -> None:
            if v is None:
                t.write_length(w, -1, compact, wide=False)
                return
            data = v.encode("utf-8")
            t.write_length(w, len(data), compact, wide=False)
            w.write(data)

        return write_string
    if ftype == "bytes":

        def write_bytes(w: t.Writer, v: Any) -> None:
            if v is None:
                t.write_length(w, -1, compact, wide=True)
                return
            t.write_length(w, len(v), compact, wide=True)
            w.write(v)

        return write_bytes
    if ftype == "records":

        def write_records(w: t.Writer, v: Any) -> None:
            if v is None:
                t.write_length(w, -1, compact, wide=True)
                return
            t.write_length(w, t.records_size(v), compact, wide=True)
            t.write_records_body(w, v)

        return write_records
    raise ValueError(f"unknown field type {ftype}")


def _struct_writer(fields: tuple[FieldSpec, ...], version: int, flexible: bool) -> StructWriter:
    regular: list[tuple[str, Any, FieldWriter]] = []
    tagged: list[tuple[int, str, Any, FieldWriter]] = []
    for spec in fields:
        name = spec[_NAME]
        if flexible and spec[_TAG] is not None and _in(spec[_TAGGED], version):
            tagged.append(
                (spec[_TAG], name, _default(spec), _value_writer(spec, version, flexible))
            )
        elif _in(spec[_VERSIONS], version) and spec[_TAG] is None:
            regular.append((name, _default(spec), _value_writer(spec, version, flexible)))
    tagged.sort(key=lambda entry: entry[0])

    def write(w: t.Writer, value: Mapping[str, Any]) -> None:
        get = value.get
        for name, default, writer in regular:
            writer(w, get(name, default))
        if flexible:
            _write_tagged(w, value, tagged)

    return write


def _write_tagged(
    w: t.Writer, value: Mapping[str, Any], tagged: list[tuple[int, str, Any, FieldWriter]]
) -> None:
    present = []
    for tag, name, default, writer in tagged:
        v = value.get(name, default)
        if v != default:
            sub = t.Writer()
            writer(sub, v)
            present.append((tag, sub.getvalue()))
    w.uvarint(len(present))
    for tag, data in present:
        w.uvarint(tag)
        w.uvarint(len(data))
        w.write(data)
