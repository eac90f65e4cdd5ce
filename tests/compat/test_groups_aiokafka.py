"""aiokafka consumer groups against a real broker: members sharing a topic, joining and
leaving mid-stream, a member killed without leaving, commits across a restart, and
auto_offset_reset. Each test runs its coroutines with `asyncio.run`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import NoOffsetForPartitionError
from compat_clients import new_topic
from group_members import (
    GROUP_BROKER,
    SESSION_TIMEOUT_MS,
    committed_offsets,
    kill_member,
    new_group,
    produce_values,
    start_killable_member,
)

from kafka_wire import create_topic

pytestmark = pytest.mark.timeout(120)


def consumer(bootstrap: str, topic: str, group: str, **config: Any) -> AIOKafkaConsumer:
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": 500,
        **config,
    }
    return AIOKafkaConsumer(topic, **settings)


async def until(predicate: Any) -> None:
    """Poll `predicate` (a member's state, changed by its own task) for up to 40 s."""
    async with asyncio.timeout(40):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.05)


class AioMember:
    """A started consumer whose records a background task collects."""

    def __init__(self, c: AIOKafkaConsumer) -> None:
        self.consumer = c
        self.values: list[bytes] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> AioMember:
        await self.consumer.start()
        self.task = asyncio.get_running_loop().create_task(self._collect())
        return self

    async def _collect(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=200)
            for records in batches.values():
                self.values.extend(r.value for r in records)

    def owned(self) -> int:
        return len(self.consumer.assignment())

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self.consumer.stop()


def test_members_share_a_topic_exactly_once(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 6)
    values = [f"v{i}".encode() for i in range(60)]

    async def main() -> None:
        members = [
            await AioMember(consumer(broker.bootstrap, topic, group)).start() for _ in range(3)
        ]
        try:
            await until(lambda: [m.owned() for m in members] == [2, 2, 2])
            await asyncio.to_thread(produce_values, broker.bootstrap, topic, values, 6)
            await until(lambda: sum(len(m.values) for m in members) >= len(values))
            await asyncio.sleep(0.3)
            assert sorted(v for m in members for v in m.values) == sorted(values)
        finally:
            for m in members:
                await m.stop()

    asyncio.run(main())


def test_member_joins_and_leaves_mid_stream(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    values = [f"v{i}".encode() for i in range(90)]

    async def main() -> None:
        def seen(*members: AioMember) -> set[bytes]:
            return {v for m in members for v in m.values}

        first = await AioMember(
            consumer(broker.bootstrap, topic, group, auto_commit_interval_ms=200)
        ).start()
        await until(lambda: first.owned() == 4)
        await asyncio.to_thread(produce_values, broker.bootstrap, topic, values[:30], 4)
        await until(lambda: seen(first) >= set(values[:30]))
        second = await AioMember(
            consumer(broker.bootstrap, topic, group, auto_commit_interval_ms=200)
        ).start()
        await until(lambda: first.owned() == 2 and second.owned() == 2)
        await asyncio.to_thread(produce_values, broker.bootstrap, topic, values[30:60], 4)
        await until(lambda: seen(first, second) >= set(values[:60]))
        await second.stop()
        await until(lambda: first.owned() == 4)
        await asyncio.to_thread(produce_values, broker.bootstrap, topic, values[60:], 4)
        await until(lambda: seen(first, second) >= set(values))
        await first.stop()

    asyncio.run(main())
    assert sum(committed_offsets(broker.bootstrap, group, topic, 4)) == len(values)


def test_killed_member_partitions_move_after_session_timeout(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 2)
    victim = start_killable_member(broker.bootstrap, topic, group)
    values = [f"v{i}".encode() for i in range(20)]

    async def main() -> None:
        survivor = await AioMember(consumer(broker.bootstrap, topic, group)).start()
        try:
            await until(lambda: survivor.owned() == 1)
            kill_member(victim)
            await asyncio.to_thread(produce_values, broker.bootstrap, topic, values, 2)
            await until(lambda: survivor.owned() == 2)
            await until(lambda: set(survivor.values) >= set(values))
        finally:
            await survivor.stop()

    try:
        asyncio.run(main())
    finally:
        kill_member(victim)


def test_commits_survive_a_broker_restart(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 1)
    produce_values(broker.bootstrap, topic, [b"a", b"b", b"c"], 1)
    tp = TopicPartition(topic, 0)

    async def first() -> None:
        c = consumer(broker.bootstrap, topic, group, enable_auto_commit=False)
        await c.start()
        try:
            await until(lambda: bool(c.assignment()))
            await c.commit({tp: 2})
        finally:
            await c.stop()

    async def second() -> list[bytes]:
        c = consumer(broker.bootstrap, topic, group, enable_auto_commit=False)
        await c.start()
        try:
            assert await c.committed(tp) == 2
            record = await asyncio.wait_for(c.getone(), 30)
            return [record.value]
        finally:
            await c.stop()

    asyncio.run(first())
    broker.restart()
    assert asyncio.run(second()) == [b"c"]


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_auto_offset_reset(broker_factory: Any, reset: str) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 1)
    produce_values(broker.bootstrap, topic, [b"old"], 1)
    tp = TopicPartition(topic, 0)

    async def main() -> list[bytes]:
        c = consumer(
            broker.bootstrap, topic, group, auto_offset_reset=reset, enable_auto_commit=False
        )
        await c.start()
        try:
            if reset == "none":
                with pytest.raises(NoOffsetForPartitionError):
                    await asyncio.wait_for(c.getone(), 30)
                return []
            await until(lambda: bool(c.assignment()))
            await c.position(tp)  # resolves the reset before "new" is written
            await asyncio.to_thread(produce_values, broker.bootstrap, topic, [b"new"], 1)
            got: list[bytes] = []
            while b"new" not in got:
                got.append((await asyncio.wait_for(c.getone(), 30)).value)
            return got
        finally:
            await c.stop()

    got = asyncio.run(main())
    if reset == "earliest":
        assert got == [b"old", b"new"]
    elif reset == "latest":
        assert got == [b"new"]
