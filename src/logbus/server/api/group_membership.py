"""Classic consumer-group membership and administration: JoinGroup v0-9 (KIP-394 member
ids from v4, KIP-345 static members from v5), SyncGroup v0-5, Heartbeat v0-4, LeaveGroup
v0-5 (batched from v3, KIP-345), DescribeGroups v0-5, ListGroups v0-5 (state filter
KIP-518, type filter KIP-848), DeleteGroups v0-2.

Each handler turns its request into an event of `logbus.coordinator.group.events`, hands
it to the broker's `GroupCoordinatorRuntime`, and shapes the answer for its version.
"""

from __future__ import annotations

from logbus.coordinator.group import events as ev
from logbus.coordinator.group.consumer_group import TopicInfo, TopicsImage
from logbus.coordinator.group.runtime import (
    CoordinatorError,
    GroupCoordinatorRuntime,
    new_member_uuid,
)
from logbus.coordinator.group.state import Token
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.delete_groups_request import DeleteGroupsRequest
from logbus.protocol.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from logbus.protocol.messages.describe_groups_request import DescribeGroupsRequest
from logbus.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribeGroupsResponse,
)
from logbus.protocol.messages.heartbeat_request import HeartbeatRequest
from logbus.protocol.messages.heartbeat_response import HeartbeatResponse
from logbus.protocol.messages.join_group_request import JoinGroupRequest
from logbus.protocol.messages.join_group_response import JoinGroupResponse
from logbus.protocol.messages.leave_group_request import LeaveGroupRequest
from logbus.protocol.messages.leave_group_response import LeaveGroupResponse
from logbus.protocol.messages.list_groups_request import ListGroupsRequest
from logbus.protocol.messages.list_groups_response import ListGroupsResponse
from logbus.protocol.messages.sync_group_request import SyncGroupRequest
from logbus.protocol.messages.sync_group_response import SyncGroupResponse
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.share_groups import delete_share_group, listed_share_groups
from logbus.server.security.acl import AclOperation, ResourceType

NO_AUTHORIZED_OPERATIONS = -(2**31)
# Kafka's AclOperation codes of what a group supports: READ (3), DELETE (6), DESCRIBE (8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def runtime(ctx: RequestContext) -> GroupCoordinatorRuntime:
    return ctx.services.group_coordinator


def client_host(ctx: RequestContext) -> str:
    """The peer's address as Kafka reports it (`/<ip>`)."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


def require_group(ctx: RequestContext, operation: AclOperation, group_id: str) -> None:
    """GROUP_AUTHORIZATION_FAILED (as a CoordinatorError, which every handler answers in
    its version's shape) unless the principal may perform `operation` on the group."""
    if not ctx.authorize(operation, ResourceType.GROUP, group_id):
        raise CoordinatorError(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def topics_image(ctx: RequestContext) -> TopicsImage:
    """The cluster's topics a consumer group may subscribe to (internal ones left out),
    for the KIP-848 coordinator's assignments."""
    return {
        name: TopicInfo(name, meta.topic_id, len(meta.partitions))
        for name, meta in ctx.services.metadata_cache.topics.items()
        if not meta.is_internal and not name.startswith("__")
    }


def _bytes(value: bytes | None) -> bytes:
    return b"" if value is None else bytes(value)


# --- JoinGroup ---------------------------------------------------------------------------


async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.version
    group_id = request["group_id"]
    member_uuid = new_member_uuid()

    def make(token: Token, now_ms: int) -> ev.JoinGroup:
        return ev.JoinGroup(
            token=token,
            now_ms=now_ms,
            group_id=group_id,
            member_id=request["member_id"],
            protocol_type=request["protocol_type"],
            protocols=tuple((p["name"], _bytes(p["metadata"])) for p in request["protocols"]),
            session_timeout_ms=request["session_timeout_ms"],
            rebalance_timeout_ms=request["rebalance_timeout_ms"] if version >= 1 else -1,
            group_instance_id=request.get("group_instance_id") if version >= 5 else None,
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            api_version=version,
            new_member_uuid=member_uuid,
            reason=request.get("reason") if version >= 8 else None,
            topics=topics_image(ctx),
        )

    try:
        require_group(ctx, AclOperation.READ, group_id)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = {
            "error_code": exc.error,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None,
            "leader": "",
            "member_id": request["member_id"],
            "members": [],
        }
    if version < 7 and body.get("protocol_name") is None:
        body = {**body, "protocol_name": ""}
    return {"throttle_time_ms": 0, **body}


# --- SyncGroup ---------------------------------------------------------------------------


async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.version
    group_id = request["group_id"]

    def make(token: Token, now_ms: int) -> ev.SyncGroup:
        return ev.SyncGroup(
            token=token,
            now_ms=now_ms,
            group_id=group_id,
            generation_id=request["generation_id"],
            member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id") if version >= 3 else None,
            protocol_type=request.get("protocol_type") if version >= 5 else None,
            protocol_name=request.get("protocol_name") if version >= 5 else None,
            assignments=tuple(
                (a["member_id"], _bytes(a["assignment"])) for a in request["assignments"]
            ),
        )

    try:
        require_group(ctx, AclOperation.READ, group_id)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = {"error_code": exc.error, "assignment": b""}
    return {"throttle_time_ms": 0, **body}


# --- Heartbeat ---------------------------------------------------------------------------


async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if runtime(ctx).is_loading(group_id):
        # Kafka answers heartbeats with NONE while loading: the member keeps its session.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}

    def make(token: Token, now_ms: int) -> ev.Heartbeat:
        return ev.Heartbeat(
            token=token,
            now_ms=now_ms,
            group_id=group_id,
            generation_id=request["generation_id"],
            member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id") if ctx.version >= 3 else None,
        )

    try:
        require_group(ctx, AclOperation.READ, group_id)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = {"error_code": exc.error}
    return {"throttle_time_ms": 0, **body}


# --- LeaveGroup --------------------------------------------------------------------------


async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = ctx.version
    group_id = request["group_id"]
    if version >= 3:
        members = tuple(
            ev.LeavingMember(
                m["member_id"],
                m.get("group_instance_id"),
                m.get("reason") if version >= 5 else None,
            )
            for m in request["members"]
        )
    else:
        members = (ev.LeavingMember(request["member_id"]),)

    def make(token: Token, now_ms: int) -> ev.LeaveGroup:
        return ev.LeaveGroup(
            token=token, now_ms=now_ms, group_id=group_id, members=members, batched=version >= 3
        )

    try:
        require_group(ctx, AclOperation.READ, group_id)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = {"error_code": exc.error, "members": []}
    return {"throttle_time_ms": 0, **body}


# --- DescribeGroups / ListGroups / DeleteGroups --------------------------------------------


async def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    include_operations = ctx.version >= 3 and request.get("include_authorized_operations")
    described: list[DescribedGroup] = []
    for group_id in request["groups"]:

        def make(token: Token, now_ms: int, group_id: str = group_id) -> ev.DescribeGroup:
            return ev.DescribeGroup(token=token, now_ms=now_ms, group_id=group_id)

        try:
            require_group(ctx, AclOperation.DESCRIBE, group_id)
            body = await runtime(ctx).submit(group_id, make)
        except CoordinatorError as exc:
            body = {
                "error_code": exc.error,
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
        operations = (
            ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if include_operations
            else NO_AUTHORIZED_OPERATIONS
        )
        described.append({**body, "authorized_operations": operations})
    return {"throttle_time_ms": 0, "groups": described}


async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = tuple(request.get("states_filter") or ()) if ctx.version >= 4 else ()
    types = tuple(request.get("types_filter") or ()) if ctx.version >= 5 else ()

    def make(token: Token, now_ms: int) -> ev.ListGroups:
        return ev.ListGroups(token=token, now_ms=now_ms, states_filter=states, types_filter=types)

    try:
        bodies = await runtime(ctx).list_groups(make)
    except CoordinatorError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.error, "groups": []}
    groups = [g for body in bodies for g in body["groups"]]
    groups += listed_share_groups(ctx, states, types)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        # as Kafka: Describe on the cluster lists every group, else those described
        visible = ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.GROUP, (g["group_id"] for g in groups)
        )
        groups = [g for g in groups if g["group_id"] in visible]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}


async def handle_delete_groups(
    ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    results: list[DeletableGroupResult] = []
    for group_id in request["groups_names"]:

        def make(token: Token, now_ms: int, group_id: str = group_id) -> ev.DeleteGroup:
            return ev.DeleteGroup(token=token, now_ms=now_ms, group_id=group_id)

        try:
            require_group(ctx, AclOperation.DELETE, group_id)
            share = await delete_share_group(ctx, group_id)
            body = share if share is not None else await runtime(ctx).submit(group_id, make)
        except CoordinatorError as exc:
            body = {"group_id": group_id, "error_code": exc.error}
        results.append(body)
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = [
    ApiHandler(ApiKey.JOIN_GROUP, 0, 9, handle_join_group),
    ApiHandler(ApiKey.SYNC_GROUP, 0, 5, handle_sync_group),
    ApiHandler(ApiKey.HEARTBEAT, 0, 4, handle_heartbeat),
    ApiHandler(ApiKey.LEAVE_GROUP, 0, 5, handle_leave_group),
    ApiHandler(ApiKey.DESCRIBE_GROUPS, 0, 5, handle_describe_groups),
    ApiHandler(ApiKey.LIST_GROUPS, 0, 5, handle_list_groups),
    ApiHandler(ApiKey.DELETE_GROUPS, 0, 2, handle_delete_groups),
]
