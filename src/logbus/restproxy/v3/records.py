"""Producing through the v3 API: `POST .../topics/{topic_name}/records`.

The body is one JSON object per record, `{"partition_id", "headers", "key", "value",
"timestamp"}`, and may hold many of them one after another (Confluent's streaming mode,
with `Transfer-Encoding: chunked`): each record is sent as soon as it has been read, and
the answer streams one JSON object per record, in the order the records came, each with
its own `error_code` (200 when it was written) while the HTTP status stays 200. A key or
value is `{"type": "BINARY" | "JSON" | "STRING", "data": ...}`, or a schema record
(`"type": "AVRO" | "JSONSCHEMA" | "PROTOBUF"`, or no type) whose schema the registry holds: by
`schema_id`, by `schema_version` of its subject, as a raw `schema` to register, or the
subject's latest version. The subject is `subject`, else `<topic>-key` / `<topic>-value`.

A record that cannot be encoded is answered with its error and not sent; the records
after it go on. JSON that cannot be parsed ends the stream with one error, as Confluent's
proxy ends it. At most `IN_FLIGHT` records wait for their answers: past that, reading the
body waits (backpressure reaches the client through HTTP flow control, never a thread).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from logbus.client.admin import TopicDescription
from logbus.client.errors import KafkaError
from logbus.client.producer import Producer
from logbus.restproxy.errors import ProxyError
from logbus.restproxy.schemas import (
    RegisteredSchema,
    SchemaRegistryClient,
    avro_encode,
    frame,
    parse_avro,
    parse_protobuf,
    protobuf_encode,
)
from logbus.restproxy.v3.resources import (
    V3_JSON,
    Links,
    V3Response,
    check_json_body,
    invalid_payload,
    kafka_error,
    links,
    object_body,
)
from logbus.restproxy.v3.topics import describe
from logbus.restproxy.web import MAX_BODY_BYTES

log = logging.getLogger(__name__)

IN_FLIGHT = 1000
TOPIC_CACHE_SECONDS = 5.0
_PLAIN = ("BINARY", "JSON", "STRING")
_SCHEMA_TYPES = {"AVRO": "AVRO", "JSONSCHEMA": "JSON", "PROTOBUF": "PROTOBUF"}
_FORMATS = {"AVRO": "AVRO", "JSON": "JSONSCHEMA", "PROTOBUF": "PROTOBUF"}


def _bad(detail: str) -> ProxyError:
    return ProxyError(400, 400, f"Bad Request: {detail}")


def error_json(error: ProxyError) -> dict[str, Any]:
    return {"error_code": error.error_code, "message": error.message}


@dataclass(frozen=True)
class Encoded:
    """A key or value as record bytes, and what the answer says of it."""

    data: bytes | None
    shown: dict[str, Any] | None


class RecordEncoder:
    """Turns the keys, values and headers of one topic's produce records into bytes.
    Lives for one request; safe on one event loop."""

    def __init__(self, topic: str, registry: SchemaRegistryClient) -> None:
        self.topic = topic
        self.registry = registry

    async def encode(self, part: str, spec: Any) -> Encoded:
        if spec is None:
            return Encoded(None, None)
        if not isinstance(spec, dict):
            raise _bad(f"{part} must be an object with a type and data.")
        kind = spec.get("type")
        data = spec.get("data")
        if isinstance(kind, str) and kind.upper() in _PLAIN:
            kind = kind.upper()
            encoded = None if data is None else _plain(kind, data)
            return Encoded(encoded, {"type": kind, "size": len(encoded or b"")})
        if kind is not None and (not isinstance(kind, str) or kind.upper() not in _SCHEMA_TYPES):
            raise _bad(f"Unsupported type {kind} for the {part}.")
        schema = await self._schema(part, spec, None if kind is None else kind.upper())
        encoded = None if data is None else self._framed(schema, data)
        return Encoded(encoded, {
            "type": _FORMATS[schema.schema_type], "subject": schema.subject,
            "schema_id": schema.schema_id, "schema_version": schema.version,
            "size": len(encoded or b""),
        })

    async def _schema(self, part: str, spec: dict[str, Any], kind: str | None) -> RegisteredSchema:
        subject = spec.get("subject") or f"{self.topic}-{part}"
        if not isinstance(subject, str):
            raise _bad("subject must be a string.")
        schema_id, version, raw = spec.get("schema_id"), spec.get("schema_version"), spec.get(
            "schema")
        if schema_id is not None:
            if isinstance(schema_id, bool) or not isinstance(schema_id, int):
                raise _bad("schema_id must be a number.")
            found_type, parsed = await self.registry.schema(schema_id)
            found = RegisteredSchema(subject, schema_id, -1, found_type, parsed)
        elif raw is not None:
            if not isinstance(raw, str):
                raise _bad("schema must be a string.")
            schema_type = _SCHEMA_TYPES.get(kind or "AVRO", "AVRO")
            parsed = _parse(schema_type, raw)
            found = await self.registry.register_version(subject, raw, schema_type, parsed)
        else:
            found = await self.registry.version(subject, "latest" if version is None else version)
        if kind is not None and found.schema_type != _SCHEMA_TYPES[kind]:
            raise _bad(f"The schema of the {part} is {found.schema_type}, not {kind}.")
        if found.schema_type not in _FORMATS:
            raise _bad(f"{found.schema_type} schemas are not supported by this proxy.")
        return found

    @staticmethod
    def _framed(schema: RegisteredSchema, data: Any) -> bytes:
        if schema.schema_type == "AVRO":
            return frame(schema.schema_id, avro_encode(schema.parsed, data))
        if schema.schema_type == "PROTOBUF":
            return frame(schema.schema_id, protobuf_encode(schema.parsed, data))
        return frame(schema.schema_id, json.dumps(data, separators=(",", ":")).encode())


def _parse(schema_type: str, text: str) -> Any:
    if schema_type == "AVRO":
        return parse_avro(text)
    if schema_type == "PROTOBUF":
        return parse_protobuf(text)
    return _json_schema(text)


def _json_schema(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProxyError(422, 42205, f"Invalid schema: {exc}") from None


def _plain(kind: str, data: Any) -> bytes:
    if kind == "JSON":
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    if not isinstance(data, str):
        shown = json.dumps(data)
        raise _bad(f"data={shown} is not a base64 string." if kind == "BINARY"
                   else f"data={shown} is not a string.")
    if kind == "STRING":
        return data.encode()
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error:
        raise _bad(f"data={json.dumps(data)} is not a valid base64 string.") from None


def _headers(value: Any) -> list[tuple[str, bytes | None]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad("headers must be a list.")
    out = []
    for header in value:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise _bad("Each header needs a name.")
        raw = header.get("value")
        out.append((header["name"], None if raw is None else _plain("BINARY", raw)))
    return out


def _timestamp_ms(value: Any) -> int | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise _bad(f"timestamp={value} is not an ISO-8601 date and time.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def iso_time(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


# -- reading the body -------------------------------------------------------------------


class JsonStreamError(ProxyError):
    """The body stopped being JSON: the stream ends here."""


class JsonSplitter:
    """Splits concatenated JSON text, fed in pieces as it arrives, into its values
    (sans-IO: `feed(text)` returns the values now complete, `end()` those left when the
    text ends). A value cut off mid-way waits for more; text that cannot become JSON is a
    JsonStreamError, after which the splitter takes nothing more.

    A cut-off value is parsed again only once the text has doubled since the last try or
    a piece ends with `}` (where a record ends, so a client that waits for each answer
    is answered at once): a large record arriving in many pieces costs linear time."""

    def __init__(self, max_value_chars: int = MAX_BODY_BYTES) -> None:
        self.max_value_chars = max_value_chars
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._tried_at = 0  # the text's length when a parse last found it cut off
        self._failed = False

    def feed(self, text: str) -> list[Any]:
        if self._failed:
            return []
        self._text += text
        if self._tried_at and len(self._text) < 2 * self._tried_at and (
            not text.rstrip().endswith("}")
        ):
            return []
        return self._split(ended=False)

    def end(self) -> list[Any]:
        return [] if self._failed else self._split(ended=True)

    def _split(self, ended: bool) -> list[Any]:
        values: list[Any] = []
        text, at = self._text, 0
        while True:
            while at < len(text) and text[at] in " \t\r\n":
                at += 1
            if at == len(text):
                self._text, self._tried_at = "", 0
                return values
            try:
                value, end = self._decoder.raw_decode(text, at)
                if end == len(text) and not ended and _is_number(value):
                    # digits at the very end may go on in the next piece
                    raise json.JSONDecodeError("Unterminated number", text, end)
                at = end
            except json.JSONDecodeError as exc:
                left = len(text) - at
                if ended or not _cut_off(exc, len(text)):
                    values.append(self._fail(f"Error processing JSON: {exc}", 400))
                elif left > self.max_value_chars:
                    values.append(self._fail("Error processing message: record too large", 413))
                else:
                    self._text = text[at:]
                    self._tried_at = len(self._text)
                return values
            values.append(value)

    def _fail(self, message: str, code: int) -> JsonStreamError:
        self._failed, self._text = True, ""
        return JsonStreamError(code, code, message)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cut_off(error: json.JSONDecodeError, length: int) -> bool:
    """Whether more text could still complete the value the error stopped in (it stopped
    at the end of the text, or inside a string), rather than the text being malformed."""
    return error.msg.startswith("Unterminated") or error.pos >= length - 5


async def json_values(request: Request) -> AsyncIterator[Any]:
    """The JSON values of a body of concatenated JSON, each as soon as it has arrived;
    JsonStreamError (as a value, then the end) for bytes that are not JSON."""
    splitter = JsonSplitter()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    async for chunk in request.stream():
        try:
            values = splitter.feed(utf8.decode(chunk))
        except UnicodeDecodeError as exc:
            yield JsonStreamError(400, 400, f"Error processing JSON: {exc}")
            return
        for value in values:
            yield value
            if isinstance(value, JsonStreamError):
                return
    try:
        values = splitter.feed(utf8.decode(b"", final=True)) + splitter.end()
    except UnicodeDecodeError as exc:
        values = [JsonStreamError(400, 400, f"Error processing JSON: {exc}")]
    for value in values:
        yield value


# -- producing --------------------------------------------------------------------------


class RecordSender:
    """Encodes and sends the records of one request to one topic, each answered with a
    dict: Confluent's delivery report (`error_code` 200) or its error. Safe on one event
    loop."""

    def __init__(
        self, request: Request, site: Links, topic: TopicDescription, producer: Producer
    ) -> None:
        self.links = site
        self.topic = topic
        self.producer = producer
        self.encoder = RecordEncoder(topic.name, request.app.state.schemas)

    async def send(self, record: Any) -> Awaitable[dict[str, Any]]:
        """Encode and hand one record to the producer; the awaitable of its answer."""
        try:
            if not isinstance(record, dict):
                raise ProxyError(400, 400, "Error processing JSON: a record is a JSON object")
            partition = self._partition(record.get("partition_id"))
            key = await self.encoder.encode("key", record.get("key"))
            value = await self.encoder.encode("value", record.get("value"))
            headers = _headers(record.get("headers"))
            timestamp = _timestamp_ms(record.get("timestamp"))
            delivery = await self.producer.send(
                self.topic.name, value.data, key.data, partition=partition,
                timestamp=timestamp, headers=headers or None,
            )
        except ProxyError as exc:
            return _answered(error_json(exc))
        except KafkaError as exc:
            return _answered(error_json(kafka_error(exc)))
        return self._delivered(delivery, key, value)

    def _partition(self, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
            value not in self.topic.partitions
        ):
            raise ProxyError(404, 40402, "Partition not found.")
        return value

    async def _delivered(
        self, delivery: asyncio.Future[Any], key: Encoded, value: Encoded
    ) -> dict[str, Any]:
        try:
            written = await delivery
        except KafkaError as exc:
            return error_json(kafka_error(exc))
        answer: dict[str, Any] = {
            "error_code": 200, "cluster_id": self.links.cluster, "topic_name": self.topic.name,
            "partition_id": written.partition, "offset": written.offset,
            "timestamp": iso_time(written.timestamp),
        }
        if key.shown is not None:
            answer["key"] = key.shown
        if value.shown is not None:
            answer["value"] = value.shown
        return answer


class RecordStream:
    """One streamed produce request: reads records from the body, sends each, and
    streams the answers in order. The reader task is owned by the answer's iterator
    (cancelled when the answer ends or the client goes away)."""

    def __init__(self, records: AsyncIterator[Any], sender: RecordSender) -> None:
        self.records = records
        self.sender = sender
        self.answers: asyncio.Queue[Awaitable[dict[str, Any]] | None] = asyncio.Queue(IN_FLIGHT)

    async def body(self) -> AsyncIterator[bytes]:
        reader = asyncio.create_task(self._read(), name="v3-produce-reader")
        try:
            while (answer := await self.answers.get()) is not None:
                yield json.dumps(await answer, separators=(",", ":")).encode() + b"\n"
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self) -> None:
        """Send every record; then the end of the answers (None). When the answer is
        cancelled (the client went away) this task is too, and nothing waits for its end
        any more."""
        try:
            async for value in self.records:
                if isinstance(value, JsonStreamError):
                    await self.answers.put(_answered(error_json(value)))
                    break
                await self.answers.put(await self.sender.send(value))
        except ClientDisconnect:
            pass
        except Exception as exc:
            # the answer must still end: a failure of ours ends it with one error
            log.exception("producing to %s failed", self.sender.topic.name)
            await self.answers.put(_answered(
                {"error_code": 500, "message": f"Internal server error: {exc}"}
            ))
        await self.answers.put(None)


async def _answered(answer: dict[str, Any]) -> dict[str, Any]:
    return answer


class StreamedAnswer(StreamingResponse):
    """A streamed answer that leaves the request's `receive` to the body reader: the
    records are still arriving while the answers go out, so nothing else may take the
    request's messages (Starlette's own disconnect listener would)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.stream_response(send)
        except OSError:
            raise ClientDisconnect() from None


async def cached_topic(request: Request, topic: str) -> TopicDescription:
    """The topic (KafkaError if it does not exist), asked at most every few seconds: a
    client producing one record a request should not pay a metadata round trip each."""
    cache: dict[str, tuple[float, TopicDescription]] = request.app.state.topic_cache
    now = time.monotonic()
    found = cache.get(topic)
    if found is not None and now - found[0] < TOPIC_CACHE_SECONDS:
        return found[1]
    info = await describe(request, topic)
    cache[topic] = (now, info)
    return info


async def _prepended(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for value in rest:
        yield value


async def produce_records(request: Request) -> Any:
    site = await links(request)
    check_json_body(request)
    topic = await cached_topic(request, request.path_params["topic_name"])
    values = json_values(request)
    # the first record before the answer starts: an empty body is refused with a status
    first = await anext(values, None)
    if first is None:
        raise invalid_payload("Request body is empty. Data is required.")
    sender = RecordSender(request, site, topic, request.app.state.producer)
    stream = RecordStream(_prepended(first, values), sender)
    return StreamedAnswer(stream.body(), media_type=V3_JSON)


def _batch_entries(body: dict[str, Any], most: int) -> list[dict[str, Any]]:
    """The entries of a batch request, checked as Confluent checks them (422, 42208)."""
    entries = body.get("entries")
    if not isinstance(entries, list):
        raise ProxyError(422, 42208, "Request body is empty. Data is required.")
    ids: set[str] = set()
    for entry in entries:
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry_id, str) or not 1 <= len(entry_id) <= 80:
            raise ProxyError(422, 42208, "Batch entry identifier is not a valid string.")
        if entry_id in ids:
            raise ProxyError(422, 42208, "Batch entry IDs are not distinct.")
        ids.add(entry_id)
    if not entries:
        raise ProxyError(422, 42208, "Empty batch.")
    if len(entries) > most:
        raise ProxyError(422, 42208, "Too many entries in batch.")
    return entries


async def produce_batch(request: Request) -> Any:
    """`POST .../records:batch`: `{"entries": [{"id", ...a record...}]}`, answered
    207 with the `successes` and `failures`, each naming its entry's id."""
    site = await links(request)
    topic = await cached_topic(request, request.path_params["topic_name"])
    entries = _batch_entries(
        await object_body(request), request.app.state.produce_batch_max_entries
    )
    sender = RecordSender(request, site, topic, request.app.state.producer)
    pending = [await sender.send(entry) for entry in entries]
    answers = await asyncio.gather(*pending)
    successes, failures = [], []
    for entry, answer in zip(entries, answers, strict=True):
        code = answer.pop("error_code")
        if code == 200:
            successes.append({"id": entry["id"], **answer})
        else:
            failures.append({"id": entry["id"], "error_code": code, "message": answer["message"]})
    return V3Response({"successes": successes, "failures": failures}, status_code=207)


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v3/clusters/{cluster_id}/topics/{topic_name}/records", produce_records, ["POST"]),
    ("/v3/clusters/{cluster_id}/topics/{topic_name}/records:batch", produce_batch, ["POST"]),
]
