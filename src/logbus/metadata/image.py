"""The metadata image: the state of the cluster that replaying `__cluster_metadata` up to
one offset builds (Kafka's `MetadataImage` with its `FeaturesImage`, `ClusterImage`,
`TopicsImage`, `ConfigurationsImage`, `ClientQuotasImage`, `AclsImage`,
`ScramImage` and `ProducerIdsImage`).

Every value here is frozen and its mappings are never changed after it is built: a
`MetadataDelta` builds the next image beside the old one, sharing what did not change,
so an image can be handed to any reader (another task, a snapshot writer) while the next
is being built. The entry point is `MetadataImage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple
from uuid import UUID

__all__ = [
    "NO_LEADER",
    "AclEntry",
    "BrokerEndpoint",
    "BrokerRegistration",
    "ConfigResource",
    "MetadataImage",
    "PartitionRegistration",
    "ProducerIdsImage",
    "QuotaEntity",
    "ScramCredential",
    "TopicImage",
]

NO_LEADER: Final = -1
# PartitionChangeRecord's "no change" values (Kafka's NO_LEADER_CHANGE and
# LeaderRecoveryState.NO_CHANGE).
NO_LEADER_CHANGE: Final = -2
NO_RECOVERY_STATE_CHANGE: Final = -1
METADATA_VERSION: Final = "metadata.version"


class BrokerEndpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int


class SupportedFeature(NamedTuple):
    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker as RegisterBrokerRecord and the fence/unfence records leave it."""

    broker_id: int
    epoch: int
    incarnation_id: UUID
    endpoints: tuple[BrokerEndpoint, ...] = ()
    features: tuple[SupportedFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[UUID, ...] = ()

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition: PartitionRecord, then each PartitionChangeRecord merged in."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[UUID, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> PartitionRegistration:
        return cls(
            replicas=tuple(data["replicas"]),
            isr=tuple(data["isr"]),
            leader=data["leader"],
            leader_epoch=data["leader_epoch"],
            partition_epoch=data["partition_epoch"],
            removing_replicas=tuple(data["removing_replicas"]),
            adding_replicas=tuple(data["adding_replicas"]),
            leader_recovery_state=data["leader_recovery_state"],
            directories=tuple(data.get("directories") or ()),
            eligible_leader_replicas=tuple(data.get("eligible_leader_replicas") or ()),
            last_known_elr=tuple(data.get("last_known_elr") or ()),
        )

    def merge(self, change: Mapping[str, Any]) -> PartitionRegistration:
        """This partition after a PartitionChangeRecord (Kafka's
        `PartitionRegistration.merge`): a field left at its "no change" value keeps its
        value; a new leader (even the same one) bumps the leader epoch; every change bumps
        the partition epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.get("leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE:
            leader, leader_epoch = change["leader"], self.leader_epoch + 1
        recovery = change.get("leader_recovery_state", NO_RECOVERY_STATE_CHANGE)
        replicas = _kept(change.get("replicas"), self.replicas)
        directories = _kept(change.get("directories"), self.directories)
        if len(directories) != len(replicas):
            directories = ()
        return PartitionRegistration(
            replicas=replicas,
            isr=_kept(change.get("isr"), self.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=_kept(change.get("removing_replicas"), self.removing_replicas),
            adding_replicas=_kept(change.get("adding_replicas"), self.adding_replicas),
            leader_recovery_state=(
                self.leader_recovery_state if recovery == NO_RECOVERY_STATE_CHANGE else recovery
            ),
            directories=directories,
            eligible_leader_replicas=_kept(
                change.get("eligible_leader_replicas"), self.eligible_leader_replicas
            ),
            last_known_elr=_kept(change.get("last_known_elr"), self.last_known_elr),
        )

    def record(self, topic_id: UUID, partition_id: int) -> dict[str, Any]:
        """The PartitionRecord body that recreates this partition."""
        return {
            "partition_id": partition_id,
            "topic_id": topic_id,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "removing_replicas": list(self.removing_replicas),
            "adding_replicas": list(self.adding_replicas),
            "leader": self.leader,
            "leader_recovery_state": self.leader_recovery_state,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "directories": list(self.directories),
            "eligible_leader_replicas": list(self.eligible_leader_replicas) or None,
            "last_known_elr": list(self.last_known_elr) or None,
        }


def _kept(new: Any, old: tuple[Any, ...]) -> tuple[Any, ...]:
    return old if new is None else tuple(new)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=dict)

    def with_partition(self, partition_id: int, partition: PartitionRegistration) -> TopicImage:
        return replace(self, partitions={**self.partitions, partition_id: partition})


class ConfigResource(NamedTuple):
    """A ConfigRecord's resource: Kafka's ConfigResource type (2 topic, 4 broker,
    8 broker logger, 16 client metrics, 32 group) and name ("" for a broker default)."""

    type: int
    name: str


# A client quota entity: its (entity type, entity name) pairs sorted by type; a name of
# None is the entity type's default.
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One ACL (AccessControlEntryRecord), with the protocol's enum codes."""

    id: UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class ScramCredential:
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """The next producer id block's start, and the broker that was given the last one."""

    next_producer_id: int = 0
    broker_id: int = -1
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole cluster metadata after the record at `offset` (-1: nothing replayed);
    `epoch` is the Raft epoch of that record."""

    offset: int = -1
    epoch: int = -1
    features: Mapping[str, int] = field(default_factory=dict)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[UUID, TopicImage] = field(default_factory=dict)
    topic_ids: Mapping[str, UUID] = field(default_factory=dict)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=dict)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    acls: Mapping[UUID, AclEntry] = field(default_factory=dict)
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=dict)
    producer_ids: ProducerIdsImage = ProducerIdsImage()

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics.get(topic_id)

    def unfenced_brokers(self) -> list[int]:
        """The brokers that may lead or be given new replicas, sorted."""
        return sorted(
            b.broker_id
            for b in self.brokers.values()
            if not b.fenced and not b.in_controlled_shutdown
        )

    @property
    def is_empty(self) -> bool:
        return self == MetadataImage(offset=self.offset, epoch=self.epoch)


EMPTY_IMAGE: Final = MetadataImage()
