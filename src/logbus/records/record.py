"""One record inside a RecordBatch v2: the `Record` value and its body's encoding.

A record body is: length varint, attributes int8 (unused, 0), timestampDelta varlong,
offsetDelta varint, key (varint length, -1 for null, then bytes), value (likewise),
header count varint, then each header as key (varint length + UTF-8) and value (varint
length, -1 for null, then bytes). Deltas are relative to the batch's baseOffset and
baseTimestamp (Kafka's record format, magic 2).

Header keys are decoded with the `surrogateescape` error handler, so keys that are not
valid UTF-8 survive a decode/encode round trip byte for byte instead of failing a fetch.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

from logbus.records.batch import InvalidBatch
from logbus.records.varint import (
    CACHED_VARINT_LIMIT,
    NON_NEGATIVE_VARINTS,
    Buffer,
    VarintError,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
    varint_bytes,
    write_varint,
    write_varlong,
)

Header = tuple[str, bytes | None]
HeaderInput = Sequence[tuple[str, bytes | None]]

# attributes (1) + timestampDelta, offsetDelta, key length, value length, header count
# (1 each at their smallest).
MIN_RECORD_BODY = 6

_UTF8 = "utf-8"
_KEEP_BYTES = "surrogateescape"


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record: absolute offset and timestamp, key, value and headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def write_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput = (),
) -> None:
    """Append one length-prefixed record body to `out`."""
    start = len(out)
    out.append(0)  # attributes: no record-level attribute is defined
    write_varlong(out, timestamp_delta)
    write_varint(out, offset_delta)
    if key is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(key))
        out += key
    if value is None:
        out.append(1)
    else:
        write_varint(out, len(value))
        out += value
    write_varint(out, len(headers))
    for header_key, header_value in headers:
        encoded_key = header_key.encode(_UTF8, _KEEP_BYTES)
        write_varint(out, len(encoded_key))
        out += encoded_key
        if header_value is None:
            out.append(1)
        else:
            write_varint(out, len(header_value))
            out += header_value
    body_length = len(out) - start
    # The length goes before the body; moving one record's bytes is cheaper than
    # sizing every field twice.
    if body_length < 64:
        out.insert(start, body_length << 1)
    else:
        length_prefix = bytearray()
        write_varint(length_prefix, body_length)
        out[start:start] = length_prefix


def write_plain_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
) -> None:
    """`write_record` for a record without headers, the producer's hot path: each varint
    comes from a table and the length prefix is computed, not moved into place."""
    table = NON_NEGATIVE_VARINTS
    limit = CACHED_VARINT_LIMIT
    ts = (
        table[timestamp_delta]
        if 0 <= timestamp_delta < limit
        else encode_varlong(timestamp_delta)
    )
    od = table[offset_delta] if offset_delta < limit else encode_varint(offset_delta)
    if key is None:
        kl = b"\x01"
        key_size = 0
    else:
        key_size = len(key)
        kl = table[key_size] if key_size < limit else encode_varint(key_size)
    if value is None:
        vl = b"\x01"
        value_size = 0
    else:
        value_size = len(value)
        vl = table[value_size] if value_size < limit else encode_varint(value_size)
    body = 2 + len(ts) + len(od) + len(kl) + key_size + len(vl) + value_size
    out += table[body] if body < limit else encode_varint(body)
    out.append(0)  # attributes
    out += ts
    out += od
    out += kl
    if key_size:
        out += key  # type: ignore[arg-type]
    out += vl
    if value_size:
        out += value  # type: ignore[arg-type]
    out.append(0)  # no headers


# Where a zigzag varint of a non-negative value grows by a byte: below 64 it takes one,
# below 8192 two, and so on (offset deltas of one batch stay below 2**31).
_VARINT_WIDTHS = ((64, 1), (1 << 13, 2), (1 << 20, 3), (1 << 27, 4), (1 << 31, 5))
_NO_HEADERS = b"\x00"
_NULL_KEY = b"\x01"
# value length -> the byte before each keyless record (the previous record's header
# count, 0) and its fields up to its value, indexed by offset delta, for timestamp delta 0:
# what a producer writes for every record of a fresh batch.
_PREFIX_CACHE: dict[int, list[bytes]] = {}
_PREFIX_CACHE_LENGTHS = 16
_PREFIX_CACHE_RECORDS = 1 << 15
_THREE_BYTES = 1 << 20


def _keyless_prefixes(length: int, timestamp_delta: int, start: int, stop: int) -> list[bytes]:
    """For offset deltas start..stop-1: b"\\x00" (the previous record's header count),
    then a keyless record of a `length`-byte value up to its value (length, attributes,
    timestamp delta, offset delta, null key, value length)."""
    if timestamp_delta != 0 or stop > _PREFIX_CACHE_RECORDS:
        return _build_keyless_prefixes(length, timestamp_delta, start, stop)
    cached = _PREFIX_CACHE.get(length)
    if cached is None:
        if len(_PREFIX_CACHE) >= _PREFIX_CACHE_LENGTHS:
            _PREFIX_CACHE.clear()
        cached = _PREFIX_CACHE[length] = []
    if len(cached) < stop:
        size = min(max(stop, 1024, 2 * len(cached)), _PREFIX_CACHE_RECORDS)
        cached += _build_keyless_prefixes(length, 0, len(cached), size)
    return cached[start:stop]


def _build_keyless_prefixes(
    length: int, timestamp_delta: int, start: int, stop: int
) -> list[bytes]:
    ts = (
        NON_NEGATIVE_VARINTS[timestamp_delta]
        if 0 <= timestamp_delta < CACHED_VARINT_LIMIT
        else encode_varlong(timestamp_delta)
    )
    value_length = varint_bytes(length)
    middle = _NULL_KEY + value_length
    # attributes, timestamp delta, key length, value length, value, header count
    fixed = 1 + len(ts) + 1 + len(value_length) + length + 1
    prefixes: list[bytes] = []
    low = start
    for bound, width in _VARINT_WIDTHS:
        if low >= stop:
            break
        if low >= bound:
            continue
        high = min(bound, stop)
        head = _NO_HEADERS + encode_varint(fixed + width) + b"\x00" + ts
        offsets = _offset_varints(low, high)
        prefixes += map(head.__add__, map(bytes.__add__, offsets, repeat(middle)))
        low = high
    return prefixes


def _offset_varints(start: int, stop: int) -> Sequence[bytes]:
    """The varints of start..stop-1 (non-negative)."""
    if stop <= CACHED_VARINT_LIMIT:
        return NON_NEGATIVE_VARINTS[start:stop]
    out = list(NON_NEGATIVE_VARINTS[start:stop]) if start < CACHED_VARINT_LIMIT else []
    # Three bytes cover 8192 <= n < 2**20 (zigzag 2n below 2**21): spelled out, since
    # a batch of small records reaches past the table.
    low, high = max(start, CACHED_VARINT_LIMIT), min(stop, _THREE_BYTES)
    out += [
        bytes(((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80, z >> 14))
        for z in range(2 * low, 2 * high, 2)
    ]
    out += map(encode_varint, range(max(start, _THREE_BYTES), stop))
    return out


def plain_record_parts(
    values: Sequence[bytes],
    keys: Sequence[bytes] | None = None,
    *,
    first_offset_delta: int = 0,
    timestamp_delta: int = 0,
    same_length: bool = False,
    timestamp_deltas: Sequence[int] | None = None,
) -> list[bytes]:
    """Pieces whose concatenation is `write_plain_record` applied to each value in turn
    (offset deltas from `first_offset_delta` on, one `timestamp_delta` for all, or each
    record's own from `timestamp_deltas`): the producer's bulk path. Keyless values of one
    length and one timestamp cost no Python work per record (cached prefixes interleaved
    with the values, joined in C). `keys` is None (every key null) or one key per value;
    values and keys are bytes, never None. `same_length`: the caller knows the values are
    of one length (saves checking)."""
    count = len(values)
    if not count:
        return []
    first_length = len(values[0])
    if timestamp_deltas is not None:
        return _record_columns(values, keys, first_offset_delta, _signed_varints(timestamp_deltas))
    if keys is None and (
        same_length or list(map(len, values)).count(first_length) == count
    ):
        prefixes = _keyless_prefixes(
            first_length, timestamp_delta, first_offset_delta, first_offset_delta + count
        )
        pieces: list[bytes] = [_NO_HEADERS] * (2 * count + 1)
        pieces[0 : 2 * count : 2] = prefixes
        pieces[1 : 2 * count : 2] = values
        pieces[0] = prefixes[0][1:]  # nothing precedes the first record
        return pieces
    ts = (
        NON_NEGATIVE_VARINTS[timestamp_delta]
        if 0 <= timestamp_delta < CACHED_VARINT_LIMIT
        else encode_varlong(timestamp_delta)
    )
    return _record_columns(values, keys, first_offset_delta, ts)


def _record_columns(
    values: Sequence[bytes],
    keys: Sequence[bytes] | None,
    first_offset_delta: int,
    ts: bytes | Sequence[bytes],
) -> list[bytes]:
    """`plain_record_parts` for records of differing lengths, keyed, or with timestamps
    of their own (`ts`: one timestamp delta's varint for all, or one per record): each
    field a column computed by C loops (map, table lookups), the columns interleaved by
    slice assignment."""
    count = len(values)
    lengths = list(map(len, values))
    value_lengths = _varints(lengths)
    offsets = _offset_varints(first_offset_delta, first_offset_delta + count)
    bodies = list(map(operator.add, lengths, map(len, value_lengths)))
    bodies = list(map(operator.add, bodies, map(len, offsets)))
    # attributes and timestamp delta: one constant, or a column
    stamp: bytes | list[bytes]
    if isinstance(ts, bytes):
        stamp = b"\x00" + ts
        fixed = len(ts)
    else:
        stamp = list(map(b"\x00".__add__, ts))
        bodies = list(map(operator.add, bodies, map(len, ts)))
        fixed = 0
    columns: list[Sequence[bytes]]
    constants: dict[int, bytes]
    if keys is None:
        # attributes, null key, header count
        bodies = list(map((3 + fixed).__add__, bodies))
        columns = [_varints(bodies), offsets, value_lengths, values]
        constants = {3: _NULL_KEY, 6: _NO_HEADERS}
    else:
        key_sizes = list(map(len, keys))
        key_lengths = _varints(key_sizes)
        bodies = list(map(operator.add, bodies, key_sizes))
        bodies = list(map(operator.add, bodies, map(len, key_lengths)))
        bodies = list(map((2 + fixed).__add__, bodies))  # attributes, header count
        columns = [_varints(bodies), offsets, key_lengths, keys, value_lengths, values]
        constants = {7: _NO_HEADERS}
    if isinstance(stamp, bytes):
        constants[1] = stamp
    else:
        columns.insert(1, stamp)
    width = len(columns) + len(constants)
    pieces = [_NO_HEADERS] * (width * count)
    variable = (n for n in range(width) if n not in constants)
    for n, column in zip(variable, columns, strict=True):
        pieces[n::width] = column
    for n, constant in constants.items():
        pieces[n::width] = [constant] * count
    return pieces


def _signed_varints(numbers: Sequence[int]) -> list[bytes]:
    """The zigzag varints of numbers that may be negative (timestamp deltas)."""
    if min(numbers) >= 0 and max(numbers) < CACHED_VARINT_LIMIT:
        return list(map(NON_NEGATIVE_VARINTS.__getitem__, numbers))
    return list(map(encode_varlong, numbers))


def _varints(numbers: list[int]) -> Sequence[bytes]:
    """The varints of non-negative numbers, from the table when they are all in it."""
    if max(numbers) < CACHED_VARINT_LIMIT:
        return list(map(NON_NEGATIVE_VARINTS.__getitem__, numbers))
    return list(map(varint_bytes, numbers))


def write_plain_records(
    out: bytearray,
    values: Sequence[bytes],
    keys: Sequence[bytes] | None = None,
    *,
    first_offset_delta: int = 0,
    timestamp_delta: int = 0,
) -> None:
    """Append `plain_record_parts(...)` to `out`."""
    out += b"".join(
        plain_record_parts(
            values, keys, first_offset_delta=first_offset_delta, timestamp_delta=timestamp_delta
        )
    )


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput = (),
) -> bytes:
    """Return one length-prefixed record body."""
    out = bytearray()
    write_record(out, offset_delta, timestamp_delta, key, value, headers)
    return bytes(out)


def size_of_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: HeaderInput = (),
) -> int:
    """Bytes `write_record` would append for these fields, length prefix included."""
    size = 1 + size_of_varlong(timestamp_delta) + size_of_varint(offset_delta)
    size += 1 if key is None else size_of_varint(len(key)) + len(key)
    size += 1 if value is None else size_of_varint(len(value)) + len(value)
    size += size_of_varint(len(headers))
    for header_key, header_value in headers:
        key_length = len(header_key.encode(_UTF8, _KEEP_BYTES))
        size += size_of_varint(key_length) + key_length
        if header_value is None:
            size += 1
        else:
            size += size_of_varint(len(header_value)) + len(header_value)
    return size + size_of_varint(size)


def decode_record(  # noqa: C901, PLR0915 (calls for key and value: +140 ns, 3% a record)
    buf: Buffer,
    pos: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> tuple[Record, int]:
    """Decode the record at `pos`; return it and the position after it.

    `log_append_time`, when given, is every record's timestamp (a LogAppendTime batch's
    maxTimestamp) and the stored deltas are ignored. Raises InvalidBatch on any
    inconsistency, naming the record's position.
    """
    # Most fields fit in one byte, so each varint read starts with that case inline:
    # it halves the cost of decoding a small record.
    start = pos
    try:
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = decode_varint(buf, pos)
        end = pos + length
        if length < MIN_RECORD_BODY:
            raise InvalidBatch(f"record at byte {start} has impossible length {length}")
        if end > len(buf):
            raise InvalidBatch(
                f"record at byte {start} claims {length} bytes but only "
                f"{len(buf) - pos} remain in the batch"
            )
        pos += 1  # attributes
        b = buf[pos]
        if b < 0x80:
            timestamp_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            timestamp_delta, pos = decode_varlong(buf, pos)
        b = buf[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            offset_delta, pos = decode_varint(buf, pos)

        b = buf[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            size, pos = decode_varint(buf, pos)
        key: bytes | None = None
        if size >= 0:
            if pos + size > end:
                raise InvalidBatch(f"record at byte {start}: key runs past the record's end")
            key = bytes(buf[pos : pos + size])
            pos += size
        elif size != -1:
            raise InvalidBatch(f"record at byte {start}: invalid key length {size}")

        b = buf[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            size, pos = decode_varint(buf, pos)
        value: bytes | None = None
        if size >= 0:
            if pos + size > end:
                raise InvalidBatch(f"record at byte {start}: value runs past the record's end")
            value = bytes(buf[pos : pos + size])
            pos += size
        elif size != -1:
            raise InvalidBatch(f"record at byte {start}: invalid value length {size}")

        headers: tuple[Header, ...] = ()
        b = buf[pos]
        if b == 0:
            pos += 1
        else:
            count, pos = decode_varint(buf, pos)
            if count < 0:
                raise InvalidBatch(f"record at byte {start}: invalid header count {count}")
            headers, pos = _decode_headers(buf, pos, end, count, start)
        if pos != end:
            raise InvalidBatch(
                f"record at byte {start}: length says {length} bytes but its fields "
                f"take {pos - (end - length)}"
            )
    except VarintError as exc:
        raise InvalidBatch(f"record at byte {start}: {exc}") from None
    except IndexError:
        raise InvalidBatch(f"record at byte {start} is cut short by the end of the batch") from None
    timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers), pos


def _decode_headers(
    buf: Buffer, pos: int, end: int, count: int, start: int
) -> tuple[tuple[Header, ...], int]:
    headers: list[Header] = []
    for _ in range(count):
        size, pos = decode_varint(buf, pos)
        if size < 0 or pos + size > end:
            raise InvalidBatch(f"record at byte {start}: invalid header key length {size}")
        header_key = str(buf[pos : pos + size], _UTF8, _KEEP_BYTES)
        pos += size
        size, pos = decode_varint(buf, pos)
        header_value: bytes | None = None
        if size >= 0:
            if pos + size > end:
                raise InvalidBatch(f"record at byte {start}: header value runs past its end")
            header_value = bytes(buf[pos : pos + size])
            pos += size
        elif size != -1:
            raise InvalidBatch(f"record at byte {start}: invalid header value length {size}")
        headers.append((header_key, header_value))
        if pos > end:
            raise InvalidBatch(f"record at byte {start}: headers run past the record's end")
    return tuple(headers), pos
