"""Reading records of one partition for the message browser: from an offset or a time,
at most N, straight from the partition's leader (no consumer group, nothing committed)."""

from __future__ import annotations

from dataclasses import dataclass

from logbus.client.admin import Admin
from logbus.client.requests.fetch import fetch
from logbus.client.types import TopicPartition
from logbus.console.errors import ConsoleError
from logbus.records.record import Record

# Bytes asked for per Fetch: a batch larger than this still comes whole (KIP-74).
_FETCH_BYTES = 1024 * 1024
MAX_COUNT = 500


@dataclass(frozen=True)
class Window:
    """What the browser read: the records, the partition's first and next offsets and
    where reading started."""

    records: list[Record]
    start_offset: int
    end_offset: int
    from_offset: int


async def offsets_of(admin: Admin, tp: TopicPartition) -> tuple[int, int]:
    """The partition's log start and log end offsets."""
    found = await admin.list_offsets({tp: "earliest"})
    start = found[tp].offset
    end = (await admin.list_offsets({tp: "latest"}))[tp].offset
    return start, end


async def offset_for_time(admin: Admin, tp: TopicPartition, ms: int) -> int | None:
    """The first offset whose record's timestamp is at least `ms` (None if none is)."""
    found = (await admin.list_offsets({tp: ms}))[tp].offset
    return None if found < 0 else found


async def read(admin: Admin, tp: TopicPartition, offset: int | None, count: int) -> Window:
    """Up to `count` records from `offset` (None: the last `count` records). An offset
    outside the log is a ConsoleError (OFFSET_OUT_OF_RANGE)."""
    start, end = await offsets_of(admin, tp)
    if offset is None:
        offset = max(start, end - count)
    elif not start <= offset <= end:
        raise ConsoleError(
            f"OFFSET_OUT_OF_RANGE: offset {offset} is outside {tp.topic}-{tp.partition}, "
            f"which holds offsets {start} to {end - 1}"
            if end > start
            else f"OFFSET_OUT_OF_RANGE: offset {offset} is outside {tp.topic}-{tp.partition}, "
            f"which is empty (next offset {end})"
        )
    records: list[Record] = []
    position = offset
    while len(records) < count and position < end:
        conn = await admin.cluster.leader(tp.topic, tp.partition)
        got = await fetch(conn, tp.topic, tp.partition, position, max_wait_ms=0,
                          max_bytes=_FETCH_BYTES)
        records.extend(got.records[: count - len(records)])
        if got.next_offset <= position:
            break
        position = got.next_offset
    return Window(records, start, end, offset)
