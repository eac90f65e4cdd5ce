"""The admin client's view of brokers' log dirs (Kafka's `describeLogDirs`, what
kafka-log-dirs.sh prints): DescribeLogDirs sent to each broker asked for (every broker
by default), retried as the admin's other calls are (`Admin._each`).

`Admin` (`client.py`) exposes this as `describe_log_dirs`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from logbus.client.errors import KafkaError
from logbus.client.requests.log_dirs import LogDirDescription, describe_log_dirs
from logbus.client.types import TopicPartition

if TYPE_CHECKING:
    from logbus.client.admin.client import Admin


async def log_dirs_of(
    admin: Admin,
    brokers: Sequence[int] | None,
    partitions: Sequence[TopicPartition] | None,
    timeout_ms: int | None,
) -> dict[int, dict[str, LogDirDescription]]:
    async def attempt(
        node_ids: list[int], _: int
    ) -> dict[int, dict[str, LogDirDescription] | KafkaError]:
        out: dict[int, dict[str, LogDirDescription] | KafkaError] = {}
        for node_id in node_ids:
            try:
                conn = await admin.cluster.node(node_id)
                out[node_id] = await describe_log_dirs(conn, partitions)
            except KafkaError as exc:
                out[node_id] = exc
        return out

    md = await admin._single(lambda: admin.cluster.refresh([]), timeout_ms)
    wanted = sorted(md.brokers) if brokers is None else list(dict.fromkeys(brokers))
    return await admin._each(wanted, attempt, timeout_ms)
