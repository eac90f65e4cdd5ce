"""Where a record goes: the producer's partition routing (Kafka's default partitioner).

A keyed record goes to murmur2 of its key modulo the topic's partition count, as the Java
client does; a keyless record (or any record with `partitioner.ignore.keys`) goes to the
topic's sticky partition, which moves on when that partition's open batch cannot take the
record (KIP-480).
"""

from __future__ import annotations

from logbus.client.errors import KafkaError
from logbus.client.metadata import ClusterMetadata
from logbus.client.partitioner import StickyPartitioner, partition_for_key
from logbus.client.producer.accumulator import RecordAccumulator
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

# Keys whose partition is remembered, per partition count (murmur2 is costly in Python).
KEY_CACHE_SIZE = 65536


class PartitionRouter:
    """Owns what routing needs to remember: each topic's partition count (once its
    metadata was found), its TopicPartitions, its sticky partitioner, and a cache of
    keys' partitions. Its sticky choice reads the accumulator's open batches, so it is
    used under the accumulator's lock, from any thread."""

    def __init__(self, accumulator: RecordAccumulator, ignore_keys: bool) -> None:
        self.accumulator = accumulator
        self.ignore_keys = ignore_keys
        self._counts: dict[str, int] = {}
        self._sticky: dict[str, StickyPartitioner] = {}
        self._tps: dict[str, list[TopicPartition]] = {}
        self._key_partitions: dict[int, dict[bytes, int]] = {}

    def count(self, topic: str) -> int | None:
        """The topic's partition count, or None while its metadata is not known."""
        return self._counts.get(topic)

    def known(self, topic: str, count: int) -> None:
        """Record the topic's partition count, found in its metadata."""
        self._counts[topic] = count

    def metadata_updated(self, metadata: ClusterMetadata) -> None:
        """Follow partitions added to a topic (seen on a periodic refresh)."""
        for topic, count in list(self._counts.items()):
            info = metadata.topics.get(topic)
            if info is not None and info.partitions and len(info.partitions) != count:
                self._counts[topic] = len(info.partitions)
                self._sticky.pop(topic, None)

    @staticmethod
    def check_partition(topic: str, partition: int, count: int) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION for a partition the topic does not have."""
        if not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic '{topic}' has no partition {partition} (it has {count})",
            )

    def partitions(self, topic: str, count: int) -> list[TopicPartition]:
        """The topic's TopicPartitions, made once per partition count."""
        tps = self._tps.get(topic)
        if tps is None or len(tps) != count:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(count)]
        return tps

    def route(
        self, topic: str, partition: int | None, key: bytes | None, count: int, size: int
    ) -> TopicPartition:
        """The TopicPartition of a record (its own `partition` if given, checked by the
        caller) of `size` accounted bytes."""
        tps = self._tps.get(topic)
        if tps is None or len(tps) != count:
            tps = self.partitions(topic, count)
        if partition is None:
            if key is None or self.ignore_keys:
                # The keyless record's common case, in one call: its topic's sticky
                # partition, whose open batch has room.
                sticky = self._sticky.get(topic)
                if sticky is not None and sticky.num_partitions == count:
                    tp = tps[sticky.current]
                    if not self.accumulator.is_full_for(tp, size):
                        return tp
            partition = self.choose(topic, key, count, tps, size)
        return tps[partition]

    def choose(
        self,
        topic: str,
        key: bytes | None,
        count: int,
        tps: list[TopicPartition],
        size: int,
    ) -> int:
        """murmur2 of the key, or the sticky partition for keyless records."""
        if key is not None and not self.ignore_keys:
            cache = self.key_cache(count)
            partition = cache.get(key)
            if partition is None:
                partition = partition_for_key(key, count)
                if len(cache) >= KEY_CACHE_SIZE:
                    cache.clear()
                cache[key] = partition
            return partition
        return self.sticky_partition(topic, count, tps, size)

    def key_cache(self, count: int) -> dict[bytes, int]:
        """Keys' partitions already computed for a topic of `count` partitions."""
        cache = self._key_partitions.get(count)
        if cache is None:
            cache = self._key_partitions[count] = {}
        return cache

    def sticky_partition(
        self, topic: str, count: int, tps: list[TopicPartition], size: int
    ) -> int:
        """The topic's sticky partition for a record of `size` bytes: the current one,
        or the next when the current one's open batch cannot take the record."""
        sticky = self._sticky.get(topic)
        if sticky is None or sticky.num_partitions != count:
            sticky = self._sticky[topic] = StickyPartitioner(count)
        partition = sticky.current
        if self.accumulator.is_full_for(tps[partition], size):
            partition = sticky.next_batch()
        return partition

    def batch_filled(self, topic: str) -> None:
        """A batch of the topic's keyless records is full: stick to the next partition."""
        sticky = self._sticky.get(topic)
        if sticky is not None:
            sticky.next_batch()

    def stick_to(self, topic: str, sticky: StickyPartitioner) -> None:
        """Use `sticky` for the topic's keyless records (a test picks its start)."""
        self._sticky[topic] = sticky
