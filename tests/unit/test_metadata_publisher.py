"""What a KRaft broker does between two metadata images (server/metadata_publisher.py), as
values: the partitions it leads or follows (only those whose registration changed and
that list it), those it stops and deletes (topic removed, or moved off it), topics whose
configs changed; and the metadata cache built from the image (unfenced brokers only,
with their endpoints; topics with ids, partition epochs and configs)."""

from __future__ import annotations

import uuid
from typing import Any

from logbus.metadata.delta import MetadataDelta
from logbus.metadata.image import EMPTY_IMAGE, MetadataImage
from logbus.metadata.records import decode_record, encode_record
from logbus.server.kraft.metadata_publisher import cache_brokers, cache_topic, image_changes

ORDERS = uuid.UUID("7a000000-0000-4000-8000-000000000001")
AUDIT = uuid.UUID("7a000000-0000-4000-8000-000000000002")


def replay(image: MetadataImage, *records: tuple[str, dict[str, Any]]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, (name, data) in enumerate(records, start=image.offset + 1):
        delta.replay(decode_record(encode_record(name, data)), offset, 1)
    return delta.apply()


def register(broker_id: int) -> tuple[str, dict[str, Any]]:
    return (
        "RegisterBrokerRecord",
        {"broker_id": broker_id, "broker_epoch": broker_id, "incarnation_id": uuid.uuid4(),
         "end_points": [
             {"name": "PLAINTEXT", "host": "h", "port": 9000 + broker_id, "security_protocol": 0},
             {"name": "SECURE", "host": "h", "port": 9100 + broker_id, "security_protocol": 1},
         ],
         "rack": None, "fenced": True},
    )  # fmt: skip


def unfence(broker_id: int) -> tuple[str, dict[str, Any]]:
    return ("UnfenceBrokerRecord", {"id": broker_id, "epoch": broker_id})


def topic(name: str, topic_id: uuid.UUID) -> tuple[str, dict[str, Any]]:
    return ("TopicRecord", {"name": name, "topic_id": topic_id})


def partition(topic_id: uuid.UUID, index: int, replicas: list[int]) -> tuple[str, dict[str, Any]]:
    return (
        "PartitionRecord",
        {"partition_id": index, "topic_id": topic_id, "replicas": replicas, "isr": replicas,
         "leader": replicas[0], "leader_epoch": 0, "partition_epoch": 0},
    )  # fmt: skip


def change(topic_id: uuid.UUID, index: int, **fields: Any) -> tuple[str, dict[str, Any]]:
    return ("PartitionChangeRecord", {"topic_id": topic_id, "partition_id": index, **fields})


def cluster() -> MetadataImage:
    return replay(
        EMPTY_IMAGE, register(1), register(2), register(3), unfence(1), unfence(2),
        topic("orders", ORDERS), partition(ORDERS, 0, [1, 2]), partition(ORDERS, 1, [2, 3]),
        topic("audit", AUDIT), partition(AUDIT, 0, [3, 1]),
    )  # fmt: skip


def test_the_first_image_hosts_every_partition_listing_the_broker() -> None:
    changes = image_changes(EMPTY_IMAGE, cluster(), 1)
    assert changes.replicas == {"orders": [0], "audit": [0]}
    assert changes.stopped == {} and changes.changed_configs == []
    assert image_changes(EMPTY_IMAGE, cluster(), 3).replicas == {"orders": [1], "audit": [0]}


def test_only_changed_partitions_of_this_broker_are_applied_again() -> None:
    before = cluster()
    after = replay(before, change(ORDERS, 0, isr=[1]), change(ORDERS, 1, leader=3, isr=[3]))
    assert image_changes(before, after, 1).replicas == {"orders": [0]}
    assert image_changes(before, after, 3).replicas == {"orders": [1]}
    assert image_changes(before, after, 2).replicas == {"orders": [0, 1]}
    assert image_changes(after, after, 2) == image_changes(EMPTY_IMAGE, EMPTY_IMAGE, 2)


def test_removed_topics_and_moved_replicas_are_stopped() -> None:
    before = cluster()
    removed = replay(before, ("RemoveTopicRecord", {"topic_id": AUDIT}))
    assert image_changes(before, removed, 1).stopped == {"audit": [0]}
    assert image_changes(before, removed, 2).stopped == {}
    moved = replay(before, change(ORDERS, 0, replicas=[2, 3], isr=[2, 3], leader=2))
    changes = image_changes(before, moved, 1)
    assert changes.stopped == {"orders": [0]} and changes.replicas == {}
    assert image_changes(before, moved, 3).replicas == {"orders": [0]}
    # a topic removed and created again under its name: the old one stops, the new starts
    recreated_id = uuid.UUID("7a000000-0000-4000-8000-000000000003")
    again = replay(removed, topic("audit", recreated_id), partition(recreated_id, 0, [1]))
    changes = image_changes(before, again, 1)
    assert changes.stopped == {"audit": [0]} and changes.replicas == {"audit": [0]}


def test_topic_config_changes_are_listed() -> None:
    before = cluster()
    after = replay(
        before,
        ("ConfigRecord", {"resource_type": 2, "resource_name": "orders",
                          "name": "retention.ms", "value": "1000"}),
    )  # fmt: skip
    assert image_changes(before, after, 3).changed_configs == ["orders"]
    meta = cache_topic(after, after.topics[ORDERS])
    assert meta.configs == {"retention.ms": "1000"}


def test_the_cache_holds_unfenced_brokers_and_topics_with_partition_epochs() -> None:
    image = replay(cluster(), change(ORDERS, 0, isr=[1]))
    brokers = cache_brokers(image, "SECURE")
    assert sorted(brokers) == [1, 2]  # broker 3 is still fenced
    assert (brokers[1].listener, brokers[1].port) == ("SECURE", 9101)
    assert brokers[1].endpoint("PLAINTEXT").port == 9001
    assert brokers[1].endpoint("SECURE").security_protocol == "SSL"
    meta = cache_topic(image, image.topics[ORDERS])
    assert meta.topic_id == ORDERS and not meta.is_internal
    state = meta.partitions[0]
    assert (state.leader, state.isr, state.replicas, state.version) == (1, (1,), (1, 2), 1)
