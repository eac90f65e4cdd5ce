"""The asyncio client: `from logbus.aio import Consumer` (and Producer, Admin)."""

from logbus.client.config import ConfigError
from logbus.client.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
)
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from logbus.client.types import TopicPartition

__all__ = [
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "TopicPartition",
]
