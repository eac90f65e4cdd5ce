"""Classic group membership and administration, on the group's coordinator: JoinGroup
v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup v0-5, DescribeGroups v0-5, ListGroups
v0-5 (any broker: the groups it coordinates), DeleteGroups v0-2.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup readers keep the error code: what it means
depends on the member's state (`logbus.client.group_member`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.common import fill_missing, per_key, send
from logbus.client.requests.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.delete_groups_request import DeleteGroupsRequest
from logbus.protocol.messages.delete_groups_response import DeleteGroupsResponse
from logbus.protocol.messages.describe_groups_request import DescribeGroupsRequest
from logbus.protocol.messages.describe_groups_response import DescribeGroupsResponse
from logbus.protocol.messages.heartbeat_request import HeartbeatRequest
from logbus.protocol.messages.heartbeat_response import HeartbeatResponse
from logbus.protocol.messages.join_group_request import JoinGroupRequest as JoinGroupBody
from logbus.protocol.messages.join_group_response import JoinGroupResponse
from logbus.protocol.messages.leave_group_request import LeaveGroupRequest
from logbus.protocol.messages.leave_group_response import LeaveGroupResponse
from logbus.protocol.messages.list_groups_request import ListGroupsRequest
from logbus.protocol.messages.list_groups_response import ListGroupsResponse
from logbus.protocol.messages.sync_group_request import SyncGroupRequest
from logbus.protocol.messages.sync_group_response import SyncGroupResponse

_STATES_FILTER_FROM = 4  # ListGroups (KIP-518)


# --- JoinGroup --------------------------------------------------------------------------


class MemberIdentity(NamedTuple):
    """Who speaks for a member: its id, the generation it was given and its static
    instance id (KIP-345). `NOT_A_MEMBER` commits offsets as an admin (or a consumer
    outside the group) does."""

    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


NOT_A_MEMBER = MemberIdentity()


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """A JoinGroup: `protocols` are (assignor name, subscription payload) in order of
    preference; `member_id` "" the first time (KIP-394 then asks for the one it chose)."""

    group_id: str
    member_id: str
    protocols: Sequence[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    protocol_type: str = PROTOCOL_TYPE
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """JoinGroup's answer; `members` (with their subscriptions) only for the leader."""

    error_code: int
    member_id: str
    generation_id: int
    protocol_name: str | None
    leader: str
    members: list[JoinedMember]


def build_join_group(version: int, request: JoinGroupRequest) -> JoinGroupBody:
    return {
        "group_id": request.group_id,
        "session_timeout_ms": request.session_timeout_ms,
        "rebalance_timeout_ms": request.rebalance_timeout_ms,
        "member_id": request.member_id,
        "group_instance_id": request.group_instance_id,
        "protocol_type": request.protocol_type,
        "protocols": [{"name": name, "metadata": data} for name, data in request.protocols],
        "reason": request.reason,
    }


def read_join_group(response: JoinGroupResponse) -> JoinGroupResult:
    return JoinGroupResult(
        response["error_code"],
        response["member_id"],
        response["generation_id"],
        response["protocol_name"],
        response["leader"],
        [
            JoinedMember(m["member_id"], m.get("group_instance_id"), bytes(m["metadata"]))
            for m in response["members"]
        ],
    )


async def join_group(conn: Connection, request: JoinGroupRequest) -> JoinGroupResult:
    """One JoinGroup; it waits up to the rebalance timeout for the other members."""
    version = conn.choose_version(ApiKey.JOIN_GROUP)
    wait = conn.request_timeout + request.rebalance_timeout_ms / 1000
    body = build_join_group(version, request)
    response = await send(conn, apis.JOIN_GROUP, body, version, response_timeout=wait)
    return read_join_group(response)


# --- SyncGroup --------------------------------------------------------------------------


def build_sync_group(
    version: int,
    group_id: str,
    member: MemberIdentity,
    assignments: Mapping[str, bytes],
    protocol_name: str | None = None,
) -> SyncGroupRequest:
    """`assignments` (member id -> assignment payload) from the leader, empty otherwise."""
    return {
        "group_id": group_id,
        "generation_id": member.generation_id,
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "protocol_type": PROTOCOL_TYPE,
        "protocol_name": protocol_name,
        "assignments": [
            {"member_id": member_id, "assignment": assignment}
            for member_id, assignment in assignments.items()
        ],
    }


def read_sync_group(response: SyncGroupResponse, group_id: str) -> bytes:
    """This member's assignment payload; raises the error."""
    check(response["error_code"], f"SyncGroup for group '{group_id}'")
    return bytes(response["assignment"])


async def sync_group(
    conn: Connection,
    group_id: str,
    member: MemberIdentity,
    assignments: Mapping[str, bytes],
    protocol_name: str | None = None,
    *,
    response_timeout: float | None = None,
) -> bytes:
    version = conn.choose_version(ApiKey.SYNC_GROUP)
    body = build_sync_group(version, group_id, member, assignments, protocol_name)
    response = await send(
        conn, apis.SYNC_GROUP, body, version, response_timeout=response_timeout
    )
    return read_sync_group(response, group_id)


# --- Heartbeat and LeaveGroup -----------------------------------------------------------


def build_heartbeat(version: int, group_id: str, member: MemberIdentity) -> HeartbeatRequest:
    return {
        "group_id": group_id,
        "generation_id": member.generation_id,
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
    }


def read_heartbeat(response: HeartbeatResponse) -> int:
    """The error code (REBALANCE_IN_PROGRESS: time to rejoin, ...)."""
    return int(response["error_code"])


async def heartbeat(conn: Connection, group_id: str, member: MemberIdentity) -> int:
    """One Heartbeat; its error code."""
    version = conn.choose_version(ApiKey.HEARTBEAT)
    body = build_heartbeat(version, group_id, member)
    response = await send(conn, apis.HEARTBEAT, body, version)
    return read_heartbeat(response)


def build_leave_group(
    version: int, group_id: str, member_id: str, reason: str | None = None
) -> LeaveGroupRequest:
    """One dynamic member leaving (v0-2 name it alone, v3+ in a batch)."""
    return {
        "group_id": group_id,
        "member_id": member_id,
        "members": [{"member_id": member_id, "group_instance_id": None, "reason": reason}],
    }


def read_leave_group(response: LeaveGroupResponse) -> int:
    """The group's error code, else the first member's."""
    code = int(response["error_code"])
    for member in response.get("members") or ():
        if code == ErrorCode.NONE:
            code = int(member["error_code"])
    return code


async def leave_group(
    conn: Connection, group_id: str, member_id: str, reason: str | None = None
) -> int:
    version = conn.choose_version(ApiKey.LEAVE_GROUP)
    body = build_leave_group(version, group_id, member_id, reason)
    return read_leave_group(await send(conn, apis.LEAVE_GROUP, body, version))


# --- group administration ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = ""
    """"classic" or "consumer" (KIP-848) from ListGroups v5 (KIP-1043), else ""."""


@dataclass(frozen=True, slots=True)
class GroupMemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)
    member_epoch: int | None = None
    """A consumer-protocol member's epoch (None for a classic member)."""
    target_assignment: dict[str, list[int]] | None = None
    """What the coordinator means the member to own once it has reconciled."""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMemberInfo]
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


def build_list_groups(version: int, states: Sequence[str] = ()) -> ListGroupsRequest:
    """Every group, or those in `states` (v4+; UNSUPPORTED_VERSION below)."""
    if states and version < _STATES_FILTER_FROM:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION, f"ListGroups v{version} cannot filter groups by state"
        )
    return {"states_filter": list(states), "types_filter": []}


def read_list_groups(response: ListGroupsResponse) -> list[ListedGroup]:
    check(response["error_code"], "ListGroups")
    return [
        ListedGroup(
            g["group_id"], g["protocol_type"], g.get("group_state") or "", g.get("group_type", "")
        )
        for g in response["groups"]
    ]


async def list_groups(conn: Connection, states: Sequence[str] = ()) -> list[ListedGroup]:
    """The groups a broker coordinates (with their state from ListGroups v4)."""
    version = conn.choose_version(ApiKey.LIST_GROUPS)
    try:
        body = build_list_groups(version, states)
    except KafkaError as exc:
        raise KafkaError(exc.code, f"broker {conn.address}: {exc.message}") from None
    return read_list_groups(await send(conn, apis.LIST_GROUPS, body, version))


def build_describe_groups(version: int, group_ids: Sequence[str]) -> DescribeGroupsRequest:
    return {"groups": list(group_ids), "include_authorized_operations": False}


def read_describe_groups(
    response: DescribeGroupsResponse, asked: Sequence[str]
) -> dict[str, GroupDescription | KafkaError]:
    """Per group its description (state "Dead" if it does not exist), or its error;
    consumer groups' member assignments decoded."""
    out: dict[str, GroupDescription | KafkaError] = {}
    for described in response["groups"]:
        group_id = described["group_id"]
        code = described["error_code"]
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            out[group_id] = GroupDescription(group_id, "Dead", "", "", [])
            continue
        if code != ErrorCode.NONE:
            out[group_id] = KafkaError(code, f"DescribeGroups for group '{group_id}'")
            continue
        consumer = described["protocol_type"] == PROTOCOL_TYPE
        members = [
            GroupMemberInfo(
                member_id=m["member_id"],
                group_instance_id=m.get("group_instance_id"),
                client_id=m["client_id"],
                client_host=m["client_host"],
                assignment=decode_assignment(m["member_assignment"]) if consumer else {},
            )
            for m in described["members"]
        ]
        out[group_id] = GroupDescription(
            group_id,
            described["group_state"],
            described["protocol_type"],
            described["protocol_data"],
            members,
        )
    fill_missing(out, asked, "DescribeGroups")
    return out


async def describe_groups(
    conn: Connection, group_ids: Sequence[str]
) -> dict[str, GroupDescription | KafkaError]:
    """DescribeGroups for groups this coordinator owns."""
    version = conn.choose_version(ApiKey.DESCRIBE_GROUPS)
    body = build_describe_groups(version, group_ids)
    response = await send(conn, apis.DESCRIBE_GROUPS, body, version)
    return read_describe_groups(response, group_ids)


async def describe_group(conn: Connection, group_id: str) -> GroupDescription:
    """DescribeGroups for one group; a group that does not exist has state "Dead"."""
    described = (await describe_groups(conn, [group_id]))[group_id]
    if isinstance(described, KafkaError):
        raise described
    return described


def build_delete_groups(version: int, group_ids: Sequence[str]) -> DeleteGroupsRequest:
    return {"groups_names": list(group_ids)}


def read_delete_groups(
    response: DeleteGroupsResponse, asked: Sequence[str]
) -> dict[str, KafkaError | None]:
    results = ((result["group_id"], result) for result in response["results"])
    return per_key(results, asked, "DeleteGroups", lambda _: None, lambda g, _: f"Group '{g}'")


async def delete_groups(
    conn: Connection, group_ids: Sequence[str]
) -> dict[str, KafkaError | None]:
    """DeleteGroups on their coordinator: per group None, or its error (NON_EMPTY_GROUP
    while it has members, GROUP_ID_NOT_FOUND if there is no such group)."""
    version = conn.choose_version(ApiKey.DELETE_GROUPS)
    body = build_delete_groups(version, group_ids)
    response = await send(conn, apis.DELETE_GROUPS, body, version)
    return read_delete_groups(response, group_ids)


async def delete_group(conn: Connection, group_id: str) -> None:
    result = (await delete_groups(conn, [group_id]))[group_id]
    if result is not None:
        raise result
