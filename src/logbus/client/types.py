"""Small value types shared by the producer, consumer and admin clients."""

from __future__ import annotations

from logbus.types import TopicPartition

__all__ = ["TopicPartition"]
