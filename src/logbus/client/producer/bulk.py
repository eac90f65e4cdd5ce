"""`send_many`'s bulk path: many records handled as columns rather than one by one.

Records that need no decision of their own (one topic, no explicit partition, timestamp
or headers, `bytes` values and keys that are all null or all `bytes`, with the identity
serializers) are sized, partitioned and encoded in bulk: a record's share of the work is
C code (transposing, summing lengths, joining bytes), and Python runs once per batch.
Keyless records follow the sticky partitioner, keyed ones murmur2 as `send` does; each
partition's run of records is encoded into its batch with one call
(`records.record.plain_record_parts`), and the batches are sealed (header, CRC32C,
compression, producer id and sequence) by the sender as usual.
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Sequence
from functools import partial
from itertools import accumulate, repeat
from operator import countOf
from typing import Any, NamedTuple, cast

from logbus.client.partitioner import partition_for_key
from logbus.client.producer.accumulator import RECORD_OVERHEAD, ProducerBatch
from logbus.client.producer.records import ProducerRecord, RecordMetadata

_FIELDS = len(ProducerRecord._fields)
_COLUMNS = [operator.itemgetter(index) for index in range(_FIELDS)]
# A RecordMetadata from a (topic, partition, offset, timestamp) tuple, made in C.
_metadata = cast(Any, partial(tuple.__new__, RecordMetadata))


class PlainRecords(NamedTuple):
    """The columns of records eligible for the bulk path."""

    topic: str
    values: Sequence[bytes]
    keys: Sequence[bytes] | None  # None: every key is null


class Run:
    """Consecutive records of one send_many call that went into one batch, from index
    `first` of the batch on."""

    __slots__ = ("batch", "count", "first")

    def __init__(self, batch: ProducerBatch, first: int, count: int) -> None:
        self.batch = batch
        self.first = first
        self.count = count


def plain_records(
    records: Sequence[ProducerRecord], raw_keys: bool, raw_values: bool
) -> PlainRecords | None:
    """The records as columns when all of them qualify for the bulk path, else None."""
    count = len(records)
    if not raw_values or not count:
        return None
    # One C pass per field, through itemgetter: nothing is allocated per record (zip(*records)
    # would make an iterator per record, and wake the garbage collector over and over).
    if countOf(map(type, records), ProducerRecord) != count:
        return None  # tuples of other shapes: the general path says what is wrong
    topic_of, value_of, key_of, partition_of, timestamp_of, headers_of = _COLUMNS
    topic = records[0].topic
    if (
        type(topic) is not str
        or countOf(map(topic_of, records), topic) != count
        or countOf(map(partition_of, records), None) != count
        or countOf(map(timestamp_of, records), None) != count
        or countOf(map(headers_of, records), None) != count
    ):
        return None
    values = list(map(value_of, records))
    if countOf(map(type, values), bytes) != count:
        return None
    keys = list(map(key_of, records))
    if countOf(keys, None) == count:
        return PlainRecords(topic, values, None)
    if raw_keys and countOf(map(type, keys), bytes) == count:
        return PlainRecords(topic, values, keys)
    return None


def record_sizes(plain: PlainRecords) -> list[int]:
    """Each record's accounted size (see `accumulator.record_size`)."""
    sizes = map(RECORD_OVERHEAD.__add__, map(len, plain.values))
    if plain.keys is not None:
        sizes = map(operator.add, sizes, map(len, plain.keys))
    return list(sizes)


def cumulative(sizes: list[int]) -> list[int]:
    return list(accumulate(sizes))


def group_by_partition(
    keys: Sequence[bytes], partitions: int, cache: dict[bytes, int], cache_size: int
) -> tuple[list[int], list[int]]:
    """murmur2 partitioning of many keys: the record indexes ordered by partition (stable,
    so each key's records keep their order) and how many records each partition got."""
    found = list(map(cache.get, keys))
    if None in found:
        for index, (key, partition) in enumerate(zip(keys, found, strict=True)):
            if partition is None:
                partition = partition_for_key(key, partitions)
                if len(cache) >= cache_size:
                    cache.clear()
                cache[key] = partition
                found[index] = partition
    chosen = cast(list[int], found)
    order = sorted(range(len(keys)), key=chosen.__getitem__)
    return order, [chosen.count(p) for p in range(partitions)]


def metadata_of(runs: list[Run]) -> list[RecordMetadata]:
    """The RecordMetadata of every record of `runs`, in order, once their batches are
    complete."""
    out: list[RecordMetadata] = []
    # RecordMetadata tuples cannot form cycles, but the collector tracks them (it stops
    # tracking plain tuples only): made by the hundred thousand, they would set off
    # several full collections of the whole heap, costing more than the tuples do.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        for run in runs:
            _extend_metadata(out, run)
    finally:
        if paused:
            gc.enable()
    return out


def _extend_metadata(out: list[RecordMetadata], run: Run) -> None:
    batch, first, count = run.batch, run.first, run.count
    topic, partition = batch.tp
    base = batch.result_offset
    offsets = range(base + first, base + first + count) if base >= 0 else repeat(-1, count)
    out += map(
        _metadata,
        zip(
            repeat(topic, count),
            repeat(partition, count),
            offsets,
            batch.timestamps[first : first + count],
            strict=True,
        ),
    )


def unsort(items: list[RecordMetadata], order: list[int]) -> list[RecordMetadata]:
    """Undo `order` (items[i] belongs to the record at index order[i])."""
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return list(map(items.__getitem__, inverse))
