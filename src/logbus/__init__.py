"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`. The blocking client is here (`from logbus import Consumer`); the
asyncio one is `logbus.aio`.
"""

__version__ = "0.1.0"

from logbus.client.config import ConfigError
from logbus.client.consumer import (
    CommitFailedError,
    ConsumerRebalanceListener,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
)
from logbus.client.consumer.sync import Consumer
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
    "__version__",
]
