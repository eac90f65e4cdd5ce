"""The schema languages the registry keeps: AVRO (parsed and checked with Apache Avro's
library), JSON (JSON Schema, checked against its meta-schema) and PROTOBUF (a .proto
text, or a base64 FileDescriptorProto read with protobuf's library). Each turns a schema
string, with the schemas its references resolve to, into a `ParsedSchema`: the form
stored and compared, and the checker its compatibility rules use.

Avro's compatibility is Avro's schema resolution (`avro.compatibility`, the port of the
Java `SchemaCompatibility` Confluent's registry uses): "new can read old" is BACKWARD.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from logbus.registry.errors import RegistryError, invalid_schema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)


@dataclass(frozen=True)
class ParsedSchema:
    """A schema that parsed: its type, the string kept (compact JSON for AVRO and JSON,
    the text as given for PROTOBUF), and the parsed form compatibility checks read."""

    schema_type: str
    canonical: str
    parsed: Any = field(compare=False, hash=False)

    def can_read(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema ([] if it can)."""
        if self.schema_type != writer.schema_type:
            return [f"Incompatible schema type: {writer.schema_type} -> {self.schema_type}"]
        if self.schema_type == AVRO:
            return _avro_can_read(self.parsed, writer.parsed)
        if self.schema_type == JSON:
            return _json_can_read(self.parsed, writer.parsed)
        return []


def parse_schema(
    schema_type: str, text: str, references: Sequence[str] = (), *, normalize: bool = False
) -> ParsedSchema:
    """The schema `text` of `schema_type`; `references` are the schema strings its
    references resolve to, in dependency order. RegistryError 42201 when it does not parse."""
    if schema_type == AVRO:
        return _parse_avro(text, references, normalize)
    if schema_type == JSON:
        return _parse_json(text)
    if schema_type == PROTOBUF:
        return _parse_protobuf(text)
    raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")


def _parse_avro(text: str, references: Sequence[str], normalize: bool) -> ParsedSchema:
    names = avro.name.Names()
    try:
        for reference in references:
            avro.schema.make_avsc_object(json.loads(reference), names)
        document = json.loads(text)
        parsed = avro.schema.make_avsc_object(document, names)
    except (ValueError, TypeError, KeyError, avro.errors.AvroException) as exc:
        raise invalid_schema(f"{{schema={text}}}, details: {exc}") from None
    if normalize:
        canonical = parsed.canonical_form
    else:
        canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return ParsedSchema(AVRO, canonical, parsed)


def _avro_can_read(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[str]:
    checker = avro.compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return []
    kinds = ", ".join(kind.value for kind in result.incompatibilities)
    return [
        f"{{errorType:'{kinds}', description:'The new schema cannot read data written with "
        f"the old one ({', '.join(sorted(result.messages))})', "
        f"additionalInfo:'{', '.join(sorted(result.locations))}'}}"
    ]


def _parse_json(text: str) -> ParsedSchema:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise invalid_schema(f"{{schema={text}}}, details: {exc}") from None
    if not isinstance(document, dict | bool):
        raise invalid_schema(f"{{schema={text}}}, details: a JSON Schema is an object or boolean")
    try:
        jsonschema.validators.validator_for(document).check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise invalid_schema(f"{{schema={text}}}, details: {exc.message}") from None
    canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return ParsedSchema(JSON, canonical, document)


def _json_can_read(reader: Any, writer: Any) -> list[str]:
    """The checks of a JSON Schema evolution this registry makes: a reader's type must be
    the writer's, a property the reader requires must have been required by the writer,
    and a property both declare must keep its type (open content models, as Confluent's
    default)."""
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return [] if reader == writer or reader is True else ["Schema changed from boolean"]
    messages = []
    if "type" in reader and reader.get("type") != writer.get("type"):
        messages.append(f"TYPE_CHANGED at #/: {writer.get('type')} -> {reader.get('type')}")
    writer_required = set(writer.get("required", ()))
    for name in sorted(set(reader.get("required", ())) - writer_required):
        messages.append(f"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at #/properties/{name}")
    reader_properties = reader.get("properties", {})
    writer_properties = writer.get("properties", {})
    for name in sorted(set(reader_properties) & set(writer_properties)):
        for message in _json_can_read(reader_properties[name], writer_properties[name]):
            messages.append(f"{message} (property {name})")
    return messages


def _parse_protobuf(text: str) -> ParsedSchema:
    """A .proto file's text, or (as confluent-kafka's ProtobufSerializer sends it) a
    base64 FileDescriptorProto, read with protobuf's own library. Kept as given."""
    descriptor = _file_descriptor(text)
    if descriptor is not None:
        if not descriptor.message_type and not descriptor.enum_type:
            raise invalid_schema(f"{{schema={text}}}, details: no message or enum definition")
        return ParsedSchema(PROTOBUF, text, descriptor)
    if not text.strip() or ("message" not in text and "enum" not in text):
        raise invalid_schema(f"{{schema={text}}}, details: no message or enum definition")
    return ParsedSchema(PROTOBUF, text, text)


def _file_descriptor(text: str) -> Any:
    """The FileDescriptorProto a base64 schema holds (None for other text)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    descriptor = descriptor_pb2.FileDescriptorProto()
    try:
        descriptor.ParseFromString(raw)
    except DecodeError:
        return None
    return descriptor
