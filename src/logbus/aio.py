"""logbus's asyncio client: `from logbus.aio import Producer, Consumer, Admin`."""

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
from logbus.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SerializationError,
)
from logbus.client.producer import (
    Producer,
    ProducerRecord,
    RecordMetadata,
)
from logbus.client.types import TopicPartition

__all__ = [
    "Admin",
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "Producer",
    "ProducerRecord",
    "RecordMetadata",
    "ResourceType",
    "SerializationError",
    "TopicPartition",
]
