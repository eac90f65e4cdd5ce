"""Share groups (KIP-932): ShareGroupHeartbeat v0-1, ShareGroupDescribe v0-1, ShareFetch
v0-1 and ShareAcknowledge v0-1, as a share consumer and the CLI send them. Routing (the
group's coordinator for heartbeats and describes, each partition's leader for fetches and
acknowledgements) and the share session's epochs are the caller's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol.messages import apis
from logbus.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from logbus.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from logbus.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    ShareFetchRequest,
)
from logbus.protocol.messages.share_fetch_response import ShareFetchResponse
from logbus.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from logbus.protocol.messages.share_group_describe_response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from logbus.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from logbus.protocol.messages.share_group_heartbeat_response import (
    ShareGroupHeartbeatResponse,
)

SHARE_VERSION = 1

Acknowledgements = Mapping[tuple[UUID, int], Sequence[tuple[int, int, Sequence[int]]]]
"""(topic id, partition) -> acknowledgement batches (first offset, last offset, types)."""


def build_share_group_heartbeat(
    version: int, group_id: str, member_id: str, member_epoch: int,
    subscribed_topics: Sequence[str] | None, rack_id: str | None = None,
) -> ShareGroupHeartbeatRequest:
    return {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": member_epoch,
        "rack_id": rack_id,
        "subscribed_topic_names": None if subscribed_topics is None else list(subscribed_topics),
    }


async def share_group_heartbeat(
    conn: Connection, group_id: str, member_id: str, member_epoch: int,
    subscribed_topics: Sequence[str] | None,
) -> ShareGroupHeartbeatResponse:
    body = build_share_group_heartbeat(
        SHARE_VERSION, group_id, member_id, member_epoch, subscribed_topics
    )
    return await send(conn, apis.SHARE_GROUP_HEARTBEAT, body, SHARE_VERSION)


def build_share_group_describe(
    version: int, group_ids: Sequence[str], include_authorized_operations: bool = False
) -> ShareGroupDescribeRequest:
    return {
        "group_ids": list(group_ids),
        "include_authorized_operations": include_authorized_operations,
    }


def read_share_group_describe(response: ShareGroupDescribeResponse) -> list[DescribedGroup]:
    """Each group as described (its error code kept: GROUP_ID_NOT_FOUND and
    NOT_COORDINATOR are the caller's to judge)."""
    return list(response["groups"])


async def describe_share_groups(conn: Connection, group_ids: Sequence[str]) -> list[DescribedGroup]:
    response = await send(
        conn, apis.SHARE_GROUP_DESCRIBE, build_share_group_describe(SHARE_VERSION, group_ids),
        SHARE_VERSION,
    )
    return read_share_group_describe(response)


def _batches(batches: Sequence[tuple[int, int, Sequence[int]]]) -> list[AcknowledgementBatch]:
    return [
        {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}
        for first, last, types in batches
    ]


def build_share_fetch(
    version: int, group_id: str, member_id: str, session_epoch: int,
    partitions: Sequence[tuple[UUID, int]], acknowledgements: Acknowledgements | None = None,
    *, max_wait_ms: int = 500, max_bytes: int = 52_428_800, max_records: int = 500,
    forgotten: Sequence[tuple[UUID, int]] = (),
) -> ShareFetchRequest:
    acks = acknowledgements or {}
    by_topic: dict[UUID, list[int]] = {}
    for topic_id, partition in [*partitions, *[k for k in acks if k not in partitions]]:
        by_topic.setdefault(topic_id, []).append(partition)
    gone: dict[UUID, list[int]] = {}
    for topic_id, partition in forgotten:
        gone.setdefault(topic_id, []).append(partition)
    body: ShareFetchRequest = {
        "group_id": group_id,
        "member_id": member_id,
        "share_session_epoch": session_epoch,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition_index": p, "partition_max_bytes": max_bytes,
                 "acknowledgement_batches": _batches(acks.get((topic_id, p), ()))}
                for p in ps
            ]}
            for topic_id, ps in by_topic.items()
        ],
        "forgotten_topics_data": [
            {"topic_id": topic_id, "partitions": ps} for topic_id, ps in gone.items()
        ],
    }
    if version >= 1:
        body["max_records"] = max_records
        body["batch_size"] = max_records
    return body


async def share_fetch(
    conn: Connection, group_id: str, member_id: str, session_epoch: int,
    partitions: Sequence[tuple[UUID, int]], acknowledgements: Acknowledgements | None = None,
    *, max_wait_ms: int = 500, max_bytes: int = 52_428_800, max_records: int = 500,
    forgotten: Sequence[tuple[UUID, int]] = (),
) -> ShareFetchResponse:
    body = build_share_fetch(
        SHARE_VERSION, group_id, member_id, session_epoch, partitions, acknowledgements,
        max_wait_ms=max_wait_ms, max_bytes=max_bytes, max_records=max_records,
        forgotten=forgotten,
    )
    return await send(
        conn, apis.SHARE_FETCH, body, SHARE_VERSION,
        response_timeout=max_wait_ms / 1000 + 30,
    )


def build_share_acknowledge(
    version: int, group_id: str, member_id: str, session_epoch: int,
    acknowledgements: Acknowledgements,
) -> ShareAcknowledgeRequest:
    by_topic: dict[UUID, list[int]] = {}
    for topic_id, partition in acknowledgements:
        by_topic.setdefault(topic_id, []).append(partition)
    return {
        "group_id": group_id,
        "member_id": member_id,
        "share_session_epoch": session_epoch,
        "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition_index": p,
                 "acknowledgement_batches": _batches(acknowledgements[(topic_id, p)])}
                for p in ps
            ]}
            for topic_id, ps in by_topic.items()
        ],
    }


async def share_acknowledge(
    conn: Connection, group_id: str, member_id: str, session_epoch: int,
    acknowledgements: Acknowledgements,
) -> ShareAcknowledgeResponse:
    body = build_share_acknowledge(
        SHARE_VERSION, group_id, member_id, session_epoch, acknowledgements
    )
    return await send(conn, apis.SHARE_ACKNOWLEDGE, body, SHARE_VERSION)
