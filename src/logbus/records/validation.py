"""Checking every record of a RecordBatch v2 at C speed: the record half of Kafka's
LogValidator (the broker's entry point is `storage.log_validator.analyze_records`).

`check_records` takes a batch's records section (decompressed) and its header and
accepts it only if it holds exactly `recordCount` records that the reference decoder
(`records.record.decode_record`) reads, with offset deltas 0, 1, ..., n-1 in order. Nothing
is decoded one record at a time in Python on the way to a yes. Two walkers do the work,
both pinned to the reference decoder by the same differential tests:

- the compiled one (`records._validate`, C, built by `pip install -e .`): one pass over
  the bytes, a few ns a record, reading each varint, length, header and offset delta as
  the reference decoder does;
- the numpy one (`records.validation_numpy`), used when the extension is not built (a
  source tree on PYTHONPATH): runs of alike records checked with strided slices, the
  others with numpy varint arrays. numpy is only imported for it.

Only a refusal goes back to the reference decoder, to name what is wrong with the first
bad record. The result carries what the log needs next: the smallest and largest record
timestamps, which records have no key, and the first record's key (a control record's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

from logbus.records.batch import CONTROL_FLAG, TIMESTAMP_TYPE_MASK, BatchHeader, InvalidBatch
from logbus.records.record import MIN_RECORD_BODY, decode_record

_Section = Callable[
    [bytes | bytearray | memoryview, int, bool], tuple[int, int, int, list[int] | None]
]
_compiled_section: _Section | None
try:
    from logbus.records._validate import check_section as _compiled_section
except ImportError:  # a source tree without the built extension: the numpy walker
    _compiled_section = None

COMPILED: Final = _compiled_section is not None


class InvalidRecords(InvalidBatch):
    """A records section that is not what its batch header says; `index` is the first bad
    record's index in its batch, when one is to blame."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class RecordsCheck(NamedTuple):
    """What `check_records` learnt about a batch's records on the way."""

    min_timestamp: int
    max_timestamp: int
    keyless: list[int]  # indexes of the records whose key is null
    first_key: bytes | None  # a control batch's first record's key, else None


class Walked(NamedTuple):
    """What a walker learnt about the records of a section it accepted."""

    min_delta: int  # the smallest and largest timestamp delta
    max_delta: int
    keyless: list[int]


# (records section, record count > 0, want_keyless) -> Walked; raises InvalidRecords.
Walker = Callable[[memoryview, int, bool], Walked]


def check_records(
    data: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    want_keyless: bool = True,
    compiled: bool | None = None,
) -> RecordsCheck:
    """Check the records section `data` of the batch with `header` (decompressed).
    `keyless` is only filled in `want_keyless`. `compiled` picks the walker (None: the
    compiled one when it is built; the tests pin both).

    Raises InvalidRecords, naming the first bad record."""
    count = header.record_count
    if count < 0:
        raise InvalidRecords(f"negative record count {count}")
    view = memoryview(data)
    if view.format != "B":
        view = view.cast("B")
    if count == 0:
        if len(view):
            raise InvalidRecords(f"{len(view)} bytes follow a batch of no records")
        return RecordsCheck(header.max_timestamp, header.max_timestamp, [], None)
    if count * (1 + MIN_RECORD_BODY) > len(view):
        raise InvalidRecords(
            f"{len(view)} bytes of records cannot hold the {count} records the header counts"
        )
    if compiled is None and _compiled_section is not None:  # the common case, inline
        bad, low, high, found = _compiled_section(view, count, want_keyless)
        if bad >= 0:
            raise name_fault(view, low, bad, count)
        keyless = [] if found is None else found
    else:
        low, high, keyless = walker(compiled)(view, count, want_keyless)
    attributes = header.attributes
    if attributes & TIMESTAMP_TYPE_MASK:  # LogAppendTime
        low = high = header.max_timestamp
    else:
        low += header.base_timestamp
        high += header.base_timestamp
    first_key = decode_record(view, 0, 0, 0)[0].key if attributes & CONTROL_FLAG else None
    return RecordsCheck(low, high, keyless, first_key)


def walker(compiled: bool | None = None) -> Walker:
    """The compiled walker (`compiled` None: when it is built), else the numpy one."""
    if compiled is None:
        compiled = COMPILED
    if compiled:
        if _compiled_section is None:
            raise RuntimeError("logbus.records._validate is not built (pip install -e .)")
        return _walk_compiled
    from logbus.records.validation_numpy import walk  # numpy is loaded only here

    return walk


def _walk_compiled(view: memoryview, count: int, want_keyless: bool) -> Walked:
    assert _compiled_section is not None
    bad, low, high, keyless = _compiled_section(view, count, want_keyless)
    if bad >= 0:
        raise name_fault(view, low, bad, count)
    return Walked(low, high, [] if keyless is None else keyless)


def name_fault(view: memoryview, pos: int, index: int, count: int) -> InvalidRecords:
    """The error for the first bad record at or after record `index` (at byte `pos`),
    named by the reference decoder."""
    end = len(view)
    while index < count:
        if pos >= end:
            return InvalidRecords(
                f"the header counts {count} records but the data ends after {index}", index
            )
        try:
            record, after = decode_record(view, pos, 0, 0)
        except InvalidBatch as exc:
            return InvalidRecords(f"record {index}: {exc}", index)
        if record.offset != index:
            return InvalidRecords(
                f"record {index} has offset delta {record.offset}, expected {index}", index
            )
        pos = after
        index += 1
    return InvalidRecords(
        f"{end - pos} bytes follow the {count} records the header counts", None
    )


MAX_COMPRESSION_RATIO: Final = 32
# The largest batch a client builds is bounded by its max.request.size (records are sized
# uncompressed), which the broker's socket.request.max.bytes (100 MiB) bounds in turn; a
# topic with max.message.bytes=2147483647 let a 35 KB zstd batch take 1 GiB of memory.
MAX_DECOMPRESSED_BYTES: Final = 128 << 20


def decompressed_limit(max_message_bytes: int) -> int:
    """The most bytes a compressed batch's records may take once decompressed: a bound a
    decompression bomb runs into (`MAX_COMPRESSION_RATIO` times the larger of
    max.message.bytes and 1 MiB, and never more than 128 MiB)."""
    return min(MAX_COMPRESSION_RATIO * max(max_message_bytes, 1 << 20), MAX_DECOMPRESSED_BYTES)
