"""Topics, configs, the offsets topic and producer ids across three `logbus server start`
processes on a real ZooKeeper: whatever broker a change goes through, every broker sees
it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from zk_cluster import ClusterBroker, ZkCluster, cluster_factory, wait_for

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.find_coordinator import find_coordinator
from logbus.client.requests.producer_id import init_producer_id
from logbus.client.requests.topics import create_topics
from logbus.coordinator.group.offsets_topic import offsets_partition_for
from logbus.protocol import ErrorCode

__all__ = ["cluster_factory"]


async def _connect(broker: ClusterBroker) -> Connection:
    return await Connection.connect("127.0.0.1", broker.port)


def topic_everywhere(cluster: ZkCluster, name: str, present: bool = True) -> None:
    def seen() -> bool:
        for broker in cluster.brokers.values():
            topics = broker.metadata().topics
            if (name in topics and topics[name].error is None) != present:
                return False
            if present and any(p.leader < 0 for p in topics[name].partitions.values()):
                return False
        return True

    wait_for(seen, 30, f"{name} {'on' if present else 'gone from'} every broker")


def test_create_through_any_broker(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(3)
    controller, _ = cluster.wait_controller()
    other = cluster.brokers[next(b for b in (1, 2, 3) if b != controller)]

    async def refused() -> None:
        async with await _connect(other) as conn:
            with pytest.raises(KafkaError) as info:
                await create_topics(conn, "direct", 1, 1)
            assert info.value.code == ErrorCode.NOT_CONTROLLER

    asyncio.run(refused())
    # a client bootstrapped at a non-controller sends CreateTopics to the controller
    admin = cluster.admin()
    admin.create_topics([NewTopic("spread", 6, 2)])["spread"].result(30)
    topic_everywhere(cluster, "spread")
    assignment = json.loads(cluster.store.get("/brokers/topics/spread")[0])["partitions"]
    assert sorted(assignment) == [str(p) for p in range(6)]
    assert all(len(set(r)) == 2 for r in assignment.values())
    # auto-creation through a non-controller: that broker writes the topic's znodes
    producer = Producer({"bootstrap.servers": other.bootstrap, "log_level": 0})
    producer.produce("auto-made", b"v")
    assert producer.flush(30) == 0
    topic_everywhere(cluster, "auto-made")


def test_rack_aware_assignment_through_the_controller(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(0)
    for broker_id, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        cluster.add(broker_id, f"broker.rack={rack}")
    cluster.wait_registered({1, 2, 3, 4})
    cluster.wait_controller()
    admin = cluster.admin()
    admin.create_topics([NewTopic("racked", 8, 2)])["racked"].result(30)
    assignment = json.loads(cluster.store.get("/brokers/topics/racked")[0])["partitions"]
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assignment.values():
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_delete_reaches_every_broker(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()
    admin = cluster.admin()
    for name in ("doomed", "marked"):
        admin.create_topics([NewTopic(name, 3, 3)])[name].result(30)
        topic_everywhere(cluster, name)
    admin.delete_topics(["doomed"])["doomed"].result(30)
    topic_everywhere(cluster, "doomed", present=False)
    assert not cluster.store.exists("/brokers/topics/doomed")
    # deletion by the znode alone (as `kafka-topics.sh --zookeeper` did)
    cluster.store.create("/admin/delete_topics/marked", b"")
    topic_everywhere(cluster, "marked", present=False)
    wait_for(lambda: not cluster.store.exists("/admin/delete_topics/marked"), 30, "marker removed")
    for broker in cluster.brokers.values():
        wait_for(
            lambda b=broker: (
                not [
                    d
                    for d in b.data_dir.iterdir()
                    if d.name.startswith(("doomed-", "marked-")) and not d.name.endswith("-delete")
                ]
            ),
            30,
            "the logs of deleted topics renamed for deletion",
        )


def test_topic_config_change_reaches_every_broker(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()
    admin = cluster.admin()
    admin.create_topics([NewTopic("tuned", 1, 3)])["tuned"].result(30)
    topic_everywhere(cluster, "tuned")
    entry = ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", "tuned", incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    for broker in cluster.brokers.values():
        from confluent_kafka.admin import AdminClient

        one = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        described = ConfigResource("topic", "tuned")
        wait_for(
            lambda one=one, described=described: (
                one.describe_configs([described])[described].result(10)["retention.ms"].value
                == "12345"
            ),
            30,
            f"broker {broker.broker_id} to see the new retention.ms",
        )


def test_offsets_topic_replicas_and_coordinator(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(2, "offsets.topic.replication.factor=3")
    cluster.wait_controller()

    async def lookup(broker: ClusterBroker) -> tuple[int, int]:
        async with await _connect(broker) as conn:
            found = await find_coordinator(conn, "g1")
            return found.error_code, found.node_id

    # fewer live brokers than offsets.topic.replication.factor: no coordinator yet
    assert asyncio.run(lookup(cluster.brokers[1]))[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not cluster.store.exists("/brokers/topics/__consumer_offsets")
    cluster.add(3, "offsets.topic.replication.factor=3")
    cluster.wait_registered({1, 2, 3})
    answers = wait_for(
        lambda: (
            (a := {b: asyncio.run(lookup(cluster.brokers[b])) for b in (1, 2, 3)})
            and all(code == ErrorCode.NONE for code, _ in a.values())
            and a
        ),
        30,
        "a coordinator",
    )
    assignment = json.loads(cluster.store.get("/brokers/topics/__consumer_offsets")[0])
    assert all(len(r) == 3 for r in assignment["partitions"].values())
    partitions = len(assignment["partitions"])
    leader = cluster.state("__consumer_offsets", offsets_partition_for("g1", partitions))
    assert {node for _, node in answers.values()} == {leader["leader"]}


def test_producer_ids_unique_across_brokers(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()

    async def ids(broker: ClusterBroker) -> list[int]:
        async with await _connect(broker) as conn:
            return [(await init_producer_id(conn)).producer_id for _ in range(3)]

    seen = [pid for b in cluster.brokers.values() for pid in asyncio.run(ids(b))]
    assert len(set(seen)) == len(seen) == 9
    block = json.loads(cluster.store.get("/latest_producer_id_block")[0])
    assert block["version"] == 1 and block["broker"] in (1, 2, 3)
    assert int(block["block_end"]) - int(block["block_start"]) == 999


def test_create_partitions_reaches_every_broker(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()
    admin = cluster.admin()
    admin.create_topics([NewTopic("grow", 2, 2)])["grow"].result(30)
    topic_everywhere(cluster, "grow")
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(30)

    def grown() -> bool:
        for broker in cluster.brokers.values():
            meta = broker.metadata("grow").topics["grow"]
            if len(meta.partitions) != 5 or any(p.leader < 0 for p in meta.partitions.values()):
                return False
        return True

    wait_for(grown, 30, "five partitions with leaders on every broker")
    for p in range(5):
        state = cluster.state("grow", p)
        assert len(state["isr"]) == 2 and state["leader"] in state["isr"]
