"""logbus.aio.Consumer in consumer groups on a real broker: subscribe, each assignor,
the rebalance listener as members join and leave, static membership, and leaving the
group when poll() is not called within max.poll.interval.ms."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import pytest
from consumer_data import GroupMember, make_topic, new_name, wait_until, write

from logbus import CommitFailedError, TopicPartition, aio


def config(broker: Any, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "heartbeat.interval.ms": 200,
    }


def member(broker: Any, group: str, topics: list[str], **extra: Any) -> GroupMember:
    return GroupMember(aio.Consumer(config(broker, group), **extra), topics)


def everything(topic: str, partitions: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(partitions)}


def test_members_share_partitions_and_read_each_record_once(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=4)
    for p in range(4):
        write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(5)])
    group = new_name("g")

    async def main() -> None:
        a = await member(broker, group, [topic]).start()
        await wait_until(lambda: a.assignment() == everything(topic, 4))
        await wait_until(lambda: len(a.records) == 20)
        b = await member(broker, group, [topic]).start()
        await wait_until(
            lambda: len(a.assignment()) == 2
            and len(b.assignment()) == 2
            and a.assignment() | b.assignment() == everything(topic, 4)
        )
        for p in range(4):
            write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(5, 10)])
        await wait_until(lambda: len(a.records) + len(b.records) >= 40)
        read = Counter((r.partition, r.offset) for r in a.records + b.records)
        assert sorted(read) == [(p, o) for p in range(4) for o in range(10)]
        assert set(read.values()) == {1}, "a record was read twice"
        # Eager (range): a gave up everything, then got half back.
        assert a.events.log[:3] == [
            ("assigned", sorted(everything(topic, 4))),
            ("revoked", sorted(everything(topic, 4))),
            ("assigned", sorted(a.assignment())),
        ]
        assert b.events.log == [("assigned", sorted(b.assignment()))]
        await b.stop()
        await wait_until(lambda: a.assignment() == everything(topic, 4))
        assert a.events.kinds()[-2:] == ["revoked", "assigned"]
        await a.stop()

    asyncio.run(main())


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_each_assignor_splits_two_topics_between_two_members(
    broker: Any, strategy: str
) -> None:
    t1 = make_topic(broker.bootstrap, partitions=3)
    t2 = make_topic(broker.bootstrap, partitions=3)
    group = new_name("g")
    all_six = everything(t1, 3) | everything(t2, 3)

    async def main() -> None:
        a = await member(broker, group, [t1, t2],
                         partition_assignment_strategy=[strategy]).start()
        await wait_until(lambda: a.assignment() == all_six)
        b = await member(broker, group, [t1, t2],
                         partition_assignment_strategy=[strategy]).start()
        await wait_until(
            lambda: a.assignment() and b.assignment()
            and a.assignment() | b.assignment() == all_six
            and not a.assignment() & b.assignment()
            and len(a.assignment()) + len(b.assignment()) == 6
        )
        first, second = sorted([a, b], key=lambda m: m.consumer.member_id)
        if strategy == "range":
            assert first.assignment() == {TopicPartition(t, p) for t in (t1, t2) for p in (0, 1)}
        elif strategy == "roundrobin":
            ordered = sorted(all_six)
            assert first.assignment() == set(ordered[0::2])
            assert second.assignment() == set(ordered[1::2])
        else:
            assert len(a.assignment()) == len(b.assignment()) == 3
            # Sticky: the first member kept half of what it had, nothing new.
            assert a.assignment() < all_six
        if strategy == "cooperative-sticky":
            # Only the partitions that moved were revoked, never everything.
            revoked = [set(ps) for kind, ps in a.events.log if kind == "revoked"]
            assert revoked == [all_six - a.assignment()]
            assert ("revoked", sorted(all_six)) not in a.events.log
        elif strategy in ("range", "roundrobin", "sticky"):
            assert ("revoked", sorted(all_six)) in a.events.log
        await b.stop()
        await wait_until(lambda: a.assignment() == all_six)
        await a.stop()

    asyncio.run(main())


def test_static_member_restarting_keeps_its_partitions_without_a_rebalance(
    broker: Any,
) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    group = new_name("g")

    async def main() -> None:
        a = await member(broker, group, [topic], group_instance_id="member-a").start()
        b = await member(broker, group, [topic], group_instance_id="member-b").start()
        await wait_until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1
                         and a.assignment() != b.assignment())
        await asyncio.sleep(0)
        mine = a.assignment()
        generation = b.consumer.generation_id
        b_events = list(b.events.log)
        await a.stop()  # a static member does not leave the group
        again = await member(broker, group, [topic], group_instance_id="member-a").start()
        await wait_until(lambda: again.assignment() == mine)
        assert b.consumer.generation_id == generation
        assert b.events.log == b_events
        await again.stop()
        await b.stop()

    asyncio.run(main())


def test_member_that_stops_polling_leaves_and_rejoins(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    group = new_name("g")

    async def main() -> None:
        a = await member(broker, group, [topic], max_poll_interval_ms=2000).start()
        b = await member(broker, group, [topic], max_poll_interval_ms=30000).start()
        await wait_until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1
                         and a.assignment() != b.assignment())
        a.paused = True  # a stops calling poll()
        await wait_until(lambda: b.assignment() == everything(topic, 2))
        with pytest.raises(CommitFailedError, match="not in the group"):
            await a.consumer.commit()
        a.paused = False
        await wait_until(lambda: "lost" in a.events.kinds())
        await wait_until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1
                         and a.assignment() != b.assignment())
        await a.stop()
        await b.stop()

    asyncio.run(main())


def test_pattern_subscription_and_unsubscribe(broker: Any) -> None:
    stem = new_name("pat")
    one = f"{stem}-one"
    two = f"{stem}-two"
    from kafka_wire import WireClient

    with WireClient(broker.bootstrap) as client:
        for name in (one, two):
            assert client.create_topic(name, 1)[0] == 0
    write(broker.bootstrap, one, 0, [b"1"])
    write(broker.bootstrap, two, 0, [b"2"])

    async def main() -> None:
        async with aio.Consumer(config(broker, new_name("g"))) as c:
            c.subscribe(pattern=re.escape(stem) + "-.*")
            got: list[bytes] = []
            while len(got) < 2:
                got += [r.value for r in await c.poll(timeout_ms=1000)]
            assert sorted(got) == [b"1", b"2"]
            assert c.subscription() == {one, two}
            assert c.assignment() == {TopicPartition(one, 0), TopicPartition(two, 0)}
            await c.unsubscribe()
            assert c.assignment() == set()

    asyncio.run(main())
