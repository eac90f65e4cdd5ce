"""ZooKeeper going away and coming back under a running cluster: brokers keep serving
produce and fetch for the partitions they lead (nothing there needs ZooKeeper), and once
ZooKeeper is back the controller works again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from zk_cluster import ZkCluster, wait_for

import logbus
from kafka_wire import WireClient
from logbus.controller.zookeeper_store import ZooKeeperStore
from logbus.protocol import ApiKey, ErrorCode


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
    controller_id, _ = cluster.wait_controller()
    cluster.store.close()
    server.stop()
    # What needs ZooKeeper fails with a code once zookeeper.connection.timeout.ms has
    # passed (here the session timeout); the connection stays open
    with WireClient(cluster.brokers[controller_id].bootstrap, timeout=60) as client:
        error, message = client.create_topic("refused", 1)
        assert error == ErrorCode.REQUEST_TIMED_OUT, message
        assert "ZooKeeper" in str(message)
        alter = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "steady",
                    "configs": [
                        {"name": "retention.ms", "config_operation": 0, "value": "1000"}
                    ],
                }
            ],
            "validate_only": False,
        }
        (altered,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)["responses"]
        assert altered["error_code"] == ErrorCode.REQUEST_TIMED_OUT
        # no producer id block can be reserved: a retriable code
        init = {
            "transactional_id": None,
            "transaction_timeout_ms": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, init)
        assert answer["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        (steady,) = client.metadata(["steady"])["topics"]
        assert steady["error_code"] == ErrorCode.NONE
    # ZooKeeper is gone: the leader still takes acks=all writes (its ISR is unchanged)
    assert send(cluster.bootstrap, "steady", [b"during%d" % i for i in range(10)]) == 10
    assert len(read(cluster.bootstrap, "steady", 20)) == 20
    # an idempotent logbus producer made now asks for its producer id again (a retriable
    # COORDINATOR_LOAD_IN_PROGRESS) until ZooKeeper is back, instead of failing
    made: list[logbus.Producer] = []
    maker = threading.Thread(
        target=lambda: made.append(
            logbus.Producer(
                bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True
            )
        )
    )
    maker.start()
    time.sleep(1.0)
    assert not made
    server.start()
    maker.join(60)
    (producer,) = made
    with producer:
        assert producer.send("steady", b"later", partition=0).result(60).offset == 20
    cluster.store = ZooKeeperStore(cluster.zk_connect, 30_000, 10_000)
    cluster.wait_registered({1, 2})
    # the controller works again: a new topic gets leaders on both brokers
    admin.create_topics([NewTopic("after", 1, 2)])["after"].result(30)
    wait_for(lambda: cluster.state("after", 0)["leader"] in (1, 2), 30, "a leader")
    assert cluster.controller()[0] in (1, 2)
