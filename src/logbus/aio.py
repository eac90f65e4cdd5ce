"""logbus's asyncio client: `from logbus.aio import Producer`."""

from logbus.client.config import ConfigError
from logbus.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SerializationError,
)
from logbus.client.producer import Producer, ProducerRecord, RecordMetadata

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
]
