"""What goes into the producer (`ProducerRecord`) and what comes back (`RecordMetadata`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple, cast


class ProducerRecord(NamedTuple):
    """One record for `send_batch`. `value` and `key` go through the producer's
    serializers; `partition` None lets the partitioner choose; `timestamp` (ms since the
    epoch) None means now."""

    topic: str
    value: Any
    key: Any = None
    partition: int | None = None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written. `offset` is -1 with acks=0 (the broker
    does not say); `timestamp` is the record's, or the broker's append time when the topic
    uses LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int


# A RecordMetadata from a (topic, partition, offset, timestamp) tuple, made in C: the
# NamedTuple's own constructor is a Python function, a frame per acknowledged record.
metadata_from_tuple = cast(
    Callable[[tuple[str, int, int, int]], RecordMetadata], partial(tuple.__new__, RecordMetadata)
)
