"""The services a started broker runs, all constructed: what the API handlers receive
with every request (`RequestContext.services`), so that none of them checks for a part
that is not there yet, and none needs the `Broker` that assembled them.

As Kafka's `KafkaApis` is given `ReplicaManager`, `GroupCoordinator`, `MetadataCache`,
... explicitly, each handler reads the collaborators it uses from here; state changes go
through their owners' methods (the controller's epochs through `ControllerLink`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import MetadataCache
    from logbus.controller.controller import Controller
    from logbus.controller.controller_events import ControllerEventManager
    from logbus.controller.metadata_store import MetadataStore
    from logbus.controller.topic_admin import NewTopic, TopicResult
    from logbus.coordinator.group.runtime import GroupCoordinatorRuntime
    from logbus.coordinator.share.coordinator import ShareGroupCoordinator
    from logbus.coordinator.share.state_coordinator import ShareCoordinator
    from logbus.coordinator.transaction.coordinator import TransactionCoordinator
    from logbus.server.api import Handlers
    from logbus.server.config.dynamic_config import DynamicConfigManager
    from logbus.server.controller_link import ControllerLink
    from logbus.server.metrics.broker_metrics import BrokerMetrics
    from logbus.server.producer_ids import ProducerIdManager
    from logbus.server.quotas.manager import ClientQuotas
    from logbus.server.replica.replica_manager import ReplicaManager
    from logbus.server.security.authorizer import Authorizer
    from logbus.server.security.credential_cache import CredentialCache
    from logbus.server.share.share_partition_manager import SharePartitionManager
    from logbus.server.share.state_store import CoordinatorStateStore
    from logbus.storage.log_manager import LogManager

T = TypeVar("T")


class ControllerForwarding(Protocol):
    """A KRaft broker's way to the active controller (`kraft.controller_forwarding`'s
    `ActiveController`), as the handlers use it."""

    async def request(
        self, api_key: int, body: Mapping[str, Any], version: int, *, timeout: float  # noqa: ASYNC109
    ) -> dict[str, Any]: ...

    async def create_topic(self, spec: NewTopic) -> TopicResult: ...


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: int
    metadata_cache: MetadataCache
    store: MetadataStore
    log_manager: LogManager
    replica_manager: ReplicaManager
    controller: Controller
    controller_link: ControllerLink
    group_coordinator: GroupCoordinatorRuntime
    producer_ids: ProducerIdManager
    dynamic_config: DynamicConfigManager
    transaction_coordinator: TransactionCoordinator
    quotas: ClientQuotas
    api_handlers: Handlers
    """The broker's handler table (what ApiVersions answers)."""
    controller_events: ControllerEventManager | None
    """In a cluster, the thread this broker's controller runs on (its work is queued
    there); None on a stand-alone broker, whose controller runs on the event loop and
    whose metadata store is the embedded one."""
    metrics: BrokerMetrics | None = None
    """What the broker records for `metrics.listener` (None when it is unset)."""
    # the ACL authorizer; None when authorizer.class.name is unset (everything allowed)
    authorizer: Authorizer | None = None
    # share groups (KIP-932): the groups coordinated here, the share partitions led here
    share_groups: ShareGroupCoordinator | None = None
    share_partitions: SharePartitionManager | None = None
    share_state: ShareCoordinator | None = None
    """The share coordinator: the `__share_group_state` partitions led here."""
    share_state_store: CoordinatorStateStore | None = None
    """The way to every share coordinator of the cluster (the share-group offsets APIs)."""
    credentials: CredentialCache | None = None
    """Every user's SCRAM credentials as the broker's logins check them."""
    forwarding: ControllerForwarding | None = None
    """A KRaft broker's way to the active controller: admin requests and topics a client
    asks for implicitly go there (None in ZooKeeper mode and stand-alone)."""

    @property
    def in_cluster(self) -> bool:
        """A member of a ZooKeeper cluster (else a stand-alone broker)."""
        return self.controller_events is not None

    async def on_controller(self, action: Callable[[], T]) -> T:
        """Run controller work: on the controller thread in a cluster (awaited), inline on
        a stand-alone broker (its controller lives on the event loop)."""
        if self.controller_events is None:
            return action()
        return await self.controller_events.call(action)

