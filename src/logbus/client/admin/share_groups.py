"""The admin client's share groups (KIP-932, what kafka-share-groups uses): the groups
listed (ListGroups v5 with the "share" type) and described (ShareGroupDescribe), and a
share group's start offsets described, altered and deleted on the group's coordinator
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).

`Admin` (`client.py`) exposes these as methods; they are sent and retried with its
`AdminCalls` (`calls.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from logbus.client import coordinator_lookup
from logbus.client.admin.calls import AdminCalls
from logbus.client.admin.types import AdminBatchError, BrokerInfo
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.client.requests.group_membership import ListedGroup, read_list_groups
from logbus.client.requests.share_group_offsets import (
    SharePartitionOffset,
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
)
from logbus.client.requests.share_groups import describe_share_groups
from logbus.client.types import TopicPartition
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.list_groups_request import ListGroupsRequest
from logbus.protocol.messages.share_group_describe_response import DescribedGroup

# ListGroups filters by group type from v5 (KIP-1043)
LIST_GROUPS_TYPES_FROM = 5


@dataclass(frozen=True)
class ShareMemberDescription:
    """A share group's member: who it is, its epoch, the topics it subscribes to and the
    partitions it is assigned (topic -> partitions)."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscribed_topics: list[str]
    assignment: dict[str, list[int]]


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as its coordinator describes it: `state` Empty, Stable or Dead, the
    group and assignment epochs, the server-side assignor and the members."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]
    coordinator: BrokerInfo | None


async def list_share_groups_on(conn: Connection) -> list[ListedGroup]:
    """The share groups one broker coordinates (ListGroups v5 filtered to type share)."""
    version = conn.choose_version(ApiKey.LIST_GROUPS)
    if version < LIST_GROUPS_TYPES_FROM:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         f"broker {conn.address} cannot list share groups")
    body: ListGroupsRequest = {"states_filter": [], "types_filter": ["share"]}
    return read_list_groups(await send(conn, apis.LIST_GROUPS, body, version))


async def list_share_groups(calls: AdminCalls, timeout_ms: int | None) -> list[ListedGroup]:
    found = await calls.on_each_broker(None, list_share_groups_on, timeout_ms)
    groups = {g.group_id: g for listed in found.values() for g in listed}
    return [groups[group_id] for group_id in sorted(groups)]


def _share_group(described: DescribedGroup, coordinator: BrokerInfo | None) -> (
    ShareGroupDescription
):
    members = [
        ShareMemberDescription(
            m["member_id"], m["client_id"], m["client_host"], m.get("rack_id"),
            m["member_epoch"], sorted(m["subscribed_topic_names"]),
            {t["topic_name"]: sorted(t["partitions"])
             for t in m["assignment"]["topic_partitions"]},
        )
        for m in described["members"]
    ]
    return ShareGroupDescription(
        described["group_id"], described["group_state"], described["group_epoch"],
        described["assignment_epoch"], described["assignor_name"], members, coordinator,
    )


async def describe_share_groups_of(
    calls: AdminCalls, group_ids: Sequence[str], timeout_ms: int | None
) -> dict[str, ShareGroupDescription]:
    async def on_coordinator(
        conn: Connection, node_id: int, batch: list[str]
    ) -> dict[str, ShareGroupDescription | KafkaError]:
        md = calls.cluster.metadata
        coordinator = md.brokers.get(node_id) if md is not None else None
        out: dict[str, ShareGroupDescription | KafkaError] = {}
        for described in await describe_share_groups(conn, batch):
            group_id, code = described["group_id"], ErrorCode(described["error_code"])
            if code == ErrorCode.NONE:
                out[group_id] = _share_group(described, coordinator)
            else:
                message = described.get("error_message") or f"share group '{group_id}'"
                out[group_id] = KafkaError(code, message)
        return out

    async def attempt(
        batch: list[str], _: int
    ) -> dict[str, ShareGroupDescription | KafkaError]:
        return await calls.on_coordinators(batch, on_coordinator)

    return await calls.each(group_ids, attempt, timeout_ms)


async def describe_share_offsets(
    calls: AdminCalls,
    group_id: str,
    partitions: Sequence[TopicPartition] | None,
    timeout_ms: int | None,
) -> dict[TopicPartition, SharePartitionOffset | None]:
    asked = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]

    async def fetch() -> dict[tuple[str, int], SharePartitionOffset | KafkaError]:
        conn = await coordinator_lookup.coordinator(calls.cluster, group_id, wait=0)
        return await describe_share_group_offsets(conn, group_id, asked)

    found = await calls.single(fetch, timeout_ms)
    results: dict[TopicPartition, SharePartitionOffset | None] = {}
    errors: dict[TopicPartition, KafkaError] = {}
    for (topic, partition), value in sorted(found.items()):
        tp = TopicPartition(topic, partition)
        if isinstance(value, KafkaError):
            errors[tp] = value
        else:
            results[tp] = value if value.start_offset >= 0 else None
    if errors:
        raise AdminBatchError(errors, results)
    return results


async def alter_share_offsets(
    calls: AdminCalls,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    timeout_ms: int | None,
) -> None:
    async def on_coordinator(
        conn: Connection, batch: list[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        moves = {(tp.topic, tp.partition): offsets[tp] for tp in batch}
        found = await alter_share_group_offsets(conn, group_id, moves)
        return {TopicPartition(*tp): error for tp, error in found.items()}

    await calls.each(offsets, calls.group_partitions(group_id, on_coordinator), timeout_ms)


async def delete_share_offsets(
    calls: AdminCalls,
    group_id: str,
    topics: Sequence[str],
    timeout_ms: int | None,
) -> None:
    async def attempt(batch: list[str], _: int) -> dict[str, KafkaError | None]:
        conn = await coordinator_lookup.coordinator(calls.cluster, group_id, wait=0)
        return await delete_share_group_offsets(conn, group_id, batch)

    await calls.each(topics, attempt, timeout_ms)
