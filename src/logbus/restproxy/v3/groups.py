"""The v3 consumer group resources: `.../consumer-groups[/{consumer_group_id}]`, its
members (`/consumers[/{consumer_id}]`, with their `/assignments`), and its lag: every
committed partition's (`/lags`, `/lags/{topic_name}/partitions/{partition_id}`) and the
largest and total (`/lag-summary`). Lag is the log end offset (read_committed, as
Confluent's proxy reads it) less the group's committed offset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from logbus.client.admin import AdminBatchError, ConsumerGroupDescription, GroupMemberInfo
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.restproxy.v3.resources import Links, admin, int_param, links, not_found

# ConsumerGroupDescription's states as Confluent's `ConsumerGroupState` spells them
_STATES = {
    "Stable": "STABLE", "PreparingRebalance": "PREPARING_REBALANCE",
    "CompletingRebalance": "COMPLETING_REBALANCE", "Empty": "EMPTY", "Dead": "DEAD",
    "Assigning": "ASSIGNING", "Reconciling": "RECONCILING",
}


def group_json(site: Links, group: ConsumerGroupDescription) -> dict[str, Any]:
    g = group.group_id
    body = site.resource(
        "KafkaConsumerGroup", ("consumer-groups", g), (("consumer-group", g),),
        consumer_group_id=g, is_simple=group.is_simple_consumer_group,
        partition_assignor=group.partition_assignor,
        state=_STATES.get(group.state, "UNKNOWN"),
        type="CONSUMER" if group.group_type == "consumer" else "CLASSIC",
        is_mixed_consumer_group=False,
    )
    if group.coordinator is not None:
        body["coordinator"] = site.related("brokers", group.coordinator.node_id)
    body["consumers"] = site.related("consumer-groups", g, "consumers")
    body["lag_summary"] = site.related("consumer-groups", g, "lag-summary")
    return body


def consumer_json(site: Links, group: str, member: GroupMemberInfo) -> dict[str, Any]:
    m = member.member_id
    return site.resource(
        "KafkaConsumer", ("consumer-groups", group, "consumers", m),
        (("consumer-group", group), ("consumer", m)),
        consumer_group_id=group, consumer_id=m, instance_id=member.group_instance_id,
        client_id=member.client_id,
        assignments=site.related("consumer-groups", group, "consumers", m, "assignments"),
    )


def assignment_json(site: Links, group: str, member: str, tp: TopicPartition) -> dict[str, Any]:
    t, p = tp
    return site.resource(
        "KafkaConsumerAssignment",
        ("consumer-groups", group, "consumers", member, "assignments", t, "partitions", p),
        (("consumer-group", group), ("consumer", member), ("assignment", t), ("partition", p)),
        consumer_group_id=group, consumer_id=member, topic_name=t, partition_id=p,
        partition=site.related("topics", t, "partitions", p),
        lag=site.related("consumer-groups", group, "lags", t, "partitions", p),
    )


async def describe_group(request: Request, group_id: str) -> ConsumerGroupDescription:
    """The group (404 if it does not exist)."""
    try:
        found = await admin(request).describe_consumer_groups([group_id])
    except KafkaError as exc:
        if exc.code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise not_found("HTTP 404 Not Found") from None
        raise
    return found[group_id]


def _member(group: ConsumerGroupDescription, member_id: str) -> GroupMemberInfo:
    for member in group.members:
        if member.member_id == member_id:
            return member
    raise not_found(f"Consumer {member_id} does not exist.")


def _assigned(member: GroupMemberInfo) -> list[TopicPartition]:
    return sorted(
        TopicPartition(topic, p) for topic, parts in member.assignment.items() for p in parts
    )


# -- groups and members ---------------------------------------------------------------


async def list_groups(request: Request) -> Any:
    site = await links(request)
    listed = await admin(request).list_consumer_groups()
    ids = [g.group_id for g in listed]
    try:
        found = await admin(request).describe_consumer_groups(ids) if ids else {}
    except AdminBatchError as exc:
        # a group that cannot be described (denied, gone since it was listed) is left
        # out, as Confluent's proxy leaves it out
        found = exc.results
    return site.collection(
        "KafkaConsumerGroupList", ("consumer-groups",),
        [group_json(site, found[g]) for g in sorted(found)],
    )


async def get_group(request: Request) -> Any:
    site = await links(request)
    return group_json(site, await describe_group(request, request.path_params["group"]))


async def list_consumers(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    members = sorted(group.members, key=lambda m: m.member_id)
    return site.collection(
        "KafkaConsumerList", ("consumer-groups", group.group_id, "consumers"),
        [consumer_json(site, group.group_id, m) for m in members],
    )


async def get_consumer(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    return consumer_json(site, group.group_id, _member(group, request.path_params["consumer"]))


async def list_assignments(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    member = _member(group, request.path_params["consumer"])
    return site.collection(
        "KafkaConsumerAssignmentList",
        ("consumer-groups", group.group_id, "consumers", member.member_id, "assignments"),
        [assignment_json(site, group.group_id, member.member_id, tp) for tp in _assigned(member)],
    )


async def get_assignment(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    member = _member(group, request.path_params["consumer"])
    tp = TopicPartition(request.path_params["topic_name"], int_param(request, "partition_id"))
    if tp not in _assigned(member):
        raise not_found("HTTP 404 Not Found")
    return assignment_json(site, group.group_id, member.member_id, tp)


# -- lag ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """One committed partition of a group: its committed offset, its log end offset and
    the member it is assigned to (None when no member owns it)."""

    tp: TopicPartition
    current_offset: int
    log_end_offset: int
    member: GroupMemberInfo | None

    @property
    def lag(self) -> int:
        return max(self.log_end_offset - self.current_offset, 0)


async def group_lags(request: Request, group: ConsumerGroupDescription) -> list[PartitionLag]:
    committed = await admin(request).list_consumer_group_offsets(group.group_id)
    if not committed:
        return []
    ends = await admin(request).list_offsets(
        dict.fromkeys(committed, "latest"), isolation_level="read_committed"
    )
    owners = {tp: m for m in group.members for tp in _assigned(m)}
    return [
        PartitionLag(tp, committed[tp], ends[tp].offset, owners.get(tp))
        for tp in sorted(committed)
    ]


def lag_json(site: Links, group: str, lag: PartitionLag) -> dict[str, Any]:
    t, p = lag.tp
    member = lag.member
    return site.resource(
        "KafkaConsumerLag", ("consumer-groups", group, "lags", t, "partitions", p),
        (("consumer-group", group), ("lag", t), ("partition", p)),
        consumer_group_id=group, topic_name=t, partition_id=p,
        current_offset=lag.current_offset, log_end_offset=lag.log_end_offset, lag=lag.lag,
        consumer_id=member.member_id if member else "",
        instance_id=member.group_instance_id if member else None,
        client_id=member.client_id if member else "",
    )


async def list_lags(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    lags = await group_lags(request, group)
    if not lags:
        raise not_found("Consumer lags not found.")
    return site.collection(
        "KafkaConsumerLagList", ("consumer-groups", group.group_id, "lags"),
        [lag_json(site, group.group_id, lag) for lag in sorted(lags, key=lambda x: -x.lag)],
    )


async def get_lag(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    tp = TopicPartition(request.path_params["topic_name"], int_param(request, "partition_id"))
    for lag in await group_lags(request, group):
        if lag.tp == tp:
            return lag_json(site, group.group_id, lag)
    raise not_found("HTTP 404 Not Found")


async def lag_summary(request: Request) -> Any:
    site = await links(request)
    group = await describe_group(request, request.path_params["group"])
    lags = await group_lags(request, group)
    if not lags:
        raise not_found("Consumer group offsets could not be found.")
    g = group.group_id
    top = max(lags, key=lambda x: x.lag)
    member = top.member
    member_id = member.member_id if member else ""
    return site.resource(
        "KafkaConsumerGroupLagSummary", ("consumer-groups", g, "lag-summary"),
        (("consumer-group", g), ("lag-summary", "")),
        consumer_group_id=g, max_lag_consumer_id=member_id,
        max_lag_instance_id=member.group_instance_id if member else None,
        max_lag_client_id=member.client_id if member else "",
        max_lag_topic_name=top.tp.topic, max_lag_partition_id=top.tp.partition,
        max_lag=top.lag, total_lag=sum(x.lag for x in lags),
        max_lag_consumer=site.related("consumer-groups", g, "consumers", member_id),
        max_lag_partition=site.related("topics", top.tp.topic, "partitions", top.tp.partition),
    )


_GROUP = "/v3/clusters/{cluster_id}/consumer-groups/{group}"
_CONSUMER = _GROUP + "/consumers/{consumer}"
ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v3/clusters/{cluster_id}/consumer-groups", list_groups, ["GET"]),
    (_GROUP, get_group, ["GET"]),
    (_GROUP + "/consumers", list_consumers, ["GET"]),
    (_CONSUMER, get_consumer, ["GET"]),
    (_CONSUMER + "/assignments", list_assignments, ["GET"]),
    (_CONSUMER + "/assignments/{topic_name}/partitions/{partition_id}", get_assignment, ["GET"]),
    (_GROUP + "/lags", list_lags, ["GET"]),
    (_GROUP + "/lags/{topic_name}/partitions/{partition_id}", get_lag, ["GET"]),
    (_GROUP + "/lag-summary", lag_summary, ["GET"]),
]
