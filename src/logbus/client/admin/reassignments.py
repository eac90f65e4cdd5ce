"""The admin client's partition reassignments (Kafka's
`Admin.alterPartitionReassignments` and `listPartitionReassignments`, KIP-455): sent to
the controller, again to the new controller when the one asked answers NOT_CONTROLLER.

`Admin` (`client.py`) exposes these as `alter_partition_reassignments` and
`list_partition_reassignments`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logbus.client.admin.calls import AdminCalls
from logbus.client.errors import KafkaError
from logbus.client.requests.reassignments import (
    PartitionReassignment,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode


async def _moved(calls: AdminCalls, error: KafkaError | None) -> None:
    if error is None:
        return
    if error.code == ErrorCode.NOT_CONTROLLER:
        await calls.cluster.refresh([])
    raise error


async def alter_reassignments_of(
    calls: AdminCalls,
    reassignments: Mapping[TopicPartition, Sequence[int] | None],
    timeout_ms: int | None,
) -> dict[TopicPartition, KafkaError | None]:
    wanted = dict(reassignments)
    request_timeout = calls.request_timeout_ms if timeout_ms is None else timeout_ms

    async def call() -> dict[TopicPartition, KafkaError | None]:
        conn = await calls.cluster.controller()
        error, results = await alter_partition_reassignments(conn, wanted, request_timeout)
        await _moved(calls, error)
        return results

    return await calls.single(call, timeout_ms)


async def list_reassignments_of(
    calls: AdminCalls, partitions: Sequence[TopicPartition] | None, timeout_ms: int | None
) -> dict[TopicPartition, PartitionReassignment]:
    wanted = None if partitions is None else list(dict.fromkeys(partitions))
    request_timeout = calls.request_timeout_ms if timeout_ms is None else timeout_ms

    async def call() -> dict[TopicPartition, PartitionReassignment]:
        conn = await calls.cluster.controller()
        error, found = await list_partition_reassignments(conn, wanted, request_timeout)
        await _moved(calls, error)
        return found

    return await calls.single(call, timeout_ms)
