"""Test data for the consumer tests: topics made and records written with the raw wire
client (not logbus's Producer), and small waiting helpers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kafka_wire import WireClient, create_topic
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType

T = TypeVar("T")


def new_name(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_topic(bootstrap: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    return create_topic(bootstrap, new_name("topic"), partitions, configs)


def write(
    bootstrap: str,
    topic: str,
    partition: int,
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[tuple[str, bytes | None]] = (),
    compression: CompressionType = CompressionType.NONE,
) -> int:
    """Append one batch; return its base offset."""
    records = [
        NewRecord(
            keys[i] if keys is not None else None,
            value,
            tuple(headers),
            timestamps[i] if timestamps is not None else None,
        )
        for i, value in enumerate(values)
    ]
    with WireClient(bootstrap) as client:
        result = client.produce(topic, partition, build_batch(records, compression=compression))
    assert result["error_code"] == 0, result
    return int(result["base_offset"])


def values_of(records: Sequence[Any]) -> list[bytes]:
    return [r.value for r in records]


def poll_until(poll: Callable[[], list[T]], count: int, timeout: float = 30.0) -> list[T]:
    """Call `poll` until it has returned `count` items in all (more fail the test)."""
    out: list[T] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"got {len(out)} of {count} records within {timeout}s")
        out += poll()
    assert len(out) == count, f"expected {count} records, got {len(out)}"
    return out


class Events:
    """A rebalance listener that records what it is told, for the asyncio consumer."""

    def __init__(self) -> None:
        self.log: list[tuple[str, list[Any]]] = []

    def on_partitions_revoked(self, revoked: Sequence[Any]) -> None:
        self.log.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned: Sequence[Any]) -> None:
        self.log.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost: Sequence[Any]) -> None:
        self.log.append(("lost", sorted(lost)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.log]


class GroupMember:
    """An asyncio consumer polling in a task of its own, keeping what it reads."""

    def __init__(self, consumer: Any, topics: Sequence[str]) -> None:
        self.consumer = consumer
        self.events = Events()
        self.records: list[Any] = []
        self.paused = False
        self._topics = list(topics)
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> GroupMember:
        await self.consumer.start()
        self.consumer.subscribe(self._topics, listener=self.events)
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        while not self._stop.is_set():
            if self.paused:
                await asyncio.sleep(0.05)
                continue
            self.records += await self.consumer.poll(timeout_ms=100)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self.consumer.close()

    def assignment(self) -> set[Any]:
        return set(self.consumer.assignment())


async def wait_until(predicate: Callable[[], Any], within: float = 45.0) -> Any:
    """Await until `predicate()` is truthy (checking every 50 ms); fail after `within` s."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.05)
