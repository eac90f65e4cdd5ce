"""logbus's Admin and confluent-kafka (librdkafka) side by side on one broker: each sees
and changes what the other made (topics, partitions, configs, groups, offsets)."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import pytest
from compat_clients import Msg, confluent_poll, confluent_produce, new_topic

from kafka_wire import wait_for
from logbus import Admin, AdminBatchError, ConfigResource, NewTopic, ResourceType, TopicPartition
from logbus.client.admin import ConfigSource
from logbus.protocol import ErrorCode

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
TIMEOUT = 30


class Committed(NamedTuple):
    offset: int
    metadata: str


def confluent_admin(broker: Any) -> Any:
    return ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap})


def confluent_partitions(client: Any, topic: str) -> int | None:
    """The partition count librdkafka's metadata shows for `topic`, None if it has none.
    (All topics are asked for: asking for one would create it with auto-creation on.)"""
    md = client.list_topics(timeout=TIMEOUT)
    info = md.topics.get(topic)
    if info is None or info.error is not None:
        return None
    return len(info.partitions)


def test_topics_and_configs_both_ways(broker: Any) -> None:
    ours, theirs = new_topic("ours"), new_topic("theirs")
    client = confluent_admin(broker)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(ours, 3, 1, config={"retention.ms": "60000"})])
        assert confluent_partitions(client, ours) == 3
        resource = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, ours)
        configs = client.describe_configs([resource])[resource].result(TIMEOUT)
        assert configs["retention.ms"].value == "60000"
        assert configs["retention.ms"].source == ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value

        futures = client.create_topics(
            [ck_admin.NewTopic(theirs, 2, 1, config={"cleanup.policy": "compact"})]
        )
        futures[theirs].result(TIMEOUT)
        described = admin.describe_topics([theirs])[theirs]
        assert sorted(described.partitions) == [0, 1]
        ours_resource = ConfigResource(ResourceType.TOPIC, theirs)
        entry = admin.describe_configs([ours_resource])[ours_resource]["cleanup.policy"]
        assert (entry.value, entry.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)

        admin.create_partitions({theirs: 4})
        wait_for(lambda: confluent_partitions(client, theirs) == 4, what="librdkafka sees 4")
        client.create_partitions([ck_admin.NewPartitions(ours, 5)])[ours].result(TIMEOUT)
        assert len(admin.describe_topics([ours])[ours].partitions) == 5

        client.delete_topics([ours])[ours].result(TIMEOUT)
        assert ours not in admin.list_topics()
        admin.delete_topics([theirs])
        wait_for(lambda: confluent_partitions(client, theirs) is None, what="theirs is gone")
        with pytest.raises(AdminBatchError) as info:
            admin.delete_topics([ours])
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offsets_agree_with_librdkafka(broker: Any) -> None:
    topic = new_topic()
    base = int(time.time() * 1000) - 10_000
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
        confluent_produce(
            broker.bootstrap, topic, [Msg(None, b"v%d" % i, (), base + i * 100) for i in range(6)]
        )
        tp = TopicPartition(topic, 0)
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
        try:
            low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), TIMEOUT)
            (by_time,) = consumer.offsets_for_times(
                [ck.TopicPartition(topic, 0, base + 250)], TIMEOUT
            )
        finally:
            consumer.close()
        found = admin.list_offsets({tp: "earliest"})[tp].offset, admin.list_offsets(
            {tp: "latest"}
        )[tp].offset
        assert found == (low, high) == (0, 6)
        assert admin.list_offsets({tp: base + 250})[tp].offset == by_time.offset == 3


def test_groups_of_librdkafka_consumers(broker_factory: Any) -> None:
    broker = broker_factory(group_initial_rebalance_delay_ms="0")
    topic, group = new_topic(), new_topic("g")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
        msgs = [Msg(None, b"v%d-%d" % (p, i), partition=p) for p in (0, 1) for i in range(5)]
        confluent_produce(broker.bootstrap, topic, msgs)

        def consumer() -> Any:
            c = ck.Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": group,
                    "client.id": "librdkafka-member",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            c.subscribe([topic])
            return c

        first = consumer()
        try:
            assert len(confluent_poll(first, 10)) == 10
            first.commit(asynchronous=False)
            described = admin.describe_consumer_groups([group])[group]
            assert described.state == "Stable"
            assert [m.client_id for m in described.members] == ["librdkafka-member"]
            assert described.members[0].assignment == {topic: [0, 1]}
            with pytest.raises(AdminBatchError) as info:
                admin.delete_consumer_groups([group])
            assert info.value.code == ErrorCode.NON_EMPTY_GROUP
        finally:
            first.close()

        p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert admin.list_consumer_group_offsets(group) == {p0: 5, p1: 5}
        listed = {g.group_id: g for g in admin.list_consumer_groups()}
        assert (listed[group].protocol_type, listed[group].state) == ("consumer", "Empty")

        # An offset with commit metadata, the shape of the consumer's OffsetAndMetadata.
        admin.alter_consumer_group_offsets(group, {p0: 2, p1: Committed(4, "from-logbus")})
        client = confluent_admin(broker)
        request = ck.ConsumerGroupTopicPartitions(group)
        (result,) = client.list_consumer_group_offsets([request]).values()
        seen = {tp.partition: tp.offset for tp in result.result(TIMEOUT).topic_partitions}
        assert seen == {0: 2, 1: 4}
        # confluent-kafka sometimes reads a committed metadata string past its end (its
        # bug: the broker sends exactly these bytes), so kafka-python checks the metadata.
        from kafka import KafkaAdminClient
        from kafka import TopicPartition as KafkaPythonPartition

        other = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            committed = other.list_group_offsets(group)[group]
        finally:
            other.close()
        assert committed[KafkaPythonPartition(topic, 1)].metadata == "from-logbus"
        assert committed[KafkaPythonPartition(topic, 0)].offset == 2

        second = consumer()
        try:
            resumed = confluent_poll(second, 4)
        finally:
            second.close()
        assert sorted((g.partition, g.offset) for g in resumed) == [(0, 2), (0, 3), (0, 4), (1, 4)]

        # librdkafka's Admin changes offsets; logbus's reads them.
        altered = ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, 0, 1)])
        for future in client.alter_consumer_group_offsets([altered]).values():
            future.result(TIMEOUT)
        assert admin.list_consumer_group_offsets(group, [p0]) == {p0: 1}

        admin.delete_consumer_groups([group])
        groups = client.list_consumer_groups().result(TIMEOUT)
        assert group not in {g.group_id for g in groups.valid}


def test_config_changes_and_deleted_records_both_ways(broker: Any) -> None:
    from logbus import AlterConfigOp

    topic = new_topic()
    client = confluent_admin(broker)
    ours = ConfigResource(ResourceType.TOPIC, topic)
    theirs = ck_admin.ConfigResource(
        ck_admin.ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ck_admin.ConfigEntry(
                "segment.bytes",
                "1048576",
                incremental_operation=ck_admin.AlterConfigOpType.SET,
            )
        ],
    )
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
        admin.incremental_alter_configs({ours: [AlterConfigOp("retention.ms", "90000")]})
        described = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
        configs = client.describe_configs([described])[described].result(TIMEOUT)
        assert configs["retention.ms"].value == "90000"

        for future in client.incremental_alter_configs([theirs]).values():
            future.result(TIMEOUT)
        entry = admin.describe_configs([ours])[ours]["segment.bytes"]
        assert (entry.value, entry.source) == ("1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG)

        confluent_produce(broker.bootstrap, topic, [Msg(None, b"v%d" % i) for i in range(8)])
        tp = TopicPartition(topic, 0)
        assert admin.delete_records({tp: 5}) == {tp: 5}
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
        try:
            low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), TIMEOUT)
        finally:
            consumer.close()
        assert (low, high) == (5, 8)
        (deleted,) = client.delete_records([ck.TopicPartition(topic, 0, 7)]).values()
        assert deleted.result(TIMEOUT).low_watermark == 7
        assert admin.list_offsets({tp: "earliest"})[tp].offset == 7
