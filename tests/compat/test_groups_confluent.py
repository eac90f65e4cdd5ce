"""confluent-kafka (librdkafka) consumer groups against a real broker: members sharing a
topic, joining and leaving mid-stream, a member killed without leaving, commits across a
restart, static members restarting without a rebalance, cooperative-sticky, and
auto.offset.reset."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_clients import new_topic
from confluent_kafka import Consumer, KafkaError, TopicPartition
from group_members import (
    GROUP_BROKER,
    SESSION_TIMEOUT_MS,
    Member,
    committed_offsets,
    kill_member,
    new_group,
    produce_values,
    start_killable_member,
    wait_all_received,
)

from kafka_wire import create_topic, wait_for

pytestmark = pytest.mark.timeout(120)


def consumer(bootstrap: str, group: str, **config: Any) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
            **config,
        }
    )


class ConfluentMember(Member):
    def __init__(self, bootstrap: str, topic: str, group: str, **config: Any) -> None:
        self.consumer = consumer(bootstrap, group, **config)
        self.assign_calls = 0
        self._owned: frozenset[int] = frozenset()

        def on_assign(_c: Any, _partitions: list[Any]) -> None:
            self.assign_calls += 1

        self.consumer.subscribe([topic], on_assign=on_assign)
        super().__init__(self._poll_values, self.consumer.close)
        self.start()

    def _poll_values(self) -> list[bytes]:
        msg = self.consumer.poll(0.2)
        # Only the polling thread touches the handle: a call from another thread can
        # deadlock with a rebalance callback waiting for the GIL.
        self._owned = frozenset(p.partition for p in self.consumer.assignment())
        if msg is None:
            return []
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return []
            raise AssertionError(msg.error())
        return [msg.value()]

    @property
    def assignment(self) -> set[int]:
        """The partitions the member owned at its last poll."""
        return set(self._owned)

    def owned(self) -> int:
        return len(self.assignment)


def test_members_share_a_topic_exactly_once(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 6)
    members = [ConfluentMember(broker.bootstrap, topic, group) for _ in range(3)]
    try:
        wait_for(lambda: [len(m.assignment) for m in members] == [2, 2, 2], 40)
        values = [f"v{i}".encode() for i in range(60)]
        produce_values(broker.bootstrap, topic, values, 6)
        wait_all_received(members, values)
        got = [v for m in members for v in m.received()]
        assert sorted(got) == sorted(values)
    finally:
        for m in members:
            m.stop()


def test_member_joins_and_leaves_mid_stream(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    values = [f"v{i}".encode() for i in range(90)]
    config = {"auto.commit.interval.ms": 200}
    first = ConfluentMember(broker.bootstrap, topic, group, **config)
    second: ConfluentMember | None = None
    try:
        wait_for(lambda: len(first.assignment) == 4, 30)
        produce_values(broker.bootstrap, topic, values[:30], 4)
        wait_all_received([first], values[:30])
        second = ConfluentMember(broker.bootstrap, topic, group, **config)
        wait_for(lambda: len(first.assignment) == 2 and len(second.assignment) == 2, 40)
        produce_values(broker.bootstrap, topic, values[30:60], 4)
        wait_all_received([first, second], values[:60])
        second.stop()
        wait_for(lambda: len(first.assignment) == 4, 40)
        produce_values(broker.bootstrap, topic, values[60:], 4)
        wait_all_received([first, second], values)
    finally:
        first.stop()
        if second is not None and second.is_alive():
            second.stop()
    assert sum(committed_offsets(broker.bootstrap, group, topic, 4)) == len(values)


def test_killed_member_partitions_move_after_session_timeout(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 2)
    victim = start_killable_member(broker.bootstrap, topic, group)
    survivor = ConfluentMember(broker.bootstrap, topic, group)
    try:
        wait_for(lambda: len(survivor.assignment) == 1, 40)
        kill_member(victim)
        values = [f"v{i}".encode() for i in range(20)]
        produce_values(broker.bootstrap, topic, values, 2)
        wait_for(lambda: len(survivor.assignment) == 2, 40)
        wait_all_received([survivor], values)
    finally:
        kill_member(victim)
        survivor.stop()


def test_commits_survive_a_broker_restart(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 1)
    produce_values(broker.bootstrap, topic, [b"a", b"b", b"c"], 1)
    m = ConfluentMember(broker.bootstrap, topic, group, **{"enable.auto.commit": False})
    wait_all_received([m], [b"a", b"b", b"c"])
    m.stop()  # close() without a commit: nothing committed
    c = consumer(broker.bootstrap, group, **{"enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    c.close()
    broker.restart()
    assert committed_offsets(broker.bootstrap, group, topic, 1) == [2]
    again = ConfluentMember(broker.bootstrap, topic, group)
    try:
        wait_all_received([again], [b"c"])
        time.sleep(0.5)
        assert again.received() == [b"c"]
    finally:
        again.stop()


def test_static_member_restarts_without_a_rebalance(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 2)
    a = ConfluentMember(broker.bootstrap, topic, group, **{"group.instance.id": "a"})
    b = ConfluentMember(broker.bootstrap, topic, group, **{"group.instance.id": "b"})
    try:
        wait_for(lambda: len(a.assignment) == 1 and len(b.assignment) == 1, 40)
        calls = b.assign_calls
        a.stop()  # a static member does not leave the group on close
        a = ConfluentMember(broker.bootstrap, topic, group, **{"group.instance.id": "a"})
        wait_for(lambda: len(a.assignment) == 1, 30)
        time.sleep(1.5)
        assert b.assign_calls == calls  # b was never revoked or reassigned
        values = [f"v{i}".encode() for i in range(10)]
        produce_values(broker.bootstrap, topic, values, 2)
        wait_all_received([a, b], values)
    finally:
        a.stop()
        b.stop()


def test_cooperative_sticky(broker_factory: Any) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first = ConfluentMember(broker.bootstrap, topic, group, **config)
    second: ConfluentMember | None = None
    try:
        wait_for(lambda: first.owned() == 4, 30)
        second = ConfluentMember(broker.bootstrap, topic, group, **config)
        wait_for(lambda: first.owned() == 2 and second.owned() == 2, 40)
        values = [f"v{i}".encode() for i in range(40)]
        produce_values(broker.bootstrap, topic, values, 4)
        wait_all_received([first, second], values)
        assert sorted(first.received() + second.received()) == sorted(values)
    finally:
        first.stop()
        if second is not None:
            second.stop()


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_auto_offset_reset(broker_factory: Any, reset: str) -> None:
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 1)
    produce_values(broker.bootstrap, topic, [b"old"], 1)
    c = consumer(
        broker.bootstrap, group, **{"auto.offset.reset": reset, "enable.partition.eof": True}
    )
    assigned: list[Any] = []
    c.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))
    got: list[bytes] = []
    errors: list[int] = []
    at_end: list[bool] = []

    def poll() -> None:
        msg = c.poll(0.1)
        if msg is None:
            return
        if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
            at_end.append(True)
        elif msg.error():
            errors.append(msg.error().code())
        else:
            got.append(msg.value())

    try:
        if reset == "error":  # librdkafka's name for "none"
            wait_for(lambda: poll() or errors, 30)
            assert errors[0] == KafkaError._AUTO_OFFSET_RESET
            assert got == []
            return
        # Reaching the end of the partition means the reset happened before "new".
        wait_for(lambda: poll() or at_end, 30)
        produce_values(broker.bootstrap, topic, [b"new"], 1)
        wait_for(lambda: poll() or b"new" in got, 30)
        assert got == ([b"old", b"new"] if reset == "earliest" else [b"new"])
    finally:
        c.close()
