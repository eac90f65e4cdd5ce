"""Variable-length integers as Kafka's record format and flexible protocol versions use them.

Protobuf's base-128 encoding: seven bits a byte, least significant group first, the high
bit set on every byte but the last. Records use the signed (zigzag) forms: `varint` for
32-bit and `varlong` for 64-bit values. Flexible protocol versions use the unsigned
32-bit form for lengths and tagged fields.

Decoders take a buffer (bytes, bytearray or memoryview) and a position and return
`(value, new_position)`; encoders either return bytes or append to a bytearray.
Malformed input (too long, overflowing, or cut short) raises `VarintError`.
"""

from __future__ import annotations

from typing import Final

Buffer = bytes | bytearray | memoryview

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT32_MAX: Final = (1 << 32) - 1

# A 32-bit value takes at most 5 bytes, a 64-bit value at most 10: the shift of the
# last byte allowed is 28 and 63 respectively.
_VARINT_LAST_SHIFT: Final = 28
_VARLONG_LAST_SHIFT: Final = 63

# Zigzag-encoded single-byte values, indexed by the unencoded value + 64 (-64 .. 63).
_SMALL_SIGNED: Final = tuple(bytes([((v << 1) ^ (v >> 63)) & 0xFF]) for v in range(-64, 64))


_CUT_SHORT: Final = "variable-length integer cut short by the end of the buffer"


class VarintError(ValueError):
    """A variable-length integer that is cut short, too long, or out of range."""


def _decode_unsigned(buf: Buffer, pos: int, last_shift: int, max_value: int) -> tuple[int, int]:
    try:
        b = buf[pos]
        pos += 1
        if b < 0x80:
            return b, pos
        result = b & 0x7F
        shift = 7
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            if shift >= last_shift:
                raise VarintError(f"variable-length integer longer than {shift // 7 + 1} bytes")
            shift += 7
    except IndexError:
        raise VarintError(_CUT_SHORT) from None
    if result > max_value:
        bits = max_value.bit_length()
        raise VarintError(f"variable-length integer {result} overflows {bits} bits")
    return result, pos


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned 32-bit varint at `pos`; return (value, position after it)."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError(_CUT_SHORT) from None
    if b < 0x80:
        return b, pos + 1
    return _decode_unsigned(buf, pos, _VARINT_LAST_SHIFT, UINT32_MAX)


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag 32-bit varint at `pos`; return (value, position after it)."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError(_CUT_SHORT) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _decode_unsigned(buf, pos, _VARINT_LAST_SHIFT, UINT32_MAX)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode a zigzag 64-bit varlong at `pos`; return (value, position after it)."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError(_CUT_SHORT) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _decode_unsigned(buf, pos, _VARLONG_LAST_SHIFT, (1 << 64) - 1)
    return (raw >> 1) ^ -(raw & 1), pos


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append `value` (0 .. 2**32-1) to `out` as an unsigned varint."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        out.append(value)
        return
    if value > UINT32_MAX:
        raise ValueError(f"unsigned varint cannot hold {value}")
    _write_raw(out, value)


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (a signed 32-bit integer) to `out` as a zigzag varint."""
    if -64 <= value < 64:
        out += _SMALL_SIGNED[value + 64]
        return
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint cannot hold {value}: it is not a 32-bit integer")
    _write_raw(out, (value << 1) ^ (value >> 63))


def write_varlong(out: bytearray, value: int) -> None:
    """Append `value` (a signed 64-bit integer) to `out` as a zigzag varlong."""
    if -64 <= value < 64:
        out += _SMALL_SIGNED[value + 64]
        return
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong cannot hold {value}: it is not a 64-bit integer")
    _write_raw(out, (value << 1) ^ (value >> 63))


def _write_raw(out: bytearray, raw: int) -> None:
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def encode_unsigned_varint(value: int) -> bytes:
    """Return `value` (0 .. 2**32-1) encoded as an unsigned varint."""
    out = bytearray()
    write_unsigned_varint(out, value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Return `value` (a signed 32-bit integer) encoded as a zigzag varint."""
    if -64 <= value < 64:
        return _SMALL_SIGNED[value + 64]
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Return `value` (a signed 64-bit integer) encoded as a zigzag varlong."""
    if -64 <= value < 64:
        return _SMALL_SIGNED[value + 64]
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def size_of_unsigned_varint(value: int) -> int:
    """Bytes that `value` takes as an unsigned varint."""
    return max(1, (value.bit_length() + 6) // 7)


def size_of_varint(value: int) -> int:
    """Bytes that `value` takes as a zigzag varint (or varlong: the encodings agree)."""
    return max(1, (((value << 1) ^ (value >> 63)).bit_length() + 6) // 7)


size_of_varlong = size_of_varint


# Encoded varints of the small non-negative values (lengths, deltas) a producer writes
# for every record: a tuple lookup instead of arithmetic and appends.
CACHED_VARINT_LIMIT: Final = 1 << 13
NON_NEGATIVE_VARINTS: Final = tuple(encode_varint(n) for n in range(CACHED_VARINT_LIMIT))


# The decoders' tables (`records.reader`, `records.stride`, `records.validation_numpy`):
# the value of every one-byte zigzag varint, indexed by its byte, and of every two-byte
# one, indexed by its 14 bits (the first byte's low seven | the second byte << 7).
ZIGZAG_1: Final = tuple((u >> 1) ^ -(u & 1) for u in range(0x80))
ZIGZAG_2: Final = tuple((u >> 1) ^ -(u & 1) for u in range(0x4000))


def varint_bytes(value: int) -> bytes:
    """`encode_varint(value)`, from a table when 0 <= value < 8192."""
    if 0 <= value < CACHED_VARINT_LIMIT:
        return NON_NEGATIVE_VARINTS[value]
    return encode_varint(value)
