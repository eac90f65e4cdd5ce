"""The mirror's target topics: a source topic missing on the target is created there with
the source's partition count and topic configs (those set on the topic, not the broker
defaults) and the target's default replication factor (`default.replication.factor`: the
target's brokers, not the source's, know how many copies their `min.insync.replicas`
needs); each topic's partition counts on both sides decide whether records keep their
partition.

The configs that belong to the source cluster's own replication are not copied, as
MirrorMaker 2's DefaultConfigPropertyFilter leaves them out (`min.insync.replicas`: a
target with fewer brokers would refuse every acks=all write; the throttled replicas name
the source's brokers; `unclean.leader.election.enable` and the timestamp settings are
the target's to choose).

The entry point is `TargetTopics`. As MirrorMaker 2's MirrorSourceConnector creates its
remote topics (without the rename: the legacy MirrorMaker keeps topic names).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from logbus.client.admin import (
    Admin,
    AdminBatchError,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from logbus.protocol import ErrorCode

# MirrorMaker 2's DefaultConfigPropertyFilter's exclusions.
NOT_COPIED = frozenset({
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class TopicPair:
    """A mirrored topic's partition count at the source and at the target."""

    source_partitions: int
    target_partitions: int

    @property
    def same_partitions(self) -> bool:
        """Partition-for-partition: a record goes to the partition it was read from."""
        return self.source_partitions == self.target_partitions


class TargetTopics:
    """What the mirror knows of each topic it copies, learnt once per topic (a topic that
    grows at the source is learnt again when a record of a new partition arrives).

    Shared by the mirror's streams on one event loop; a lock per topic makes two streams
    that meet a new topic at once create it once.
    """

    def __init__(self, source: Admin, target: Admin) -> None:
        self._source = source
        self._target = target
        self._pairs: dict[str, TopicPair] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.created: list[str] = []

    def known(self, topic: str, partition: int) -> TopicPair | None:
        pair = self._pairs.get(topic)
        if pair is None or partition >= pair.source_partitions:
            return None
        return pair

    async def pair(self, topic: str, partition: int) -> TopicPair:
        """The topic's partition counts, creating it on the target when it is missing."""
        pair = self.known(topic, partition)
        if pair is not None:
            return pair
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            pair = self.known(topic, partition)
            if pair is None:
                pair = await self._learn(topic)
                self._pairs[topic] = pair
        return pair

    async def _learn(self, topic: str) -> TopicPair:
        source = (await self._source.describe_topics([topic]))[topic]
        count = len(source.partitions)
        try:
            target = (await self._target.describe_topics([topic]))[topic]
        except AdminBatchError as exc:
            if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
        else:
            return TopicPair(count, len(target.partitions))
        await self._create(topic, count)
        return TopicPair(count, count)

    async def _create(self, topic: str, partitions: int) -> None:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        described = (await self._source.describe_configs([resource]))[resource]
        configs = {
            name: entry.value
            for name, entry in described.items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            and entry.value is not None
            and name not in NOT_COPIED
        }
        new = NewTopic(topic, partitions, config=configs)
        try:
            await self._target.create_topics([new])
        except AdminBatchError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        else:
            self.created.append(topic)
