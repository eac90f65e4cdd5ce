"""ReadShareGroupState v0, WriteShareGroupState v0 and InitializeShareGroupState v0
(KIP-932): a share partition's leader asks the share coordinator for the state it keeps,
and gives it the new state after each change; ReadShareGroupStateSummary v0 and
DeleteShareGroupState v0: a group coordinator reads the start offsets of many partitions at
once, and deletes their state. Used by the broker's share-state store
(`server/share/state_store.py`)."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol import ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.delete_share_group_state_request import (
    DeleteShareGroupStateRequest,
)
from logbus.protocol.messages.initialize_share_group_state_request import (
    InitializeShareGroupStateRequest,
)
from logbus.protocol.messages.read_share_group_state_request import (
    ReadShareGroupStateRequest,
)
from logbus.protocol.messages.read_share_group_state_response import (
    PartitionResult as ReadResult,
)
from logbus.protocol.messages.read_share_group_state_response import (
    ReadShareGroupStateResponse,
)
from logbus.protocol.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from logbus.protocol.messages.write_share_group_state_request import (
    StateBatch,
    WriteShareGroupStateRequest,
)
from logbus.protocol.messages.write_share_group_state_response import (
    WriteShareGroupStateResponse,
)


def build_read_share_group_state(
    group_id: str, topic_id: UUID, partition: int, leader_epoch: int
) -> ReadShareGroupStateRequest:
    return {
        "group_id": group_id,
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": partition, "leader_epoch": leader_epoch}
        ]}],
    }


def read_read_share_group_state(response: ReadShareGroupStateResponse) -> ReadResult:
    """The one partition's result (error code kept: NOT_COORDINATOR and
    COORDINATOR_LOAD_IN_PROGRESS are the caller's to retry)."""
    for topic in response["results"]:
        for partition in topic["partitions"]:
            return partition
    return {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "state_epoch": 0, "start_offset": -1,
            "state_batches": []}


async def read_share_group_state(
    conn: Connection, group_id: str, topic_id: UUID, partition: int, leader_epoch: int
) -> ReadResult:
    response = await send(
        conn, apis.READ_SHARE_GROUP_STATE,
        build_read_share_group_state(group_id, topic_id, partition, leader_epoch), 0,
    )
    return read_read_share_group_state(response)


def build_write_share_group_state(
    group_id: str, topic_id: UUID, partition: int, state_epoch: int, leader_epoch: int,
    start_offset: int, batches: list[StateBatch],
) -> WriteShareGroupStateRequest:
    return {
        "group_id": group_id,
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start_offset, "state_batches": batches,
        }]}],
    }


def read_write_share_group_state(response: WriteShareGroupStateResponse) -> ErrorCode:
    for topic in response["results"]:
        for partition in topic["partitions"]:
            return ErrorCode(partition["error_code"])
    return ErrorCode.UNKNOWN_SERVER_ERROR


async def write_share_group_state(
    conn: Connection, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
    leader_epoch: int, start_offset: int, batches: list[StateBatch],
) -> ErrorCode:
    response = await send(
        conn, apis.WRITE_SHARE_GROUP_STATE,
        build_write_share_group_state(
            group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches
        ),
        0,
    )
    return read_write_share_group_state(response)


def build_initialize_share_group_state(
    group_id: str, topic_id: UUID, partition: int, state_epoch: int, start_offset: int
) -> InitializeShareGroupStateRequest:
    return {
        "group_id": group_id,
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": partition, "state_epoch": state_epoch, "start_offset": start_offset}
        ]}],
    }


StatePartitions = dict[UUID, list[int]]
"""Topic id -> partitions."""


def build_read_share_group_state_summary(
    group_id: str, partitions: StatePartitions
) -> ReadShareGroupStateSummaryRequest:
    return {
        "group_id": group_id,
        "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition": p, "leader_epoch": -1} for p in indexes
            ]}
            for topic_id, indexes in partitions.items()
        ],
    }


class StateSummary(NamedTuple):
    """A share partition's start offset as its share coordinator keeps it (-1: no state)."""

    error: ErrorCode
    state_epoch: int
    leader_epoch: int
    start_offset: int


async def read_share_group_state_summary(
    conn: Connection, group_id: str, partitions: StatePartitions
) -> dict[tuple[UUID, int], StateSummary]:
    response = await send(
        conn, apis.READ_SHARE_GROUP_STATE_SUMMARY,
        build_read_share_group_state_summary(group_id, partitions), 0,
    )
    return {
        (topic["topic_id"], p["partition"]): StateSummary(
            ErrorCode(p["error_code"]), p["state_epoch"], p["leader_epoch"], p["start_offset"]
        )
        for topic in response["results"]
        for p in topic["partitions"]
    }


def build_delete_share_group_state(
    group_id: str, partitions: StatePartitions
) -> DeleteShareGroupStateRequest:
    return {
        "group_id": group_id,
        "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": p} for p in indexes]}
            for topic_id, indexes in partitions.items()
        ],
    }


async def delete_share_group_state(
    conn: Connection, group_id: str, partitions: StatePartitions
) -> dict[tuple[UUID, int], ErrorCode]:
    response = await send(
        conn, apis.DELETE_SHARE_GROUP_STATE,
        build_delete_share_group_state(group_id, partitions), 0,
    )
    return {
        (topic["topic_id"], p["partition"]): ErrorCode(p["error_code"])
        for topic in response["results"]
        for p in topic["partitions"]
    }
