"""Produce v3-11 (v3 is the first to carry record batches v2, the only format this client
writes): record batches, already encoded, for partitions led by one broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import (
    DEFAULT_TIMEOUT_MS,
    by_topic,
    per_partition,
    require_version,
    send,
    value,
)
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.produce_request import PartitionProduceData, ProduceRequest
from logbus.protocol.messages.produce_response import PartitionProduceResponse, ProduceResponse
from logbus.types import TopicPartition

MIN_VERSION = 3
Batch = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int


def build_produce(
    version: int,
    batches: Mapping[TopicPartition, Batch],
    acks: int = -1,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    transactional_id: str | None = None,
) -> ProduceRequest:
    """One batch per partition (the version does not change the body's shape)."""
    topics: dict[str, list[PartitionProduceData]] = by_topic(
        (tp, {"index": tp[1], "records": batch}) for tp, batch in batches.items()
    )
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
    }


def read_produce(
    response: ProduceResponse, asked: Mapping[TopicPartition, object]
) -> dict[TopicPartition, ProduceResult | KafkaError]:
    """Per partition asked for: where its batch went, or its error (with the broker's
    message and the records it rejected, KIP-467)."""
    return per_partition(
        (
            (TopicPartition(t["name"], p["index"]), p)
            for t in response["responses"]
            for p in t["partition_responses"]
        ),
        asked,
        "Produce",
        lambda p: ProduceResult(p["base_offset"], p["log_append_time_ms"], p["log_start_offset"]),
        message=_error_message,
    )


def _error_message(key: TopicPartition, p: PartitionProduceResponse) -> str:
    parts = [p["error_message"]] if p["error_message"] else []
    parts += [
        f"record {e['batch_index']}: {e['batch_index_error_message']}" for e in p["record_errors"]
    ]
    return "; ".join(parts) or f"producing to {key[0]}-{key[1]}"


async def produce_many(
    conn: Connection,
    batches: Mapping[TopicPartition, Batch],
    acks: int = -1,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    transactional_id: str | None = None,
) -> dict[TopicPartition, ProduceResult | KafkaError] | None:
    """One Produce request carrying a batch for each partition (all led by `conn`'s broker).
    Returns per-partition results or errors, or None with acks=0 (the broker does not
    answer; this returns once the request is written)."""
    version = require_version(conn, ApiKey.PRODUCE, MIN_VERSION)
    body = build_produce(
        version, batches, acks, timeout_ms=timeout_ms, transactional_id=transactional_id
    )
    timeout = conn.request_timeout + timeout_ms / 1000
    response = await send(conn, apis.PRODUCE, body, version, response_timeout=timeout)
    if acks == 0:
        return None
    return read_produce(response, batches)


async def produce(
    conn: Connection,
    topic: str,
    partition: int,
    batch: bytes,
    acks: int = -1,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> ProduceResult | None:
    """Append one record batch (v2 bytes) to a partition, on its leader."""
    tp = TopicPartition(topic, partition)
    results = await produce_many(conn, {tp: batch}, acks, timeout_ms=timeout_ms)
    return None if results is None else value(results[tp])
