"""Producing through the v2 API: `POST /topics/{topic}` and
`POST /topics/{topic}/partitions/{partition}` with a batch of records in one embedded
format. Every key and value is encoded before the first record is sent, so a request
that cannot be encoded stores nothing; the records then go out together through one
shared producer, and the answer lists each record's partition and offset (or error). A
record the producer refuses (larger than its max.request.size) gets its error in the
answer and the others are written, as with Confluent's proxy, whose producer fails that
record's send only."""

from __future__ import annotations

import asyncio
from typing import Any

from logbus.client.errors import KafkaError
from logbus.client.producer import Producer
from logbus.client.producer.accumulator import record_size
from logbus.restproxy import errors
from logbus.restproxy.formats import Encoder
from logbus.restproxy.schemas import SchemaRegistryClient


def records_of(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise errors.unprocessable("The request needs a \"records\" list")
    records: list[dict[str, Any]] = body["records"]
    if not set(map(type, records)) <= {dict}:
        raise errors.unprocessable("Each record is a JSON object")
    return records


async def produce(
    producer: Producer,
    registry: SchemaRegistryClient,
    topic: str,
    partition_count: int,
    embedded: str,
    body: Any,
    partition: int | None = None,
) -> dict[str, Any]:
    """Encode and send the records of `body`; the v2 produce response."""
    records = records_of(body)
    encoder = Encoder(embedded, registry, topic)
    await encoder.prepare(body, records)
    targets = _targets(records, topic, partition_count, partition)
    keys = encoder.encode_column("key", [record.get("key") for record in records])
    values = encoder.encode_column("value", [record.get("value") for record in records])
    refused = _too_large(producer, keys, values)
    if refused:
        keep = [i for i in range(len(records)) if i not in refused]
        keys = [keys[i] for i in keep]
        values = [values[i] for i in keep]
        targets = None if targets is None else [targets[i] for i in keep]
    if not values:
        offsets = []
    elif targets is None:
        offsets = await _send_together(producer, topic, keys, values)
    else:
        offsets = await _send_each(producer, topic, keys, values, targets)
    for index in sorted(refused):
        offsets.insert(index, _offset(None, None, refused[index]))
    return {
        "key_schema_id": encoder.schema_id("key"),
        "value_schema_id": encoder.schema_id("value"),
        "offsets": offsets,
    }


def _targets(
    records: list[dict[str, Any]], topic: str, partition_count: int, partition: int | None
) -> list[int | None] | None:
    """The partition each record goes to (None for the partitioner's choice), checked;
    None when the partitioner places them all."""
    if partition is not None:
        return [partition] * len(records)
    if not any("partition" in record for record in records):
        return None
    targets = [record.get("partition") for record in records]
    for target in targets:
        if target is not None and (
            not isinstance(target, int) or not 0 <= target < partition_count
        ):
            raise errors.partition_not_found(topic, target)
    return None if all(target is None for target in targets) else targets


def _too_large(
    producer: Producer, keys: list[bytes | None], values: list[bytes | None]
) -> dict[int, KafkaError]:
    """The records the producer would refuse for their size, by index, with its error."""
    limit = producer.admission.max_request_size
    refused: dict[int, KafkaError] = {}
    if record_size(_longest(keys), _longest(values), None) <= limit:
        return refused  # the common case, without a Python step per record
    for index, (key, value) in enumerate(zip(keys, values, strict=True)):
        size = record_size(key, value, None)
        if size > limit:
            try:
                producer.admission.check_size(size)
            except KafkaError as exc:
                refused[index] = exc
    return refused


def _longest(column: list[bytes | None]) -> bytes | None:
    return max(filter(None, column), key=len, default=None)


def _offset(
    partition: int | None, offset: int | None, error: BaseException | None
) -> dict[str, Any]:
    if error is not None:
        return {"partition": None, "offset": None, "error_code": 50002, "error": str(error)}
    return {"partition": partition, "offset": offset, "error_code": None, "error": None}


async def _send_together(
    producer: Producer, topic: str, keys: list[bytes | None], values: list[bytes | None]
) -> list[dict[str, Any]]:
    """Records the partitioner places: handed to the producer as columns, in one call
    (its bulk path, one future for all)."""
    try:
        future = await producer.send_many(topic=topic, values=values, keys=keys)
        sent = await future
    except KafkaError as exc:
        return [_offset(None, None, exc) for _ in values]
    return [
        {"partition": m.partition, "offset": m.offset, "error_code": None, "error": None}
        for m in sent
    ]


async def _send_each(
    producer: Producer, topic: str, keys: list[bytes | None], values: list[bytes | None],
    targets: list[int | None],
) -> list[dict[str, Any]]:
    """Records naming their partitions: one send each."""
    futures = []
    try:
        for key, value, target in zip(keys, values, targets, strict=True):
            futures.append(await producer.send(topic, value, key, partition=target))
    except KafkaError as exc:
        raise errors.kafka_error(str(exc)) from None
    results = await asyncio.gather(*futures, return_exceptions=True)
    return [
        _offset(None, None, r) if isinstance(r, BaseException) else
        _offset(r.partition, r.offset, None)
        for r in results
    ]
