"""The logbus client's ShareConsumer (KIP-932 share groups) against a real broker: four
members on one partition accept every record once; a released record goes to another
member; a rejected one is archived, and a record released up to the delivery limit too;
an expired acquisition lock redelivers; the asyncio consumer; unsubscribing (accepting and
leaving) and subscribing again; and the caller's mistakes (acknowledging a record not from
the last poll or twice, polling in explicit mode with records unacknowledged) answered
with clear errors."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from consumer_data import make_topic, new_name, poll_until, wait_until, write

import logbus
from kafka_wire import wait_for
from logbus import AcknowledgeType, ConfigError, ShareConsumer, TopicPartition, aio
from logbus.client.consumer.records import IllegalStateError
from logbus.protocol import ErrorCode

pytestmark = pytest.mark.timeout(120)


def earliest_share_group(bootstrap: str) -> str:
    """A new share group id whose `share.auto.offset.reset` is earliest (a GROUP config
    set with the logbus Admin)."""
    group = new_name("share")
    with logbus.Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.incremental_alter_configs({
            logbus.ConfigResource(logbus.ResourceType.GROUP, group): [
                logbus.AlterConfigOp("share.auto.offset.reset", "earliest")
            ]
        })
    return group


def share_consumer(bootstrap: str, group: str, topic: str, **config: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}, **config)
    consumer.subscribe([topic])
    return consumer


class ShareMember(threading.Thread):
    """Polls a blocking ShareConsumer on its own thread in implicit mode, recording every
    value delivered to it and every offset whose acceptance the broker confirmed."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = share_consumer(bootstrap, group, topic)
        self.values: list[bytes] = []
        self.confirmed: set[int] = set()
        self.failed: list[Any] = []
        self.consumer.set_acknowledgement_commit_callback(self._acknowledged)
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for record in self.consumer.poll(0.5):
                self.values.append(record.value)
                time.sleep(0.002)  # a little work per record, so members interleave
        self.consumer.close()  # the last acceptances leave with it

    def _acknowledged(self, offsets: dict[TopicPartition, set[int]], error: Any) -> None:
        if error is None:
            for found in offsets.values():
                self.confirmed |= found
        else:
            self.failed.append(error)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def test_four_members_on_one_partition_accept_every_record_once(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    members = [ShareMember(broker.bootstrap, group, topic) for _ in range(4)]
    values = [b"v%d" % i for i in range(2000)]
    try:
        for start in range(0, len(values), 100):
            write(broker.bootstrap, topic, 0, values[start : start + 100])
        wait_for(
            lambda: sum(len(m.values) for m in members) >= len(values), 60,
            what="every record delivered",
        )
    finally:
        for member in members:
            member.stop()
    assert [m.failed for m in members] == [[]] * 4
    assert set().union(*(m.confirmed for m in members)) == set(range(len(values)))
    delivered = [v for m in members for v in m.values]
    assert sorted(delivered) == sorted(values)  # each once: none lost, none twice
    assert sum(1 for m in members if m.values) >= 2  # the partition was shared
    # all were accepted: a new member gets only what is written next
    with share_consumer(broker.bootstrap, group, topic) as late:
        write(broker.bootstrap, topic, 0, [b"last"])
        assert [r.value for r in poll_until(lambda: late.poll(0.5), 1)] == [b"last"]


def test_a_whole_batch_is_acquired_and_polled_max_poll_records_at_a_time(broker: Any) -> None:
    """The broker acquires the whole batch for the first member that asks (MaxRecords
    yields to the batch's boundary, as in Kafka's batch-optimized mode); the consumer
    returns it max.poll.records at a time, and each record is accepted once, by the poll
    after the one that returned it."""
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"b%d" % i for i in range(45)])  # one batch
    with share_consumer(broker.bootstrap, group, topic, max_poll_records=10) as first:
        polls = [wait_for(lambda: first.poll(0.5), what="a delivery")]
        polls += [first.poll(0.5) for _ in range(4)]
        with share_consumer(broker.bootstrap, group, topic) as second:
            assert second.poll(1.0) == []  # all 45 are the first member's
        assert first.poll(0.5) == []  # accepts the last 5
    assert [len(p) for p in polls] == [10, 10, 10, 10, 5]
    assert [r.offset for p in polls for r in p] == list(range(45))
    with share_consumer(broker.bootstrap, group, topic) as late:
        write(broker.bootstrap, topic, 0, [b"after"])
        assert [r.value for r in poll_until(lambda: late.poll(0.5), 1)] == [b"after"]


def test_released_records_go_to_another_member(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"r%d" % i for i in range(20)])
    with share_consumer(
        broker.bootstrap, group, topic, share_acknowledgement_mode="explicit"
    ) as first:
        taken = poll_until(lambda: first.poll(0.5), 20)
        assert {r.delivery_count for r in taken} == {1}
        for record in taken:
            first.acknowledge(record, AcknowledgeType.RELEASE)
        assert first.commit_sync() == {TopicPartition(topic, 0): None}
        with share_consumer(broker.bootstrap, group, topic) as second:
            again = poll_until(lambda: second.poll(0.5), 20)
    assert sorted(r.value for r in again) == sorted(r.value for r in taken)
    assert {r.delivery_count for r in again} == {2}


def test_rejected_record_is_archived_and_released_ones_stop_at_the_limit(
    broker_factory: Any,
) -> None:
    broker = broker_factory(**{"group.share.delivery.count.limit": "3"})
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"keep", b"drop"])
    counts: dict[bytes, list[int]] = {b"keep": [], b"drop": [], b"next": []}
    with share_consumer(
        broker.bootstrap, group, topic, share_acknowledgement_mode="explicit"
    ) as consumer:
        while len(counts[b"keep"]) < 3:
            for record in wait_for(lambda: consumer.poll(0.5), what="a delivery"):
                counts[record.value].append(record.delivery_count)
                kind = AcknowledgeType.REJECT if record.value == b"drop" else (
                    AcknowledgeType.RELEASE
                )
                consumer.acknowledge(record, kind)
            assert set(consumer.commit_sync().values()) == {None}
        # released at its third delivery (the limit): archived, so only what comes next
        write(broker.bootstrap, topic, 0, [b"next"])
        last = poll_until(lambda: consumer.poll(0.5), 1)
        assert [r.value for r in last] == [b"next"]
        consumer.acknowledge(last[0])
    assert counts == {b"keep": [1, 2, 3], b"drop": [1], b"next": []}


def test_expired_lock_redelivers_and_the_late_acknowledgement_fails(
    broker_factory: Any,
) -> None:
    broker = broker_factory(**{"group.share.record.lock.duration.ms": "1000"})
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"x%d" % i for i in range(5)])
    holder = share_consumer(broker.bootstrap, group, topic, share_acknowledgement_mode="explicit")
    other = share_consumer(broker.bootstrap, group, topic)
    try:
        held = poll_until(lambda: holder.poll(0.5), 5)  # not acknowledged: the lock runs out
        assert holder.acquisition_lock_timeout_ms == 1000
        redelivered = poll_until(lambda: other.poll(0.5), 5)
        for record in held:
            holder.acknowledge(record, AcknowledgeType.ACCEPT)
        outcome = holder.commit_sync()[TopicPartition(topic, 0)]
    finally:
        other.close()
        holder.close()
    assert sorted(r.value for r in redelivered) == sorted(r.value for r in held)
    assert {r.delivery_count for r in redelivered} == {2}
    assert outcome is not None and outcome.code == ErrorCode.INVALID_RECORD_STATE


def test_asyncio_share_consumers(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"a%d" % i for i in range(200)])
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group}

    async def main() -> list[Any]:
        got: list[Any] = []

        async def read(consumer: aio.ShareConsumer) -> None:
            async for record in consumer:
                got.append(record)

        early = aio.ShareConsumer(config)
        early.subscribe([topic])  # before start(): kept until then
        async with early as a, aio.ShareConsumer(config) as b:
            b.subscribe(topic)
            tasks = [asyncio.ensure_future(read(c)) for c in (a, b)]
            await wait_until(lambda: len(got) >= 200)
            assert a.assignment() == {TopicPartition(topic, 0)}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return got

    got = asyncio.run(main())
    assert sorted(r.value for r in got) == sorted(b"a%d" % i for i in range(200))


def test_mistakes_are_refused_clearly(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"m%d" % i for i in range(3)])
    with pytest.raises(ConfigError, match=r"group\.id"):
        ShareConsumer({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                      share_acknowledgement_mode="sometimes")
    with share_consumer(
        broker.bootstrap, group, topic, share_acknowledgement_mode="explicit"
    ) as consumer:
        records = poll_until(lambda: consumer.poll(0.5), 3)
        consumer.acknowledge(records[0], AcknowledgeType.ACCEPT)
        with pytest.raises(IllegalStateError, match="acknowledged already"):
            consumer.acknowledge(records[0], AcknowledgeType.REJECT)  # twice
        with pytest.raises(IllegalStateError, match="not returned by the last poll"):
            consumer.acknowledge(records[1]._replace(offset=99))
        with pytest.raises(IllegalStateError, match="2 records of the last poll"):
            consumer.poll(0.1)  # explicit mode: records 1 and 2 are unacknowledged
        consumer.acknowledge(records[1], AcknowledgeType.ACCEPT)
        consumer.acknowledge(records[2], AcknowledgeType.RELEASE)
        again = poll_until(lambda: consumer.poll(0.5), 1)  # the released record again
        assert [(r.value, r.delivery_count) for r in again] == [(b"m2", 2)]
    with (
        share_consumer(broker.bootstrap, group, topic) as implicit,
        pytest.raises(IllegalStateError, match="explicit"),
    ):
        implicit.acknowledge(records[2])
    with (
        ShareConsumer(bootstrap_servers=broker.bootstrap, group_id=group) as idle,
        pytest.raises(IllegalStateError, match="not subscribed"),
    ):
        idle.poll(0.1)


def test_unsubscribe_accepts_and_leaves_and_subscribe_joins_again(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"u%d" % i for i in range(5)])
    with share_consumer(broker.bootstrap, group, topic) as consumer:
        first = poll_until(lambda: consumer.poll(0.5), 5)
        member_id = consumer.member_id
        consumer.unsubscribe()  # implicit mode: the five are accepted on the way out
        assert consumer.subscription() == set() and consumer.assignment() == set()
        with pytest.raises(IllegalStateError, match="not subscribed"):
            consumer.poll(0.1)
        consumer.subscribe([topic])
        write(broker.bootstrap, topic, 0, [b"later"])
        again = poll_until(lambda: consumer.poll(0.5), 1)
        assert consumer.member_id == member_id  # the same member, joined again
    assert [r.value for r in first] == [b"u%d" % i for i in range(5)]
    assert [(r.value, r.delivery_count) for r in again] == [(b"later", 1)]


def test_admin_lists_and_describes_share_groups(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    group = earliest_share_group(broker.bootstrap)
    with share_consumer(broker.bootstrap, group, topic, client_id="described") as member, \
            logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        write(broker.bootstrap, topic, 0, [b"a", b"b"])
        poll_until(lambda: member.poll(0.5), 2)
        listed = wait_for(lambda: [g for g in admin.list_share_groups() if g.group_id == group],
                          what="the share group listed")
        assert [(g.group_type, g.state) for g in listed] == [("share", "Stable")]
        assert group not in {g.group_id for g in admin.list_consumer_groups()}
        described = admin.describe_share_groups([group])[group]
        assert (described.state, described.assignor) == ("Stable", "simple")
        assert described.group_epoch >= 1 and described.coordinator is not None
        (m,) = described.members
        assert (m.client_id, m.subscribed_topics, m.assignment) == (
            "described", [topic], {topic: [0]})
        assert m.member_epoch >= 1
        with pytest.raises(logbus.KafkaError) as refused:
            admin.describe_share_groups(["no-such-share-group"])
        assert refused.value.code == ErrorCode.GROUP_ID_NOT_FOUND
