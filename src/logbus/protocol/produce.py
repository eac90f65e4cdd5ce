"""Hand-written decoder for Produce requests v3-11: the hot path of every write.

It yields the same dict shape as the generic codec, with each partition's records as a
zero-copy `memoryview` of the request frame, and skips tagged fields (Produce defines none
below the top level that the broker uses).
"""

from __future__ import annotations

import struct

from logbus.protocol.errors import ProtocolError
from logbus.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from logbus.protocol.schema import read_tagged_fields
from logbus.protocol.types import make_string_reader, read_length

_I32 = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi").unpack_from
FLEXIBLE_FROM = 9


def decode_produce_request(buf: memoryview, pos: int, version: int) -> ProduceRequest:
    try:
        return _decode(buf, pos, version >= FLEXIBLE_FROM)
    except struct.error as exc:
        raise ProtocolError("produce request truncated") from exc


_STRINGS = {compact: make_string_reader(compact, nullable=True) for compact in (False, True)}


def _decode(buf: memoryview, pos: int, flexible: bool) -> ProduceRequest:
    read_string = _STRINGS[flexible]
    transactional_id, pos = read_string(buf, pos)
    acks, timeout_ms = _ACKS_TIMEOUT(buf, pos)
    pos += 6
    n_topics, pos = read_length(buf, pos, flexible, wide=True)
    if n_topics < 0 or n_topics > len(buf) - pos:
        raise ProtocolError(f"impossible topic count {n_topics}")
    topics: list[TopicProduceData] = []
    for _ in range(n_topics):
        name, pos = read_string(buf, pos)
        if name is None:
            raise ProtocolError("null topic name")
        n_parts, pos = read_length(buf, pos, flexible, wide=True)
        if n_parts < 0 or n_parts > len(buf) - pos:
            raise ProtocolError(f"impossible partition count {n_parts}")
        partitions: list[PartitionProduceData] = []
        for _ in range(n_parts):
            index = _I32(buf, pos)[0]
            size, pos = read_length(buf, pos + 4, flexible, wide=True)
            records: memoryview | None = None
            if size >= 0:
                end = pos + size
                if end > len(buf):
                    raise ProtocolError("record set runs past the end of the request")
                records = buf[pos:end]
                pos = end
            if flexible:
                pos = read_tagged_fields(buf, pos, {}, {})
            partitions.append({"index": index, "records": records})
        if flexible:
            pos = read_tagged_fields(buf, pos, {}, {})
        topics.append({"name": name, "partition_data": partitions})
    if flexible:
        pos = read_tagged_fields(buf, pos, {}, {})
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": topics,
    }
