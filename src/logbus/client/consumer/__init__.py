"""The consumer: `Consumer` (asyncio) reads records of subscribed topics (with a group)
or assigned partitions; `logbus.client.consumer.sync.Consumer` is the blocking wrapper.

Inside: `fetcher` (background fetching, record decoding), `coordinator` (rebalances,
commits, with `logbus.client.group_member`), `assignors`, `subscription_state`.
"""

from logbus.client.consumer.consumer import Consumer, OffsetAndTimestamp
from logbus.client.consumer.records import (
    CommitFailedError,
    ConsumerRebalanceListener,
    ConsumerRecord,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    PartitionColumns,
)
from logbus.client.types import TopicPartition

__all__ = [
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "IllegalStateError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionColumns",
    "TopicPartition",
]
