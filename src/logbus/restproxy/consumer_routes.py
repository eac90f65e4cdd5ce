"""The v2 consumer resources: `/consumers/{group}` (create an instance) and
`/consumers/{group}/instances/{instance}/...` (subscription, assignments, records,
offsets, positions, delete). Each request to an instance holds its lock."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from logbus.client.consumer import OffsetAndMetadata
from logbus.client.consumer.records import IllegalStateError
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.restproxy import errors
from logbus.restproxy.consumers import ConsumerInstance, ConsumerManager
from logbus.restproxy.formats import (
    BINARY,
    JSON,
    decode,
    decode_plain,
    embedded_format,
    media_type,
)
from logbus.restproxy.schemas import SchemaRegistryClient
from logbus.restproxy.web import V2Response, check_v2_body, read_json

NO_CONTENT = 204


def _manager(request: Request) -> ConsumerManager:
    manager: ConsumerManager = request.app.state.consumers
    return manager


def _instance(request: Request) -> ConsumerInstance:
    p = request.path_params
    return _manager(request).get(p["group"], p["instance"])


def _partitions(body: Any, key: str = "partitions") -> list[TopicPartition]:
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise errors.unprocessable(f'The request needs a "{key}" list')
    try:
        return [TopicPartition(str(i["topic"]), int(i["partition"])) for i in items]
    except (KeyError, TypeError, ValueError):
        raise errors.unprocessable("Each partition needs a topic and a partition") from None


def _offsets(body: Any) -> dict[TopicPartition, int]:
    items = body.get("offsets") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise errors.unprocessable('The request needs an "offsets" list')
    try:
        return {
            TopicPartition(str(i["topic"]), int(i["partition"])): int(i["offset"])
            for i in items
        }
    except (KeyError, TypeError, ValueError):
        raise errors.unprocessable("Each offset needs a topic, a partition and an offset") from None


async def create_instance(request: Request) -> Any:
    check_v2_body(request)
    group = request.path_params["group"]
    instance = await _manager(request).create(group, await read_json(request))
    return {
        "instance_id": instance.name,
        "base_uri": f"{request.base_url}consumers/{group}/instances/{instance.name}",
    }


async def delete_instance(request: Request) -> Any:
    p = request.path_params
    await _manager(request).delete(p["group"], p["instance"])
    return Response(status_code=NO_CONTENT)


async def subscribe(request: Request) -> Any:
    check_v2_body(request)
    body = await read_json(request)
    instance = _instance(request)
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object")
    topics, pattern = body.get("topics"), body.get("topic_pattern")
    async with instance.lock:
        try:
            if pattern is not None:
                instance.consumer.subscribe(pattern=str(pattern))
            elif isinstance(topics, list) and topics:
                instance.consumer.subscribe([str(t) for t in topics])
            else:
                raise errors.unprocessable('The request needs "topics" or "topic_pattern"')
        except IllegalStateError:
            raise errors.illegal_state("the consumer has manually assigned partitions") from None
        except (ValueError, re.error) as exc:
            raise errors.unprocessable(str(exc)) from None
    return Response(status_code=NO_CONTENT)


async def get_subscription(request: Request) -> Any:
    return {"topics": sorted(_instance(request).consumer.subscription())}


async def unsubscribe(request: Request) -> Any:
    instance = _instance(request)
    async with instance.lock:
        await instance.consumer.unsubscribe()
    return Response(status_code=NO_CONTENT)


async def assign(request: Request) -> Any:
    check_v2_body(request)
    partitions = _partitions(await read_json(request))
    instance = _instance(request)
    async with instance.lock:
        try:
            instance.consumer.assign(partitions)
        except IllegalStateError:
            raise errors.illegal_state("the consumer is subscribed to topics") from None
    return Response(status_code=NO_CONTENT)


async def get_assignments(request: Request) -> Any:
    assigned = sorted(_instance(request).consumer.assignment())
    return {"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in assigned]}


async def seek(request: Request) -> Any:
    check_v2_body(request)
    offsets = _offsets(await read_json(request))
    instance = _instance(request)
    async with instance.lock:
        for tp, offset in offsets.items():
            _check_assigned(instance, tp)
            instance.consumer.seek(tp, offset)
    return Response(status_code=NO_CONTENT)


def _check_assigned(instance: ConsumerInstance, tp: TopicPartition) -> None:
    if tp not in instance.consumer.assignment():
        raise errors.illegal_state(f"{tp.topic}-{tp.partition} is not assigned to this consumer")


async def _seek_to(request: Request, end: bool) -> Any:
    check_v2_body(request)
    partitions = _partitions(await read_json(request))
    instance = _instance(request)
    async with instance.lock:
        for tp in partitions:
            _check_assigned(instance, tp)
        if end:
            instance.consumer.seek_to_end(*partitions)
        else:
            instance.consumer.seek_to_beginning(*partitions)
    return Response(status_code=NO_CONTENT)


async def seek_to_beginning(request: Request) -> Any:
    return await _seek_to(request, end=False)


async def seek_to_end(request: Request) -> Any:
    return await _seek_to(request, end=True)


def _query_int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f"{name} must be a number") from None


async def records(request: Request) -> Any:
    instance = _instance(request)
    accepted = embedded_format(request.headers.get("accept"), default=instance.embedded)
    if accepted != instance.embedded:
        raise errors.format_mismatch()
    timeout = _query_int(request, "timeout", instance.request_timeout_ms)
    max_bytes = _query_int(request, "max_bytes", 64 * 1024 * 1024)
    async with instance.lock:
        try:
            polled = await instance.consumer.poll(timeout_ms=max(timeout, 0))
        except IllegalStateError:
            raise errors.illegal_state("the consumer is not subscribed to any topics") from None
        except KafkaError as exc:
            raise errors.kafka_error(str(exc)) from None
        shown = await _shown(instance, request.app.state.schemas, polled, max_bytes)
    response = V2Response(shown)
    response.headers["content-type"] = media_type(instance.embedded)
    return response


async def _shown(
    instance: ConsumerInstance, schemas: SchemaRegistryClient, polled: list[Any], max_bytes: int
) -> list[dict[str, Any]]:
    """The polled records as the response shows them, up to `max_bytes` of keys and
    values (at least one); the consumer seeks back to the first record left out."""
    embedded = instance.embedded
    shown: list[dict[str, Any]] = []
    size = 0
    for index, record in enumerate(polled):
        size += len(record.key or b"") + len(record.value or b"")
        if shown and size > max_bytes:
            _rewind(instance, polled[index:])
            break
        if embedded in (BINARY, JSON):
            key = decode_plain(embedded, record.key)
            value = decode_plain(embedded, record.value)
        else:
            key = await decode(embedded, schemas, record.key)
            value = await decode(embedded, schemas, record.value)
        shown.append({"topic": record.topic, "key": key, "value": value,
                      "partition": record.partition, "offset": record.offset})
    return shown


def _rewind(instance: ConsumerInstance, left: list[Any]) -> None:
    """Seek back to the first record of each partition that did not fit in max_bytes."""
    first: dict[TopicPartition, int] = {}
    for record in left:
        first.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    for tp, offset in first.items():
        instance.consumer.seek(tp, offset)


async def commit(request: Request) -> Any:
    check_v2_body(request)
    body = await read_json(request, allow_empty=True)
    instance = _instance(request)
    offsets = None if body is None or not body.get("offsets") else _offsets(body)
    async with instance.lock:
        try:
            await instance.consumer.commit(
                None if offsets is None
                else {tp: OffsetAndMetadata(offset) for tp, offset in offsets.items()}
            )
        except KafkaError as exc:
            raise errors.kafka_error(str(exc)) from None
    return Response(status_code=200)


async def committed(request: Request) -> Any:
    check_v2_body(request)
    partitions = _partitions(await read_json(request))
    instance = _instance(request)
    async with instance.lock:
        try:
            found = await instance.consumer.committed(partitions)
        except KafkaError as exc:
            raise errors.kafka_error(str(exc)) from None
    return {
        "offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": meta.offset,
             "metadata": meta.metadata}
            for tp, meta in found.items()
            if meta is not None
        ]
    }


_INSTANCE = "/consumers/{group}/instances/{instance}"
ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/consumers/{group}", create_instance, ["POST"]),
    (_INSTANCE, delete_instance, ["DELETE"]),
    (f"{_INSTANCE}/subscription", subscribe, ["POST"]),
    (f"{_INSTANCE}/subscription", get_subscription, ["GET"]),
    (f"{_INSTANCE}/subscription", unsubscribe, ["DELETE"]),
    (f"{_INSTANCE}/assignments", assign, ["POST"]),
    (f"{_INSTANCE}/assignments", get_assignments, ["GET"]),
    (f"{_INSTANCE}/positions", seek, ["POST"]),
    (f"{_INSTANCE}/positions/beginning", seek_to_beginning, ["POST"]),
    (f"{_INSTANCE}/positions/end", seek_to_end, ["POST"]),
    (f"{_INSTANCE}/records", records, ["GET"]),
    (f"{_INSTANCE}/offsets", commit, ["POST"]),
    (f"{_INSTANCE}/offsets", committed, ["GET"]),
]
