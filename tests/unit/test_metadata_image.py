"""The metadata image built by replaying KRaft's metadata records (logbus.metadata): one
test per record type through the bytes of the record (encoded, decoded, replayed), the
records that contradict the image refused, an untouched part of the image shared with the
next, and an image written as a snapshot (Kafka's `.checkpoint` frame) and loaded back."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from logbus.metadata.delta import MetadataDelta, MetadataReplayError, replay_all
from logbus.metadata.image import (
    EMPTY_IMAGE,
    AclEntry,
    BrokerEndpoint,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    ScramCredential,
)
from logbus.metadata.image_writer import image_records, snapshot_values
from logbus.metadata.records import decode_record, encode_record
from logbus.protocol.errors import ProtocolError
from logbus.raft.snapshots import SnapshotId, read_snapshot_records, write_snapshot

TOPIC_ID = uuid.UUID("5f3a1c2e-0000-4000-8000-000000000001")
INCARNATION = uuid.UUID("5f3a1c2e-0000-4000-8000-0000000000aa")


def replay(image: MetadataImage, *records: tuple[str, dict[str, Any]]) -> MetadataImage:
    """Each record through its bytes, as a log holds it, then replayed."""
    delta = MetadataDelta(image)
    for offset, (name, data) in enumerate(records, start=image.offset + 1):
        delta.replay(decode_record(encode_record(name, data)), offset, 3)
    return delta.apply()


def register(broker_id: int, epoch: int = 10, *, fenced: bool = True) -> tuple[str, dict[str, Any]]:
    return (
        "RegisterBrokerRecord",
        {
            "broker_id": broker_id,
            "broker_epoch": epoch,
            "incarnation_id": INCARNATION,
            "end_points": [
                {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + broker_id,
                 "security_protocol": 0},
            ],
            "features": [
                {"name": "metadata.version", "min_supported_version": 1,
                 "max_supported_version": 20},
            ],
            "rack": "r1",
            "fenced": fenced,
        },
    )  # fmt: skip


def topic(name: str = "orders", topic_id: uuid.UUID = TOPIC_ID) -> tuple[str, dict[str, Any]]:
    return ("TopicRecord", {"name": name, "topic_id": topic_id})


def partition(
    partition_id: int = 0, replicas: list[int] | None = None, topic_id: uuid.UUID = TOPIC_ID
) -> tuple[str, dict[str, Any]]:
    replicas = replicas or [1, 2, 3]
    return (
        "PartitionRecord",
        {
            "partition_id": partition_id,
            "topic_id": topic_id,
            "replicas": replicas,
            "isr": replicas,
            "leader": replicas[0],
            "leader_epoch": 0,
            "partition_epoch": 0,
        },
    )


@pytest.fixture
def cluster() -> MetadataImage:
    """Three registered brokers and one topic of two partitions."""
    return replay(
        EMPTY_IMAGE, register(1), register(2), register(3), topic(), partition(0),
        partition(1, [2, 3, 1]),
    )  # fmt: skip


def test_a_record_survives_its_frame() -> None:
    value = encode_record("NoOpRecord", {})
    assert value == bytes([1, 20, 0, 0])  # frame version, type, version, empty body
    with pytest.raises(ProtocolError, match="frame version"):
        decode_record(bytes([2, 20, 0, 0]))
    with pytest.raises(ProtocolError, match="record type"):
        decode_record(bytes([1, 99, 0, 0]))
    with pytest.raises(ProtocolError, match="version 7"):
        decode_record(bytes([1, 20, 7, 0]))


def test_register_broker_record(cluster: MetadataImage) -> None:
    broker = cluster.brokers[2]
    assert broker.epoch == 10 and broker.fenced and broker.rack == "r1"
    assert broker.endpoint("PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9002, 0)
    assert broker.features[0].max_version == 20
    again = replay(cluster, register(2, 25, fenced=False))  # a restart: a new epoch
    assert again.brokers[2].epoch == 25 and not again.brokers[2].fenced


def test_unregister_broker_record(cluster: MetadataImage) -> None:
    image = replay(cluster, ("UnregisterBrokerRecord", {"broker_id": 3, "broker_epoch": 10}))
    assert sorted(image.brokers) == [1, 2]
    with pytest.raises(MetadataReplayError, match="epoch 10"):
        replay(cluster, ("UnregisterBrokerRecord", {"broker_id": 3, "broker_epoch": 9}))


def test_fence_and_unfence_broker_records(cluster: MetadataImage) -> None:
    image = replay(cluster, ("UnfenceBrokerRecord", {"id": 1, "epoch": 10}))
    assert not image.brokers[1].fenced and image.unfenced_brokers() == [1]
    image = replay(image, ("FenceBrokerRecord", {"id": 1, "epoch": 10}))
    assert image.brokers[1].fenced and image.unfenced_brokers() == []
    with pytest.raises(MetadataReplayError, match="not registered"):
        replay(image, ("FenceBrokerRecord", {"id": 7, "epoch": 10}))


def test_broker_registration_change_record(cluster: MetadataImage) -> None:
    change = {"broker_id": 1, "broker_epoch": 10, "fenced": -1}
    image = replay(cluster, ("BrokerRegistrationChangeRecord", change))
    assert not image.brokers[1].fenced
    change = {"broker_id": 1, "broker_epoch": 10, "in_controlled_shutdown": 1}
    image = replay(image, ("BrokerRegistrationChangeRecord", change))
    assert image.brokers[1].in_controlled_shutdown and not image.brokers[1].fenced
    assert image.unfenced_brokers() == []  # a broker shutting down gets nothing new
    change = {"broker_id": 1, "broker_epoch": 10, "fenced": 1}
    assert replay(image, ("BrokerRegistrationChangeRecord", change)).brokers[1].fenced


def test_topic_and_partition_records(cluster: MetadataImage) -> None:
    orders = cluster.topic("orders")
    assert orders is not None and orders.topic_id == TOPIC_ID
    expected = PartitionRegistration(replicas=(2, 3, 1), isr=(2, 3, 1), leader=2)
    assert orders.partitions[1] == expected
    with pytest.raises(MetadataReplayError, match="already exists"):
        replay(cluster, topic("orders", uuid.uuid4()))
    with pytest.raises(MetadataReplayError, match="unknown topic id"):
        replay(cluster, partition(0, topic_id=uuid.uuid4()))


def test_partition_change_record(cluster: MetadataImage) -> None:
    shrink = {"topic_id": TOPIC_ID, "partition_id": 0, "isr": [1, 2]}
    image = replay(cluster, ("PartitionChangeRecord", shrink))
    p = image.topics[TOPIC_ID].partitions[0]
    # An ISR change alone: same leader and leader epoch, the partition epoch moves.
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    elect = {"topic_id": TOPIC_ID, "partition_id": 0, "leader": 2, "isr": [2]}
    p = replay(image, ("PartitionChangeRecord", elect)).topics[TOPIC_ID].partitions[0]
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2,), 2, 1, 2)
    assert p.replicas == (1, 2, 3)
    offline = {"topic_id": TOPIC_ID, "partition_id": 0, "leader": -1}
    p = replay(image, ("PartitionChangeRecord", offline)).topics[TOPIC_ID].partitions[0]
    assert (p.leader, p.leader_epoch) == (-1, 1)
    with pytest.raises(MetadataReplayError, match="unknown partition"):
        replay(cluster, ("PartitionChangeRecord", {"topic_id": TOPIC_ID, "partition_id": 5}))


def test_remove_topic_record(cluster: MetadataImage) -> None:
    configured = replay(
        cluster,
        ("ConfigRecord", {"resource_type": 2, "resource_name": "orders",
                          "name": "retention.ms", "value": "1000"}),
    )  # fmt: skip
    delta = MetadataDelta(configured)
    delta.replay(decode_record(encode_record("RemoveTopicRecord", {"topic_id": TOPIC_ID})))
    image = delta.apply()
    assert image.topic("orders") is None and image.topics == {}
    assert image.configs == {}  # the topic's configs go with it
    assert set(delta.deleted_topics) == {TOPIC_ID}
    # The name can be used again, by a new topic id.
    again = replay(image, topic("orders", uuid.uuid4()))
    assert again.topic("orders") is not None


def test_config_record(cluster: MetadataImage) -> None:
    def config(name: str, value: str | None) -> tuple[str, dict[str, Any]]:
        return ("ConfigRecord", {"resource_type": 4, "resource_name": "1", "name": name,
                                 "value": value})  # fmt: skip

    image = replay(cluster, config("log.retention.ms", "5"), config("num.io.threads", "4"))
    assert image.configs[ConfigResource(4, "1")] == {"log.retention.ms": "5", "num.io.threads": "4"}
    image = replay(image, config("log.retention.ms", None))
    assert image.configs[ConfigResource(4, "1")] == {"num.io.threads": "4"}
    assert replay(image, config("num.io.threads", None)).configs == {}


def test_client_quota_record(cluster: MetadataImage) -> None:
    entity = [{"entity_type": "user", "entity_name": "alice"},
              {"entity_type": "client-id", "entity_name": None}]  # fmt: skip
    rate = {"entity": entity, "key": "producer_byte_rate", "value": 1024.0, "remove": False}
    image = replay(cluster, ("ClientQuotaRecord", rate))
    key = (("client-id", None), ("user", "alice"))
    assert image.client_quotas == {key: {"producer_byte_rate": 1024.0}}
    removed = replay(image, ("ClientQuotaRecord", {**rate, "remove": True}))
    assert removed.client_quotas == {}


def test_access_control_entry_records(cluster: MetadataImage) -> None:
    acl_id = uuid.uuid4()
    body = {"id": acl_id, "resource_type": 2, "resource_name": "orders", "pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3,
            "permission_type": 3}  # fmt: skip
    image = replay(cluster, ("AccessControlEntryRecord", body))
    assert image.acls == {acl_id: AclEntry(acl_id, 2, "orders", 3, "User:alice", "*", 3, 3)}
    assert replay(image, ("RemoveAccessControlEntryRecord", {"id": acl_id})).acls == {}
    with pytest.raises(MetadataReplayError, match="unknown ACL"):
        replay(image, ("RemoveAccessControlEntryRecord", {"id": uuid.uuid4()}))


def test_user_scram_credential_records(cluster: MetadataImage) -> None:
    body = {"name": "alice", "mechanism": 2, "salt": b"salt", "stored_key": b"sk",
            "server_key": b"vk", "iterations": 8192}  # fmt: skip
    image = replay(cluster, ("UserScramCredentialRecord", body))
    assert image.scram[("alice", 2)] == ScramCredential("alice", 2, b"salt", b"sk", b"vk", 8192)
    removed = replay(image, ("RemoveUserScramCredentialRecord", {"name": "alice", "mechanism": 2}))
    assert removed.scram == {}
    with pytest.raises(MetadataReplayError, match="no SCRAM credential"):
        replay(removed, ("RemoveUserScramCredentialRecord", {"name": "alice", "mechanism": 2}))


def test_producer_ids_record(cluster: MetadataImage) -> None:
    block = {"broker_id": 2, "broker_epoch": 10, "next_producer_id": 1000}
    image = replay(cluster, ("ProducerIdsRecord", block))
    assert image.producer_ids == ProducerIdsImage(1000, 2, 10)
    with pytest.raises(MetadataReplayError, match="goes back"):
        replay(image, ("ProducerIdsRecord", {**block, "next_producer_id": 10}))


def test_feature_level_record(cluster: MetadataImage) -> None:
    level = {"name": "metadata.version", "feature_level": 20}
    image = replay(cluster, ("FeatureLevelRecord", level))
    assert image.features == {"metadata.version": 20}
    gone = replay(image, ("FeatureLevelRecord", {"name": "metadata.version", "feature_level": 0}))
    assert gone.features == {}


def test_no_op_record_moves_only_the_offset(cluster: MetadataImage) -> None:
    image = replay(cluster, ("NoOpRecord", {}))
    assert image.offset == cluster.offset + 1
    assert image.brokers is cluster.brokers and image.topics is cluster.topics


def test_a_delta_shares_what_it_did_not_change_and_leaves_the_old_image(
    cluster: MetadataImage,
) -> None:
    image = replay(cluster, ("UnfenceBrokerRecord", {"id": 1, "epoch": 10}))
    assert image.topics is cluster.topics and image.configs is cluster.configs
    assert image.brokers is not cluster.brokers and cluster.brokers[1].fenced


def full_image() -> MetadataImage:
    acl = {"id": uuid.UUID(int=7), "resource_type": 2, "resource_name": "orders",
           "pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3,
           "permission_type": 3}  # fmt: skip
    scram = {"name": "alice", "mechanism": 1, "salt": b"s", "stored_key": b"k",
             "server_key": b"v", "iterations": 4096}  # fmt: skip
    quota = {"entity": [{"entity_type": "user", "entity_name": None}],
             "key": "consumer_byte_rate", "value": 2.5, "remove": False}  # fmt: skip
    return replay(
        EMPTY_IMAGE,
        ("FeatureLevelRecord", {"name": "metadata.version", "feature_level": 20}),
        register(1, fenced=False), register(2), topic(), partition(0), partition(1, [2, 1]),
        ("PartitionChangeRecord", {"topic_id": TOPIC_ID, "partition_id": 0, "leader": 2}),
        ("BrokerRegistrationChangeRecord",
         {"broker_id": 2, "broker_epoch": 10, "in_controlled_shutdown": 1}),
        ("ConfigRecord", {"resource_type": 2, "resource_name": "orders",
                          "name": "cleanup.policy", "value": "compact"}),
        ("ClientQuotaRecord", quota),
        ("AccessControlEntryRecord", acl),
        ("UserScramCredentialRecord", scram),
        ("ProducerIdsRecord", {"broker_id": 1, "broker_epoch": 10, "next_producer_id": 2000}),
    )  # fmt: skip


def test_an_image_written_as_records_replays_to_itself() -> None:
    image = full_image()
    again = replay_all(EMPTY_IMAGE, image_records(image))
    assert again == MetadataImage(**{**_fields(image), "offset": -1, "epoch": -1})
    assert image_records(again) == image_records(image)


def _fields(image: MetadataImage) -> dict[str, Any]:
    return {name: getattr(image, name) for name in MetadataImage.__dataclass_fields__}


def test_an_image_through_a_snapshot_file(tmp_path: Path) -> None:
    image = full_image()
    snapshot = SnapshotId(end_offset=image.offset + 1, epoch=3)
    write_snapshot(tmp_path, snapshot, snapshot_values(image), timestamp_ms=1)
    loaded = replay_all(
        EMPTY_IMAGE, [decode_record(v) for v in read_snapshot_records(tmp_path, snapshot)]
    )
    assert _fields(loaded) | {"offset": 0, "epoch": 0} == _fields(image) | {"offset": 0, "epoch": 0}
    assert loaded.topics[TOPIC_ID].partitions[0].leader_epoch == 1
    assert loaded.brokers[2].in_controlled_shutdown
