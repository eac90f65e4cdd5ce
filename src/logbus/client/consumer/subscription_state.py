"""What a consumer reads: its subscription (topics, a pattern, or partitions assigned by
hand), the partitions it holds now, and each one's position (Kafka's SubscriptionState).

Owned by one `Consumer`; used from its event loop only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from logbus.client.consumer.records import ConsumerRebalanceListener, IllegalStateError
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition


class SubscriptionType(Enum):
    NONE = "none"
    AUTO_TOPICS = "topics"
    AUTO_PATTERN = "pattern"
    USER_ASSIGNED = "assigned"


@dataclass(slots=True)
class PartitionState:
    """One held partition. `position` is the next offset poll() returns (None until it is
    known); `epoch` changes on every seek so that fetches sent before are dropped;
    `reset` names a pending reset ("earliest", "latest" or a timestamp-free "none")."""

    position: int | None = None
    paused: bool = False
    reset: str | None = None
    epoch: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    error: KafkaError | None = None
    retry_at: float = 0.0


class SubscriptionState:
    """The subscription and the assignment with their positions."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.topics: list[str] = []
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0  # bumped on every subscription change, to trigger a rejoin

    # --- subscribing ------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type not in (SubscriptionType.NONE, kind):
            raise IllegalStateError(
                "subscribe() and assign() cannot be mixed; call unsubscribe() first"
            )
        self.type = kind

    def subscribe(
        self, topics: Sequence[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        self._set_type(SubscriptionType.AUTO_TOPICS)
        self.topics = sorted(set(topics))
        self.pattern = None
        self.listener = listener
        self.version += 1

    def subscribe_pattern(
        self, pattern: re.Pattern[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.pattern = pattern
        self.topics = []
        self.listener = listener
        self.version += 1

    def matched_topics(self, topics: Sequence[str]) -> bool:
        """Topics a pattern matches now; True when that changes the subscription."""
        matched = sorted(set(topics))
        if matched == self.topics:
            return False
        self.topics = matched
        self.version += 1
        return True

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        if not wanted:
            self.unsubscribe()
            return
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self.topics = sorted({tp.topic for tp in wanted})
        self._set_assignment(wanted)

    def assign_from_group(self, partitions: Iterable[TopicPartition]) -> None:
        self._set_assignment(list(partitions))

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        kept = {tp: self.assignment.get(tp) or PartitionState() for tp in partitions}
        self.assignment = kept

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.topics = []
        self.pattern = None
        self.listener = None
        self.assignment = {}
        self.version += 1

    @property
    def auto_assigned(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    # --- positions --------------------------------------------------------------------

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"partition {tp.topic}-{tp.partition} is not assigned")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        state = self.state(tp)
        state.position = offset
        state.reset = None
        state.error = None
        state.epoch += 1

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        state = self.state(tp)
        state.position = None
        state.reset = strategy
        state.error = None
        state.epoch += 1

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None]

    def consumed(self) -> dict[TopicPartition, int]:
        """Positions of every held partition that has one (what a commit stores)."""
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}
