"""DeleteRecords v0-2: move partitions' log start offsets forward, on their leader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import (
    DEFAULT_TIMEOUT_MS,
    TopicPartition,
    by_topic,
    fill_missing,
)
from logbus.protocol import ApiKey, ErrorCode

HIGH_WATERMARK = -1  # everything below the high watermark


def build_delete_records(
    version: int, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> dict[str, Any]:
    """Delete the records below each offset (HIGH_WATERMARK: below the high watermark)."""
    topics = by_topic(
        (tp, {"partition_index": tp[1], "offset": offset}) for tp, offset in offsets.items()
    )
    return {
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }


def read_delete_records(
    response: dict[str, Any], asked: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | KafkaError]:
    """Each partition's new low watermark, or its error."""
    out: dict[TopicPartition, int | KafkaError] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], f"deleting records of {key[0]}-{key[1]}")
            else:
                out[key] = p["low_watermark"]
    fill_missing(out, asked, "DeleteRecords")
    return out


async def delete_records(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, int | KafkaError]:
    """DeleteRecords for partitions led by `conn`'s broker."""
    version = conn.choose_version(ApiKey.DELETE_RECORDS)
    body = build_delete_records(version, offsets, timeout_ms=timeout_ms)
    return read_delete_records(await conn.request(ApiKey.DELETE_RECORDS, body, version), offsets)
