"""`logbus.aio.Admin` changing configs (IncrementalAlterConfigs, AlterConfigs) and deleting
records (DeleteRecords) on a real broker, with every kind of bad input."""

from __future__ import annotations

from typing import Any

import pytest
from admin_helpers import failure, name, run

from logbus import Admin as BlockingAdmin
from logbus.aio import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
    ResourceType,
    TopicPartition,
)
from logbus.client.admin import ConfigSource
from logbus.client.requests import produce as produce_request
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


async def entries(admin: Admin, resource: ConfigResource) -> dict[str, Any]:
    return (await admin.describe_configs([resource]))[resource]


def test_incremental_alter_topic_configs(broker: Any) -> None:
    topic = name("t")
    resource = ConfigResource(ResourceType.TOPIC, topic)

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, config={"retention.ms": "60000"})])
        await admin.incremental_alter_configs(
            {
                resource: [
                    AlterConfigOp("retention.ms", None, DELETE),
                    AlterConfigOp("segment.bytes", "1048576"),
                    AlterConfigOp("cleanup.policy", "compact", APPEND),
                ]
            }
        )
        found = await entries(admin, resource)
        assert found["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
        assert (found["segment.bytes"].value, found["segment.bytes"].source) == (
            "1048576",
            ConfigSource.DYNAMIC_TOPIC_CONFIG,
        )
        assert found["cleanup.policy"].value == "delete,compact"

        await admin.incremental_alter_configs(
            {resource: [AlterConfigOp("cleanup.policy", "delete", SUBTRACT)]}
        )
        assert (await entries(admin, resource))["cleanup.policy"].value == "compact"

        await admin.incremental_alter_configs(
            {resource: [AlterConfigOp("segment.bytes", "2097152")]}, validate_only=True
        )
        assert (await entries(admin, resource))["segment.bytes"].value == "1048576"

    run(broker, action)


def test_incremental_alter_reports_each_resource(broker: Any) -> None:
    topic, ghost = name("t"), name("ghost")
    good = ConfigResource(ResourceType.TOPIC, topic)
    missing = ConfigResource(ResourceType.TOPIC, ghost)
    bad_value = ConfigResource(ResourceType.TOPIC, topic + "-2")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic), NewTopic(bad_value.name)])
        err = await failure(
            admin.incremental_alter_configs(
                {
                    good: [AlterConfigOp("retention.ms", "1000")],
                    missing: [AlterConfigOp("retention.ms", "1000")],
                    bad_value: [AlterConfigOp("retention.ms", "soon")],
                }
            )
        )
        assert set(err.errors) == {missing, bad_value}
        assert err.errors[missing].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert err.errors[bad_value].code == ErrorCode.INVALID_CONFIG
        assert "retention.ms" in str(err.errors[bad_value])
        assert (await entries(admin, good))["retention.ms"].value == "1000"

        err = await failure(
            admin.incremental_alter_configs({good: [AlterConfigOp("no.such.config", "1")]})
        )
        assert err.code == ErrorCode.INVALID_CONFIG and "no.such.config" in str(err)
        err = await failure(
            admin.incremental_alter_configs({good: [AlterConfigOp("retention.ms", "5", APPEND)]})
        )
        assert err.code == ErrorCode.INVALID_CONFIG
        with pytest.raises(ValueError, match="needs a value"):
            await admin.incremental_alter_configs({good: [AlterConfigOp("retention.ms", None)]})

    run(broker, action)


def test_broker_configs(broker: Any) -> None:
    this_broker = ConfigResource(ResourceType.BROKER, "0")
    defaults = ConfigResource(ResourceType.BROKER, "")

    async def action(admin: Admin) -> None:
        await admin.incremental_alter_configs(
            {
                this_broker: [AlterConfigOp("log.retention.ms", "5000")],
                defaults: [AlterConfigOp("log.retention.minutes", "30")],
            }
        )
        entry = (await entries(admin, this_broker))["log.retention.ms"]
        assert (entry.value, entry.source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        err = await failure(
            admin.incremental_alter_configs({this_broker: [AlterConfigOp("broker.id", "7")]})
        )
        assert err.code == ErrorCode.INVALID_REQUEST
        assert "Cannot update these configs dynamically" in str(err)

    run(broker, action)


def test_legacy_alter_configs_replaces_the_whole_set(broker: Any) -> None:
    topic = name("t")
    resource = ConfigResource(ResourceType.TOPIC, topic)

    async def action(admin: Admin) -> None:
        await admin.create_topics(
            [NewTopic(topic, config={"retention.ms": "60000", "segment.bytes": "1048576"})]
        )
        await admin.alter_configs({resource: {"retention.ms": "120000"}})
        found = await entries(admin, resource)
        assert found["retention.ms"].value == "120000"
        assert found["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG  # dropped

        err = await failure(admin.alter_configs({resource: {"retention.ms": "x"}}))
        assert err.code == ErrorCode.INVALID_CONFIG
        err = await failure(
            admin.alter_configs({ConfigResource(ResourceType.TOPIC, name("ghost")): {}})
        )
        assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(broker, action)


def test_delete_records(broker: Any) -> None:
    topic = name("t")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=2)])
        for p in (0, 1):
            conn = await admin.cluster.leader(topic, p)
            records = [NewRecord(None, b"v%d" % i) for i in range(10)]
            await produce_request.produce(conn, topic, p, build_batch(records))
        p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

        assert await admin.delete_records({p0: 4, p1: -1}) == {p0: 4, p1: 10}
        earliest = await admin.list_offsets({p0: "earliest", p1: "earliest"})
        assert (earliest[p0].offset, earliest[p1].offset) == (4, 10)
        assert await admin.delete_records({p0: 2}) == {p0: 4}  # never moves back

        missing = TopicPartition(topic, 5)
        err = await failure(admin.delete_records({p0: 11, missing: 0, p1: 10}))
        assert err.errors[p0].code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert err.errors[missing].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert err.results == {p1: 10}
        with pytest.raises(ValueError, match="offset"):
            await admin.delete_records({p0: -2})

    run(broker, action)


def test_blocking_admin_alters_and_deletes(broker: Any) -> None:
    topic = name("t")
    resource = ConfigResource(ResourceType.TOPIC, topic)
    with BlockingAdmin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic)])
        admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "1000")]})
        admin.alter_configs({resource: {"retention.ms": "2000"}})
        assert admin.describe_configs([resource])[resource]["retention.ms"].value == "2000"
        assert admin.delete_records({TopicPartition(topic, 0): -1}) == {
            TopicPartition(topic, 0): 0
        }
