"""The share consumer's values: the records `poll()` returns (with their delivery count),
the acknowledgement types, and the records a ShareFetch answer brings (KIP-932)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NamedTuple

from logbus.client.consumer.fetcher import Deserializer
from logbus.client.consumer.records import ConsumerRecord, Header
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.records.batch import InvalidBatch, split_batches
from logbus.records.reader import build_record_tuples, decode_record_columns


class AcknowledgeType(IntEnum):
    """How a record delivered by a share group is acknowledged (Kafka's AcknowledgeType;
    the wire codes of ShareFetch and ShareAcknowledge)."""

    ACCEPT = 1
    """Done with: never delivered again."""
    RELEASE = 2
    """Not processed: delivered again (to any member), unless at the delivery limit."""
    REJECT = 3
    """Cannot be processed: never delivered again (archived)."""


GAP = 0
"""The wire's type for an acquired offset that holds no record (a control batch, a
compacted offset): the client acknowledges it by itself."""


class ShareConsumerRecord(NamedTuple):
    """One record as a share consumer's `poll()` returns it: a `ConsumerRecord`'s fields
    and `delivery_count`, how many times the group delivered it (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...]
    delivery_count: int


class AcquiredRange(NamedTuple):
    """Offsets `first_offset`..`last_offset` that a ShareFetch acquired for this member."""

    first_offset: int
    last_offset: int
    delivery_count: int


class Delivery(NamedTuple):
    """What one partition of a ShareFetch answer delivered: the records of acquired offsets
    (in offset order), and the acquired offsets with no record (to acknowledge as gaps)."""

    records: list[ShareConsumerRecord]
    gaps: list[int]


def read_delivery(
    tp: TopicPartition,
    records: Any,
    acquired: Sequence[AcquiredRange],
    *,
    check_crcs: bool = True,
    key_deserializer: Deserializer | None = None,
    value_deserializer: Deserializer | None = None,
) -> Delivery:
    """The records of `records` (the partition's record set) at acquired offsets. The
    broker sends whole batches: records outside the acquired ranges are someone else's."""
    ranges = sorted(acquired)
    firsts = [r.first_offset for r in ranges]
    view = memoryview(records if records is not None else b"")
    out: list[ShareConsumerRecord] = []
    seen: set[int] = set()
    try:
        batches = split_batches(view)
    except InvalidBatch as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"share fetch of {tp}: {exc}") from None
    for position, header in batches:
        if header.is_control or not _overlaps(ranges, header.base_offset, header.last_offset):
            continue
        try:
            columns = decode_record_columns(
                view[position : position + header.size], header, verify_crc=check_crcs
            )
        except InvalidBatch as exc:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"record batch of {tp} at offset {header.base_offset} is invalid: {exc}",
            ) from None
        built: list[ConsumerRecord] = build_record_tuples(
            ConsumerRecord, tp.topic, tp.partition, columns,
            key_deserializer=key_deserializer, value_deserializer=value_deserializer,
        )
        for record in built:
            count = _delivery_count(ranges, firsts, record.offset)
            if count is not None and record.offset not in seen:
                seen.add(record.offset)
                out.append(ShareConsumerRecord(*record, count))
    gaps = [
        offset
        for r in ranges
        for offset in range(r.first_offset, r.last_offset + 1)
        if offset not in seen
    ]
    return Delivery(out, gaps)


def _overlaps(ranges: Sequence[AcquiredRange], first: int, last: int) -> bool:
    return any(r.first_offset <= last and first <= r.last_offset for r in ranges)


def _delivery_count(
    ranges: Sequence[AcquiredRange], firsts: Sequence[int], offset: int
) -> int | None:
    index = bisect.bisect_right(firsts, offset) - 1
    if index >= 0 and offset <= ranges[index].last_offset:
        return ranges[index].delivery_count
    return None
