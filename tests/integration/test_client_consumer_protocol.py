"""The logbus client's consumers with `group.protocol=consumer` (KIP-848) on a real broker:
asyncio members that the coordinator assigns incrementally (a member keeping partitions
never has them revoked), the blocking consumer, commits with the member epoch, and the
Admin's description of the group."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from consumer_data import GroupMember, make_topic, new_name, wait_until, write

import logbus
from logbus import TopicPartition, aio

BROKER = {"group.consumer.heartbeat.interval.ms": "200"}


def config(broker: Any, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }


def everything(topic: str, partitions: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(partitions)}


def test_asyncio_members_are_assigned_incrementally(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic = make_topic(broker.bootstrap, partitions=4)
    for p in range(4):
        write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(5)])
    group = new_name("g")

    async def main() -> None:
        a = await GroupMember(aio.Consumer(config(broker, group)), [topic]).start()
        await wait_until(lambda: a.assignment() == everything(topic, 4))
        await wait_until(lambda: len(a.records) == 20)
        b = await GroupMember(aio.Consumer(config(broker, group)), [topic]).start()
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
        # Incremental: a gave up only the two partitions b took, and kept the others.
        kept = sorted(a.assignment())
        assert a.events.log[:2] == [
            ("assigned", sorted(everything(topic, 4))),
            ("revoked", sorted(everything(topic, 4) - set(kept))),
        ]
        assert set(b.events.kinds()) == {"assigned"}  # first nothing free, then its two
        await b.stop()
        await wait_until(lambda: a.assignment() == everything(topic, 4))
        assert a.events.kinds()[-1] == "assigned"
        assert "revoked" not in a.events.kinds()[2:]
        await a.stop()

    asyncio.run(main())


def test_blocking_consumer_commits_with_its_member_epoch(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic = make_topic(broker.bootstrap, partitions=2)
    for p in range(2):
        write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(10)])
    group = new_name("g")
    with logbus.Consumer(config(broker, group), enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += consumer.poll(0.2)
        assert len(got) == 20
        consumer.commit()
        with logbus.Admin(bootstrap_servers=broker.bootstrap) as admin:
            described = admin.describe_consumer_groups([group])[group]
            committed = admin.list_consumer_group_offsets(group)
        assert described.group_type == "consumer" and described.state == "Stable"
        (member,) = described.members
        assert member.member_epoch == described.assignment_epoch
        assert member.assignment == member.target_assignment == {topic: [0, 1]}
    assert {tp.partition: o for tp, o in committed.items()} == {0: 10, 1: 10}
