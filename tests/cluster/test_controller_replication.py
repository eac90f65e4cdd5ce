"""The controller and replication together, with three `logbus server start` processes:
acknowledged records survive the kill -9 of their partition's leader, whose followers in
the ISR take over."""

from __future__ import annotations

import json
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from zk_cluster import SESSION_TIMEOUT_MS, ZkCluster, cluster_factory, wait_for

from logbus.coordinator.group.offsets_topic import offsets_partition_for

__all__ = ["cluster_factory"]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Send with acks=all and idempotence; the values acknowledged."""
    acked: list[bytes] = []

    def done(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60_000,
            "log_level": 0,
        }
    )
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=done)
        producer.poll(0)
    assert producer.flush(90) == 0
    return acked


def consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    # assigned, not subscribed: no group coordinator is needed (with one broker dead,
    # __consumer_offsets cannot get its offsets.topic.replication.factor=3 replicas)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: list[bytes] = []

    def more() -> bool:
        seen.extend(m.value() for m in consumer.consume(100, 1) if not m.error())
        return len(seen) >= expected

    try:
        wait_for(more, 60, "every record")
    finally:
        consumer.close()
    return seen


def test_acknowledged_records_survive_the_leaders_kill(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()
    admin = cluster.admin()
    config = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic("safe", 1, 3, config=config)])["safe"].result(30)
    wait_for(lambda: sorted(cluster.state("safe", 0)["isr"]) == [1, 2, 3], 30, "full ISR")
    first = produce(cluster.bootstrap, "safe", [b"a%d" % i for i in range(200)])
    assert len(first) == 200
    leader = cluster.state("safe", 0)["leader"]
    cluster.brokers[leader].kill()
    wait_for(
        lambda: cluster.state("safe", 0)["leader"] not in (leader, -1),
        SESSION_TIMEOUT_MS / 1000 + 20,
        "a new leader",
    )
    second = produce(cluster.bootstrap, "safe", [b"b%d" % i for i in range(200)])
    assert len(second) == 200
    seen = consume_all(cluster.bootstrap, "safe", 400)
    assert seen == first + second


def test_group_coordinator_moves_with_leadership(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3, "offsets.topic.replication.factor=3")
    cluster.wait_controller()
    admin = cluster.admin()
    admin.create_topics([NewTopic("work", 1, 3)])["work"].result(30)
    produce(cluster.bootstrap, "work", [b"w%d" % i for i in range(10)])

    def group_consumer() -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "workers",
                # a member the new coordinator still knows (its leave may not have
                # reached the followers before the kill, as in Kafka) expires sooner
                "session.timeout.ms": 6000,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )

    consumer = group_consumer()
    consumer.subscribe(["work"])
    got: list[bytes] = []
    try:

        def six() -> bool:
            got.extend(m.value() for m in consumer.consume(10, 1) if not m.error())
            return len(got) >= 6

        wait_for(six, 60, "six records")
        consumer.commit(offsets=[TopicPartition("work", 0, 6)], asynchronous=False)
    finally:
        consumer.close()
    partitions = len(
        json.loads(cluster.store.get("/brokers/topics/__consumer_offsets")[0])["partitions"]
    )
    group_partition = offsets_partition_for("workers", partitions)
    coordinator = cluster.state("__consumer_offsets", group_partition)["leader"]
    cluster.brokers[coordinator].kill()
    wait_for(
        lambda: (
            cluster.state("__consumer_offsets", group_partition)["leader"] not in (coordinator, -1)
        ),
        SESSION_TIMEOUT_MS / 1000 + 20,
        "a new coordinator",
    )
    # the group's committed offset survived: a new member resumes at 6
    resumed = group_consumer()
    resumed.subscribe(["work"])
    rest: list[bytes] = []
    try:

        def four() -> bool:
            rest.extend(m.value() for m in resumed.consume(10, 1) if not m.error())
            return len(rest) >= 4

        wait_for(four, 60, "the remaining records")
    finally:
        resumed.close()
    assert rest == [b"w%d" % i for i in range(6, 10)]
