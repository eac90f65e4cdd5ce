"""logbus: a distributed commit log that speaks the Apache Kafka protocol.

The broker's entry point is `logbus.server.broker.Broker`; the command line is
`logbus.cli.main`.
"""

__version__ = "0.1.0"

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

__all__ = [
    "ClientClosedError",
    "ConfigError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "Producer",
    "ProducerRecord",
    "RecordMetadata",
    "SerializationError",
    "__version__",
]
