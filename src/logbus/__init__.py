"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`. The blocking client is here (`from logbus import Producer, Consumer,
ShareConsumer, Admin`); the asyncio one is `logbus.aio`. Client names are imported on first
use, so the broker and the command line do not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
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
        ProducerRecord,
        RecordMetadata,
    )
    from logbus.client.producer.future import FutureRecordMetadata
    from logbus.client.producer.sync import Producer
    from logbus.client.share import AcknowledgeType, ShareConsumerRecord
    from logbus.client.share.sync import ShareConsumer
    from logbus.client.types import ConsumerGroupMetadata, TopicPartition
    from logbus.common.config_def import ConfigError

# public name -> the module it lives in
_LAZY = {
    "AcknowledgeType": "logbus.client.share",
    "Admin": "logbus.client.admin.sync",
    "AdminBatchError": "logbus.client.admin",
    "AlterConfigOp": "logbus.client.admin",
    "AlterConfigOpType": "logbus.client.admin",
    "ClientClosedError": "logbus.client.errors",
    "CommitFailedError": "logbus.client.consumer",
    "ConfigError": "logbus.common.config_def",
    "ConfigResource": "logbus.client.admin",
    "Consumer": "logbus.client.consumer.sync",
    "ConsumerRebalanceListener": "logbus.client.consumer",
    "ConsumerGroupMetadata": "logbus.client.types",
    "ConsumerRecord": "logbus.client.consumer",
    "FutureRecordMetadata": "logbus.client.producer.future",
    "KafkaConnectionError": "logbus.client.errors",
    "KafkaError": "logbus.client.errors",
    "TransactionAbortedError": "logbus.client.errors",
    "TransactionAbortableError": "logbus.client.errors",
    "ProducerFencedError": "logbus.client.errors",
    "InvalidTxnStateError": "logbus.client.errors",
    "KafkaTimeoutError": "logbus.client.errors",
    "NewPartitions": "logbus.client.admin",
    "NewTopic": "logbus.client.admin",
    "NoOffsetForPartitionError": "logbus.client.consumer",
    "OffsetAndMetadata": "logbus.client.consumer",
    "OffsetAndTimestamp": "logbus.client.consumer",
    "OffsetOutOfRangeError": "logbus.client.consumer",
    "Producer": "logbus.client.producer.sync",
    "ProducerRecord": "logbus.client.producer",
    "RecordMetadata": "logbus.client.producer",
    "ResourceType": "logbus.client.admin",
    "SerializationError": "logbus.client.errors",
    "ShareConsumer": "logbus.client.share.sync",
    "ShareConsumerRecord": "logbus.client.share",
    "TopicPartition": "logbus.client.types",
}

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
    "FutureRecordMetadata",
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
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'logbus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
