"""The frame of a metadata record (Kafka's `MetadataRecordSerde`): the value of each data
record of `__cluster_metadata` is an unsigned varint frame version (1), an unsigned
varint record type (the record's `apiKey` in metadata-records/), an unsigned varint
record version, then the record's flexible body.

The entry points are `encode_record` and `decode_record`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Final, NamedTuple

from logbus.protocol import schema
from logbus.protocol import types as t
from logbus.protocol.errors import ProtocolError
from logbus.protocol.messages import MESSAGES

__all__ = ["MetadataRecord", "decode_record", "encode_record", "record_type"]

FRAME_VERSION: Final = 1


class MetadataRecord(NamedTuple):
    """One decoded metadata record: its name (e.g. "TopicRecord"), version and body."""

    name: str
    version: int
    data: dict[str, Any]


@cache
def _names_by_type() -> dict[int, str]:
    return {
        key: name for name, _m, key, mtype in MESSAGES if mtype == "metadata" and key is not None
    }


@cache
def _message(name: str) -> schema.Message:
    message = schema.message(name)
    if message.type != "metadata":
        raise KeyError(f"{name} is not a metadata record")
    return message


def record_type(name: str) -> int:
    """The record type (apiKey) of a metadata record by name."""
    api_key = _message(name).api_key
    assert api_key is not None
    return api_key


def latest_version(name: str) -> int:
    return _message(name).valid_versions[1]


def encode_record(name: str, data: Mapping[str, Any], version: int | None = None) -> bytes:
    """The bytes of one metadata record (the newest version unless `version` is given)."""
    message = _message(name)
    if version is None:
        version = message.valid_versions[1]
    w = t.Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(record_type(name))
    w.uvarint(version)
    return w.getvalue() + message.encode(data, version)


def decode_record(value: bytes | memoryview) -> MetadataRecord:
    """A metadata record from its bytes; ProtocolError for an unknown frame version,
    record type or version (a log written by a newer release)."""
    buf = memoryview(value)
    frame, pos = t.read_uvarint(buf, 0)
    if frame != FRAME_VERSION:
        raise ProtocolError(f"unknown metadata record frame version {frame}")
    kind, pos = t.read_uvarint(buf, pos)
    version, pos = t.read_uvarint(buf, pos)
    name = _names_by_type().get(kind)
    if name is None:
        raise ProtocolError(f"unknown metadata record type {kind}")
    message = _message(name)
    if not message.supports(version):
        raise ProtocolError(f"{name} version {version} is not supported")
    return MetadataRecord(name, version, message.decode(buf[pos:], version))
