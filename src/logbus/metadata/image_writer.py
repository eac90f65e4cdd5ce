"""An image written back out as records (Kafka's `ImageWriter`): what a snapshot of the
metadata log holds, in the order Kafka writes it (features first, so `metadata.version`
is known before anything that depends on it; brokers; topics with their partitions;
configs; client quotas; producer ids; ACLs; SCRAM credentials). Replaying the records
onto an empty image gives the same image back.

The entry points are `image_records` and `snapshot_values`.
"""

from __future__ import annotations

from collections.abc import Iterator

from logbus.metadata.image import METADATA_VERSION, MetadataImage
from logbus.metadata.records import MetadataRecord, encode_record, latest_version

__all__ = ["image_records", "snapshot_values"]


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records that rebuild `image` from an empty one."""
    return [
        *_features(image),
        *_brokers(image),
        *_topics(image),
        *_configs(image),
        *_quotas(image),
        *_producer_ids(image),
        *_acls(image),
        *_scram(image),
    ]


def snapshot_values(image: MetadataImage) -> list[bytes]:
    """The record values of a snapshot of `image`."""
    return [encode_record(r.name, r.data, r.version) for r in image_records(image)]


def _record(name: str, data: dict[str, object]) -> MetadataRecord:
    return MetadataRecord(name, latest_version(name), data)


def _features(image: MetadataImage) -> Iterator[MetadataRecord]:
    names = sorted(image.features, key=lambda n: (n != METADATA_VERSION, n))
    for name in names:
        yield _record("FeatureLevelRecord", {"name": name, "feature_level": image.features[name]})


def _brokers(image: MetadataImage) -> Iterator[MetadataRecord]:
    for broker_id in sorted(image.brokers):
        b = image.brokers[broker_id]
        yield _record(
            "RegisterBrokerRecord",
            {
                "broker_id": b.broker_id,
                "broker_epoch": b.epoch,
                "incarnation_id": b.incarnation_id,
                "end_points": [e._asdict() for e in b.endpoints],
                "features": [
                    {
                        "name": f.name,
                        "min_supported_version": f.min_version,
                        "max_supported_version": f.max_version,
                    }
                    for f in b.features
                ],
                "rack": b.rack,
                "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
                "log_dirs": list(b.log_dirs),
            },
        )


def _topics(image: MetadataImage) -> Iterator[MetadataRecord]:
    for name in sorted(image.topic_ids):
        topic = image.topics[image.topic_ids[name]]
        yield _record("TopicRecord", {"name": topic.name, "topic_id": topic.topic_id})
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            yield _record("PartitionRecord", partition.record(topic.topic_id, partition_id))


def _configs(image: MetadataImage) -> Iterator[MetadataRecord]:
    for resource in sorted(image.configs):
        for key, value in sorted(image.configs[resource].items()):
            yield _record(
                "ConfigRecord",
                {
                    "resource_type": resource.type,
                    "resource_name": resource.name,
                    "name": key,
                    "value": value,
                },
            )


def _quotas(image: MetadataImage) -> Iterator[MetadataRecord]:
    for entity in sorted(image.client_quotas, key=repr):
        for key, value in sorted(image.client_quotas[entity].items()):
            yield _record(
                "ClientQuotaRecord",
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "key": key,
                    "value": value,
                    "remove": False,
                },
            )


def _producer_ids(image: MetadataImage) -> Iterator[MetadataRecord]:
    ids = image.producer_ids
    if ids.next_producer_id > 0:
        yield _record(
            "ProducerIdsRecord",
            {
                "broker_id": ids.broker_id,
                "broker_epoch": ids.broker_epoch,
                "next_producer_id": ids.next_producer_id,
            },
        )


def _acls(image: MetadataImage) -> Iterator[MetadataRecord]:
    for acl_id in sorted(image.acls):
        a = image.acls[acl_id]
        yield _record(
            "AccessControlEntryRecord",
            {
                "id": a.id,
                "resource_type": a.resource_type,
                "resource_name": a.resource_name,
                "pattern_type": a.pattern_type,
                "principal": a.principal,
                "host": a.host,
                "operation": a.operation,
                "permission_type": a.permission_type,
            },
        )


def _scram(image: MetadataImage) -> Iterator[MetadataRecord]:
    for key in sorted(image.scram):
        c = image.scram[key]
        yield _record(
            "UserScramCredentialRecord",
            {
                "name": c.name,
                "mechanism": c.mechanism,
                "salt": c.salt,
                "stored_key": c.stored_key,
                "server_key": c.server_key,
                "iterations": c.iterations,
            },
        )
