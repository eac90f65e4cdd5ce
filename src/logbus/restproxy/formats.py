"""Confluent REST Proxy's v2 embedded formats: the media types
`application/vnd.kafka.{binary,json,avro,jsonschema}.v2+json`, how a produce request's
keys and values become record bytes in each, and how a consumer's records become JSON
again. AVRO and JSONSCHEMA records carry Confluent's framing and a registry id."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from logbus.restproxy import errors, json_codec
from logbus.restproxy.schemas import (
    SchemaRegistryClient,
    avro_decode,
    avro_encode,
    frame,
    parse_avro,
    unframe,
)

BINARY = "binary"
JSON = "json"
AVRO = "avro"
JSONSCHEMA = "jsonschema"
FORMATS = (BINARY, JSON, AVRO, JSONSCHEMA)
SCHEMA_FORMATS = {AVRO: "AVRO", JSONSCHEMA: "JSON"}
V2_JSON = "application/vnd.kafka.v2+json"


def media_type(embedded: str) -> str:
    return f"application/vnd.kafka.{embedded}.v2+json"


def embedded_format(content_type: str | None, default: str | None = None) -> str | None:
    """The embedded format a media type names (`default` for plain JSON types); None
    for a type the proxy does not take."""
    text = (content_type or "").split(";")[0].strip().lower()
    if text in ("", "application/json", "application/octet-stream", V2_JSON, "*/*"):
        return default
    for embedded in FORMATS:
        if text in (media_type(embedded), f"application/vnd.kafka.{embedded}+json"):
            return embedded
    return None


@dataclass
class SchemaChoice:
    """The schema a produce request gives for its keys or values: an id, or the schema
    text to register (the id is filled in once registered)."""

    schema_id: int | None
    text: str | None
    parsed: Any = None


class Encoder:
    """Turns the keys and values of one produce request into record bytes."""

    def __init__(self, embedded: str, registry: SchemaRegistryClient, topic: str) -> None:
        self.embedded = embedded
        self.registry = registry
        self.topic = topic
        self.schemas: dict[str, SchemaChoice | None] = {"key": None, "value": None}

    async def prepare(self, body: dict[str, Any], records: list[dict[str, Any]]) -> None:
        """Register or fetch the request's schemas (schema formats only)."""
        if self.embedded not in SCHEMA_FORMATS:
            return
        for part in ("key", "value"):
            needed = any(r.get(part) is not None for r in records)
            schema_id = body.get(f"{part}_schema_id")
            text = body.get(f"{part}_schema")
            if schema_id is None and text is None:
                if needed:
                    raise errors.key_schema_missing() if part == "key" else (
                        errors.value_schema_missing()
                    )
                continue
            self.schemas[part] = await self._schema(part, schema_id, text)

    async def _schema(self, part: str, schema_id: Any, text: Any) -> SchemaChoice:
        schema_type = SCHEMA_FORMATS[self.embedded]
        if schema_id is not None:
            if not isinstance(schema_id, int):
                raise errors.unprocessable(f"{part}_schema_id must be a number")
            found_type, parsed = await self.registry.schema(schema_id)
            if found_type != schema_type:
                raise errors.invalid_schema(
                    f"schema {schema_id} is {found_type}, not {schema_type}"
                )
            return SchemaChoice(schema_id, None, parsed)
        if not isinstance(text, str):
            raise errors.invalid_schema(f"{part}_schema must be a string")
        if schema_type == "AVRO":
            parsed = parse_avro(text)
        else:
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise errors.invalid_schema(str(exc)) from None
        schema_id = await self.registry.register(f"{self.topic}-{part}", text, schema_type)
        return SchemaChoice(schema_id, text, parsed)

    def schema_id(self, part: str) -> int | None:
        choice = self.schemas[part]
        return None if choice is None else choice.schema_id

    def encode_column(self, part: str, values: list[Any]) -> list[bytes | None]:
        """The keys or the values of a request's records, in order (JSON's without a
        call per record)."""
        if self.embedded == JSON:
            dumps = json_codec.dumps
            return [None if value is None else dumps(value) for value in values]
        return [self.encode(part, value) for value in values]

    def encode(self, part: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if self.embedded == BINARY:
            if not isinstance(value, str):
                raise errors.conversion_failed(f"a binary {part} is a base64 string")
            try:
                return base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise errors.conversion_failed(f"{part} is not base64: {exc}") from None
        if self.embedded == JSON:
            return json_codec.dumps(value)
        choice = self.schemas[part]
        assert choice is not None and choice.schema_id is not None
        if self.embedded == AVRO:
            return frame(choice.schema_id, avro_encode(choice.parsed, value))
        return frame(choice.schema_id, json_codec.dumps(value))


def decode_plain(embedded: str, data: bytes | None) -> Any:
    """A consumed key or value in the binary or JSON format (no registry involved)."""
    if data is None:
        return None
    if embedded == BINARY:
        return base64.b64encode(data).decode()
    try:
        return json.loads(data)
    except ValueError as exc:
        raise errors.ProxyError(500, 50002, f"A record is not JSON: {exc}") from None


async def decode(embedded: str, registry: SchemaRegistryClient, data: bytes | None) -> Any:
    """A consumed key or value as the consumer's embedded format shows it."""
    if data is None or embedded in (BINARY, JSON):
        return decode_plain(embedded, data)
    schema_id, payload = unframe(data)
    schema_type, parsed = await registry.schema(schema_id)
    if embedded == AVRO and schema_type == "AVRO":
        return jsonable(avro_decode(parsed, payload))
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise errors.ProxyError(500, 50002, f"A record is not JSON: {exc}") from None


def jsonable(value: Any) -> Any:
    """Avro's decoded values as JSON takes them (bytes as ISO-8859-1 text, as Avro's
    JSON encoding writes them)."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value
