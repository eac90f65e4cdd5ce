"""KIP-848 consumer groups, on the group's coordinator: ConsumerGroupHeartbeat v0-1 (a
member's subscription and owned partitions in, its epoch and assignment out) and
ConsumerGroupDescribe v0 (what a group's members own and are meant to own, with their
epochs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.client.requests.group_membership import GroupDescription, GroupMemberInfo
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.consumer_group_describe_request import (
    ConsumerGroupDescribeRequest,
)
from logbus.protocol.messages.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
    TopicPartitions,
)
from logbus.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from logbus.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)

CONSUMER_GROUP_TYPE = "consumer"


def build_consumer_group_describe(group_ids: Sequence[str]) -> ConsumerGroupDescribeRequest:
    return {"group_ids": list(group_ids), "include_authorized_operations": False}


def _by_topic(partitions: Sequence[TopicPartitions], names: Mapping[UUID, str]) -> dict[
    str, list[int]
]:
    return {
        (p.get("topic_name") or names.get(p["topic_id"], str(p["topic_id"]))): sorted(
            p["partitions"]
        )
        for p in partitions
    }


def read_consumer_group_describe(
    response: ConsumerGroupDescribeResponse, names: Mapping[UUID, str]
) -> dict[str, GroupDescription | KafkaError]:
    """Per group its description, or its error (GROUP_ID_NOT_FOUND for a group that is
    not a consumer-protocol group: ask DescribeGroups)."""
    out: dict[str, GroupDescription | KafkaError] = {}
    for described in response["groups"]:
        group_id = described["group_id"]
        code = described["error_code"]
        if code != ErrorCode.NONE:
            message = described.get("error_message") or f"ConsumerGroupDescribe of '{group_id}'"
            out[group_id] = KafkaError(code, message)
            continue
        members = [
            GroupMemberInfo(
                member_id=m["member_id"],
                group_instance_id=m.get("instance_id"),
                client_id=m["client_id"],
                client_host=m["client_host"],
                assignment=_by_topic(m["assignment"]["topic_partitions"], names),
                member_epoch=m["member_epoch"],
                target_assignment=_by_topic(m["target_assignment"]["topic_partitions"], names),
            )
            for m in described["members"]
        ]
        out[group_id] = GroupDescription(
            group_id,
            described["group_state"],
            "consumer",
            described["assignor_name"],
            members,
            group_type=CONSUMER_GROUP_TYPE,
            group_epoch=described["group_epoch"],
            assignment_epoch=described["assignment_epoch"],
        )
    return out


async def consumer_group_describe(
    conn: Connection, group_ids: Sequence[str], names: Mapping[UUID, str]
) -> dict[str, GroupDescription | KafkaError]:
    """ConsumerGroupDescribe for groups this coordinator owns; `names` names topic ids
    the broker left unnamed."""
    version = conn.choose_version(ApiKey.CONSUMER_GROUP_DESCRIBE)
    body = build_consumer_group_describe(group_ids)
    response = await send(conn, apis.CONSUMER_GROUP_DESCRIBE, body, version)
    return read_consumer_group_describe(response, names)


# --- ConsumerGroupHeartbeat --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """A ConsumerGroupHeartbeat's answer: `assignment` (topic id -> partitions) is None
    when the coordinator did not send one (unchanged)."""

    error_code: int
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[UUID, list[int]] | None


def build_consumer_group_heartbeat(
    group_id: str,
    member_id: str,
    member_epoch: int,
    *,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    topics: Sequence[str] | None = None,
    server_assignor: str | None = None,
    owned: Mapping[UUID, Sequence[int]] | None = None,
) -> ConsumerGroupHeartbeatRequest:
    """A heartbeat; None fields are "unchanged since the last heartbeat"."""
    return {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": member_epoch,
        "instance_id": instance_id,
        "rack_id": rack_id,
        "rebalance_timeout_ms": rebalance_timeout_ms,
        "subscribed_topic_names": None if topics is None else sorted(topics),
        "subscribed_topic_regex": None,
        "server_assignor": server_assignor,
        "topic_partitions": None if owned is None else [
            {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(owned.items())
        ],
    }


def read_consumer_group_heartbeat(response: ConsumerGroupHeartbeatResponse) -> HeartbeatAnswer:
    assignment = response.get("assignment")
    return HeartbeatAnswer(
        error_code=response["error_code"],
        member_id=response.get("member_id"),
        member_epoch=response["member_epoch"],
        heartbeat_interval_ms=response["heartbeat_interval_ms"],
        assignment=None if assignment is None else {
            t["topic_id"]: sorted(t["partitions"]) for t in assignment["topic_partitions"]
        },
    )


async def consumer_group_heartbeat(
    conn: Connection, body: ConsumerGroupHeartbeatRequest
) -> HeartbeatAnswer:
    version = conn.choose_version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    response = await send(conn, apis.CONSUMER_GROUP_HEARTBEAT, body, version)
    return read_consumer_group_heartbeat(response)
