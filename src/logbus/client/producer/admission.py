"""What a record must pass before it is buffered (the first half of Kafka's
`KafkaProducer.doSend`): its key and value serialized, its size within
max.request.size, and room for it in buffer.memory (waiting up to max.block.ms)."""

from __future__ import annotations

from typing import Any

from logbus.client.errors import KafkaError
from logbus.client.producer.buffer_pool import BufferPool
from logbus.client.producer.serializers import Serializer, is_identity, serializer
from logbus.protocol import ErrorCode


class RecordAdmission:
    """Owns the serializers, the size limit and the buffer pool. Made from the
    producer's parsed config; safe to use from any thread (the pool is, and the rest does
    not change)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.key_serializer: Serializer = serializer("key.serializer", config["key.serializer"])
        self.value_serializer: Serializer = serializer(
            "value.serializer", config["value.serializer"]
        )
        # Identity serializers: `bytes` keys and values go as they are, with no call.
        self.raw_keys = is_identity(self.key_serializer)
        self.raw_values = is_identity(self.value_serializer)
        self.max_request_size: int = config["max.request.size"]
        self.max_block: float = config["max.block.ms"] / 1000
        self.pool = BufferPool(config["buffer.memory"])

    def serialize(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """The key and value as bytes (SerializationError as the serializers raise)."""
        if not (self.raw_keys and (key is None or type(key) is bytes)):
            key = self.key_serializer(key)
        if not (self.raw_values and (value is None or type(value) is bytes)):
            value = self.value_serializer(value)
        return key, value

    def check_size(self, size: int) -> None:
        """MESSAGE_TOO_LARGE for a record over max.request.size."""
        if size > self.max_request_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The message is {size} bytes when serialized which is larger than "
                f"max.request.size={self.max_request_size}",
            )

    def reserve_blocking(self, size: int) -> None:
        """Room for `size` bytes, from a caller's thread (blocking up to max.block.ms)."""
        if not self.pool.try_reserve(size):
            self.pool.reserve_blocking(size, self.max_block)
