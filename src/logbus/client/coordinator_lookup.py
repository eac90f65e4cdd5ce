"""Finding a group's (or a transactional id's) coordinator: FindCoordinator asked of any
broker, again while the broker is still creating or loading `__consumer_offsets` (or
`__transaction_state`), then a connection to the broker it names (the request itself is
`logbus.client.requests.find_coordinator`)."""

from __future__ import annotations

import asyncio
import time

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.find_coordinator import GROUP_KEY, find_coordinator
from logbus.protocol import ErrorCode

# Errors that mean "ask again, perhaps of another coordinator, soon".
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_RETRY_BACKOFF = 0.1
DEFAULT_COORDINATOR_WAIT = 20.0


async def coordinator(
    cluster: Cluster,
    group_id: str,
    *,
    wait: float = DEFAULT_COORDINATOR_WAIT,
    key_type: int = GROUP_KEY,
) -> Connection:
    """A connection to the coordinator of `group_id`, found with FindCoordinator; retried
    (for up to `wait` seconds) while the broker answers COORDINATOR_NOT_AVAILABLE."""
    node_id = await coordinator_id(cluster, group_id, wait=wait, key_type=key_type)
    md = cluster.metadata
    if md is None or node_id not in md.brokers:
        await cluster.refresh([])
    return await cluster.node(node_id)


async def coordinator_id(
    cluster: Cluster,
    group_id: str,
    *,
    wait: float = DEFAULT_COORDINATOR_WAIT,
    key_type: int = GROUP_KEY,
) -> int:
    """The broker id of the coordinator of `group_id` (FindCoordinator), retried for up to
    `wait` seconds while the broker answers COORDINATOR_NOT_AVAILABLE."""
    deadline = time.monotonic() + wait
    while True:
        found = await find_coordinator(await cluster.bootstrap(), group_id, key_type)
        code = found.error_code
        if code == ErrorCode.NONE:
            return found.node_id
        if code not in COORDINATOR_ERRORS or time.monotonic() > deadline:
            raise KafkaError(
                code,
                found.error_message
                or f"FindCoordinator for {'group' if key_type == GROUP_KEY else 'transactional id'}"
                f" '{group_id}'",
            )
        await asyncio.sleep(_RETRY_BACKOFF)

