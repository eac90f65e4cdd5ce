"""Replaying metadata records onto an image (Kafka's `MetadataDelta`): one function per
record type, kept in one table (`REPLAY`), each reading the record's body and changing
the delta's copy of the part of the image it touches.

    delta = MetadataDelta(image)
    for offset, value in committed: delta.replay(decode_record(value), offset, epoch)
    image = delta.apply()

The delta copies a part of the image (brokers, topics, ...) the first time a record
changes it, so `apply()` shares every untouched part with the old image, and the old image
never changes. It also remembers which topics and brokers changed, for the readers that
act on changes (a broker becoming leader or follower). A record that contradicts the
image (a partition of an unknown topic, a broker epoch that is not the registered one)
raises `MetadataReplayError`: the log is not one this image can follow.
A delta is used by one task; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final
from uuid import UUID

from logbus.metadata.image import (
    AclEntry,
    BrokerEndpoint,
    BrokerRegistration,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    QuotaEntity,
    ScramCredential,
    SupportedFeature,
    TopicImage,
)
from logbus.metadata.records import MetadataRecord

__all__ = ["REPLAY", "MetadataDelta", "MetadataReplayError", "replay_all"]


class MetadataReplayError(ValueError):
    """A record that cannot follow the image it is replayed onto."""


# BrokerRegistrationChangeRecord's Fenced field.
FENCE: Final = 1
UNFENCE: Final = -1


class MetadataDelta:
    """The changes of a run of records to one image; `apply()` makes the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.offset = image.offset
        self.epoch = image.epoch
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[UUID, TopicImage] | None = None
        self._topic_ids: dict[str, UUID] | None = None
        self._configs: dict[ConfigResource, dict[str, str]] | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] | None = None
        self._acls: dict[UUID, AclEntry] | None = None
        self._scram: dict[tuple[str, int], ScramCredential] | None = None
        self._producer_ids: ProducerIdsImage | None = None
        self.changed_topics: set[UUID] = set()
        self.deleted_topics: dict[UUID, TopicImage] = {}
        self.changed_brokers: set[int] = set()

    # --- copies of the parts of the image, made on first change --------------------

    @property
    def features(self) -> dict[str, int]:
        if self._features is None:
            self._features = dict(self.image.features)
        return self._features

    @property
    def brokers(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    @property
    def topics(self) -> dict[UUID, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.image.topics)
            self._topic_ids = dict(self.image.topic_ids)
        return self._topics

    @property
    def topic_ids(self) -> dict[str, UUID]:
        self.topics  # noqa: B018 (copies both together)
        assert self._topic_ids is not None
        return self._topic_ids

    @property
    def configs(self) -> dict[ConfigResource, dict[str, str]]:
        if self._configs is None:
            self._configs = {k: dict(v) for k, v in self.image.configs.items()}
        return self._configs

    @property
    def quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        if self._quotas is None:
            self._quotas = {k: dict(v) for k, v in self.image.client_quotas.items()}
        return self._quotas

    @property
    def acls(self) -> dict[UUID, AclEntry]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    @property
    def producer_ids(self) -> ProducerIdsImage:
        return self.image.producer_ids if self._producer_ids is None else self._producer_ids

    @producer_ids.setter
    def producer_ids(self, value: ProducerIdsImage) -> None:
        self._producer_ids = value

    @property
    def scram(self) -> dict[tuple[str, int], ScramCredential]:
        if self._scram is None:
            self._scram = dict(self.image.scram)
        return self._scram

    # --- replay and apply -------------------------------------------------------------

    def replay(self, record: MetadataRecord, offset: int = -1, epoch: int = -1) -> None:
        """Apply one record (at `offset`, written in Raft epoch `epoch`)."""
        handler = REPLAY.get(record.name)
        if handler is None:
            raise MetadataReplayError(f"{record.name} cannot be replayed")
        handler(self, record.data)
        if offset >= 0:
            self.offset, self.epoch = offset, epoch

    def broker(self, broker_id: int, epoch: int | None = None) -> BrokerRegistration:
        found = self.brokers.get(broker_id)
        if found is None:
            raise MetadataReplayError(f"broker {broker_id} is not registered")
        if epoch is not None and found.epoch != epoch:
            raise MetadataReplayError(
                f"broker {broker_id} has epoch {found.epoch}, the record names {epoch}"
            )
        return found

    def set_broker(self, registration: BrokerRegistration) -> None:
        self.brokers[registration.broker_id] = registration
        self.changed_brokers.add(registration.broker_id)

    def topic(self, topic_id: UUID) -> TopicImage:
        found = self.topics.get(topic_id)
        if found is None:
            raise MetadataReplayError(f"unknown topic id {topic_id}")
        return found

    def set_topic(self, topic: TopicImage) -> None:
        self.topics[topic.topic_id] = topic
        self.topic_ids[topic.name] = topic.topic_id
        self.changed_topics.add(topic.topic_id)

    def apply(self) -> MetadataImage:
        """The image after every record replayed so far."""
        image = self.image
        return MetadataImage(
            offset=self.offset,
            epoch=self.epoch,
            features=image.features if self._features is None else self._features,
            brokers=image.brokers if self._brokers is None else self._brokers,
            topics=image.topics if self._topics is None else self._topics,
            topic_ids=image.topic_ids if self._topic_ids is None else self._topic_ids,
            configs=image.configs if self._configs is None else self._configs,
            client_quotas=image.client_quotas if self._quotas is None else self._quotas,
            acls=image.acls if self._acls is None else self._acls,
            scram=image.scram if self._scram is None else self._scram,
            producer_ids=self.producer_ids,
        )


# --- one function per record type -------------------------------------------------------

Body = dict[str, Any]


def _register_broker(delta: MetadataDelta, r: Body) -> None:
    delta.set_broker(
        BrokerRegistration(
            broker_id=r["broker_id"],
            epoch=r["broker_epoch"],
            incarnation_id=r["incarnation_id"],
            endpoints=tuple(
                BrokerEndpoint(e["name"], e["host"], e["port"], e["security_protocol"])
                for e in r["end_points"]
            ),
            features=tuple(
                SupportedFeature(f["name"], f["min_supported_version"], f["max_supported_version"])
                for f in r["features"]
            ),
            rack=r["rack"],
            fenced=r["fenced"],
            in_controlled_shutdown=r.get("in_controlled_shutdown", False),
            log_dirs=tuple(r.get("log_dirs") or ()),
        )
    )


def _unregister_broker(delta: MetadataDelta, r: Body) -> None:
    delta.broker(r["broker_id"], r["broker_epoch"])
    del delta.brokers[r["broker_id"]]
    delta.changed_brokers.add(r["broker_id"])


def _fence_broker(delta: MetadataDelta, r: Body) -> None:
    delta.set_broker(replace(delta.broker(r["id"], r["epoch"]), fenced=True))


def _unfence_broker(delta: MetadataDelta, r: Body) -> None:
    delta.set_broker(replace(delta.broker(r["id"], r["epoch"]), fenced=False))


def _broker_registration_change(delta: MetadataDelta, r: Body) -> None:
    broker = delta.broker(r["broker_id"], r["broker_epoch"])
    fenced = {FENCE: True, UNFENCE: False}.get(r.get("fenced", 0), broker.fenced)
    shutting_down = broker.in_controlled_shutdown or r.get("in_controlled_shutdown", 0) == 1
    log_dirs = tuple(r["log_dirs"]) if r.get("log_dirs") else broker.log_dirs
    delta.set_broker(
        replace(broker, fenced=fenced, in_controlled_shutdown=shutting_down, log_dirs=log_dirs)
    )


def _topic(delta: MetadataDelta, r: Body) -> None:
    if r["name"] in delta.topic_ids:
        raise MetadataReplayError(f"topic {r['name']} already exists")
    delta.set_topic(TopicImage(r["name"], r["topic_id"], {}))


def _partition(delta: MetadataDelta, r: Body) -> None:
    topic = delta.topic(r["topic_id"])
    delta.set_topic(topic.with_partition(r["partition_id"], PartitionRegistration.from_record(r)))


def _partition_change(delta: MetadataDelta, r: Body) -> None:
    topic = delta.topic(r["topic_id"])
    partition = topic.partitions.get(r["partition_id"])
    if partition is None:
        raise MetadataReplayError(f"unknown partition {topic.name}-{r['partition_id']}")
    delta.set_topic(topic.with_partition(r["partition_id"], partition.merge(r)))


def _remove_topic(delta: MetadataDelta, r: Body) -> None:
    topic = delta.topic(r["topic_id"])
    del delta.topics[topic.topic_id]
    del delta.topic_ids[topic.name]
    delta.changed_topics.discard(topic.topic_id)
    delta.deleted_topics[topic.topic_id] = topic
    delta.configs.pop(ConfigResource(TOPIC_RESOURCE, topic.name), None)


TOPIC_RESOURCE: Final = 2


def _config(delta: MetadataDelta, r: Body) -> None:
    resource = ConfigResource(r["resource_type"], r["resource_name"])
    values = delta.configs.setdefault(resource, {})
    if r["value"] is None:
        values.pop(r["name"], None)
    else:
        values[r["name"]] = r["value"]
    if not values:
        del delta.configs[resource]


def _client_quota(delta: MetadataDelta, r: Body) -> None:
    entity: QuotaEntity = tuple(sorted((e["entity_type"], e["entity_name"]) for e in r["entity"]))
    values = delta.quotas.setdefault(entity, {})
    if r["remove"]:
        values.pop(r["key"], None)
    else:
        values[r["key"]] = r["value"]
    if not values:
        del delta.quotas[entity]


def _access_control_entry(delta: MetadataDelta, r: Body) -> None:
    delta.acls[r["id"]] = AclEntry(
        r["id"], r["resource_type"], r["resource_name"], r["pattern_type"], r["principal"],
        r["host"], r["operation"], r["permission_type"],
    )  # fmt: skip


def _remove_access_control_entry(delta: MetadataDelta, r: Body) -> None:
    if delta.acls.pop(r["id"], None) is None:
        raise MetadataReplayError(f"unknown ACL id {r['id']}")


def _user_scram_credential(delta: MetadataDelta, r: Body) -> None:
    delta.scram[(r["name"], r["mechanism"])] = ScramCredential(
        r["name"], r["mechanism"], bytes(r["salt"]), bytes(r["stored_key"]),
        bytes(r["server_key"]), r["iterations"],
    )  # fmt: skip


def _remove_user_scram_credential(delta: MetadataDelta, r: Body) -> None:
    if delta.scram.pop((r["name"], r["mechanism"]), None) is None:
        raise MetadataReplayError(f"no SCRAM credential of {r['name']} ({r['mechanism']})")


def _producer_ids(delta: MetadataDelta, r: Body) -> None:
    current = delta.producer_ids
    if r["next_producer_id"] < current.next_producer_id:
        raise MetadataReplayError(
            f"producer id block start {r['next_producer_id']} goes back from "
            f"{current.next_producer_id}"
        )
    delta.producer_ids = ProducerIdsImage(r["next_producer_id"], r["broker_id"], r["broker_epoch"])


def _feature_level(delta: MetadataDelta, r: Body) -> None:
    if r["feature_level"] == 0:
        delta.features.pop(r["name"], None)
    else:
        delta.features[r["name"]] = r["feature_level"]


def _no_op(delta: MetadataDelta, r: Body) -> None:
    """NoOpRecord (KIP-835) changes nothing but the image's offset."""


REPLAY: Final[dict[str, Callable[[MetadataDelta, Body], None]]] = {
    "RegisterBrokerRecord": _register_broker,
    "UnregisterBrokerRecord": _unregister_broker,
    "FenceBrokerRecord": _fence_broker,
    "UnfenceBrokerRecord": _unfence_broker,
    "BrokerRegistrationChangeRecord": _broker_registration_change,
    "TopicRecord": _topic,
    "PartitionRecord": _partition,
    "PartitionChangeRecord": _partition_change,
    "RemoveTopicRecord": _remove_topic,
    "ConfigRecord": _config,
    "ClientQuotaRecord": _client_quota,
    "AccessControlEntryRecord": _access_control_entry,
    "RemoveAccessControlEntryRecord": _remove_access_control_entry,
    "UserScramCredentialRecord": _user_scram_credential,
    "RemoveUserScramCredentialRecord": _remove_user_scram_credential,
    "ProducerIdsRecord": _producer_ids,
    "FeatureLevelRecord": _feature_level,
    "NoOpRecord": _no_op,
}


def replay_all(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    """The image after `records` (no offsets: for snapshots and tests)."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()
