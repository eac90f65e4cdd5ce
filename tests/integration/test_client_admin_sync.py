"""The blocking `logbus.Admin` against a real broker: every call through its loop thread."""

from __future__ import annotations

import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from logbus import (
    Admin,
    AdminBatchError,
    ConfigResource,
    KafkaConnectionError,
    NewTopic,
    ResourceType,
    TopicPartition,
)
from logbus.protocol import ErrorCode


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_every_call_blocks_until_done(broker: Any) -> None:
    topic, group = name("t"), name("g")
    with Admin({"bootstrap.servers": broker.bootstrap}, client_id="sync-admin") as admin:
        assert admin.config["client.id"] == "sync-admin"
        created = admin.create_topics([NewTopic(topic, num_partitions=2)])
        assert created[topic].num_partitions == 2
        assert topic in admin.list_topics()
        admin.create_partitions({topic: 3})
        assert len(admin.describe_topics([topic])[topic].partitions) == 3
        resource = ConfigResource(ResourceType.TOPIC, topic)
        assert admin.describe_configs([resource])[resource]["cleanup.policy"].value == "delete"
        p0 = TopicPartition(topic, 0)
        assert admin.list_offsets({p0: "latest"})[p0].offset == 0
        assert admin.describe_cluster().nodes[0].port == broker.port

        p1 = TopicPartition(topic, 1)
        admin.alter_consumer_group_offsets(group, {p0: 0, p1: 0})
        assert admin.list_consumer_group_offsets(group) == {p0: 0, p1: 0}
        assert group in {g.group_id for g in admin.list_consumer_groups()}
        assert admin.describe_consumer_groups([group])[group].state == "Empty"
        admin.delete_consumer_group_offsets(group, [p0])
        assert admin.list_consumer_group_offsets(group) == {p1: 0}
        admin.delete_consumer_groups([group])
        assert admin.list_consumer_group_offsets(group) == {}

        with pytest.raises(AdminBatchError) as info:
            admin.create_topics([NewTopic(topic)])
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
    admin.close()  # closing twice is harmless


def test_shared_between_threads(broker: Any) -> None:
    topics = [name("t") for _ in range(8)]
    with Admin(bootstrap_servers=broker.bootstrap) as admin:

        def create(topic: str) -> str:
            return next(iter(admin.create_topics([NewTopic(topic)])))

        with ThreadPoolExecutor(4) as pool:
            assert sorted(pool.map(create, topics)) == sorted(topics)
        assert set(topics) <= set(admin.list_topics())
    assert not [t for t in threading.enumerate() if t.name == "logbus-admin"]


def test_unreachable_broker_fails_at_creation() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KafkaConnectionError, match="Connection refused"):
        Admin(bootstrap_servers=f"127.0.0.1:{port}")
    assert not [t for t in threading.enumerate() if t.name == "logbus-admin"]
