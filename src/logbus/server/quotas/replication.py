"""Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73): a byte rate for one
side of replication, applied to the replicas a topic config names.

A broker has two: the leader side (`leader.replication.throttled.rate`, for the replicas
of `leader.replication.throttled.replicas`: what it sends to followers not in the ISR) and
the follower side (`follower.replication.throttled.rate`, for
`follower.replication.throttled.replicas`: what its replica fetchers copy while out of the
ISR). Both lists hold `partition:broker` pairs, or `*` for every replica; a pair counts
on the broker it names. Replicas in the ISR are never throttled, as in Kafka.

The rate is kept with a token bucket holding at most one second of bytes, so a copy runs
at the throttle within a fraction of a second over any stretch (Kafka's sampled window
lets about ten seconds' worth through at once). Owned by the broker's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from logbus.types import TopicPartition

UNLIMITED = 2**63 - 1
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BURST_SECONDS = 1.0

# A topic's configs by name, or None for a topic this broker does not know.
TopicConfigs = Callable[[str], "Mapping[str, str] | None"]


def parse_throttled_replicas(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replicas list names on `broker_id`; None for `*`."""
    text = value.strip()
    if text == "*":
        return None
    out = set()
    for item in text.split(","):
        partition, _, broker = item.strip().partition(":")
        partition, broker = partition.strip(), broker.strip()
        if partition.isdigit() and broker.isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One side's throttle: `rate` bytes/s (UNLIMITED: off) over the replicas that
    `replicas_config` names on this broker."""

    def __init__(
        self,
        broker_id: int,
        replicas_config: str,
        topic_configs: TopicConfigs,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id = broker_id
        self.replicas_config = replicas_config
        self.topic_configs = topic_configs
        self.clock = clock
        self.rate = UNLIMITED
        self._tokens = 0.0
        self._last = clock()
        self._parsed: dict[str, frozenset[int] | None] = {}

    def update_rate(self, rate: int) -> None:
        if rate != self.rate:
            self.rate = rate
            self._tokens = min(self._tokens, self._capacity())
            self._last = self.clock()

    def _capacity(self) -> float:
        return self.rate * BURST_SECONDS

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(self._capacity(), self._tokens + (now - self._last) * self.rate)
        self._last = now

    @property
    def enabled(self) -> bool:
        return self.rate < UNLIMITED

    def is_throttled(self, tp: TopicPartition) -> bool:
        """Whether the topic's list names this replica of `tp` (or every replica)."""
        if not self.enabled:
            return False
        configs = self.topic_configs(tp.topic)
        value = configs.get(self.replicas_config) if configs else None
        if not value:
            return False
        if value not in self._parsed:
            if len(self._parsed) > 1024:
                self._parsed.clear()
            self._parsed[value] = parse_throttled_replicas(value, self.broker_id)
        partitions = self._parsed[value]
        return partitions is None or tp.partition in partitions

    def is_exceeded(self) -> bool:
        """Whether throttled replicas must wait (the bytes of the last second are spent)."""
        if not self.enabled:
            return False
        self._refill()
        return self._tokens <= 0

    def delay(self) -> float:
        """Seconds until throttled replicas may move bytes again (0: now)."""
        if not self.enabled:
            return 0.0
        self._refill()
        return 0.0 if self._tokens > 0 else (1 - self._tokens) / self.rate

    def record(self, size: int) -> None:
        """Count `size` bytes of throttled replicas."""
        if self.enabled and size:
            self._refill()
            self._tokens -= size
