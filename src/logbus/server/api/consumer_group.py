"""KIP-848 consumer groups: ConsumerGroupHeartbeat v0-1 (v1 adds the broker-side regular
expression subscription and client-chosen member ids, KIP-1082) and ConsumerGroupDescribe
v0.

Each request becomes an event of `logbus.coordinator.group.events` for the broker's
`GroupCoordinatorRuntime`, with the cluster's topics as this broker knows them (the
coordinator resolves subscriptions and computes assignments against them).
"""

from __future__ import annotations

from collections.abc import Callable

from logbus.coordinator.group import events as ev
from logbus.coordinator.group.consumer_group import as_assignment
from logbus.coordinator.group.consumer_heartbeat import error_response
from logbus.coordinator.group.runtime import CoordinatorError, new_member_uuid
from logbus.coordinator.group.state import Token
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.consumer_group_describe_request import (
    ConsumerGroupDescribeRequest,
)
from logbus.protocol.messages.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from logbus.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from logbus.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.group_membership import (
    GROUP_OPERATIONS,
    NO_AUTHORIZED_OPERATIONS,
    client_host,
    require_group,
    runtime,
    topics_image,
)
from logbus.server.security.acl import AclOperation, ResourceType


async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    group_id = request["group_id"]
    owned = request.get("topic_partitions")
    names = request.get("subscribed_topic_names")
    member_uuid = new_member_uuid()

    def make(token: Token, now_ms: int) -> ev.ConsumerGroupHeartbeat:
        return ev.ConsumerGroupHeartbeat(
            token=token,
            now_ms=now_ms,
            group_id=group_id,
            member_id=request["member_id"],
            member_epoch=request["member_epoch"],
            topics=topics_image(ctx),
            may_describe=topic_describe_check(ctx),
            instance_id=request.get("instance_id"),
            rack_id=request.get("rack_id"),
            rebalance_timeout_ms=request.get("rebalance_timeout_ms", -1),
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=request.get("subscribed_topic_regex") if ctx.version >= 1
            else None,
            server_assignor=request.get("server_assignor"),
            owned=None if owned is None else as_assignment(
                (t["topic_id"], p) for t in owned for p in t["partitions"]
            ),
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            api_version=ctx.version,
            new_member_uuid=member_uuid,
        )

    try:
        require_group(ctx, AclOperation.READ, group_id)
        require_subscribed_topics(ctx, names)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = error_response(exc.error)
    return {"throttle_time_ms": 0, **body}


def require_subscribed_topics(ctx: RequestContext, names: list[str] | None) -> None:
    """TOPIC_AUTHORIZATION_FAILED unless the principal may DESCRIBE every topic it
    subscribes to by name (Kafka's KafkaApis checks this before the coordinator sees the
    heartbeat, whether or not the topics exist)."""
    if names and ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names) != set(names):
        raise CoordinatorError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def topic_describe_check(ctx: RequestContext) -> Callable[[str], bool] | None:
    """Whether the principal may DESCRIBE a topic, which bounds what its regular expression
    resolves to; None when the broker has no authorizer (every topic)."""
    if ctx.services.authorizer is None:
        return None
    return lambda topic: ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


UNDESCRIBABLE_TOPICS = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def _failed_describe(group_id: str, error: ErrorCode) -> DescribedGroup:
    return {
        "error_code": error,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }


def _may_describe_topics_of(ctx: RequestContext, group: DescribedGroup) -> bool:
    """Whether the principal may DESCRIBE every topic the group's members are assigned or
    meant to be: Kafka refuses the whole group otherwise (TOPIC_AUTHORIZATION_FAILED), so
    a describe never names a topic the caller may not see."""
    names = {
        t["topic_name"]
        for m in group["members"]
        for assignment in (m["assignment"], m["target_assignment"])
        for t in assignment["topic_partitions"]
        if t["topic_name"]  # a topic deleted since has no name to judge
    }
    return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names) == names


async def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    include_operations = bool(request.get("include_authorized_operations"))
    cache = ctx.services.metadata_cache
    topic_names = {meta.topic_id: name for name, meta in cache.topics.items()}
    described: list[DescribedGroup] = []
    for group_id in request["group_ids"]:

        def make(
            token: Token, now_ms: int, group_id: str = group_id
        ) -> ev.ConsumerGroupDescribe:
            return ev.ConsumerGroupDescribe(
                token=token, now_ms=now_ms, group_id=group_id, topic_names=topic_names
            )

        try:
            require_group(ctx, AclOperation.DESCRIBE, group_id)
            body = await runtime(ctx).submit(group_id, make)
        except CoordinatorError as exc:
            body = _failed_describe(group_id, exc.error)
        if body["error_code"] == ErrorCode.NONE and not _may_describe_topics_of(ctx, body):
            body = {**_failed_describe(group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    "error_message": UNDESCRIBABLE_TOPICS}
        operations = (
            ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if include_operations and body["error_code"] == ErrorCode.NONE
            else NO_AUTHORIZED_OPERATIONS
        )
        described.append({**body, "authorized_operations": operations})
    return {"throttle_time_ms": 0, "groups": described}


HANDLERS = [
    ApiHandler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, handle_consumer_group_heartbeat),
    ApiHandler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 0, handle_consumer_group_describe),
]
