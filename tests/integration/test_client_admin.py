"""`logbus.aio.Admin` against a real broker: every call, per-item errors, bad input."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from admin_helpers import failure, name, run

from logbus.aio import (
    Admin,
    AdminBatchError,
    ConfigResource,
    KafkaError,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicPartition,
)
from logbus.client.admin import ConfigSource
from logbus.client.requests import produce as produce_request
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch


async def produce(admin: Admin, topic: str, partition: int, timestamps: list[int]) -> None:
    records = [NewRecord(None, f"v{i}".encode(), timestamp=ts) for i, ts in enumerate(timestamps)]
    conn = await admin.cluster.leader(topic, partition)
    await produce_request.produce(conn, topic, partition, build_batch(records))


def test_topic_lifecycle(broker: Any) -> None:
    orders, audit = name("orders"), name("audit")

    async def action(admin: Admin) -> None:
        created = await admin.create_topics(
            [
                NewTopic(orders, num_partitions=3, replication_factor=1),
                NewTopic(audit, config={"retention.ms": "60000", "cleanup.policy": "compact"}),
            ]
        )
        assert set(created) == {orders, audit}
        assert (created[orders].num_partitions, created[orders].replication_factor) == (3, 1)
        assert created[audit].num_partitions == 1  # the broker's num.partitions
        assert created[audit].configs["retention.ms"] == "60000"

        topics = await admin.list_topics()
        assert {orders, audit} <= set(topics)
        assert topics == sorted(topics)

        described = await admin.describe_topics([orders])
        info = described[orders]
        assert sorted(info.partitions) == [0, 1, 2]
        assert all(p.leader == 0 and p.replicas == (0,) and p.isr == (0,)
                   for p in info.partitions.values())  # fmt: skip
        assert not info.is_internal
        assert info.topic_id == created[orders].topic_id

        await admin.create_partitions({orders: 5, audit: NewPartitions(2)})
        described = await admin.describe_topics([orders, audit])
        assert [len(described[t].partitions) for t in (orders, audit)] == [5, 2]

        await admin.delete_topics([orders, audit])
        assert not {orders, audit} & set(await admin.list_topics())
        gone = await failure(admin.describe_topics([orders]))
        assert gone.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert f"Topic '{orders}' does not exist" in str(gone)

    run(broker, action)


def test_create_topics_reports_each_topic(broker: Any) -> None:
    good, taken = name("good"), name("taken")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(taken)])
        err = await failure(
            admin.create_topics(
                [
                    NewTopic(good, num_partitions=2),
                    NewTopic(taken),
                    NewTopic(name("zero"), num_partitions=0),
                    NewTopic(name("rf"), replication_factor=3),
                    NewTopic(name("cfg"), config={"retention.ms": "soon"}),
                    NewTopic("bad name!"),
                ]
            )
        )
        codes = {topic: e.code for topic, e in err.errors.items()}
        assert sorted(codes.values()) == sorted(
            [
                ErrorCode.TOPIC_ALREADY_EXISTS,
                ErrorCode.INVALID_PARTITIONS,
                ErrorCode.INVALID_REPLICATION_FACTOR,
                ErrorCode.INVALID_CONFIG,
                ErrorCode.INVALID_TOPIC_EXCEPTION,
            ]
        )
        assert codes[taken] == ErrorCode.TOPIC_ALREADY_EXISTS
        invalid_config = next(e for e in err.errors.values() if e.code == ErrorCode.INVALID_CONFIG)
        assert "retention.ms" in str(invalid_config)
        assert list(err.results) == [good]  # the valid topic was created all the same
        assert err.results[good].num_partitions == 2
        assert "5 of 6 failed" in str(err)
        assert good in await admin.list_topics()

        # One topic: the error reads as that topic's own.
        single = await failure(admin.create_topics([NewTopic(taken)]))
        assert single.code == ErrorCode.TOPIC_ALREADY_EXISTS and not single.retriable
        assert str(single).startswith("TOPIC_ALREADY_EXISTS")

        checked = name("checked")
        plan = await admin.create_topics([NewTopic(checked, 4)], validate_only=True)
        assert plan[checked].num_partitions == 4
        assert checked not in await admin.list_topics()

        with pytest.raises(ValueError, match="listed twice"):
            await admin.create_topics([NewTopic(checked), NewTopic(checked)])
        # A name or a dict where NewTopic objects belong: told so, nothing created.
        with pytest.raises(TypeError, match="takes NewTopic objects, not str"):
            await admin.create_topics({checked: 3})  # type: ignore[arg-type]
        assert checked not in await admin.list_topics()

    run(broker, action)


def test_bad_partition_changes_and_unknown_topics(broker: Any) -> None:
    topic = name("t")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=2)])
        err = await failure(admin.create_partitions({topic: 2}))
        assert err.code == ErrorCode.INVALID_PARTITIONS
        err = await failure(admin.create_partitions({topic: 1}))
        assert err.code == ErrorCode.INVALID_PARTITIONS
        err = await failure(admin.create_partitions({topic: NewPartitions(3, [[7]])}))
        assert err.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        plan = name("plan")
        await admin.create_partitions({topic: 3}, validate_only=True)
        assert len((await admin.describe_topics([topic]))[topic].partitions) == 2

        ghost = name("ghost")
        for call in (
            admin.create_partitions({ghost: 3}),
            admin.delete_topics([ghost]),
            admin.describe_topics([ghost, topic]),
        ):
            err = await failure(call)
            assert list(err.errors) == [ghost]
            assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert plan not in await admin.list_topics()

    run(broker, action)


def test_describe_configs(broker: Any) -> None:
    topic = name("t")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, config={"retention.ms": "60000"})])
        resource = ConfigResource(ResourceType.TOPIC, topic)
        broker_resource = ConfigResource(ResourceType.BROKER, "0")
        found = await admin.describe_configs([resource, broker_resource], include_synonyms=True)
        entries = found[resource]
        retention = entries["retention.ms"]
        assert (retention.value, retention.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert not retention.is_default
        assert retention.synonyms[0].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert entries["cleanup.policy"].value == "delete"
        assert entries["cleanup.policy"].is_default
        assert found[broker_resource]["broker.id"].value == "0"

        ghost = ConfigResource(ResourceType.TOPIC, name("ghost"))
        err = await failure(admin.describe_configs([ghost, resource]))
        assert list(err.errors) == [ghost]
        assert err.errors[ghost].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert resource in err.results

        err = await failure(admin.describe_configs([ConfigResource(ResourceType.BROKER, "x")]))
        assert err.code == ErrorCode.INVALID_REQUEST

    run(broker, action)


def test_list_offsets(broker: Any) -> None:
    topic = name("t")
    now = int(time.time() * 1000)

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=2)])
        await produce(admin, topic, 0, [now - 3000, now - 2000, now + 5000, now - 1000])
        p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        found = await admin.list_offsets({p0: "earliest", p1: "latest"})
        assert (found[p0].offset, found[p1].offset) == (0, 0)
        latest = await admin.list_offsets({p0: "latest"})
        assert latest[p0].offset == 4
        by_time = await admin.list_offsets({p0: now - 2500})
        assert (by_time[p0].offset, by_time[p0].timestamp) == (1, now - 2000)
        assert (await admin.list_offsets({p0: now + 10_000}))[p0].offset == -1
        biggest = await admin.list_offsets({p0: "max_timestamp"})
        assert (biggest[p0].offset, biggest[p0].timestamp) == (2, now + 5000)
        committed = await admin.list_offsets({p0: "latest"}, isolation_level="read_committed")
        assert committed[p0].offset == 4

        missing = TopicPartition(topic, 9)
        err = await failure(admin.list_offsets({p0: "earliest", missing: "earliest"}))
        assert list(err.errors) == [missing]
        assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert err.results[p0].offset == 0
        err = await failure(admin.list_offsets({TopicPartition(name("ghost"), 0): "latest"}))
        assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        for bad in ("newest", -5, True):
            with pytest.raises(ValueError):
                await admin.list_offsets({p0: bad})  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="isolation_level"):
            await admin.list_offsets({p0: "latest"}, isolation_level="dirty")  # type: ignore[arg-type]

    run(broker, action)


def test_describe_cluster(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        cluster = await admin.describe_cluster()
        assert cluster.cluster_id
        assert [(n.node_id, n.host, n.port) for n in cluster.nodes] == [
            (0, "127.0.0.1", broker.port)
        ]
        assert cluster.controller == cluster.nodes[0]

    run(broker, action)


def test_group_offsets_of_an_inactive_group(broker: Any) -> None:
    topic, group = name("t"), name("g")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=3)])
        for p in range(3):
            await produce(admin, topic, p, [1, 2, 3, 4, 5])
        p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))
        assert await admin.list_consumer_group_offsets(group) == {}

        await admin.alter_consumer_group_offsets(group, {p0: 1, p1: 2, p2: 5})
        assert await admin.list_consumer_group_offsets(group) == {p0: 1, p1: 2, p2: 5}
        assert await admin.list_consumer_group_offsets(group, [p1]) == {p1: 2}

        listed = {g.group_id: g for g in await admin.list_consumer_groups()}
        assert listed[group].state == "Empty"
        assert group in {g.group_id for g in await admin.list_consumer_groups(states=["Empty"])}
        assert group not in {
            g.group_id for g in await admin.list_consumer_groups(states=["Stable"])
        }
        described = (await admin.describe_consumer_groups([group]))[group]
        assert (described.state, described.members) == ("Empty", [])
        assert described.coordinator is not None and described.coordinator.node_id == 0

        await admin.delete_consumer_group_offsets(group, [p1])
        assert await admin.list_consumer_group_offsets(group) == {p0: 1, p2: 5}

        ghost = name("ghost")
        err = await failure(admin.describe_consumer_groups([group, ghost]))
        assert list(err.errors) == [ghost]
        assert err.code == ErrorCode.GROUP_ID_NOT_FOUND
        assert f"Consumer group '{ghost}' does not exist." in str(err)

        await admin.delete_consumer_groups([group])
        assert group not in {g.group_id for g in await admin.list_consumer_groups()}
        assert await admin.list_consumer_group_offsets(group) == {}
        err = await failure(admin.delete_consumer_groups([group]))
        assert err.code == ErrorCode.GROUP_ID_NOT_FOUND

        with pytest.raises(ValueError, match="offset"):
            await admin.alter_consumer_group_offsets(group, {p0: -1})

    run(broker, action)


def test_active_group(broker_factory: Any) -> None:
    from confluent_kafka import Consumer

    broker = broker_factory(group_initial_rebalance_delay_ms="0")
    topic, group = name("t"), name("g")

    async def create(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=2)])

    run(broker, create)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "active-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer got no partitions"
            consumer.poll(0.2)
        p0 = TopicPartition(topic, 0)

        async def action(admin: Admin) -> None:
            described = (await admin.describe_consumer_groups([group]))[group]
            assert described.state == "Stable"
            assert described.protocol_type == "consumer"
            assert described.partition_assignor in ("range", "roundrobin")
            (member,) = described.members
            assert member.client_id == "active-client"
            assert member.assignment == {topic: [0, 1]}

            err = await failure(admin.delete_consumer_groups([group]))
            assert err.code == ErrorCode.NON_EMPTY_GROUP
            err = await failure(admin.alter_consumer_group_offsets(group, {p0: 0}))
            assert err.code == ErrorCode.UNKNOWN_MEMBER_ID
            err = await failure(admin.delete_consumer_group_offsets(group, [p0]))
            assert err.code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

        run(broker, action)
    finally:
        consumer.close()


def test_unknown_config_names_are_refused() -> None:
    from logbus.aio import ConfigError

    with pytest.raises(ConfigError, match=r"did you mean 'request\.timeout\.ms'"):
        Admin({"bootstrap.servers": "127.0.0.1:9"}, request_timeout=5)
    with pytest.raises(ConfigError, match=r"unknown admin config 'linger\.ms'"):
        Admin({"linger.ms": 5})
    admin = Admin(bootstrap_servers="a:1,b:2", default_api_timeout_ms="5000")
    assert admin.config["bootstrap.servers"] == ["a:1", "b:2"]
    assert admin.config["default.api.timeout.ms"] == 5000
    with pytest.raises(RuntimeError, match="not started"):
        asyncio.run(admin.list_topics())


def test_retries_across_a_broker_restart(broker: Any) -> None:
    """The broker closes every connection when it stops: the next calls reconnect and, if
    the group coordinator is still loading, retry until it answers."""
    topic, group = name("t"), name("g")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic)])
        await admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 0})
        await asyncio.to_thread(broker.restart)
        assert topic in await admin.list_topics()
        assert await admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 0}
        await admin.create_partitions({topic: 2})

    run(broker, action)


def test_calls_give_up_at_their_timeout(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        await asyncio.to_thread(broker.stop)
        with pytest.raises(KafkaError) as info:
            await admin.list_topics(timeout_ms=300)
        assert info.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert "gave up after 300 ms" in str(info.value)
        assert "cannot connect" in str(info.value)
        with pytest.raises(AdminBatchError) as batch:
            await admin.delete_topics(["a", "b"], timeout_ms=300)
        assert set(batch.value.errors) == {"a", "b"}
        assert batch.value.retriable

    run(broker, action, retry_backoff_ms=20)
