"""logbus's consumer with third-party clients: records written by confluent-kafka and
kafka-python read back field for field, and consumer groups mixing logbus,
confluent-kafka and kafka-python members (each assignor they share): every partition
consumed by exactly one member, and the group rebalancing when one leaves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from compat_clients import (
    Got,
    confluent_produce,
    expected,
    kafka_python_produce,
    new_topic,
    sample_messages,
)
from group_members import (
    GROUP_BROKER,
    SESSION_TIMEOUT_MS,
    Member,
    kafka_python_subscribe,
    new_group,
    produce_values,
    wait_all_received,
)

from kafka_wire import create_topic, wait_for
from logbus import Consumer, TopicPartition

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(
    ("writer", "null_header"),
    [(confluent_produce, True), (kafka_python_produce, False)],
    ids=["confluent-kafka", "kafka-python"],
)
def test_reads_records_third_party_producers_write(
    broker: Any, writer: Callable[..., Any], null_header: bool
) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    msgs = sample_messages(40, null_header=null_header)
    writer(broker.bootstrap, topic, msgs)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        got: list[Got] = []
        wait_for(lambda: got.extend(
            Got(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp)
            for r in c.poll(0.5)
        ) or len(got) >= len(msgs), 30)
    assert got == expected(msgs)


# --- mixed groups -------------------------------------------------------------------------

JAVA_NAMES = {"range": "range", "roundrobin": "roundrobin",
              "cooperative-sticky": "cooperative-sticky"}


def logbus_member(bootstrap: str, topic: str, group: str, strategy: str) -> Member:
    c = Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                 session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=500,
                 partition_assignment_strategy=[strategy])
    c.subscribe([topic])
    m = Member(lambda: [r.value for r in c.poll(0.2)], c.close)
    m.owned = lambda: len(c.assignment())  # type: ignore[attr-defined]
    m.start()
    return m


def confluent_member(bootstrap: str, topic: str, group: str, strategy: str) -> Member:
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import KafkaError

    c = ConfluentConsumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": JAVA_NAMES[strategy],
    })
    owned: list[int] = [0]
    c.subscribe([topic])

    def poll() -> list[bytes]:
        msg = c.poll(0.2)
        owned[0] = len(c.assignment())  # only the polling thread touches the handle
        if msg is None:
            return []
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return []
            raise AssertionError(msg.error())
        return [msg.value()]

    m = Member(poll, c.close)
    m.owned = lambda: owned[0]  # type: ignore[attr-defined]
    m.start()
    return m


def kafka_python_member(bootstrap: str, topic: str, group: str, strategy: str) -> Member:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "cooperative-sticky": CooperativeStickyAssignor}[strategy]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
                      heartbeat_interval_ms=500, partition_assignment_strategy=[assignor])
    kafka_python_subscribe(c, topic)
    owned: list[int] = [0]

    def poll() -> list[bytes]:
        got = [r.value for rs in c.poll(200).values() for r in rs]
        owned[0] = len(c.assignment())
        return got

    m = Member(poll, c.close)
    m.owned = lambda: owned[0]  # type: ignore[attr-defined]
    m.start()
    return m


@pytest.mark.parametrize("logbus_first", [True, False], ids=["logbus-leads", "others-lead"])
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_mixed_group_consumes_each_record_once_and_rebalances(
    broker_factory: Any, strategy: str, logbus_first: bool
) -> None:
    """The first member to join leads the group and computes the assignment."""
    broker = broker_factory(**GROUP_BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 6)
    makers = [logbus_member, confluent_member, kafka_python_member]
    if not logbus_first:
        makers.reverse()
    members = []
    try:
        for make in makers:
            members.append(make(broker.bootstrap, topic, group, strategy))
            # Join one by one, so the leader is the first.
            wait_for(lambda: sum(m.owned() for m in members) == 6, 60)  # type: ignore[attr-defined]
        wait_for(lambda: [m.owned() for m in members] == [2, 2, 2], 60)  # type: ignore[attr-defined]
        first = [f"a{i}".encode() for i in range(60)]
        produce_values(broker.bootstrap, topic, first, 6)
        wait_all_received(members, first)
        got = Counter(v for m in members for v in m.received())
        assert sorted(got) == sorted(first) and set(got.values()) == {1}
        # Each member read exactly its own partitions' records.
        for m in members:
            assert len(m.received()) == 20

        # The confluent-kafka member leaves; the other two take over its partitions.
        leaver = members.pop(1)
        leaver.stop()
        wait_for(lambda: [m.owned() for m in members] == [3, 3], 60)  # type: ignore[attr-defined]
        second = [f"b{i}".encode() for i in range(60)]
        produce_values(broker.bootstrap, topic, second, 6)
        wait_all_received(members, second)
        late = Counter(v for m in members for v in m.received() if v.startswith(b"b"))
        assert sorted(late) == sorted(second) and set(late.values()) == {1}
    finally:
        for m in members:
            if m.is_alive():
                m.stop()
