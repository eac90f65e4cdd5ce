"""Share-group membership (KIP-932): ShareGroupHeartbeat v0-1 and ShareGroupDescribe v0-1
(version 1 is Kafka 4.1's first stable one, with the fields of version 0).

The group's coordinator is the broker leading its `__consumer_offsets` partition, as for
every group; membership is kept by the broker's `ShareGroupCoordinator`.
"""

from __future__ import annotations

import time

from logbus.coordinator.share.coordinator import ShareGroupCoordinator
from logbus.coordinator.share.share_group import ShareGroup, ShareGroupError, ShareMember
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.delete_groups_response import DeletableGroupResult
from logbus.protocol.messages.list_groups_response import ListedGroup
from logbus.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from logbus.protocol.messages.share_group_describe_response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from logbus.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from logbus.protocol.messages.share_group_heartbeat_response import (
    ShareGroupHeartbeatResponse,
)
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType

NO_AUTHORIZED_OPERATIONS = -(2**31)
# Kafka's AclOperation codes of what a group supports: READ (3), DELETE (6), DESCRIBE (8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
ASSIGNOR = "simple"


def share_groups(ctx: RequestContext) -> ShareGroupCoordinator:
    coordinator = ctx.services.share_groups
    assert coordinator is not None, "the broker runs a share-group coordinator once started"
    return coordinator


def coordinator_error(ctx: RequestContext, group_id: str) -> ErrorCode:
    """NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS unless this broker coordinates
    `group_id` now."""
    runtime = ctx.services.group_coordinator
    if runtime.partition_for(group_id) not in runtime.shards:
        return ErrorCode.NOT_COORDINATOR
    if runtime.is_loading(group_id):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NONE


def partition_count(ctx: RequestContext, topic: str) -> int:
    meta = ctx.services.metadata_cache.topics.get(topic)
    return 0 if meta is None else len(meta.partitions)


def assignment_body(ctx: RequestContext, member: ShareMember, with_names: bool) -> Body:
    topics = []
    for topic, partitions in sorted(member.assignment.items()):
        meta = ctx.services.metadata_cache.topics.get(topic)
        if meta is None or not partitions:
            continue
        entry: Body = {"topic_id": meta.topic_id, "partitions": list(partitions)}
        if with_names:
            entry["topic_name"] = topic
        topics.append(entry)
    return {"topic_partitions": topics}


def now_ms() -> int:
    return int(time.time() * 1000)


# --- ShareGroupHeartbeat ------------------------------------------------------------------


async def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    group_id = request["group_id"]
    coordinator = share_groups(ctx)
    interval = coordinator.settings.heartbeat_interval_ms

    def error(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
        return {
            "throttle_time_ms": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": -1, "heartbeat_interval_ms": interval,
            "assignment": None,
        }

    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.get("subscribed_topic_names")
    if names and ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names) != set(names):
        # as Kafka's KafkaApis: every topic subscribed to by name must be describable
        return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if not group_id:
        return error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty")
    epoch = request["member_epoch"]
    if epoch < -1 or (epoch != 0 and not request["member_id"]):
        return error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty")
    if (code := coordinator_error(ctx, group_id)) != ErrorCode.NONE:
        return error(code)
    try:
        member = coordinator.heartbeat(
            group_id,
            member_id=request["member_id"],
            member_epoch=epoch,
            rack_id=request.get("rack_id"),
            subscribed_topics=request.get("subscribed_topic_names"),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.peer.rsplit(":", 1)[0],
            now_ms=now_ms(),
            partitions=lambda topic: partition_count(ctx, topic),
        )
    except ShareGroupError as exc:
        return error(exc.error, exc.message)
    if member is None:  # left
        return {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": request["member_id"], "member_epoch": -1,
            "heartbeat_interval_ms": interval, "assignment": None,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "member_id": member.member_id,
        "member_epoch": member.member_epoch,
        "heartbeat_interval_ms": interval,
        "assignment": assignment_body(ctx, member, with_names=False),  # type: ignore[typeddict-item]
    }


# --- ShareGroupDescribe -------------------------------------------------------------------


def _describe(ctx: RequestContext, group: ShareGroup, include_operations: bool) -> DescribedGroup:
    members = [
        {
            "member_id": m.member_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topics),
            "assignment": assignment_body(ctx, m, with_names=True),
        }
        for m in group.members.values()
    ]
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": ASSIGNOR,
        "members": members,  # type: ignore[typeddict-item]
        "authorized_operations": (
            ctx.authorized_operations(ResourceType.GROUP, group.group_id, GROUP_OPERATIONS)
            if include_operations
            else NO_AUTHORIZED_OPERATIONS
        ),
    }


async def handle_share_group_describe(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    coordinator = share_groups(ctx)
    groups: list[DescribedGroup] = []
    for group_id in request["group_ids"]:

        def failed(code: ErrorCode, gid: str = group_id) -> DescribedGroup:
            return {
                "error_code": code, "error_message": None, "group_id": gid,
                "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                "assignor_name": "", "members": [],
                "authorized_operations": NO_AUTHORIZED_OPERATIONS,
            }

        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(failed(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if (code := coordinator_error(ctx, group_id)) != ErrorCode.NONE:
            groups.append(failed(code))
            continue
        group = coordinator.groups.get(group_id)
        if group is None:
            groups.append(failed(ErrorCode.GROUP_ID_NOT_FOUND))
            continue
        coordinator.expire(group, now_ms(), lambda topic: partition_count(ctx, topic))
        groups.append(_describe(ctx, group, request["include_authorized_operations"]))
    return {"throttle_time_ms": 0, "groups": groups}


HANDLERS = [
    ApiHandler(ApiKey.SHARE_GROUP_HEARTBEAT, 0, 1, handle_share_group_heartbeat),
    ApiHandler(ApiKey.SHARE_GROUP_DESCRIBE, 0, 1, handle_share_group_describe),
]


# --- ListGroups and DeleteGroups: the share groups among the others -----------------------


def listed_share_groups(
    ctx: RequestContext, states: tuple[str, ...], types: tuple[str, ...]
) -> list[ListedGroup]:
    """ListGroups' entries for the share groups coordinated here (group type "share",
    KIP-1043), filtered by state and type as Kafka filters (case-insensitively)."""
    if types and "share" not in {t.lower() for t in types}:
        return []
    wanted = {s.lower() for s in states}
    runtime = ctx.services.group_coordinator
    found: list[ListedGroup] = []
    for group in share_groups(ctx).groups.values():
        if runtime.partition_for(group.group_id) not in runtime.shards:
            continue
        if wanted and group.state.lower() not in wanted:
            continue
        found.append({
            "group_id": group.group_id, "protocol_type": "share",
            "group_state": group.state, "group_type": "share",
        })
    return found


async def delete_share_group(ctx: RequestContext, group_id: str) -> DeletableGroupResult | None:
    """DeleteGroups of a share group coordinated here (None when `group_id` is not one):
    NON_EMPTY_GROUP while it has members; else its membership is dropped and the delivery
    state this broker keeps for it (as leader and as share coordinator) is deleted."""
    coordinator = share_groups(ctx)
    if group_id not in coordinator.groups or coordinator_error(ctx, group_id) != ErrorCode.NONE:
        return None
    if not coordinator.delete(group_id):
        return {"group_id": group_id, "error_code": ErrorCode.NON_EMPTY_GROUP}
    if ctx.services.share_partitions is not None:
        ctx.services.share_partitions.forget_group(group_id)
    if ctx.services.share_state is not None:
        await ctx.services.share_state.delete_group(group_id)
    return {"group_id": group_id, "error_code": ErrorCode.NONE}
