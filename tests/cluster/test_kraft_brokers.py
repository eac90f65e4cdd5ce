"""KRaft brokers (issue 27, point 4): nodes with the broker role serve clients from the
metadata log. Three combined nodes (`process.roles=broker,controller`) take a topic
created by confluent-kafka's admin client (forwarded to the active controller), an
acks=all idempotent producer's records and give them all back to a consumer group; a
partition leader killed with kill -9 is fenced when its session times out, a new leader
comes from the ISR, the load goes on, and so it does when the active controller is
killed next; the checker finds nothing lost, duplicated or reordered; a broker-only
node beside three controller-only nodes serves as well."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from checker import History
from fault_checks import read_and_check, wait_identical_logs, wait_isr
from kraft_cluster import KRaftProcessCluster
from load import ProducerLoad

TOPIC = "orders"
COUNT = 2000
CONFLUENT_LOAD: dict[str, Any] = {
    "client": "confluent",
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 120000,
    "log_level": 0,
}


def create_with_confluent(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})]
    )
    futures[topic].result(60)


def produce_and_consume(bootstrap: str, topic: str) -> set[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    failed: list[Any] = []
    for i in range(COUNT):
        producer.produce(
            topic, value=b"%d" % i, key=b"%d" % i,
            on_delivery=lambda err, _msg: err is not None and failed.append(err),
        )  # fmt: skip
    assert producer.flush(60) == 0
    assert not failed, failed[:3]
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "readers", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(values) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.add(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.timeout(240)
def test_three_combined_nodes_serve_confluent_kafka(tmp_path: Path) -> None:
    with KRaftProcessCluster(tmp_path, brokers=[1, 2, 3], controllers=[1, 2, 3]) as cluster:
        assert cluster.broker_ids() == [1, 2, 3]
        create_with_confluent(cluster.bootstrap, TOPIC, 3)
        cluster.wait_for(
            lambda: all(p.leader in (1, 2, 3) for p in cluster.metadata(TOPIC).partitions.values()),
            60, "leaders for every partition",
        )  # fmt: skip
        info = cluster.metadata(TOPIC)
        for partition in info.partitions.values():
            assert sorted(partition.replicas) == [1, 2, 3]
        values = produce_and_consume(cluster.bootstrap, TOPIC)
        assert values == {b"%d" % i for i in range(COUNT)}
        # every replica ends with the same batches (followers fetched, ISR kept whole)
        wait_isr(cluster, TOPIC, 3)
        for partition in range(3):
            wait_identical_logs(cluster, TOPIC, partition)


@pytest.mark.timeout(300)
def test_a_killed_partition_leader_then_active_controller_under_load(tmp_path: Path) -> None:
    with KRaftProcessCluster(
        tmp_path, brokers=[1, 2, 3], controllers=[1, 2, 3], min_insync_replicas="2"
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
        history = History()
        with ProducerLoad(cluster.bootstrap, history, TOPIC, producers=2, **CONFLUENT_LOAD) as load:
            load.wait_acknowledged(200)
            victim = cluster.leader_of(TOPIC, 0)
            isr = cluster.isr_of(TOPIC, 0)
            cluster.kill(victim)
            new_leader = cluster.wait_for(
                lambda: (lead := cluster.leader_of(TOPIC, 0)) not in (-1, victim) and lead,
                60, f"a new leader after kill -9 of broker {victim}",
            )  # fmt: skip
            assert new_leader in isr
            cluster.wait_for(lambda: victim not in cluster.broker_ids(), 30, "the victim fenced")
            load.wait_acknowledged(load.acknowledged() + 200)
            cluster.start_broker(victim)
            wait_isr(cluster, TOPIC, 2)
            load.wait_acknowledged(load.acknowledged() + 200)
            # then the active controller (a broker too): the quorum elects another, and
            # the brokers keep their sessions with it
            epoch = cluster.controller_epoch()
            controller = cluster.active_controller()
            cluster.kill(controller)
            cluster.wait_for(
                lambda: cluster.active_controller() not in (controller,)
                and cluster.controller_epoch() > epoch,
                60, f"a new active controller after kill -9 of {controller}",
            )  # fmt: skip
            load.wait_acknowledged(load.acknowledged() + 200)
            cluster.start_broker(controller)
            wait_isr(cluster, TOPIC, 2)
            load.wait_acknowledged(load.acknowledged() + 200)
        assert not load.errors, load.errors
        result = read_and_check(cluster, history, TOPIC, 2)
        assert result.ok, str(result)
        for partition in range(2):
            wait_identical_logs(cluster, TOPIC, partition)


@pytest.mark.timeout(240)
def test_a_broker_only_node_beside_three_controllers_serves(tmp_path: Path) -> None:
    with KRaftProcessCluster(
        tmp_path, brokers=[10], controllers=[1, 2, 3], offsets_topic_replication_factor="1"
    ) as cluster:
        assert cluster.broker_ids() == [10]
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("solo", 2, 1)])["solo"].result(60)
        cluster.wait_for(
            lambda: all(p.leader == 10 for p in cluster.metadata("solo").partitions.values()),
            60, "broker 10 leading solo",
        )  # fmt: skip
        from confluent_kafka import Consumer, Producer

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
        for i in range(100):
            producer.produce("solo", value=b"%d" % i)
        assert producer.flush(60) == 0
        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap, "group.id": "solo-readers",
             "auto.offset.reset": "earliest"}
        )  # fmt: skip
        consumer.subscribe(["solo"])
        values: set[bytes] = set()
        deadline = time.monotonic() + 60
        try:
            while len(values) < 100 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.add(message.value())
        finally:
            consumer.close()
        assert values == {b"%d" % i for i in range(100)}
        # the topic deleted through the broker: its logs leave the broker's directory
        admin.delete_topics(["solo"])["solo"].result(60)
        cluster.wait_for(
            lambda: not [
                p for p in cluster.data_dir(10).glob("solo-*") if not p.name.endswith("-delete")
            ],
            60, "solo's logs deleted",
        )  # fmt: skip
