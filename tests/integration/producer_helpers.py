"""Reading back what a producer wrote, with logbus's own Connection and Fetch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from logbus.client.connection import Connection
from logbus.client.requests.fetch import fetch
from logbus.records.batch import BatchHeader
from logbus.records.record import Record


async def read_partition_async(
    bootstrap: str, topic: str, partition: int = 0
) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch of a partition up to its high watermark, with its records."""
    host, port = bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        out: list[tuple[BatchHeader, list[Record]]] = []
        offset = 0
        while True:
            fetched = await fetch(conn, topic, partition, offset, max_wait_ms=0)
            out.extend(fetched.batches)
            offset = fetched.next_offset
            if offset >= fetched.high_watermark:
                return out


def read_partition(
    bootstrap: str, topic: str, partition: int = 0
) -> list[tuple[BatchHeader, list[Record]]]:
    return asyncio.run(read_partition_async(bootstrap, topic, partition))


def read_records(bootstrap: str, topic: str, partition: int = 0) -> list[Record]:
    return [r for _, records in read_partition(bootstrap, topic, partition) for r in records]


def run_threads(target: Callable[[int], object], count: int) -> None:
    """Run `target(0)` ... `target(count - 1)` on as many threads at once, until all end."""
    workers = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
