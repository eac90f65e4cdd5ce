"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`. This package is the blocking client (`logbus.Producer`,
`logbus.Admin`); `logbus.aio` is its asyncio twin.
"""

__version__ = "0.1.0"

from logbus.client.admin import (
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from logbus.client.admin.sync import Admin
from logbus.client.config import ConfigError
from logbus.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SerializationError,
)
from logbus.client.producer import ProducerRecord, RecordMetadata
from logbus.client.producer.sync import Producer
from logbus.client.types import TopicPartition

__all__ = [
    "Admin",
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClientClosedError",
    "ConfigError",
    "ConfigResource",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewPartitions",
    "NewTopic",
    "Producer",
    "ProducerRecord",
    "RecordMetadata",
    "ResourceType",
    "SerializationError",
    "TopicPartition",
    "__version__",
]
