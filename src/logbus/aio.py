"""logbus's asyncio client: `from logbus.aio import Producer`."""

from logbus.client.config import ConfigError
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from logbus.client.producer import Producer, ProducerRecord, RecordMetadata

__all__ = [
    "ConfigError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "Producer",
    "ProducerRecord",
    "RecordMetadata",
]
