"""Value types every layer shares: the broker, the coordinators, storage and the clients
(Kafka's `org.apache.kafka.common`)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic. A tuple, so `("t", 0)` and `TopicPartition("t", 0)` are equal
    and hash alike: a plain pair finds its entry in a map keyed by TopicPartition."""

    topic: str
    partition: int
