"""How long the source keeps trying when a broker dies or a leader moves.

The entry point is `RetryBudget`: one per call that talks to the cluster (listing offsets
on the driver, fetching a range on an executor). A retriable error (a broken connection, a
leader that moved or is being elected, a coordinator loading) is followed by a pause, a
metadata refresh by the caller, and another try, until `kafka.default.api.timeout.ms` has
passed since the call began, as Kafka's consumer retries `offsetsForTimes`,
`beginningOffsets` and its fetches. A broker killed with -9 stays the leader in metadata
until the controller notices (its ZooKeeper session expires), so a fixed few tries would
give up while the cluster is still electing.
"""

from __future__ import annotations

import asyncio
import time

from logbus.client.errors import KafkaError
from logbus.protocol import ErrorCode

# A broker the last metadata named that is gone from the cluster: new metadata names
# another (Kafka's clients refresh and retry on it too).
_ALSO_RETRIED = frozenset({ErrorCode.BROKER_NOT_AVAILABLE})


def is_retriable(exc: KafkaError) -> bool:
    return exc.retriable or exc.code in _ALSO_RETRIED


class RetryBudget:
    """The time left for one call's retries, and the pause before each (`backoff_ms`,
    doubling up to `backoff_max_ms`, as Kafka's `retry.backoff.ms` and
    `retry.backoff.max.ms`). Used from one task."""

    def __init__(self, timeout_ms: int, backoff_ms: int = 100, backoff_max_ms: int = 1000) -> None:
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000
        self.delay = backoff_ms / 1000
        self.delay_max = max(backoff_ms, backoff_max_ms) / 1000
        self.attempts = 0

    async def pause(self, exc: KafkaError) -> bool:
        """After `exc`: wait and return True to try again; False when `exc` is not
        retriable or the time is up (the caller raises)."""
        self.attempts += 1
        left = self.deadline - time.monotonic()
        if not is_retriable(exc) or left <= 0:
            return False
        await asyncio.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, self.delay_max)
        return True

    def describe(self, exc: KafkaError) -> str:
        """`exc`, and how long it was retried when it was."""
        if not is_retriable(exc):
            return str(exc)
        return (
            f"{exc} (still failing after {self.attempts} attempts in "
            f"{self.timeout_ms} ms, kafka.default.api.timeout.ms)"
        )
