"""Confluent-framed Avro in the `logbus` source and sink (keyFormat/valueFormat=avro):
a zero byte, the writer schema's registry id (big-endian int32), then the Avro binary
body, as Confluent's serializers write records.

Planning happens on the driver (`read_decoders`, `write_encoders`): the reader schema
(a version of the subject) is fetched, or the writer schema is derived from the column's
Spark type and registered, so an unknown subject, an unreachable registry, a refused
evolution or a column the schema cannot hold fails the query before any task runs. The
Spark types follow Spark's `from_avro`: records are structs, unions with null nullable,
enums strings, bytes and fixed binary, date, timestamp-millis/micros and decimal their
Spark types.

On an executor each record is decoded with fastavro's `schemaless_reader` from the
writer schema its id names (fetched once per id and process, `_writer_schema`) and
resolved to the reader schema: Avro's schema resolution, the rules the registry's
compatibility checks stand on. A record without the magic byte, with an unknown id or
an undecodable body fails the task naming its partition and offset (mode=FAILFAST), or
reads as null (mode=PERMISSIVE).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from logbus.spark.options import AvroColumn, LogbusSparkError, RecordFormats
from logbus.spark.schema_registry import (
    SCHEMA_NOT_FOUND,
    SUBJECT_NOT_FOUND,
    VERSION_NOT_FOUND,
    RegistryClient,
    RegistryError,
)

_FRAME = struct.Struct(">bI")
_DEFAULT_RECORD_NAME = "topLevelRecord"  # the name Spark's to_avro gives the top record

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[tuple[str, str], DataType] = {
    ("int", "date"): DateType(),
    ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(),
    ("long", "local-timestamp-millis"): TimestampNTZType(),
    ("long", "local-timestamp-micros"): TimestampNTZType(),
}


class _SparkTypes:
    """The Spark type of an Avro schema (JSON), as `from_avro` derives it. Remembers the
    named types (records, enums, fixed) seen so far, for references by name."""

    def __init__(self) -> None:
        self.named: dict[str, DataType] = {}
        self.open: set[str] = set()

    def of(self, schema: Any, namespace: str = "") -> tuple[DataType, bool]:
        """(Spark type, nullable)."""
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if isinstance(schema, str):
            return self._name(schema, namespace), False
        if not isinstance(schema, dict) or "type" not in schema:
            raise LogbusSparkError(f"not an Avro schema: {schema!r}")
        kind = schema["type"]
        logical = schema.get("logicalType")
        if isinstance(kind, str) and logical is not None:
            if (kind, logical) in _LOGICAL:
                return _LOGICAL[(kind, logical)], False
            if logical == "decimal" and kind in ("bytes", "fixed"):
                return DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
        if kind in ("record", "error"):
            return self._record(schema, namespace), False
        if kind in ("enum", "fixed"):
            found: DataType = StringType() if kind == "enum" else BinaryType()
            self.named[_fullname(schema, namespace)] = found
            return found, False
        if kind == "array":
            items, nullable = self.of(schema["items"], namespace)
            return ArrayType(items, nullable), False
        if kind == "map":
            values, nullable = self.of(schema["values"], namespace)
            return MapType(StringType(), values, nullable), False
        return self.of(kind, namespace)

    def _name(self, name: str, namespace: str) -> DataType:
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        if name == "null":
            raise LogbusSparkError("a field of Avro type null alone has no Spark type")
        for candidate in (f"{namespace}.{name}" if namespace and "." not in name else "", name):
            if candidate in self.open:
                raise LogbusSparkError(
                    f"the recursive Avro type {candidate!r} has no Spark type"
                )
            if candidate in self.named:
                return self.named[candidate]
        raise LogbusSparkError(f"the Avro schema refers to an unknown type {name!r}")

    def _union(self, branches: list[Any], namespace: str) -> tuple[DataType, bool]:
        others = [b for b in branches if b != "null"]
        if len(others) != 1:
            raise LogbusSparkError(
                f"the Avro union {json.dumps(branches)} has no Spark type here: only a "
                "union of null and one other type (a nullable field) is supported"
            )
        found, _ = self.of(others[0], namespace)
        return found, len(others) < len(branches)

    def _record(self, schema: dict[str, Any], namespace: str) -> StructType:
        fullname = _fullname(schema, namespace)
        inner = fullname.rpartition(".")[0]
        self.open.add(fullname)
        fields = []
        for field in schema.get("fields", []):
            found, nullable = self.of(field["type"], inner)
            fields.append(StructField(field["name"], found, nullable))
        self.open.discard(fullname)
        struct_type = StructType(fields)
        self.named[fullname] = struct_type
        return struct_type


def _fullname(schema: dict[str, Any], namespace: str) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    space = schema.get("namespace", namespace) or ""
    return f"{space}.{name}" if space else name


def spark_type_of(avro_schema: Any) -> DataType:
    """The Spark type `from_avro` gives a column of this Avro schema (parsed JSON)."""
    found, _ = _SparkTypes().of(avro_schema)
    return found


def avro_schema_of(data_type: DataType, record_name: str, where: str) -> dict[str, Any]:
    """The Avro schema `to_avro` derives from a struct type: a record named `record_name`
    (a full name), nested structs as records named after their fields, nullable fields
    as unions with null (null first, default null, so a field added later reads as null
    from older records)."""
    if not isinstance(data_type, StructType):
        raise LogbusSparkError(f"{where} must be a struct, not {data_type.simpleString()}")
    namespace, _, name = record_name.rpartition(".")
    return _record_of(data_type, name, namespace, where)


def _record_of(data_type: StructType, name: str, namespace: str, where: str) -> dict[str, Any]:
    fullname = f"{namespace}.{name}" if namespace else name
    fields = []
    for field in data_type.fields:
        inner = _avro_of(field.dataType, field.name, fullname, f"{where}.{field.name}")
        if field.nullable:
            fields.append({"name": field.name, "type": ["null", inner], "default": None})
        else:
            fields.append({"name": field.name, "type": inner})
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
    if namespace:
        schema["namespace"] = namespace
    return schema


def _avro_of(data_type: DataType, name: str, namespace: str, where: str) -> Any:
    simple: dict[type, Any] = {
        BooleanType: "boolean", ByteType: "int", ShortType: "int", IntegerType: "int",
        LongType: "long", FloatType: "float", DoubleType: "double", StringType: "string",
        BinaryType: "bytes",
        DateType: {"type": "int", "logicalType": "date"},
        TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
        TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
    }
    if type(data_type) in simple:
        return simple[type(data_type)]
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision,
                "scale": data_type.scale}
    if isinstance(data_type, StructType):
        return _record_of(data_type, name, namespace, where)
    if isinstance(data_type, ArrayType):
        items = _avro_of(data_type.elementType, name, namespace, f"{where}[]")
        return {"type": "array", "items": ["null", items] if data_type.containsNull else items}
    if isinstance(data_type, MapType) and isinstance(data_type.keyType, StringType):
        values = _avro_of(data_type.valueType, name, namespace, f"{where}{{}}")
        nullable = data_type.valueContainsNull
        return {"type": "map", "values": ["null", values] if nullable else values}
    raise LogbusSparkError(
        f"{where} is {data_type.simpleString()}, which an Avro schema cannot hold"
    )


# Per-process caches (a Spark Python worker serves many tasks): parsed schemas by their
# text, and writer schemas by (registry, id). None records an id the registry lacks.
_PARSED: dict[str, Any] = {}
_WRITERS: dict[tuple[str, int], str | None] = {}


def _parsed(text: str) -> Any:
    found = _PARSED.get(text)
    if found is None:
        found = _PARSED[text] = fastavro.parse_schema(json.loads(text), named_schemas={})
    return found


def _writer_schema(registry_url: str, schema_id: int) -> str | None:
    """The text of the schema `schema_id` names, None if the registry has no such id."""
    key = (registry_url, schema_id)
    if key not in _WRITERS:
        try:
            _WRITERS[key] = RegistryClient(registry_url).schema(schema_id)
        except RegistryError as exc:
            if exc.code != SCHEMA_NOT_FOUND:
                raise
            _WRITERS[key] = None
    return _WRITERS[key]


class _BadRecord(Exception):
    """A record the reader schema cannot be read from (mode decides what follows)."""


@dataclass(frozen=True)
class AvroColumnDecoder:
    """Decodes one column (`key` or `value`) of the rows a task reads: built on the
    driver, shipped to executors; holds the reader schema's text only."""

    column: str
    registry_url: str
    reader_schema: str
    spark_type: DataType
    permissive: bool

    def decode(self, data: pa.Array, where: Callable[[int], str]) -> pa.Array:
        """The decoded values of a binary column as an Arrow struct array."""
        reader = _parsed(self.reader_schema)
        values: list[Any] = []
        for i, raw in enumerate(data.to_pylist()):
            if raw is None:
                values.append(None)
                continue
            try:
                values.append(self._decode_one(raw, reader))
            except _BadRecord as exc:
                if not self.permissive:
                    raise LogbusSparkError(
                        f"{where(i)}: the {self.column} {exc} (with mode=PERMISSIVE such "
                        "a record reads as null)"
                    ) from None
                values.append(None)
        return pa.array(values, type=to_arrow_type(self.spark_type, timezone="UTC"))

    def _decode_one(self, raw: bytes, reader: Any) -> Any:
        if len(raw) < _FRAME.size or raw[0] != 0:
            raise _BadRecord(
                "does not start with Confluent's magic byte 0 and a schema id (it was not "
                "written with a schema registry)"
            )
        _, schema_id = _FRAME.unpack_from(raw)
        text = _writer_schema(self.registry_url, schema_id)
        if text is None:
            raise _BadRecord(f"names schema id {schema_id}, which the registry does not have")
        body = io.BytesIO(raw[_FRAME.size :])
        try:
            if text == self.reader_schema:
                return fastavro.schemaless_reader(body, reader, None)
            return fastavro.schemaless_reader(body, _parsed(text), reader)
        # fastavro reports a body that does not match its schema, or a writer schema the
        # reader schema cannot resolve, with many exception types
        except Exception as exc:
            raise _BadRecord(
                f"cannot be read with writer schema id {schema_id}: "
                f"{type(exc).__name__}: {exc}"
            ) from None


@dataclass(frozen=True)
class AvroColumnEncoder:
    """Encodes one struct column (`key` or `value`) of the rows a task writes with the
    schema `schema_id`, in Confluent's framing."""

    column: str
    schema_id: int
    schema: str
    spark_type: DataType

    def encode(self, data: pa.Array) -> pa.Array:
        writer = _parsed(self.schema)
        prefix = _FRAME.pack(0, self.schema_id)
        convert = _avro_value if _has_map(self.spark_type) else None
        out: list[bytes | None] = []
        for value in data.to_pylist():
            if value is None:
                out.append(None)
                continue
            if convert is not None:
                value = convert(value, self.spark_type)
            body = io.BytesIO()
            body.write(prefix)
            try:
                fastavro.schemaless_writer(body, writer, value)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise LogbusSparkError(
                    f"a row's {self.column!r} cannot be written with schema id "
                    f"{self.schema_id}: {type(exc).__name__}: {exc}"
                ) from None
            out.append(body.getvalue())
        return pa.array(out, pa.binary())


def _has_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, StructType):
        return any(_has_map(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _has_map(data_type.elementType)
    return False


def _avro_value(value: Any, data_type: DataType) -> Any:
    """A value as Arrow gives it, with maps (lists of pairs there) as dicts."""
    if value is None:
        return None
    if isinstance(data_type, MapType):
        return {k: _avro_value(v, data_type.valueType) for k, v in value}
    if isinstance(data_type, StructType):
        return {f.name: _avro_value(value.get(f.name), f.dataType) for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        return [_avro_value(v, data_type.elementType) for v in value]
    return value


def _registry_problem(exc: RegistryError, column: AvroColumn) -> LogbusSparkError:
    option = f"{column.column}Subject"
    if exc.code == SUBJECT_NOT_FOUND:
        return LogbusSparkError(
            f"option {option!r}: the schema registry has no subject {column.subject!r}"
        )
    if exc.code == VERSION_NOT_FOUND:
        return LogbusSparkError(
            f"option '{column.column}SchemaVersion': subject {column.subject!r} has no "
            f"version {column.version}"
        )
    if exc.status is None:
        return exc
    return LogbusSparkError(f"option {option!r} ({column.subject!r}): {exc}")


def read_decoders(formats: RecordFormats) -> tuple[AvroColumnDecoder, ...]:
    """The decoders of a read's Avro columns, from the reader schemas the registry holds
    (on the driver: an unknown subject or version, or a registry that does not answer,
    fails the query here)."""
    if not formats.avro:
        return ()
    assert formats.registry_url is not None
    client = RegistryClient(formats.registry_url)
    decoders = []
    for column in formats.avro:
        try:
            found = client.version(column.subject, column.version)
        except RegistryError as exc:
            raise _registry_problem(exc, column) from None
        try:
            spark_type = spark_type_of(json.loads(found.schema))
        except LogbusSparkError as exc:
            raise LogbusSparkError(
                f"option '{column.column}Subject': version {found.version} of "
                f"{column.subject!r}: {exc}"
            ) from None
        decoders.append(
            AvroColumnDecoder(
                column.column, formats.registry_url, found.schema, spark_type,
                formats.permissive,
            )
        )
    return tuple(decoders)


def decoded_schema(schema: StructType, decoders: Sequence[AvroColumnDecoder]) -> StructType:
    """The source's row schema with each Avro column's type replaced by its struct."""
    types = {d.column: d.spark_type for d in decoders}
    return StructType(
        [StructField(f.name, types.get(f.name, f.dataType), True) for f in schema.fields]
    )


def decode_batch(
    batch: pa.RecordBatch, decoders: Sequence[AvroColumnDecoder], schema: pa.Schema
) -> pa.RecordBatch:
    """A batch of the source's rows with its Avro columns decoded."""
    topics = batch.column("topic")
    partitions = batch.column("partition")
    offsets = batch.column("offset")

    def where(row: int) -> str:
        return (
            f"partition {topics[row].as_py()}-{partitions[row].as_py()} offset "
            f"{offsets[row].as_py()}"
        )

    arrays = list(batch.columns)
    for decoder in decoders:
        index = batch.schema.get_field_index(decoder.column)
        arrays[index] = decoder.decode(batch.column(index), where)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_encoders(formats: RecordFormats, schema: StructType) -> tuple[AvroColumnEncoder, ...]:
    """The encoders of a write's Avro columns, with their writer schemas registered (or
    looked up) on the driver: a refused evolution or a column the schema cannot hold
    fails the query before any task runs."""
    if not formats.avro:
        return ()
    assert formats.registry_url is not None
    client = RegistryClient(formats.registry_url)
    types = {f.name: f.dataType for f in schema.fields}
    encoders = []
    for column in formats.avro:
        data_type = types.get(column.column)
        if not isinstance(data_type, StructType):
            given = "missing" if data_type is None else data_type.simpleString()
            raise LogbusSparkError(
                f"with {column.column}Format=avro, column {column.column!r} must be a "
                f"struct (given: {given})"
            )
        if column.schema_id is not None:
            schema_id, text = column.schema_id, _given_schema(client, column, data_type)
        else:
            schema_id, text = _registered(client, formats, column, data_type)
        encoders.append(AvroColumnEncoder(column.column, schema_id, text, data_type))
    return tuple(encoders)


def _given_schema(client: RegistryClient, column: AvroColumn, data_type: StructType) -> str:
    """The schema `<column>SchemaId` names, checked against the column's fields."""
    option = f"{column.column}SchemaId"
    assert column.schema_id is not None
    try:
        text = client.schema(column.schema_id)
    except RegistryError as exc:
        if exc.code == SCHEMA_NOT_FOUND:
            raise LogbusSparkError(
                f"option {option!r}: the schema registry has no schema id {column.schema_id}"
            ) from None
        raise
    schema = json.loads(text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise LogbusSparkError(f"option {option!r}: schema {column.schema_id} is not a record")
    fields = {f["name"]: f for f in schema.get("fields", [])}
    for name in data_type.names:
        if name not in fields:
            raise LogbusSparkError(
                f"option {option!r}: schema {column.schema_id} has no field {name!r} "
                f"for {column.column}.{name}"
            )
    for name, field in fields.items():
        if name not in data_type.names and "default" not in field:
            raise LogbusSparkError(
                f"option {option!r}: schema {column.schema_id}'s field {name!r} has no "
                f"default and column {column.column!r} has no field {name!r}"
            )
    return text


def _registered(
    client: RegistryClient, formats: RecordFormats, column: AvroColumn, data_type: StructType
) -> tuple[int, str]:
    """The schema derived from the column's type, registered under the subject (or, with
    auto.register.schemas=false, looked up there): its id and text."""
    name = column.record_name or _latest_record_name(client, column) or _DEFAULT_RECORD_NAME
    text = json.dumps(avro_schema_of(data_type, name, f"column {column.column!r}"))
    option = f"{column.column}Subject"
    try:
        if formats.auto_register:
            return client.register(column.subject, text), text
        return client.lookup(column.subject, text), text
    except RegistryError as exc:
        if exc.status == 409:
            raise LogbusSparkError(
                f"option {option!r}: the schema registry refused the schema of column "
                f"{column.column!r} under {column.subject!r}: {exc}"
            ) from None
        if exc.status == 404 and not formats.auto_register:
            raise LogbusSparkError(
                f"option 'auto.register.schemas' is false and subject {column.subject!r} "
                f"does not hold the schema of column {column.column!r} ({text}): {exc}"
            ) from None
        raise _registry_problem(exc, column) from None


def _latest_record_name(client: RegistryClient, column: AvroColumn) -> str | None:
    """The full name of the record the subject's newest version holds, if any: a
    derived schema takes it, so that it can evolve the registered one."""
    try:
        latest = json.loads(client.version(column.subject).schema)
    except RegistryError as exc:
        if exc.code in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND):
            return None
        raise _registry_problem(exc, column) from None
    if isinstance(latest, dict) and latest.get("type") == "record":
        return _fullname(latest, "")
    return None


def encode_batch(batch: pa.RecordBatch, encoders: Sequence[AvroColumnEncoder]) -> pa.RecordBatch:
    """A batch of the sink's rows with its Avro columns encoded as binary."""
    arrays = list(batch.columns)
    fields = list(batch.schema)
    for encoder in encoders:
        index = batch.schema.get_field_index(encoder.column)
        arrays[index] = encoder.encode(batch.column(index))
        fields[index] = pa.field(encoder.column, pa.binary())
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
