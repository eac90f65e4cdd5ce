"""The proxy's side of the schema registry (`schema.registry.url`): registering the
schemas a produce request carries, fetching schemas by id, and Confluent's framing (a
zero byte, the 4-byte schema id, then the encoding) for the AVRO, JSONSCHEMA and
PROTOBUF embedded formats. Avro is encoded and decoded with Apache Avro's library,
Protobuf with protobuf's (a schema given as a base64 `FileDescriptorProto`, as
confluent-kafka's serializers register it; the record is the file's first message, and
its framing carries Confluent's message-index list for it, the single byte 0); the
registry is called over HTTP (urllib, in a worker thread, so the event loop never waits
on it)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import urllib.parse
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.io
import avro.schema
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from logbus.common.registry_http import RegistryRefused, RegistryUnreachable, call_registry
from logbus.restproxy import errors

_FRAME = struct.Struct(">bI")


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as a subject holds it: its id, its version, its type and the parsed
    schema (an Avro schema or a JSON Schema document)."""

    subject: str
    schema_id: int
    version: int
    schema_type: str
    parsed: Any


class SchemaRegistryClient:
    """Registers and fetches schemas; caches what it fetched. Shared by the proxy's
    tasks (the caches are plain dicts touched only on the event loop)."""

    def __init__(self, url: str | None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/") if url else None
        self.timeout = timeout
        self._by_id: dict[int, tuple[str, Any]] = {}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        assert self.url is not None
        try:
            return call_registry(self.url, method, path, body, timeout=self.timeout)
        except RegistryRefused as exc:
            detail = exc.message
            if exc.status == 409 or exc.status == 422:
                raise errors.invalid_schema(detail) from None
            if exc.status == 404:
                raise errors.ProxyError(404, 40403, f"Schema not found: {detail}") from None
            raise errors.ProxyError(500, 50002, f"Schema registry error: {detail}") from None
        except RegistryUnreachable as exc:
            raise errors.ProxyError(500, 50002, f"Schema registry error: {exc}") from None

    def _check_configured(self) -> None:
        if self.url is None:
            raise errors.unprocessable(
                "This embedded format needs a schema registry (schema.registry.url)"
            )

    async def register(self, subject: str, schema: str, schema_type: str) -> int:
        self._check_configured()
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        result = await asyncio.to_thread(
            self._call, "POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions",
            body,
        )
        return int(result["id"])

    async def register_version(
        self, subject: str, schema: str, schema_type: str, parsed: Any
    ) -> RegisteredSchema:
        """Register `schema` under `subject` (or find it there) with its id and version."""
        await self.register(subject, schema, schema_type)
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        result = await asyncio.to_thread(
            self._call, "POST", f"/subjects/{urllib.parse.quote(subject, safe='')}", body
        )
        return RegisteredSchema(subject, int(result["id"]), int(result["version"]),
                                schema_type, parsed)

    async def version(self, subject: str, version: int | str) -> RegisteredSchema:
        """A version of a subject (`"latest"` for its newest), as the registry has it."""
        self._check_configured()
        path = (
            f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/"
            f"{urllib.parse.quote(str(version), safe='')}"
        )
        result = await asyncio.to_thread(self._call, "GET", path)
        schema_type = result.get("schemaType", "AVRO")
        parsed = parse_registered(schema_type, result["schema"])
        self._by_id.setdefault(int(result["id"]), (schema_type, parsed))
        return RegisteredSchema(subject, int(result["id"]), int(result["version"]),
                                schema_type, parsed)

    async def schema(self, schema_id: int) -> tuple[str, Any]:
        """(schema type, parsed schema: an Avro schema, a JSON Schema document, or a
        Protobuf message class)."""
        self._check_configured()
        found = self._by_id.get(schema_id)
        if found is None:
            result = await asyncio.to_thread(self._call, "GET", f"/schemas/ids/{schema_id}")
            schema_type = result.get("schemaType", "AVRO")
            parsed = parse_registered(schema_type, result["schema"])
            found = self._by_id[schema_id] = (schema_type, parsed)
        return found


def frame(schema_id: int, payload: bytes) -> bytes:
    return _FRAME.pack(0, schema_id) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    if len(data) < _FRAME.size or data[0] != 0:
        raise errors.ProxyError(
            500, 50002, "Unknown magic byte: the record was not written with a schema id"
        )
    _, schema_id = _FRAME.unpack_from(data)
    return schema_id, data[_FRAME.size :]


def avro_encode(schema: avro.schema.Schema, value: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        avro.io.DatumWriter(schema).write(value, avro.io.BinaryEncoder(buffer))
    except (avro.errors.AvroException, TypeError, ValueError) as exc:
        raise errors.conversion_failed(str(exc)) from None
    return buffer.getvalue()


def avro_decode(schema: avro.schema.Schema, data: bytes) -> Any:
    try:
        return avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(data)))
    except (avro.errors.AvroException, TypeError, ValueError, struct.error) as exc:
        raise errors.ProxyError(500, 50002, f"Cannot decode an Avro record: {exc}") from None


def parse_avro(text: str) -> avro.schema.Schema:
    try:
        return avro.schema.parse(text)
    except (avro.errors.AvroException, ValueError, TypeError) as exc:
        raise errors.invalid_schema(str(exc)) from None


def parse_registered(schema_type: str, text: str) -> Any:
    """A schema the registry holds, parsed for encoding (None for a Protobuf schema this
    proxy cannot encode with: a record of it is refused when it is produced)."""
    if schema_type == "AVRO":
        return avro.schema.parse(text)
    if schema_type == "PROTOBUF":
        try:
            return parse_protobuf(text)
        except errors.ProxyError:
            return None
    return json.loads(text)


# Confluent's message-index list naming the file's first message: [0], written as one 0
FIRST_MESSAGE = b"\x00"


def parse_protobuf(text: str) -> Any:
    """The message class of the first message of a base64 `FileDescriptorProto` without
    imports. 422 for a .proto text or a file that imports others (not supported)."""
    try:
        file_proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(text, validate=True)
        )
    except (ValueError, DecodeError):
        raise errors.invalid_schema(
            "a PROTOBUF schema must be a base64 FileDescriptorProto here (.proto text is "
            "not supported by the proxy)"
        ) from None
    if file_proto.dependency or not file_proto.message_type:
        raise errors.invalid_schema(
            "a PROTOBUF schema must define a message and import no other file here"
        )
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.Add(file_proto)
        name = ".".join(filter(None, (file_proto.package, file_proto.message_type[0].name)))
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    except (TypeError, KeyError) as exc:
        raise errors.invalid_schema(str(exc)) from None


def protobuf_encode(message_class: Any, value: Any) -> bytes:
    """`value` (the message as protobuf's JSON mapping) encoded, after the message index."""
    if message_class is None:
        raise errors.invalid_schema("this PROTOBUF schema cannot be encoded by the proxy")
    try:
        message = json_format.ParseDict(value, message_class())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise errors.conversion_failed(str(exc)) from None
    encoded: bytes = message.SerializeToString()
    return FIRST_MESSAGE + encoded
