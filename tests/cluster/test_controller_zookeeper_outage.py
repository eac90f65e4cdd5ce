"""ZooKeeper going away and coming back under a running cluster: brokers keep serving
produce and fetch for the partitions they lead (nothing there needs ZooKeeper), and once
ZooKeeper is back the controller works again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from zk_cluster import ZkCluster, wait_for

from logbus.controller.zookeeper_store import ZooKeeperStore


@pytest.fixture
def private_cluster(zookeeper_factory: Callable[[], Any], tmp_path: Path) -> Iterator[Any]:
    server = zookeeper_factory()
    connect = f"{server.connect}/outage"
    cluster = ZkCluster(connect, tmp_path, ZooKeeperStore(connect, 30_000, 10_000))
    yield server, cluster
    cluster.close()


def send(bootstrap: str, topic: str, values: list[bytes]) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    failed: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, m: e and failed.append(e))
    assert producer.flush(60) == 0
    return len(values) - len(failed)


def read(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "r",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: list[bytes] = []

    def more() -> bool:
        seen.extend(m.value() for m in consumer.consume(100, 1) if not m.error())
        return len(seen) >= expected

    try:
        wait_for(more, 60, "the records")
    finally:
        consumer.close()
    return seen


def test_brokers_serve_while_zookeeper_is_down(private_cluster: Any) -> None:
    server, cluster = private_cluster
    for broker_id in (1, 2):
        cluster.add(broker_id)
    cluster.wait_registered({1, 2})
    cluster.wait_controller()
    admin = cluster.admin()
    admin.create_topics([NewTopic("steady", 1, 2)])["steady"].result(30)
    wait_for(lambda: len(cluster.state("steady", 0)["isr"]) == 2, 30, "the full ISR")
    assert send(cluster.bootstrap, "steady", [b"before%d" % i for i in range(10)]) == 10
    cluster.store.close()
    server.stop()
    # ZooKeeper is gone: the leader still takes acks=all writes (its ISR is unchanged)
    assert send(cluster.bootstrap, "steady", [b"during%d" % i for i in range(10)]) == 10
    assert len(read(cluster.bootstrap, "steady", 20)) == 20
    server.start()
    cluster.store = ZooKeeperStore(cluster.zk_connect, 30_000, 10_000)
    cluster.wait_registered({1, 2})
    # the controller works again: a new topic gets leaders on both brokers
    admin.create_topics([NewTopic("after", 1, 2)])["after"].result(30)
    wait_for(lambda: cluster.state("after", 0)["leader"] in (1, 2), 30, "a leader")
    assert cluster.controller()[0] in (1, 2)
