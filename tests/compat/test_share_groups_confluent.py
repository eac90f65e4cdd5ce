"""confluent-kafka's ShareConsumer (KIP-932 share groups, librdkafka 2.16) against a real
broker: four members on one partition each get a share of the records and every record is
accepted once; records one member releases, or whose acquisition lock expires, are
delivered to another; a record released up to the delivery limit is archived; and a
logbus ShareConsumer in the same group as a confluent-kafka one."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from compat_clients import new_topic
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from group_members import new_group, produce_values

import logbus
from kafka_wire import create_topic, wait_for

pytestmark = pytest.mark.timeout(120)


def earliest_share_group(bootstrap: str) -> str:
    """A new group id whose `share.auto.offset.reset` is earliest (a GROUP config)."""
    group = new_group()
    resource = ConfigResource(
        ResourceType.GROUP, group,
        incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET,
        )],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)
    return group


def share_consumer(bootstrap: str, group: str, topic: str, **config: Any) -> Any:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    consumer.subscribe([topic])
    return consumer


class ShareMember(threading.Thread):
    """Polls a ShareConsumer on its own thread (it is not thread-safe) in implicit mode,
    recording every value delivered to it."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = share_consumer(bootstrap, group, topic)
        self.values: list[bytes] = []
        # offsets whose acknowledgement the broker confirmed (the commit callback)
        self.confirmed: set[int] = set()
        self.consumer.set_acknowledgement_commit_callback(self._acknowledged)
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for message in self.consumer.poll(0.5) or []:
                if message.error() is None:
                    self.values.append(message.value())
                    time.sleep(0.002)  # a little work per record, so members interleave
        self.consumer.close()  # the last acknowledgements leave with it

    def _acknowledged(self, offsets: dict[Any, set[int]], error: object) -> None:
        if error is None:
            for found in offsets.values():
                self.confirmed |= found

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def poll_values(consumer: Any, want: int, timeout: float = 30) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(m for m in consumer.poll(0.5) or [] if m.error() is None)
        return len(got) >= want

    wait_for(enough, timeout, what=f"{want} records")
    return got


def test_four_members_on_one_partition_accept_every_record_once(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, new_topic("share"))
    group = earliest_share_group(broker.bootstrap)
    members = [ShareMember(broker.bootstrap, group, topic) for _ in range(4)]
    values = [b"v%d" % i for i in range(2000)]
    try:
        # in batches of 50: a share fetch acquires whole batches (Kafka's batch-optimized
        # mode), so the members share the partition batch by batch
        produce_values(broker.bootstrap, topic, values, 1, per_batch=50)
        wait_for(
            lambda: sum(len(m.values) for m in members) >= len(values), 60,
            what="every record delivered",
        )
    finally:
        for member in members:
            member.stop()  # closing sends the last acknowledgements
    assert set().union(*(m.confirmed for m in members)) == set(range(len(values)))
    delivered = [v for m in members for v in m.values]
    assert sorted(delivered) == sorted(values)  # each once: none lost, none twice
    assert sum(1 for m in members if m.values) >= 2  # the partition was shared
    # all were accepted: a new member gets only what is produced next
    late = share_consumer(broker.bootstrap, group, topic)
    try:
        produce_values(broker.bootstrap, topic, [b"last"], 1)
        assert [m.value() for m in poll_values(late, 1)] == [b"last"]
    finally:
        late.close()


def test_released_records_go_to_another_member(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, new_topic("share"))
    group = earliest_share_group(broker.bootstrap)
    produce_values(broker.bootstrap, topic, [b"r%d" % i for i in range(20)], 1)
    first = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    try:
        taken = poll_values(first, 20)
        for message in taken:
            first.acknowledge(message, AcknowledgeType.RELEASE)
        first.commit_sync()
    finally:
        first.close()
    second = share_consumer(broker.bootstrap, group, topic)
    try:
        again = poll_values(second, 20)
    finally:
        second.close()
    assert sorted(m.value() for m in again) == sorted(m.value() for m in taken)
    assert {m.delivery_count() for m in again} == {2}


def test_expired_lock_redelivers(broker_factory: Any) -> None:
    broker = broker_factory(**{"group.share.record.lock.duration.ms": "1000"})
    topic = create_topic(broker.bootstrap, new_topic("share"))
    group = earliest_share_group(broker.bootstrap)
    produce_values(broker.bootstrap, topic, [b"x%d" % i for i in range(5)], 1)
    holder = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    other = share_consumer(broker.bootstrap, group, topic)
    try:
        held = poll_values(holder, 5)  # never acknowledged: the lock runs out
        redelivered = poll_values(other, 5)
    finally:
        other.close()
        holder.close()
    assert sorted(m.value() for m in redelivered) == sorted(m.value() for m in held)
    assert min(m.delivery_count() for m in redelivered) >= 2


def test_rejected_record_is_archived_and_released_ones_stop_at_the_limit(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, new_topic("share"))
    group = earliest_share_group(broker.bootstrap)
    produce_values(broker.bootstrap, topic, [b"keep", b"drop"], 1)
    consumer = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    counts: dict[bytes, list[int]] = {b"keep": [], b"drop": [], b"next": []}
    try:
        for _ in range(5):
            for message in poll_values(consumer, 1):
                counts[message.value()].append(message.delivery_count())
                kind = AcknowledgeType.REJECT if message.value() == b"drop" else (
                    AcknowledgeType.RELEASE
                )
                consumer.acknowledge(message, kind)
            consumer.commit_sync()
            if len(counts[b"keep"]) >= 5:
                break
        # released at its fifth delivery (the limit): archived, so only what comes next
        produce_values(broker.bootstrap, topic, [b"next"], 1)
        assert [m.value() for m in poll_values(consumer, 1)] == [b"next"]
    finally:
        consumer.close()
    assert counts[b"drop"] == [1]
    assert counts[b"keep"] == [1, 2, 3, 4, 5]


class LogbusShareMember(threading.Thread):
    """A logbus ShareConsumer polled on its own thread in implicit mode, recording every
    value delivered to it."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = logbus.ShareConsumer(bootstrap_servers=bootstrap, group_id=group)
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for record in self.consumer.poll(0.5):
                self.values.append(record.value)
                time.sleep(0.002)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def poll_logbus(consumer: logbus.ShareConsumer, want: int) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(consumer.poll(0.5))
        return len(got) >= want

    wait_for(enough, 30, what=f"{want} records")
    return got


def test_logbus_and_confluent_share_consumers_in_one_group(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, new_topic("share"))
    group = earliest_share_group(broker.bootstrap)
    produce_values(broker.bootstrap, topic, [b"h%d" % i for i in range(10)], 1)
    # records the logbus member releases go to the confluent-kafka member, and back
    ours = logbus.ShareConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    )
    theirs = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    try:
        ours.subscribe([topic])
        taken = poll_logbus(ours, 10)
        for record in taken:
            ours.acknowledge(record, logbus.AcknowledgeType.RELEASE)
        assert set(ours.commit_sync().values()) == {None}
        passed = poll_values(theirs, 10)
        assert sorted(m.value() for m in passed) == sorted(r.value for r in taken)
        assert {m.delivery_count() for m in passed} == {2}
        for message in passed:
            theirs.acknowledge(message, AcknowledgeType.RELEASE)
        theirs.commit_sync()
        back = poll_logbus(ours, 10)
        assert {r.delivery_count for r in back} == {3}
        for record in back:
            ours.acknowledge(record, logbus.AcknowledgeType.ACCEPT)
        assert set(ours.commit_sync().values()) == {None}
    finally:
        theirs.close()
        ours.close()
    # side by side in implicit mode: every record delivered once, to one of them
    members: list[Any] = [
        ShareMember(broker.bootstrap, group, topic),
        LogbusShareMember(broker.bootstrap, group, topic),
    ]
    values = [b"v%d" % i for i in range(1000)]
    try:
        for start in range(0, len(values), 50):
            produce_values(broker.bootstrap, topic, values[start : start + 50], 1)
        wait_for(
            lambda: sum(len(m.values) for m in members) >= len(values), 60,
            what="every record delivered",
        )
    finally:
        for member in members:
            member.stop()
    assert sorted(v for m in members for v in m.values) == sorted(values)
