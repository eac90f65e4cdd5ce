"""`fetch_many_raw` (undecoded batches, the Spark reader's fetch) against the decoded
`fetch`, and the one Fetch builder naming topics by id (v13+) or by name, on a real
broker."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.requests.fetch import (
    FetchOptions,
    FetchPosition,
    fetch,
    fetch_many_raw,
    fetch_partitions,
)
from logbus.client.requests.metadata import metadata
from logbus.client.requests.produce import produce
from logbus.client.requests.topics import create_topics
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import decode_record_tuples


async def _compare(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        await create_topics(conn, "raw", 1, 1)
        for first in (0, 5, 10):  # three batches of five records, one with headers
            records = [
                NewRecord(
                    None if i == 1 else b"k%d" % (first + i),
                    b"v%d" % (first + i),
                    (("h", b"x"),) if first == 5 else (),
                    timestamp=1_000 + first + i,
                )
                for i in range(5)
            ]
            await produce(conn, "raw", 0, build_batch(records))
        for offset in (0, 7, 14, 15):
            decoded = await fetch(conn, "raw", 0, offset)
            raw = (await fetch_many_raw(conn, {("raw", 0): offset}))[("raw", 0)]
            assert not isinstance(decoded, Exception) and not isinstance(raw, Exception)
            assert (raw.next_offset, raw.high_watermark) == (
                decoded.next_offset, decoded.high_watermark
            )
            # Batches wholly before the offset are left out; the first one kept may start
            # before it (the broker sends whole batches).
            assert [h.base_offset for _, h in raw.batches] == [
                h.base_offset for h, _ in decoded.batches
            ]
            got = [
                (r[2], r[3], r[4], r[5], r[6], r[7])
                for view, header in raw.batches
                for r in decode_record_tuples(view, header, tuple, "raw", 0, min_offset=offset)
            ]
            want = [
                (r.offset, r.timestamp, 0, r.key, r.value, r.headers) for r in decoded.records
            ]
            assert got == want
            assert [o for o, *_ in got] == list(range(offset, 15))


def test_raw_fetch_matches_decoded_fetch(broker: Any) -> None:
    asyncio.run(_compare(broker.bootstrap))


async def _by_id(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        await create_topics(conn, "by-id", 1, 1)
        await produce(conn, "by-id", 0, build_batch([NewRecord(b"k", b"v", timestamp=5)]))
        topic_id = (await metadata(conn, ["by-id"])).topic("by-id").topic_id
        positions = {("by-id", 0): FetchPosition(0)}
        options = FetchOptions(max_wait_ms=0)
        # With the topic's id the request goes out at v13+ and the answer, naming the topic
        # by id, is read back under its name.
        found = await fetch_partitions(conn, positions, options, {"by-id": topic_id})
        data = found.partitions[("by-id", 0)]
        assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 1)
        assert data.records
        # An id the broker does not know is its error: the topic was named by id only.
        wrong = UUID(int=topic_id.int ^ 1)
        found = await fetch_partitions(conn, positions, options, {"by-id": wrong})
        assert found.partitions[("by-id", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        # Without an id the request stays at v12 and names the topic.
        found = await fetch_partitions(conn, positions, options)
        assert found.partitions[("by-id", 0)].high_watermark == 1


def test_fetch_names_topics_by_id_when_it_knows_them(broker: Any) -> None:
    asyncio.run(_by_id(broker.bootstrap))
