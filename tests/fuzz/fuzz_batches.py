"""Record batches for Produce: valid ones built with `logbus.records.builder`, and the
mutation families that lie inside them under a recomputed, valid CRC32C.

Every mutation returns the batch bytes and a one-line description. A mutated batch is
reassembled by `assemble`: the header's batchLength, attributes, counts and CRC are
written last, so each lie is exactly the one the family names.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from logbus.records.batch import HEADER_SIZE, LOG_OVERHEAD, compute_crc
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType, compress
from logbus.records.legacy import write_message
from logbus.records.varint import decode_varint, decode_varlong, encode_varint

CODECS = (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
          CompressionType.ZSTD)

# offsets of header fields inside a batch (Kafka's RecordBatch v2)
BATCH_LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORD_COUNT_AT = 57

HUGE_COUNTS = (2**31 - 1, 2**30, 1 << 24)


def random_records(rng: random.Random, n: int | None = None) -> list[NewRecord]:
    n = rng.choice((1, 2, 3, 5, 20)) if n is None else n
    out = []
    for i in range(n):
        key = None if rng.random() < 0.2 else f"k{i}".encode() + rng.randbytes(rng.choice((0, 4)))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice((0, 3, 30, 300)))
        headers = (("h", rng.randbytes(2)),) if rng.random() < 0.3 else ()
        out.append(NewRecord(key, value, headers))
    return out


def valid_batch(rng: random.Random, codec: int | None = None, n: int | None = None) -> bytes:
    if codec is None:
        codec = rng.choice((CompressionType.NONE, CompressionType.NONE, *CODECS))
    return build_batch(random_records(rng, n), compression=codec)


def legacy_message_set(rng: random.Random, magic: int) -> bytes:
    out = bytearray()
    for offset, record in enumerate(random_records(rng, rng.choice((1, 2, 3)))):
        write_message(out, offset, magic, 1_700_000_000_000, record.key, record.value)
    return bytes(out)


# --- taking a batch apart and putting it back together -------------------------------------


@dataclass
class RecordSpan:
    """Positions of one record's varints inside an uncompressed records payload."""

    start: int
    body_at: int  # just after the length varint
    offset_delta_at: int
    offset_delta_end: int
    key_length_at: int
    end: int


def record_spans(payload: bytes) -> list[RecordSpan]:
    spans = []
    pos = 0
    while pos < len(payload):
        length, body_at = decode_varint(payload, pos)
        p = body_at + 1  # attributes
        _ts, p = decode_varlong(payload, p)
        delta_at = p
        _delta, p = decode_varint(payload, p)
        spans.append(RecordSpan(pos, body_at, delta_at, p, p, body_at + length))
        pos = body_at + length
    return spans


def split(batch: bytes) -> tuple[bytearray, bytes, int]:
    """(header, uncompressed records payload, codec) of a valid batch built here."""
    header = bytearray(batch[:HEADER_SIZE])
    codec = header[ATTRIBUTES_AT + 1] & 0x07
    return header, batch[HEADER_SIZE:], codec


def assemble(header: bytearray, payload: bytes, codec: int, *, compressed: bool = False,
             record_count: int | None = None, last_offset_delta: int | None = None) -> bytes:
    """A batch with `payload` as its records (compressed with `codec` unless it already
    is), the given counts, a consistent batchLength and a valid CRC."""
    data = payload if compressed or codec == CompressionType.NONE else compress(codec, payload)
    out = bytearray(header) + data
    struct.pack_into(">i", out, BATCH_LENGTH_AT, len(out) - LOG_OVERHEAD)
    attributes = struct.unpack_from(">h", out, ATTRIBUTES_AT)[0]
    struct.pack_into(">h", out, ATTRIBUTES_AT, (attributes & ~0x07) | codec)
    if record_count is not None:
        struct.pack_into(">i", out, RECORD_COUNT_AT, record_count)
    if last_offset_delta is not None:
        struct.pack_into(">i", out, LAST_OFFSET_DELTA_AT, last_offset_delta)
    return recrc(out)


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_AT, compute_crc(batch))
    return bytes(batch)


def uncompressed(rng: random.Random, n: int | None = None) -> tuple[bytearray, bytes, int]:
    header, payload, _ = split(valid_batch(rng, CompressionType.NONE, n))
    return header, payload, len(record_spans(payload))


def any_codec(rng: random.Random) -> int:
    return rng.choice((CompressionType.NONE, *CODECS))


# --- the families --------------------------------------------------------------------------

Mutation = Callable[[random.Random], tuple[bytes, str]]


def corrupt_compressed(rng: random.Random) -> tuple[bytes, str]:
    codec = rng.choice(CODECS)
    header, payload, n = uncompressed(rng)
    data = bytearray(compress(codec, payload))
    how = rng.choice(("flip", "truncate", "random", "junk", "empty", "garbage-inside",
                      "short-inside"))
    if how == "flip":
        for _ in range(rng.choice((1, 2, 8))):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[: rng.randrange(len(data))]
    elif how == "random":
        data = bytearray(rng.randbytes(rng.choice((1, 10, len(data)))))
    elif how == "junk":
        data += rng.randbytes(rng.choice((1, 7, 64)))
    elif how == "empty":
        data = bytearray()
    elif how == "garbage-inside":
        # a valid stream of the codec whose content is not records
        data = bytearray(compress(codec, rng.randbytes(rng.choice((1, 20, 200)))))
    else:
        data = bytearray(compress(codec, payload[: rng.randrange(len(payload))]))
    batch = assemble(header, bytes(data), codec, compressed=True)
    return batch, f"{codec.name} batch of {n} records, compressed payload {how}"


def lying_record_count(rng: random.Random) -> tuple[bytes, str]:
    codec = any_codec(rng)
    header, payload, n = uncompressed(rng)
    count = rng.choice((n + 1, n - 1, 0, -1, *HUGE_COUNTS))
    consistent = rng.random() < 0.5  # lastOffsetDelta agreeing with the lie
    last = count - 1 if consistent else None
    batch = assemble(header, payload, codec, record_count=count, last_offset_delta=last)
    return batch, (f"{codec.name} batch of {n} records claiming {count}"
                   + (f", lastOffsetDelta {last}" if consistent else ""))


def bad_record_length(rng: random.Random) -> tuple[bytes, str]:
    codec = any_codec(rng)
    header, payload, n = uncompressed(rng)
    spans = record_spans(payload)
    target = rng.randrange(n)
    span = spans[target]
    length = span.end - span.body_at
    new = rng.choice((length + 1, length - 1, 0, -1, -(2**31), 2**31 - 1, length + 1000))
    raw = rng.choice((encode_varint(new), b"\xff\xff\xff\xff\xff\xff\x01", b"\x80"))
    mutated = payload[: span.start] + raw + payload[span.body_at:]
    batch = assemble(header, mutated, codec)
    what = f"record {target} length {length} -> {raw.hex()}"
    return batch, f"{codec.name} batch of {n} records, {what}"


def bad_offset_delta(rng: random.Random) -> tuple[bytes, str]:
    codec = any_codec(rng)
    header, payload, n = uncompressed(rng, rng.choice((2, 3, 5)))
    spans = record_spans(payload)
    how = rng.choice(("record", "record", "last"))
    if how == "last":
        last = rng.choice((n, n - 2, -1, 2**31 - 1, 0))
        batch = assemble(header, payload, codec, last_offset_delta=last)
        return batch, f"{codec.name} batch of {n} records with lastOffsetDelta {last}"
    target = rng.randrange(n)
    span = spans[target]
    new = rng.choice((target - 1, target + 1, 0, -1, 2**31 - 1, n + 5))
    raw = encode_varint(new)
    body = payload[span.body_at : span.offset_delta_at] + raw + payload[span.offset_delta_end :
                                                                           span.end]
    record = encode_varint(len(body)) + body
    mutated = payload[: span.start] + record + payload[span.end :]
    batch = assemble(header, mutated, codec)
    return batch, f"{codec.name} batch of {n} records, record {target} offsetDelta -> {new}"


def bad_record_fields(rng: random.Random) -> tuple[bytes, str]:
    """A lie after the offset delta: key/value lengths, header counts, varints that never
    end, bytes left over after the last record."""
    codec = any_codec(rng)
    header, payload, n = uncompressed(rng)
    spans = record_spans(payload)
    target = rng.randrange(n)
    span = spans[target]
    body = bytearray(payload[span.body_at : span.end])
    how = rng.choice(("key-length", "truncated-record", "unterminated", "leftover",
                      "attributes", "headers-count", "timestamp"))
    at = span.key_length_at - span.body_at
    if how == "key-length":
        _key_length, after = decode_varint(body, at)
        new = rng.choice((-2, 2**31 - 1, len(body), 1 << 20))
        body[at:after] = encode_varint(new)
    elif how == "truncated-record":
        body = body[: rng.randrange(len(body))]
    elif how == "unterminated":
        body[at:] = b"\xff" * (len(body) - at)
    elif how == "leftover":
        body += rng.randbytes(rng.choice((1, 3)))
    elif how == "attributes":
        body[0] = rng.choice((1, 0x80, 0xFF))
    elif how == "headers-count":
        # the last varint of a record without headers is its header count (0)
        body[-1:] = encode_varint(rng.choice((-1, 5, 2**31 - 1)))
    else:
        _ts, after = decode_varlong(body, 1)
        body[1:after] = b"\xff" * 9 + b"\x01"  # a varlong longer than ten bytes allows
    record = encode_varint(len(body)) + bytes(body)
    if how == "leftover" and rng.random() < 0.5:
        record = payload[span.start : span.end] + bytes(rng.randbytes(2))
    mutated = payload[: span.start] + record + payload[span.end :]
    batch = assemble(header, mutated, codec)
    return batch, f"{codec.name} batch of {n} records, record {target}: {how}"


def bad_batch_header(rng: random.Random) -> tuple[bytes, str]:
    """Header lies under a valid CRC, and a good batch followed by a lying one."""
    codec = any_codec(rng)
    header, payload, n = uncompressed(rng)
    how = rng.choice(("magic", "codec", "control", "transactional", "producer", "timestamps",
                      "batch-length", "good-then-lying", "partial-tail", "empty-batch"))
    if how == "magic":
        header[MAGIC_AT] = rng.choice((0, 1, 3, 0xFF))
    elif how == "codec":
        batch = bytearray(assemble(header, payload, CompressionType.NONE))
        struct.pack_into(">h", batch, ATTRIBUTES_AT, rng.choice((5, 6, 7)))
        return recrc(batch), f"batch of {n} records with compression codec id {batch[22] & 7}"
    elif how == "control":
        struct.pack_into(">h", header, ATTRIBUTES_AT, 0x20)
    elif how == "transactional":
        struct.pack_into(">h", header, ATTRIBUTES_AT, 0x10)
        struct.pack_into(">q", header, PRODUCER_ID_AT, rng.choice((-1, 5)))
    elif how == "producer":
        struct.pack_into(">q", header, PRODUCER_ID_AT, rng.choice((0, 7, 2**62)))
        struct.pack_into(">h", header, PRODUCER_EPOCH_AT, rng.choice((-1, 0, 2**15 - 1)))
        struct.pack_into(">i", header, BASE_SEQUENCE_AT, rng.choice((-1, 0, 2**31 - 1)))
    elif how == "timestamps":
        struct.pack_into(">q", header, BASE_TIMESTAMP_AT, rng.choice((-5, 2**63 - 1, 0)))
        struct.pack_into(">q", header, MAX_TIMESTAMP_AT, rng.choice((-5, 2**63 - 1, 0)))
    elif how == "batch-length":
        batch = bytearray(assemble(header, payload, codec))
        true_length = len(batch) - LOG_OVERHEAD
        struct.pack_into(">i", batch, BATCH_LENGTH_AT,
                         rng.choice((true_length - 1, true_length + 1, true_length - 10)))
        return recrc(batch), f"{codec.name} batch of {n} records with a lying batchLength"
    elif how == "good-then-lying":
        good = valid_batch(rng, codec)
        lying = assemble(header, payload, codec, record_count=rng.choice(HUGE_COUNTS),
                         last_offset_delta=rng.choice((None, 2**31 - 2)))
        return good + lying, f"a good {codec.name} batch, then one claiming a huge count"
    elif how == "partial-tail":
        good = valid_batch(rng, codec)
        tail = valid_batch(rng, codec)
        return good + tail[: rng.randrange(1, len(tail))], "a good batch and part of another"
    else:
        return assemble(header, b"", codec, record_count=0, last_offset_delta=-1), "no records"
    return assemble(header, payload, codec), f"{codec.name} batch of {n} records, header {how}"


def bad_legacy_message_set(rng: random.Random) -> tuple[bytes, str]:
    """Magic 0/1 message sets (Produce v0-2) with lies under a valid CRC32."""
    magic = rng.choice((0, 1))
    data = bytearray(legacy_message_set(rng, magic))
    how = rng.choice(("key-length", "value-length", "compressed-garbage", "size", "attributes"))
    key_at = 12 + 4 + 2 + (8 if magic == 1 else 0)
    if how == "key-length":
        struct.pack_into(">i", data, key_at, rng.choice((-2, 2**31 - 1, 1000)))
    elif how == "value-length":
        key_len = struct.unpack_from(">i", data, key_at)[0]
        struct.pack_into(">i", data, key_at + 4 + max(key_len, 0),
                         rng.choice((-2, 2**31 - 1, 1000)))
    elif how == "compressed-garbage":
        codec = rng.choice((1, 2, 3))
        out = bytearray()
        write_message(out, 0, magic, 1_700_000_000_000, None, rng.randbytes(40),
                      attributes=codec)
        return bytes(out), f"magic {magic} wrapper (codec {codec}) around garbage"
    elif how == "size":
        struct.pack_into(">i", data, 8, rng.choice((0, 3, 2**31 - 1)))
        return bytes(data), f"magic {magic} message set with a lying message size"
    else:
        data[12 + 4 + 1] = rng.choice((4, 7, 0x08))
    crc = zlib.crc32(memoryview(data)[12 + 4 : 12 + struct.unpack_from(">i", data, 8)[0]])
    struct.pack_into(">I", data, 12, crc)
    return bytes(data), f"magic {magic} message set, {how}"


BATCH_FAMILIES: dict[str, Mutation] = {
    "corrupt_compressed": corrupt_compressed,
    "lying_record_count": lying_record_count,
    "bad_record_length": bad_record_length,
    "bad_offset_delta": bad_offset_delta,
    "bad_record_fields": bad_record_fields,
    "bad_batch_header": bad_batch_header,
    "bad_legacy_message_set": bad_legacy_message_set,
}
