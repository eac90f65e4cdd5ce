"""Helpers for tests that speak the protocol directly with logbus's own Connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from logbus.client.connection import Connection
from logbus.protocol import ApiKey
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import iter_record_set

T = TypeVar("T")


def run(bootstrap: str, action: Callable[[Connection], Awaitable[T]]) -> T:
    """Open a connection to `bootstrap`, run `action` with it, close it."""
    host, port = bootstrap.rsplit(":", 1)

    async def main() -> T:
        conn = await Connection.connect(host, int(port))
        try:
            return await action(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def batch(*values: bytes, **kwargs: Any) -> bytes:
    return build_batch([NewRecord(None, v) for v in values], **kwargs)


async def produce(
    conn: Connection,
    topic: str,
    partition: int,
    records: bytes,
    *,
    acks: int = -1,
    version: int | None = None,
) -> dict[str, Any]:
    response = await conn.request(
        ApiKey.PRODUCE,
        {
            "acks": acks,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
        version,
    )
    if acks == 0:
        return {}
    result: dict[str, Any] = response["responses"][0]["partition_responses"][0]
    return result


async def fetch(
    conn: Connection,
    topic: str,
    partition: int,
    offset: int,
    *,
    version: int | None = None,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 50 << 20,
    topic_id: Any = None,
) -> dict[str, Any]:
    if version is None and topic_id is None:
        version = 12  # the newest version that names topics rather than ids
    response = await conn.request(
        ApiKey.FETCH,
        {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": partition_max_bytes,
                            "current_leader_epoch": -1,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        version,
        response_timeout=max_wait_ms / 1000 + 10,
    )
    result: dict[str, Any] = response["responses"][0]["partitions"][0]
    return result


def values(records: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set."""
    out = []
    for _header, recs in iter_record_set(bytes(records or b"")):
        out += [(r.offset, r.value) for r in recs]
    return out
