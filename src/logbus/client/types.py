"""Small value types shared by the producer, consumer and admin clients."""

from __future__ import annotations

from typing import NamedTuple

from logbus.types import TopicPartition

__all__ = ["ConsumerGroupMetadata", "TopicPartition"]


class ConsumerGroupMetadata(NamedTuple):
    """Who a consumer is in its group (`Consumer.group_metadata()`), handed to
    `Producer.send_offsets_to_transaction` so the group coordinator fences offsets
    committed by a member that has left the generation (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
