"""This broker's side of the controller (Kafka's ZooKeeper mode): the epochs that fence
stale controller requests, and what the broker does when the controller speaks.

The entry point is `ControllerLink`. Kafka keeps the newest controller epoch in
`ReplicaManager` and the broker epoch with its ZooKeeper registration; `KafkaApis` hands
new leaderships to the group and transaction coordinators (`onLeadershipChange`). Here one
object owns both epochs and those hand-overs, so the handlers of
`server/api/controller_requests.py` and the in-process `LocalChannel` change the broker's
state only through its methods.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from logbus.client.requests.controller import UNKNOWN_BROKER_EPOCH
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC
from logbus.coordinator.share.state_coordinator import ShareCoordinator
from logbus.coordinator.share.state_records import SHARE_STATE_TOPIC
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import BrokerInfo, MetadataCache, TopicMetadata
    from logbus.coordinator.group.runtime import GroupCoordinatorRuntime
    from logbus.coordinator.transaction.coordinator import TransactionCoordinator
    from logbus.server.replica.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class ControllerLink:
    """Owns this broker's epochs towards the controller and applies the controller's
    LeaderAndIsr, UpdateMetadata and StopReplica (the `BrokerCallbacks` of
    `controller/channel.py`) to the replica manager, the coordinators and the metadata
    cache. Built by `Broker.start` once those exist; used on the broker's event loop only
    (`lock` keeps one controller request at a time)."""

    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        group_coordinator: GroupCoordinatorRuntime,
        transaction_coordinator: TransactionCoordinator,
    ) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        # the share coordinator (KIP-932), told of `__share_group_state` leadership too
        self.share_state: ShareCoordinator | None = None
        self.broker_epoch = UNKNOWN_BROKER_EPOCH
        """This incarnation's broker epoch: the czxid of its `/brokers/ids/<id>` node
        (-1: unknown, controller requests' broker epochs are not checked)."""
        self.controller_epoch = 0
        """The newest controller epoch seen in a controller request; older ones are
        refused (STALE_CONTROLLER_EPOCH)."""
        self.lock = asyncio.Lock()
        """Held while one controller request is handled: they apply one at a time."""

    # --- epochs ---------------------------------------------------------------------------

    def registered(self, broker_epoch: int) -> None:
        """This broker registered (again) with the metadata store, as `broker_epoch`."""
        self.broker_epoch = broker_epoch

    def accept_controller_epoch(self, controller_epoch: int) -> None:
        """A controller request of `controller_epoch` passed `fencing_error`."""
        self.controller_epoch = controller_epoch

    def saw_controller(self, controller_epoch: int) -> None:
        """This broker's own controller started at `controller_epoch` (stand-alone)."""
        self.controller_epoch = max(self.controller_epoch, controller_epoch)

    def fencing_error(
        self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int
    ) -> ErrorCode | None:
        """STALE_BROKER_EPOCH or STALE_CONTROLLER_EPOCH if the request must be refused."""
        if UNKNOWN_BROKER_EPOCH not in (broker_epoch, self.broker_epoch) and (
            broker_epoch < self.broker_epoch
        ):
            # Kafka refuses only an older epoch: the controller may learn this broker's new
            # registration (and send with its epoch) before the broker does.
            log.warning(
                "refusing %s from controller %d: broker epoch %d is older than this broker's %d",
                api,
                controller_id,
                broker_epoch,
                self.broker_epoch,
            )
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            log.warning(
                "refusing %s from controller %d: controller epoch %d is older than %d",
                api,
                controller_id,
                controller_epoch,
                self.controller_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return None

    # --- the controller's requests applied ------------------------------------------------

    def apply_leader_and_isr(self, topic: TopicMetadata, partitions: list[int]) -> None:
        self.replica_manager.apply_leader_and_isr(topic, partitions)
        if topic.name == OFFSETS_TOPIC:
            for p in partitions:
                state = topic.partitions[p]
                self.group_coordinator.on_leadership(
                    p, state.leader == self.broker_id, state.leader_epoch
                )
        if topic.name == TRANSACTION_STATE_TOPIC:
            for p in partitions:
                state = topic.partitions[p]
                self.transaction_coordinator.on_leadership(
                    p, state.leader == self.broker_id, state.leader_epoch
                )
        if topic.name == SHARE_STATE_TOPIC and self.share_state is not None:
            for p in partitions:
                state = topic.partitions[p]
                self.share_state.on_leadership(
                    p, state.leader == self.broker_id, state.leader_epoch
                )

    def apply_update_metadata(
        self,
        brokers: list[BrokerInfo],
        topics: list[TopicMetadata],
        deleted: list[str],
        controller_id: int | None = None,
    ) -> None:
        cache = self.metadata_cache
        if controller_id is not None:
            cache.controller_id = controller_id
        cache.brokers = {b.broker_id: b for b in brokers}
        for topic in topics:
            old = cache.topics.get(topic.name)
            cache.update_topic(topic)
            if old is not None:
                self.replica_manager.update_log_config(topic)
        for name in deleted:
            cache.remove_topic(name)

    def unload_offline(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions whose log dir failed: the coordinators they hold stop here, as
        Kafka's handleLogDirFailure resigns them (their new leaders load them)."""
        for tp in partitions:
            if tp.topic == OFFSETS_TOPIC:
                self.group_coordinator.unload(tp.partition)
            elif tp.topic == TRANSACTION_STATE_TOPIC:
                self.transaction_coordinator.unload(tp.partition)

    def apply_stop_replica(self, topic: str, partitions: list[int], delete: bool) -> None:
        if topic == OFFSETS_TOPIC:
            for p in partitions:
                self.group_coordinator.unload(p)
        if topic == TRANSACTION_STATE_TOPIC:
            for p in partitions:
                self.transaction_coordinator.unload(p)
        if topic == SHARE_STATE_TOPIC and self.share_state is not None:
            for p in partitions:
                self.share_state.unload(p)
        self.replica_manager.apply_stop_replica(topic, partitions, delete)
