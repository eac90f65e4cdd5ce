"""The asyncio client: `from logbus.aio import Admin`."""

from logbus.client.admin import (
    Admin,
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from logbus.client.config import ConfigError
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
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
]
