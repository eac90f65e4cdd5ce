"""logbus's producer. The entry point is `Producer` (asyncio, `logbus.aio.Producer`);
`logbus.client.producer.sync.Producer` (`logbus.Producer`) is its blocking wrapper."""

from logbus.client.producer.producer import Producer
from logbus.client.producer.records import ProducerRecord, RecordMetadata

__all__ = ["Producer", "ProducerRecord", "RecordMetadata"]
