"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`. The blocking client is here (`from logbus import Consumer`); the
asyncio one is `logbus.aio`. Client names are imported on first use, so the broker and
the command line do not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
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

# public name -> the module it lives in
_LAZY = {
    "CommitFailedError": "logbus.client.consumer",
    "ConfigError": "logbus.client.config",
    "Consumer": "logbus.client.consumer.sync",
    "ConsumerRebalanceListener": "logbus.client.consumer",
    "ConsumerRecord": "logbus.client.consumer",
    "KafkaConnectionError": "logbus.client.errors",
    "KafkaError": "logbus.client.errors",
    "KafkaTimeoutError": "logbus.client.errors",
    "NoOffsetForPartitionError": "logbus.client.consumer",
    "OffsetAndMetadata": "logbus.client.consumer",
    "OffsetAndTimestamp": "logbus.client.consumer",
    "OffsetOutOfRangeError": "logbus.client.consumer",
    "TopicPartition": "logbus.client.types",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'logbus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
