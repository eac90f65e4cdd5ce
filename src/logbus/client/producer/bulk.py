"""`send_many`'s bulk path: many records handled as columns rather than one by one.

Records that need no decision of their own (one topic, no explicit partition, timestamp
or headers, `bytes` values and keys that are all null or all `bytes`, with the identity
serializers), and the columns of send_many's columnar form (`topic=`, `values=`,
`keys=`) once serialized, are sized, partitioned and encoded in bulk: a record's share
of the work is C code (transposing, summing lengths, joining bytes), and Python runs once
per batch.
Keyless records follow the sticky partitioner, keyed ones murmur2 as `send` does; each
partition's run of records is encoded into its batch with one call
(`records.record.plain_record_parts`), and the batches are sealed (header, CRC32C,
compression, producer id and sequence) by the sender as usual.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import operator
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, repeat
from operator import countOf
from typing import Any, NamedTuple, cast

from logbus.client.partitioner import partition_for_key
from logbus.client.producer.accumulator import (
    RECORD_OVERHEAD,
    TIMESTAMP_LIMIT,
    ProducerBatch,
    RecordAccumulator,
    valid_timestamp,
)
from logbus.client.producer.admission import RecordAdmission
from logbus.client.producer.records import ProducerRecord, RecordMetadata, metadata_from_tuple
from logbus.client.producer.router import KEY_CACHE_SIZE, PartitionRouter
from logbus.client.producer.sender import Sender
from logbus.client.producer.serializers import Serializer
from logbus.client.types import TopicPartition
from logbus.records.builder import now_ms
from logbus.records.varint import size_of_varint, size_of_varlong

_FIELDS = len(ProducerRecord._fields)
_COLUMNS = [operator.itemgetter(index) for index in range(_FIELDS)]


class PlainRecords(NamedTuple):
    """The columns of records eligible for the bulk path: `partition` (None: the
    partitioner's choice) and `timestamps` (None: now) as in `Columns`."""

    topic: str
    values: Sequence[bytes]
    keys: Sequence[bytes] | None  # None: every key is null
    partition: int | None = None
    timestamps: Sequence[int] | None = None


class Columns(NamedTuple):
    """send_many's columnar form: the values of records for one topic, and their keys
    (None: every key is null); the one partition they all go to (None: the
    partitioner's choice) and each one's timestamp (None: every record's is now)."""

    topic: str
    values: Sequence[Any]
    keys: Sequence[Any] | None
    partition: int | None = None
    timestamps: Sequence[int] | None = None


_JOINING = -2  # append_plain: the partition is new to the transaction, nothing appended


def _not_transactional(tp: TopicPartition) -> bool:
    return False


class BulkAppender(NamedTuple):
    """The producer's collaborators the bulk path works with, its check that the
    producer is still open (ClientClosedError) after a wait, and, for a transactional
    producer, the hook told of each partition records are buffered for
    (`TransactionManager.partition_buffered`: True when the partition has just started
    joining the transaction)."""

    router: PartitionRouter
    admission: RecordAdmission
    accumulator: RecordAccumulator
    sender: Sender
    check_open: Callable[[], object]
    partition_buffered: Callable[[TopicPartition], bool] = _not_transactional


class Segment(NamedTuple):
    """Records `low` to `high` (excluded) of a bulk call, all for `partition` (None: the
    sticky partitioner's choice, batch by batch)."""

    partition: int | None
    low: int
    high: int


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


def batch_input(
    records: Iterable[ProducerRecord] | None,
    topic: str | None,
    values: Iterable[Any] | None,
    keys: Iterable[Any] | None,
    partition: int | None = None,
    timestamps: Iterable[int] | None = None,
) -> Sequence[ProducerRecord] | Columns:
    """What `send_many` was given, checked: its records as a sequence, or its columns
    (values, keys and timestamps as lists of equal length). TypeError or ValueError,
    saying what is wrong, when the two forms are mixed or a column is missing or
    malformed (a timestamp that is not an int from 0 to 2**63-1 among them)."""
    if records is not None:
        if (topic, values, keys, partition, timestamps) != (None,) * 5:
            raise TypeError(
                "give either records or topic=, values= (and keys=, partition=, "
                "timestamps=), not both"
            )
        return records if isinstance(records, list | tuple) else list(records)
    if topic is None or values is None:
        missing = " and ".join(
            name for name, given in (("topic=", topic), ("values=", values)) if given is None
        )
        raise TypeError(f"give records, or topic= and values= (and keys=): {missing} missing")
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    values = _column("values", values)
    if partition is not None and (type(partition) is not int or partition < 0):
        raise TypeError(f"partition must be a non-negative int, not {partition!r}")
    stamps = None if timestamps is None else _timestamps(timestamps, len(values))
    if keys is None:
        return Columns(topic, values, None, partition, stamps)
    keys = _column("keys", keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values: give one key per value")
    return Columns(topic, values, keys, partition, stamps)


def _timestamps(column: Iterable[int], count: int) -> Sequence[int]:
    """The timestamps column, checked in C loops as `valid_timestamp` checks one."""
    stamps = _column("timestamps", column)
    if len(stamps) != count:
        raise ValueError(
            f"{len(stamps)} timestamps for {count} values: give one timestamp per value"
        )
    if count and (
        countOf(map(type, stamps), int) != count
        or min(stamps) < 0
        or max(stamps) >= TIMESTAMP_LIMIT
    ):
        bad = next(
            t for t in stamps if type(t) is not int or not 0 <= t < TIMESTAMP_LIMIT
        )
        valid_timestamp(bad)  # raises ValueError, saying why
    return stamps


def _column(name: str, column: Iterable[Any]) -> Sequence[Any]:
    if isinstance(column, str | bytes | bytearray | memoryview):
        # Iterating would give characters or ints: one value where a list was meant.
        raise TypeError(f"{name} must be a list of {name}, not one {type(column).__name__}")
    if isinstance(column, list | tuple):
        return column
    try:
        return list(column)
    except TypeError:
        raise TypeError(
            f"{name} must be a list of {name}, not {type(column).__name__}"
        ) from None


def plain_columns(
    columns: Columns,
    key_serializer: Serializer,
    value_serializer: Serializer,
    raw_keys: bool,
    raw_values: bool,
) -> PlainRecords | Columns:
    """The columns serialized: as PlainRecords when they qualify for the bulk path (every
    value bytes, keys all null or all bytes), else as serialized Columns (some null values,
    or a mix of null and non-null keys) for the general path. Values that are already
    `bytes` skip the identity serializer, as in `send`; SerializationError as `send`."""
    topic, values, keys, partition, timestamps = columns
    count = len(values)
    if not (raw_values and countOf(map(type, values), bytes) == count):
        values = list(map(value_serializer, values))
    if keys is not None:
        if countOf(keys, None) == count:
            keys = None
        elif not (raw_keys and countOf(map(type, keys), bytes) == count):
            keys = list(map(key_serializer, keys))
    if count and countOf(map(type, values), bytes) == count and (
        keys is None or countOf(map(type, keys), bytes) == count
    ):
        return PlainRecords(topic, values, keys, partition, timestamps)
    return Columns(topic, values, keys, partition, timestamps)


def record_sizes(plain: PlainRecords) -> tuple[Sequence[int], Sequence[int], bool]:
    """Each record's accounted size (see `accumulator.record_size`), the running totals
    of those sizes, and whether the records are keyless values of one length (then both
    are computed, not listed one by one)."""
    count = len(plain.values)
    lengths = list(map(len, plain.values))
    if plain.keys is None and lengths.count(lengths[0]) == count:
        size = RECORD_OVERHEAD + lengths[0]
        return [size] * count, range(size, size * count + 1, size), True
    sizes = list(map(RECORD_OVERHEAD.__add__, lengths))
    if plain.keys is not None:
        sizes = list(map(operator.add, sizes, map(len, plain.keys)))
    return sizes, list(accumulate(sizes)), False


def encoded_overhead(
    largest: int, keyed: bool, last_offset_delta: int, timestamp_delta: int
) -> int:
    """At most the bytes a record takes once encoded beyond its key and value (length
    prefix, attributes, deltas, key and value lengths, header count), for records whose
    key and value together take at most `largest` bytes. Tighter than RECORD_OVERHEAD,
    so that a batch is filled to batch.size in one go."""
    width = size_of_varint(largest)
    body = (
        2  # attributes, header count
        + size_of_varlong(timestamp_delta)
        + size_of_varint(last_offset_delta)
        + (width if keyed else 1)
        + width
        + largest
    )
    return size_of_varint(body) + body - largest


def _fitting(
    ends: Sequence[int],
    index: int,
    high: int,
    before: int,
    room: int,
    largest: int,
    keyed: bool,
    batch: ProducerBatch,
    now: int,
) -> tuple[int, int]:
    """How many records from `index` on fit in `room` bytes of `batch` once encoded, and
    the slack used (accounted size less encoded size, at least). The offset deltas'
    width is first bounded by the records left, then by the records found to fit: the
    tighter fit is kept unless it would widen the last offset delta's varint."""

    def fit(last_offset_delta: int) -> tuple[int, int]:
        overhead = encoded_overhead(
            largest - RECORD_OVERHEAD, keyed, last_offset_delta, now - batch.base_timestamp
        )
        slack = max(RECORD_OVERHEAD - overhead, 0)
        count = bisect.bisect_right(
            range(index + 1, high + 1),
            room,
            key=lambda end: ends[end - 1] - before - slack * (end - index),
        )
        return count, slack

    loose, loose_slack = fit(batch.count + high - index)
    if not loose:
        return loose, loose_slack
    tight, tight_slack = fit(batch.count + loose - 1)
    if size_of_varint(batch.count + tight - 1) > size_of_varint(batch.count + loose - 1):
        return loose, loose_slack
    return tight, tight_slack


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
        metadata_from_tuple,
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


class _Stamps:
    """The timestamps of a bulk call's records, given by the caller, and their range."""

    __slots__ = ("earliest", "latest", "timestamps")

    def __init__(self, timestamps: Sequence[int]) -> None:
        self.timestamps = timestamps
        self.earliest = min(timestamps)
        self.latest = max(timestamps)

    def farthest_from(self, base: int) -> int:
        """The timestamp whose delta from `base` takes the most bytes as a varlong: what
        bounds a record's encoded size in a batch of that base timestamp."""
        early, late = self.earliest - base, self.latest - base
        return self.earliest if size_of_varlong(early) > size_of_varlong(late) else self.latest


def _keyed_segments(
    keys: Sequence[bytes], count: int, cache: dict[bytes, int]
) -> tuple[list[int], list[Segment]]:
    """Keyed records grouped by partition: the order to place them in, and the run of
    that order each partition gets."""
    order, per_partition = group_by_partition(keys, count, cache, KEY_CACHE_SIZE)
    segments = []
    low = 0
    for partition, placed in enumerate(per_partition):
        if placed:
            segments.append(Segment(partition, low, low + placed))
            low += placed
    return order, segments


async def _wait_for_memory(
    appender: BulkAppender, batches: dict[int, ProducerBatch], need: int
) -> int:
    """Reserve `need` bytes of buffer.memory, waiting (up to max.block.ms) while the
    batches filled so far are sent at once to free it; returns `need`."""
    admission, sender = appender.admission, appender.sender
    sender.expedite.update(b.tp for b in batches.values())
    sender.wakeup()
    await admission.pool.reserve(need, admission.max_block)
    appender.check_open()
    return need


async def _join_transaction(
    appender: BulkAppender, tps: list[TopicPartition], segments: list[Segment]
) -> bool:
    """Keyed records' partitions, all known before any is encoded, join the transaction
    in one AddPartitionsToTxn that leaves now; whether it waited for that."""
    started = [appender.partition_buffered(tps[p]) for p, _low, _high in segments if p is not None]
    if any(started):
        await asyncio.sleep(0)
        return True
    return False


async def _batch_filled(appender: BulkAppender, tp: TopicPartition, *, sticky: bool) -> None:
    """`tp`'s batch is full: ship it while the next one is encoded, and move keyless
    records (`sticky`) on to the next partition (KIP-480)."""
    appender.sender.expedite.add(tp)
    appender.sender.wakeup()
    if sticky:
        with appender.accumulator.lock:
            appender.router.batch_filled(tp.topic)
    await asyncio.sleep(0)
    appender.check_open()


class _Placement(NamedTuple):
    """A bulk call's records in the order they are placed in, and the partition of each
    run of them."""

    values: Sequence[bytes]
    keys: Sequence[bytes] | None
    timestamps: Sequence[int] | None
    sizes: Sequence[int]
    ends: Sequence[int]
    order: list[int] | None  # None: as given
    segments: list[Segment]


def _placement(
    plain: PlainRecords,
    sizes: Sequence[int],
    ends: Sequence[int],
    router: PartitionRouter,
    count: int,
) -> _Placement:
    """Where the records go: all to the partition given, keyed ones grouped by the
    partition of their key, keyless ones wherever the sticky partitioner says."""
    topic, values, keys, partition, timestamps = plain
    if partition is not None:
        router.check_partition(topic, partition, count)
    if partition is not None or keys is None or router.ignore_keys:
        return _Placement(
            values, keys, timestamps, sizes, ends, None, [Segment(partition, 0, len(values))]
        )
    order, segments = _keyed_segments(keys, count, router.key_cache(count))
    sizes = list(map(sizes.__getitem__, order))
    return _Placement(
        list(map(values.__getitem__, order)),
        list(map(keys.__getitem__, order)),
        None if timestamps is None else list(map(timestamps.__getitem__, order)),
        sizes,
        list(accumulate(sizes)),
        order,
        segments,
    )


async def append_plain(
    appender: BulkAppender,
    plain: PlainRecords,
    count: int,
    runs: list[Run],
    batches: dict[int, ProducerBatch],
) -> list[int] | None:
    """Put `plain`'s records (of a topic of `count` partitions) into their batches: each
    partition's records encoded a batch at a time, the buffer space of each batch
    reserved at once, each full batch handed to the sender before the next is encoded.
    Appends a Run per batch to `runs` and the batches to `batches`; returns the order the
    records were placed in (None: as given)."""
    router, admission, accumulator, _sender, check_open, partition_buffered = appender
    pool = admission.pool
    topic = plain.topic
    sizes, ends, same_length = record_sizes(plain)
    largest = max(sizes)
    admission.check_size(largest)
    tps = router.partitions(topic, count)
    values, keys, timestamps, sizes, ends, order, segments = _placement(
        plain, sizes, ends, router, count
    )
    if await _join_transaction(appender, tps, segments):
        check_open()
    batch_size = accumulator.batch_size
    reserved = 0  # buffer space reserved and not yet used
    now = now_ms()
    stamps = None if timestamps is None else _Stamps(timestamps)
    try:
        for chosen, low, high in segments:
            index = low
            while index < high:
                size = sizes[index]
                before = ends[index - 1] if index else 0
                with accumulator.lock:
                    partition = (
                        router.sticky_partition(topic, count, tps, size)
                        if chosen is None
                        else chosen
                    )
                    tp = tps[partition]
                    if stamps is not None:
                        now = stamps.timestamps[index]  # a new batch's base timestamp
                    batch = accumulator.batch_with_room(tp, size, now)
                    # As many records as fit in the batch once encoded (each takes its
                    # accounted size less `slack`) and in buffer.memory (accounted).
                    room = batch_size - len(batch.buf)
                    if stamps is not None:
                        now = stamps.farthest_from(batch.base_timestamp)
                    fitting, slack = _fitting(
                        ends, index, high, before, room, largest, keys is not None, batch, now
                    )
                    end = bisect.bisect_right(ends, before + pool.limit, index, index + fitting)
                    end = max(end, index + 1)
                    total = ends[end - 1] - before
                    if partition_buffered(tp):
                        first = _JOINING
                    elif total <= reserved or pool.try_reserve(total - reserved):
                        reserved = max(reserved - total, 0)
                        taken = None if stamps is None else stamps.timestamps[index:end]
                        first = batch.append_values(
                            values[index:end],
                            None if keys is None else keys[index:end],
                            now if taken is None else max(taken),
                            total,
                            same_length=same_length,
                            timestamps=taken,
                        )
                    else:
                        first = -1
                if first == _JOINING:
                    # New to the transaction: its AddPartitionsToTxn leaves now, before
                    # the partition's records are encoded, so that its round trip
                    # overlaps that work instead of holding the batch after it.
                    await asyncio.sleep(0)
                    check_open()
                    continue
                if first < 0:
                    reserved += await _wait_for_memory(appender, batches, total - reserved)
                    now = now_ms()
                    continue  # the batches may have moved on while we waited
                runs.append(Run(batch, first, end - index))
                batches[id(batch)] = batch
                index = end
                if index < high and len(batch.buf) + sizes[index] - slack > batch_size:
                    await _batch_filled(appender, tp, sticky=chosen is None)
    finally:
        if reserved:
            pool.release(reserved)
    return order
