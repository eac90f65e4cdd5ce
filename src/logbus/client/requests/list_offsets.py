"""ListOffsets v0-10: the offset for a time (EARLIEST, LATEST, MAX_TIMESTAMP from v7, or
a timestamp in ms) of partitions led by one broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import (
    DEFAULT_TIMEOUT_MS,
    by_topic,
    per_partition,
    send,
    value,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from logbus.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
)
from logbus.types import TopicPartition

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3  # the record with the largest timestamp (v7+, KIP-734)
_MAX_TIMESTAMP_FROM = 7


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """ListOffsets' answer for one partition: the offset, the timestamp of its record
    (-1 when not looked up by time) and the leader epoch (-1 if unknown)."""

    offset: int
    timestamp: int
    leader_epoch: int


def build_list_offsets(
    version: int,
    requests: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    replica_id: int = -1,
) -> ListOffsetsRequest:
    """Look up each partition's offset for its time; raises UNSUPPORTED_VERSION for
    MAX_TIMESTAMP below v7."""
    if version < _MAX_TIMESTAMP_FROM and MAX_TIMESTAMP in requests.values():
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"ListOffsets v{version} cannot look up the offset of the largest timestamp",
        )
    topics: dict[str, list[ListOffsetsPartition]] = by_topic(
        (tp, {"partition_index": tp[1], "timestamp": timestamp, "max_num_offsets": 1})
        for tp, timestamp in requests.items()
    )
    return {
        "replica_id": replica_id,
        "isolation_level": isolation_level,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }


def read_list_offsets(
    response: ListOffsetsResponse, version: int, asked: Mapping[TopicPartition, object]
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    def read(p: ListOffsetsPartitionResponse) -> ListedOffset:
        if version == 0:  # the old list of segment offsets, newest first
            offsets = p["old_style_offsets"]
            return ListedOffset(offsets[0] if offsets else -1, -1, -1)
        return ListedOffset(p["offset"], p["timestamp"], p["leader_epoch"])

    return per_partition(
        (
            (TopicPartition(t["name"], p["partition_index"]), p)
            for t in response["topics"]
            for p in t["partitions"]
        ),
        asked,
        "ListOffsets",
        read,
    )


async def list_offsets_info(
    conn: Connection,
    requests: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    """ListOffsets for partitions led by `conn`'s broker: per partition the offset with its
    timestamp and leader epoch, or its error. `isolation_level` 1 (read_committed) stops
    LATEST at the last stable offset."""
    version = conn.choose_version(ApiKey.LIST_OFFSETS)
    try:
        body = build_list_offsets(
            version, requests, isolation_level=isolation_level, timeout_ms=timeout_ms
        )
    except KafkaError as exc:
        raise KafkaError(exc.code, f"broker {conn.address}: {exc.message}") from None
    response = await send(conn, apis.LIST_OFFSETS, body, version)
    return read_list_offsets(response, version, requests)


async def list_offsets_many(
    conn: Connection, requests: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | KafkaError]:
    """ListOffsets for several partitions led by `conn`'s broker: offsets only."""
    found = await list_offsets_info(conn, requests)
    return {
        key: result if isinstance(result, KafkaError) else result.offset
        for key, result in found.items()
    }


async def list_offsets(conn: Connection, topic: str, partition: int, timestamp: int) -> int:
    """The offset for a timestamp: EARLIEST (-2), LATEST (-1), or the first offset whose
    timestamp is at least `timestamp` ms (-1 if there is none). Must go to the leader."""
    tp = TopicPartition(topic, partition)
    result = await list_offsets_many(conn, {tp: timestamp})
    return value(result[tp])
