"""DeleteRecords v0-2: move partitions' log start offsets forward, on their leader."""

from __future__ import annotations

from collections.abc import Mapping

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import (
    DEFAULT_TIMEOUT_MS,
    by_topic,
    per_partition,
    send,
)
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
)
from logbus.protocol.messages.delete_records_response import DeleteRecordsResponse
from logbus.types import TopicPartition

HIGH_WATERMARK = -1  # everything below the high watermark


def build_delete_records(
    version: int, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> DeleteRecordsRequest:
    """Delete the records below each offset (HIGH_WATERMARK: below the high watermark)."""
    topics: dict[str, list[DeleteRecordsPartition]] = by_topic(
        (tp, {"partition_index": tp[1], "offset": offset}) for tp, offset in offsets.items()
    )
    return {
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }


def read_delete_records(
    response: DeleteRecordsResponse, asked: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | KafkaError]:
    """Each partition's new low watermark, or its error."""
    return per_partition(
        ((TopicPartition(t["name"], p["partition_index"]), p)
         for t in response["topics"] for p in t["partitions"]),
        asked,
        "DeleteRecords",
        lambda p: p["low_watermark"],
    )


async def delete_records(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, int | KafkaError]:
    """DeleteRecords for partitions led by `conn`'s broker."""
    version = conn.choose_version(ApiKey.DELETE_RECORDS)
    body = build_delete_records(version, offsets, timeout_ms=timeout_ms)
    response = await send(conn, apis.DELETE_RECORDS, body, version)
    return read_delete_records(response, offsets)
