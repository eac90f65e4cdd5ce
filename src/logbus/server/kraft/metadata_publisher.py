"""A KRaft broker acting on its metadata image (Kafka's `BrokerMetadataPublisher` and
`ReplicaManager.applyDelta`, KIP-500/631): where a ZooKeeper-mode broker waits for
LeaderAndIsr, UpdateMetadata and StopReplica, a KRaft broker compares each new image
with the one it published before.

- The metadata cache (what Metadata, FindCoordinator and DescribeCluster answer) becomes
  the image's: registered, unfenced brokers with their endpoints; every topic with its
  id, partitions and configs.
- Every partition whose registration changed and that lists this broker as a replica is
  led or followed through the same `ControllerLink.apply_leader_and_isr` path a
  LeaderAndIsr takes (leader epoch, ISR, replicas, partition epoch), so the coordinators
  learn of their partitions as in ZooKeeper mode.
- Partitions of removed topics, or no longer assigned to this broker, are stopped and
  their logs deleted (`apply_stop_replica`); once the broker has caught up
  (`remove_stray_logs`), logs of topics deleted while it was down go too.
- Client quotas and SCRAM credentials the broker enforces follow the image
  (`publish_client_quotas`, `publish_scram_credentials`), and so do the dynamic broker
  configs (`broker_config_layers`); the broker adds them as `followers`.

`image_changes` is the pure part (two images in, what to do out); `MetadataPublisher`
applies it. The entry point is `MetadataPublisher`. Event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from uuid import UUID

from logbus.common.security.scram import MECHANISM_TYPES
from logbus.common.security.scram import ScramCredential as StoredCredential
from logbus.controller.cluster_metadata import (
    BrokerInfo,
    EndPoint,
    MetadataCache,
    PartitionState,
    TopicMetadata,
)
from logbus.controller.topic_validation import INTERNAL_TOPICS
from logbus.metadata.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    ConfigResource,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    TopicImage,
)
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbus.server.quotas.entity import CLIENT_ID_TYPE, DEFAULT, USER_TYPE
from logbus.server.quotas.entity import QuotaEntity as ClientQuotaEntity

if TYPE_CHECKING:
    from logbus.server.controller_link import ControllerLink
    from logbus.server.quotas.manager import ClientQuotas
    from logbus.server.security.authorizer import Authorizer
    from logbus.server.security.credential_cache import CredentialCache
    from logbus.storage.log_manager import LogManager

__all__ = [
    "ImageChanges",
    "MetadataPublisher",
    "broker_config_layers",
    "cache_brokers",
    "cache_topic",
    "image_changes",
    "publish_acls",
    "publish_client_quotas",
    "publish_scram_credentials",
]

logger = logging.getLogger(__name__)

TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
SECURITY_PROTOCOLS: Final = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


@dataclass(frozen=True)
class ImageChanges:
    """What one broker does between two images: the partitions (by topic name) to lead
    or follow as their registrations say, and those to stop and delete here."""

    replicas: dict[str, list[int]] = field(default_factory=dict)
    stopped: dict[str, list[int]] = field(default_factory=dict)
    changed_configs: list[str] = field(default_factory=list)


def _hosted(partitions: Mapping[int, PartitionRegistration], broker_id: int) -> set[int]:
    return {p for p, reg in partitions.items() if broker_id in reg.replicas}


def image_changes(old: MetadataImage, new: MetadataImage, broker_id: int) -> ImageChanges:
    """What `broker_id` does when its image moves from `old` to `new`."""
    changes = ImageChanges()
    for topic_id, before in old.topics.items():
        after = new.topics.get(topic_id)
        gone = _hosted(before.partitions, broker_id)
        if after is not None:
            gone -= _hosted(after.partitions, broker_id)
        if gone:
            changes.stopped[before.name] = sorted(gone)
    for topic_id, after in new.topics.items():
        earlier = old.topics.get(topic_id)
        previous = earlier.partitions if earlier is not None else {}
        changed = sorted(
            p for p in _hosted(after.partitions, broker_id)
            if previous.get(p) != after.partitions[p]
        )  # fmt: skip
        if changed:
            changes.replicas[after.name] = changed
        if earlier is not None and _topic_configs(old, earlier.name) != _topic_configs(
            new, after.name
        ):
            changes.changed_configs.append(after.name)
    return changes


NO_CONFIGS: Final[Mapping[str, str]] = {}


def _topic_configs(image: MetadataImage, name: str) -> Mapping[str, str]:
    return image.configs.get(ConfigResource(TOPIC_RESOURCE, name), NO_CONFIGS)


def cache_topic(image: MetadataImage, topic: TopicImage) -> TopicMetadata:
    """A topic of the image as the metadata cache holds it (the partition epoch where a
    ZooKeeper-mode cache holds the state znode's version)."""
    partitions = {
        p: PartitionState(
            reg.leader,
            reg.leader_epoch,
            reg.isr,
            reg.replicas,
            controller_epoch=max(image.epoch, 0),
            version=reg.partition_epoch,
        )
        for p, reg in topic.partitions.items()
    }
    return TopicMetadata(
        topic.name,
        topic.topic_id,
        partitions,
        dict(_topic_configs(image, topic.name)),
        is_internal=topic.name in INTERNAL_TOPICS,
    )


def _broker_info(broker: BrokerRegistration, client_listener: str | None) -> BrokerInfo | None:
    endpoints = tuple(
        EndPoint(e.name, e.host, e.port, SECURITY_PROTOCOLS.get(e.security_protocol, e.name))
        for e in broker.endpoints
    )
    if not endpoints:
        return None
    main = next((e for e in endpoints if e.listener == client_listener), endpoints[0])
    return BrokerInfo(broker.broker_id, main.host, main.port, broker.rack, main.listener, endpoints)


def cache_brokers(image: MetadataImage, client_listener: str | None) -> dict[int, BrokerInfo]:
    """The registered, unfenced brokers of the image (the live brokers of Kafka's
    KRaftMetadataCache), with every endpoint they registered."""
    brokers: dict[int, BrokerInfo] = {}
    for broker_id, broker in sorted(image.brokers.items()):
        if broker.fenced:
            continue
        info = _broker_info(broker, client_listener)
        if info is not None:
            brokers[broker_id] = info
    return brokers


class MetadataPublisher:
    """Publishes each new image to the broker: its metadata cache, its replicas (through
    the controller link) and its logs. `publish(image)` after every replay; an image
    already published is not published twice."""

    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        link: ControllerLink,
        log_manager: LogManager,
        client_listener: str | None,
    ) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self.link = link
        self.log_manager = log_manager
        self.client_listener = client_listener
        self.published: MetadataImage = EMPTY_IMAGE
        self.followers: list[Callable[[MetadataImage, MetadataImage], None]] = []
        """Told (old image, new image) after each publication."""

    def publish(self, image: MetadataImage) -> None:
        old = self.published
        if image is old:
            return
        changes = image_changes(old, image, self.broker_id)
        self._update_cache(old, image)
        for name, partitions in changes.stopped.items():
            logger.info("broker %d: stopping %s %s", self.broker_id, name, partitions)
            self.link.apply_stop_replica(name, partitions, delete=True)
        for name, partitions in changes.replicas.items():
            self.link.apply_leader_and_isr(self.cache.topics[name], partitions)
        for name in changes.changed_configs:
            self.link.replica_manager.update_log_config(self.cache.topics[name])
        self.published = image
        for follower in self.followers:
            follower(old, image)

    def remove_stray_logs(self) -> None:
        """Delete the logs of topics the published image does not hold (deleted while the
        broker was down). Only once the image has caught up with the quorum (the broker
        is unfenced): an image still replaying would take a live topic for a deleted one."""
        self.log_manager.delete_stray_logs(
            {t.name: t.topic_id for t in self.published.topics.values()}
        )

    def _update_cache(self, old: MetadataImage, image: MetadataImage) -> None:
        cache = self.cache
        cache.controller_id = self.broker_id  # clients' admin requests come here: forwarded
        if old.brokers is not image.brokers:
            cache.brokers = cache_brokers(image, self.client_listener)
        for name in _removed_names(old, image):
            cache.remove_topic(name)
        for topic_id, topic in image.topics.items():
            if old.topics.get(topic_id) is not topic or _topic_configs(
                old, topic.name
            ) is not _topic_configs(image, topic.name):
                cache.update_topic(cache_topic(image, topic))


def _removed_names(old: MetadataImage, new: MetadataImage) -> Iterable[str]:
    removed: set[UUID] = set(old.topics) - set(new.topics)
    names = {old.topics[t].name for t in removed}
    return sorted(names - set(new.topic_ids))


def _client_quota_entity(entity: QuotaEntity) -> ClientQuotaEntity:
    parts = dict(entity)

    def part(kind: str) -> str | None:
        if kind not in parts:
            return None
        name = parts[kind]
        return DEFAULT if name is None else name

    return ClientQuotaEntity(part(USER_TYPE), part(CLIENT_ID_TYPE))


def publish_client_quotas(old: MetadataImage, new: MetadataImage, quotas: ClientQuotas) -> None:
    """The client quotas of the image into the broker's `ClientQuotas`."""
    if old.client_quotas is new.client_quotas:
        return
    for entity in set(old.client_quotas) | set(new.client_quotas):
        values = new.client_quotas.get(entity, {})
        if old.client_quotas.get(entity) != values:
            quotas.set_entity(_client_quota_entity(entity), values)


def publish_scram_credentials(
    old: MetadataImage, new: MetadataImage, credentials: CredentialCache
) -> None:
    """The SCRAM credentials of the image into the broker's `CredentialCache`."""
    if old.scram is new.scram:
        return
    users = {name for name, _m in old.scram} | {name for name, _m in new.scram}
    for user in users:
        stored = {
            MECHANISM_TYPES[mechanism]: StoredCredential(
                c.salt, c.stored_key, c.server_key, c.iterations
            )
            for (name, mechanism), c in new.scram.items()
            if name == user and mechanism in MECHANISM_TYPES
        }
        credentials.set_user(user, stored)


def broker_config_layers(
    image: MetadataImage, broker_id: int
) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """The dynamic broker configs of the image: (cluster-wide default, this broker's)."""
    return (
        image.configs.get(ConfigResource(BROKER_RESOURCE, ""), NO_CONFIGS),
        image.configs.get(ConfigResource(BROKER_RESOURCE, str(broker_id)), NO_CONFIGS),
    )


def image_acls(image: MetadataImage) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """The image's ACLs by resource pattern, as the authorizer holds them."""
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for acl in image.acls.values():
        pattern = ResourcePattern(
            ResourceType(acl.resource_type), acl.resource_name, PatternType(acl.pattern_type)
        )
        found.setdefault(pattern, set()).add(
            AccessControlEntry(
                acl.principal, acl.host, AclOperation(acl.operation),
                AclPermissionType(acl.permission_type),
            )
        )  # fmt: skip
    return {pattern: frozenset(entries) for pattern, entries in found.items()}


def publish_acls(old: MetadataImage, new: MetadataImage, authorizer: Authorizer) -> None:
    """The ACLs of the image into the broker's authorizer."""
    if old.acls is not new.acls:
        authorizer.set_acls(image_acls(new))
