"""Producing through the v2 API: `POST /topics/{topic}` and
`POST /topics/{topic}/partitions/{partition}` with a batch of records in one embedded
format. Every key and value is encoded before the first record is sent, so a request
that cannot be encoded stores nothing; the records then go out together through one
shared producer, and the answer lists each record's partition and offset (or error)."""

from __future__ import annotations

import asyncio
from typing import Any

from logbus.client.errors import KafkaError
from logbus.client.producer import Producer
from logbus.restproxy import errors
from logbus.restproxy.formats import Encoder
from logbus.restproxy.schemas import SchemaRegistryClient


def records_of(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise errors.unprocessable("The request needs a \"records\" list")
    records: list[dict[str, Any]] = body["records"]
    if not all(isinstance(r, dict) for r in records):
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
    encoded = []
    for record in records:
        target = partition if partition is not None else record.get("partition")
        if target is not None and (
            not isinstance(target, int) or not 0 <= target < partition_count
        ):
            raise errors.partition_not_found(topic, target)
        encoded.append(
            (encoder.encode("key", record.get("key")), encoder.encode("value", record.get("value")),
             target)
        )
    futures = []
    try:
        for key, value, target in encoded:
            futures.append(await producer.send(topic, value, key, partition=target))
    except KafkaError as exc:
        raise errors.kafka_error(str(exc)) from None
    results = await asyncio.gather(*futures, return_exceptions=True)
    offsets = []
    for result in results:
        if isinstance(result, BaseException):
            offsets.append({"partition": None, "offset": None, "error_code": 50002,
                            "error": str(result)})
        else:
            offsets.append({"partition": result.partition, "offset": result.offset,
                            "error_code": None, "error": None})
    return {
        "key_schema_id": encoder.schema_id("key"),
        "value_schema_id": encoder.schema_id("value"),
        "offsets": offsets,
    }
