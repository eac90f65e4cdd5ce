"""The admin client's share-group offsets (KIP-932, what kafka-share-groups uses): a share
group's start offsets described, altered and deleted on the group's coordinator
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).

`Admin` (`client.py`) exposes these as methods; they are sent and retried with its
`AdminCalls` (`calls.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logbus.client import coordinator_lookup
from logbus.client.admin.calls import AdminCalls
from logbus.client.admin.types import AdminBatchError
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.share_group_offsets import (
    SharePartitionOffset,
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
)
from logbus.client.types import TopicPartition


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
