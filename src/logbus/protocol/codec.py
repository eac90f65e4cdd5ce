"""Requests and responses as whole frames: headers plus generically coded bodies.

Header versions follow Kafka: a request to a flexible API version uses request header v2
(v1 otherwise; ControlledShutdown v0 uses v0); a response uses header v1 when flexible,
except ApiVersions, whose response header is always v0 so that any client can read it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from logbus.protocol import schema
from logbus.protocol import types as t
from logbus.protocol.errors import ProtocolError, UnsupportedVersion
from logbus.protocol.fetch import encode_fetch_response
from logbus.protocol.messages.api_keys import ApiKey
from logbus.protocol.messages.fetch_response import FetchResponse
from logbus.protocol.produce import decode_produce_request

_REQUEST_HEAD = struct.Struct(">hhi")
_CLIENT_ID = t.make_string_reader(compact=False, nullable=True)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if schema.request(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if schema.response(api_key).is_flexible(api_version) else 0


def peek_request_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame, before anything else."""
    if len(frame) < _REQUEST_HEAD.size:
        raise ProtocolError("request shorter than its header")
    api_key, api_version, correlation_id = _REQUEST_HEAD.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode the request header; return it and the position where the body starts.

    Raises UnsupportedVersion for an API key or version the codec has no table for (the
    caller may still answer, using the correlation id it carries).
    """
    view = memoryview(frame)
    api_key, api_version, correlation_id = peek_request_header(view)
    try:
        message = schema.request(api_key)
    except KeyError:
        raise UnsupportedVersion(api_key, api_version, correlation_id) from None
    if not message.supports(api_version):
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    pos = _REQUEST_HEAD.size
    client_id = None
    header_version = request_header_version(api_key, api_version)
    if header_version >= 1:
        client_id, pos = _CLIENT_ID(view, pos)
    if header_version >= 2:
        pos = schema.read_tagged_fields(view, pos, {}, {})
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a request frame (without its size prefix). Trailing bytes are tolerated; a
    request whose arrays hold more than `REQUEST_ELEMENT_LIMIT` elements in all is a
    ProtocolError (the broker closes the connection)."""
    view = memoryview(frame)
    header, pos = parse_request_header(view)
    if header.api_key == ApiKey.PRODUCE and header.api_version >= 3:
        return header, cast(dict[str, Any], decode_produce_request(view, pos, header.api_version))
    budget = t.ELEMENT_BUDGET
    budget.remaining = t.REQUEST_ELEMENT_LIMIT
    try:
        body, _ = schema.request(header.api_key).reader(header.api_version)(view, pos)
    finally:
        budget.remaining = None
    return header, body


def encode_request(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """A complete request frame, size prefix included."""
    return b"".join(encode_request_chunks(header, body))


def encode_request_chunks(header: RequestHeader, body: Mapping[str, Any]) -> list[Any]:
    """A complete request frame as bytes-like chunks, so that a Produce's batches can be
    written as they are instead of copied into one frame."""
    header_version = request_header_version(header.api_key, header.api_version)
    head = _REQUEST_HEAD.pack(header.api_key, header.api_version, header.correlation_id)
    w = t.Writer()
    w.write(head)
    if header_version >= 1:
        _write_client_id(w, header.client_id)
    if header_version >= 2:
        w.uvarint(0)
    schema.request(header.api_key).writer(header.api_version)(w, body)
    size = w.size()
    chunks = [c.read() if hasattr(c, "read") else c for c in w.chunks()]
    chunks[0] = t.INT32.pack(size) + chunks[0]  # the head is always the first chunk
    return chunks


def _write_client_id(w: t.Writer, client_id: str | None) -> None:
    if client_id is None:
        w.pack(t.INT16, -1)
        return
    raw = client_id.encode("utf-8")
    w.pack(t.INT16, len(raw))
    w.write(raw)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> list[Any]:
    """A complete response frame as chunks: bytes, and file slices to send as they are."""
    w = t.Writer()
    w.pack(t.INT32, correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        w.uvarint(0)
    if api_key == ApiKey.FETCH and api_version >= 4:
        encode_fetch_response(w, cast(FetchResponse, body), api_version)
    else:
        schema.response(api_key).writer(api_version)(w, body)
    size = w.size()
    chunks = w.chunks()
    prefix = t.INT32.pack(size)
    if chunks and isinstance(chunks[0], bytes):
        chunks[0] = prefix + chunks[0]
    else:
        chunks.insert(0, prefix)
    return chunks


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (without size prefix): (correlation_id, body)."""
    view = memoryview(frame)
    correlation_id, pos = t.read_int32(view, 0)
    if response_header_version(api_key, api_version) >= 1:
        pos = schema.read_tagged_fields(view, pos, {}, {})
    body, _ = schema.response(api_key).reader(api_version)(view, pos)
    return correlation_id, body
