"""A share group's offsets (KIP-932): DescribeShareGroupOffsets v0, AlterShareGroupOffsets v0
and DeleteShareGroupOffsets v0, sent to the group's coordinator by the admin client (and so
by `logbus share-groups`). A share group's offset of a partition is its share-partition
start offset: where the records the group has not finished with begin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.protocol import ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
)
from logbus.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
)
from logbus.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
)
from logbus.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
)
from logbus.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestTopic,
)
from logbus.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
)

VERSION = 0


class SharePartitionOffset(NamedTuple):
    """A share partition's start offset (-1: the group has none there) and the leader
    epoch it was kept with (-1 when unknown)."""

    start_offset: int
    leader_epoch: int


def _by_topic(partitions: Sequence[tuple[str, int]]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


def build_describe_share_group_offsets(
    group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> DescribeShareGroupOffsetsRequest:
    """`partitions` None: every partition the group has a start offset for."""
    topics: list[DescribeShareGroupOffsetsRequestTopic] | None = None
    if partitions is not None:
        topics = [
            {"topic_name": topic, "partitions": indexes}
            for topic, indexes in _by_topic(partitions).items()
        ]
    return {"groups": [{"group_id": group_id, "topics": topics}]}


def read_describe_share_group_offsets(
    response: DescribeShareGroupOffsetsResponse,
) -> dict[tuple[str, int], SharePartitionOffset | KafkaError]:
    """Each partition's offset or error. Raises KafkaError for the group's error."""
    found: dict[tuple[str, int], SharePartitionOffset | KafkaError] = {}
    for group in response["groups"]:
        if group["error_code"] != ErrorCode.NONE:
            raise KafkaError(ErrorCode(group["error_code"]), group.get("error_message") or "")
        for topic in group["topics"]:
            for p in topic["partitions"]:
                tp = (topic["topic_name"], p["partition_index"])
                found[tp] = (
                    KafkaError(ErrorCode(p["error_code"]), p.get("error_message") or "")
                    if p["error_code"] != ErrorCode.NONE
                    else SharePartitionOffset(p["start_offset"], p["leader_epoch"])
                )
    return found


async def describe_share_group_offsets(
    conn: Connection, group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> dict[tuple[str, int], SharePartitionOffset | KafkaError]:
    response = await send(
        conn, apis.DESCRIBE_SHARE_GROUP_OFFSETS,
        build_describe_share_group_offsets(group_id, partitions), VERSION,
    )
    return read_describe_share_group_offsets(response)


def build_alter_share_group_offsets(
    group_id: str, offsets: Mapping[tuple[str, int], int]
) -> AlterShareGroupOffsetsRequest:
    topics: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append((partition, offset))
    return {
        "group_id": group_id,
        "topics": [
            {"topic_name": topic, "partitions": [
                {"partition_index": p, "start_offset": offset} for p, offset in entries
            ]}
            for topic, entries in topics.items()
        ],
    }


def read_alter_share_group_offsets(
    response: AlterShareGroupOffsetsResponse,
) -> dict[tuple[str, int], KafkaError | None]:
    """Each partition's error (None: moved). Raises KafkaError for the group's error."""
    if response["error_code"] != ErrorCode.NONE:
        raise KafkaError(ErrorCode(response["error_code"]), response.get("error_message") or "")
    return {
        (topic["topic_name"], p["partition_index"]): (
            None if p["error_code"] == ErrorCode.NONE
            else KafkaError(ErrorCode(p["error_code"]), p.get("error_message") or "")
        )
        for topic in response["responses"]
        for p in topic["partitions"]
    }


async def alter_share_group_offsets(
    conn: Connection, group_id: str, offsets: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], KafkaError | None]:
    response = await send(
        conn, apis.ALTER_SHARE_GROUP_OFFSETS,
        build_alter_share_group_offsets(group_id, offsets), VERSION,
    )
    return read_alter_share_group_offsets(response)


def build_delete_share_group_offsets(
    group_id: str, topics: Sequence[str]
) -> DeleteShareGroupOffsetsRequest:
    return {"group_id": group_id, "topics": [{"topic_name": topic} for topic in topics]}


def read_delete_share_group_offsets(
    response: DeleteShareGroupOffsetsResponse,
) -> dict[str, KafkaError | None]:
    """Each topic's error (None: deleted). Raises KafkaError for the group's error."""
    if response["error_code"] != ErrorCode.NONE:
        raise KafkaError(ErrorCode(response["error_code"]), response.get("error_message") or "")
    return {
        topic["topic_name"]: (
            None if topic["error_code"] == ErrorCode.NONE
            else KafkaError(ErrorCode(topic["error_code"]), topic.get("error_message") or "")
        )
        for topic in response["responses"]
    }


async def delete_share_group_offsets(
    conn: Connection, group_id: str, topics: Sequence[str]
) -> dict[str, KafkaError | None]:
    response = await send(
        conn, apis.DELETE_SHARE_GROUP_OFFSETS,
        build_delete_share_group_offsets(group_id, topics), VERSION,
    )
    return read_delete_share_group_offsets(response)
