"""logbus's asyncio client: `from logbus.aio import Producer, Consumer, ShareConsumer, Admin`."""

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
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    SerializationError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from logbus.client.producer import (
    Producer,
    ProducerRecord,
    RecordMetadata,
)
from logbus.client.share import AcknowledgeType, ShareConsumer, ShareConsumerRecord
from logbus.client.types import ConsumerGroupMetadata, TopicPartition
from logbus.common.config_def import ConfigError

__all__ = [
    "AcknowledgeType",
    "Admin",
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "InvalidTxnStateError",
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
    "ProducerFencedError",
    "ProducerRecord",
    "RecordMetadata",
    "ResourceType",
    "SerializationError",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionAbortedError",
]
