"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`; the blocking client is `logbus.Admin` (and `logbus.aio` its asyncio
twin).
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
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from logbus.client.types import TopicPartition

__all__ = [
    "Admin",
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ConfigError",
    "ConfigResource",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewPartitions",
    "NewTopic",
    "ResourceType",
    "TopicPartition",
    "__version__",
]
