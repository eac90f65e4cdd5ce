"""A KRaft broker (`process.roles=broker`, or `broker,controller` for a combined node):
the broker of `broker.py` whose cluster metadata comes from the metadata log instead of
ZooKeeper (KIP-500, KIP-631; Kafka's `BrokerServer`).

Start-up, in Kafka's order: the storage formatted for this node and cluster is checked
(`controller_node.check_formatted`); the node follows the quorum (an observer
`RaftClient`, or, on a combined node, the local voter's); a `MetadataLoader` replays the
log and a `MetadataPublisher` acts on each image (metadata cache, leaders and followers,
deleted partitions); the `BrokerLifecycleManager` registers the broker's listeners and
heartbeats; the broker serves clients once the controller has unfenced it (its image has
caught up with its registration). Admin requests go to the active controller
(`controller_forwarding.py`), and so do producer id blocks and ISR changes
(AlterPartition, through the replica manager's `AlterPartitionManager`).

Client quotas, SCRAM credentials, ACLs, dynamic broker configs and topic configs follow
the image. What still reads a metadata store gets a local embedded store nothing writes
(ApiVersions leaves out the APIs that would act on it): docs/kraft.md lists what is not
taken from the image yet.

The entry point is `KRaftBroker`; `logbus server start` runs it for the broker role.
Owned by one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from logbus.common.config_def import ConfigValue
from logbus.controller.cluster_metadata import BrokerInfo
from logbus.controller.controller import Controller
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.metadata_store import EmbeddedStore, MetadataStore
from logbus.metadata.image import EMPTY_IMAGE, MetadataImage
from logbus.protocol import ApiKey
from logbus.raft.raft_client import RaftClient
from logbus.server.broker import Broker, BrokerParts
from logbus.server.cluster_member import BrokerStartupError, ClusterMember
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.dynamic_config import DynamicConfigManager, config_with_layers
from logbus.server.config.kraft import KRaftSettings
from logbus.server.config.listeners import Listener as ListenerConfig
from logbus.server.controller_link import ControllerLink
from logbus.server.kraft.broker_lifecycle import BrokerEndpoint, BrokerLifecycleManager, BrokerState
from logbus.server.kraft.controller_forwarding import (
    ActiveController,
    ControllerProducerIds,
    forwarding_handlers,
)
from logbus.server.kraft.controller_node import ControllerNode, check_formatted, quorum_config
from logbus.server.kraft.metadata_loader import MetadataLoader
from logbus.server.kraft.metadata_publisher import (
    MetadataPublisher,
    broker_config_layers,
    publish_acls,
    publish_client_quotas,
    publish_scram_credentials,
)
from logbus.server.producer_ids import ProducerIdManager
from logbus.server.replica.alter_partition_manager import ControllerEndpoint
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.server.security.authorizer import Authorizer, parse_super_users
from logbus.server.security.credential_cache import CredentialCache
from logbus.storage.log_manager import LogManager
from logbus.storage.meta_properties import MetaProperties

__all__ = ["KRaftBroker"]

log = logging.getLogger(__name__)

ZOOKEEPER_MODE_APIS: Final = frozenset(
    {
        # the ZooKeeper-mode controller's requests: a KRaft broker acts on its image
        ApiKey.LEADER_AND_ISR,
        ApiKey.UPDATE_METADATA,
        ApiKey.STOP_REPLICA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ALTER_PARTITION,  # the KRaft controller's, on the controller listener
        # still served over the ZooKeeper-era store, which a KRaft broker does not have
        # (docs/kraft.md): not advertised rather than answered wrongly
        ApiKey.ALTER_CONFIGS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
    }
)
"""APIs a KRaft broker does not serve (ApiVersions leaves them out)."""
SECURITY_PROTOCOL_IDS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
UNFENCE_LOG_INTERVAL_S: Final = 30.0


def _kraft_broker_settings(config: BrokerConfig) -> KRaftSettings:
    """The KRaft settings of a broker-role node."""
    kraft = config.kraft
    if kraft is None or not kraft.is_broker:
        raise BrokerStartupError("a KRaft broker needs process.roles with the broker role")
    return kraft


class KRaftBroker(Broker):
    """One broker-role node. `start()` returns once the broker is registered, caught up
    and unfenced; `stop()` shuts it down through the controller (WantShutDown), then as
    `Broker.stop` does, then leaves the quorum."""

    def __init__(self, config: BrokerConfig) -> None:
        kraft = _kraft_broker_settings(config)
        super().__init__(config)
        self.broker_id = kraft.node_id  # node.id names the broker (broker.id may be unset)
        self.kraft = kraft
        self.apis.handlers = {
            key: handler
            for key, handler in forwarding_handlers(self.apis.handlers).items()
            if key not in ZOOKEEPER_MODE_APIS
        }
        self.meta: MetaProperties | None = None
        self.controller_node: ControllerNode | None = None
        """The local voter and controller of a combined node (None on a broker-only one)."""
        self.raft: RaftClient | None = None
        self.loader: MetadataLoader | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self._credential_cache: CredentialCache | None = None
        self._authorizer: Authorizer | None = None
        self._publisher: MetadataPublisher | None = None
        self._static: dict[str, ConfigValue] = {}
        self.active_controller = ActiveController(
            self.broker_id,
            kraft.voters,
            lambda: self.raft.leader_id if self.raft is not None else -1,
            request_timeout_ms=kraft.request_timeout_ms,
        )

    # --- listeners: the controller listener belongs to the controller -----------------------

    def _served_listeners(self) -> list[ListenerConfig]:
        names = set(self.kraft.controller_listener_names)
        return [listener for listener in self.config.listeners if listener.name not in names]

    def _advertised_listeners(self) -> list[ListenerConfig]:
        names = set(self.kraft.controller_listener_names)
        return [
            listener for listener in self.config.advertised_listeners
            if listener.name not in names
        ]  # fmt: skip

    def _controller_endpoint(self) -> ControllerEndpoint:
        """AlterPartition goes to the active controller's controller listener."""

        def active() -> tuple[int, str, int] | None:
            leader = self.raft.leader_id if self.raft is not None else -1
            address = self.kraft.voters.get(leader)
            return None if address is None else (leader, address.host, address.port)

        return active

    def _forwarding(self) -> ActiveController:
        return self.active_controller

    def _producer_id_manager(self, store: MetadataStore) -> ProducerIdManager:
        return ControllerProducerIds(
            store, self.broker_id, self.active_controller,
            lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
        )  # fmt: skip

    # --- start-up ---------------------------------------------------------------------------

    async def _open_metadata_store(
        self, undo: contextlib.AsyncExitStack
    ) -> tuple[MetadataStore, DynamicConfigManager]:
        """The formatted storage checked, the quorum followed; the local store the parts
        not yet fed by the image read (empty)."""
        self.meta = meta = check_formatted(self.config, self.kraft)
        self.metadata_cache.cluster_id = meta.cluster_id or ""
        await self._follow_quorum(meta, undo)
        store = EmbeddedStore(self.config.log_dirs[0])
        undo.push_async_callback(self._close_store, store)
        dynamic = self._dynamic_config_manager(store)
        self.config = dynamic.load()
        self._static = dynamic.static
        return store, dynamic

    async def _load_credentials(
        self, store: MetadataStore, dynamic_config: DynamicConfigManager
    ) -> CredentialCache:
        """An empty cache the image fills (`publish_scram_credentials`)."""
        self._credential_cache = CredentialCache(store)
        return self._credential_cache

    async def _follow_quorum(self, meta: MetaProperties, undo: contextlib.AsyncExitStack) -> None:
        """Combined: the local controller (a voter); broker only: an observer."""
        if self.kraft.is_controller:
            node = ControllerNode(self.config)
            undo.push_async_callback(node.stop)
            await node.start()
            self.controller_node = node
            assert node.client is not None
            self.raft = node.client
            return
        client = RaftClient(quorum_config(self.config, meta))
        undo.push_async_callback(client.close)
        await client.start()
        self.raft = client

    async def _start_controller(
        self,
        store: MetadataStore,
        log_manager: LogManager,
        dynamic_config: DynamicConfigManager,
        replica_manager: ReplicaManager,
        link: ControllerLink,
        undo: contextlib.AsyncExitStack,
    ) -> tuple[Controller, ClusterMember | None, None]:
        """The image followed and published, the broker registered; returns once the
        controller has unfenced it. The returned `Controller` is never started: the
        controller's work is the quorum's (forwarded), it only stands in the services."""
        assert self.raft is not None
        undo.push_async_callback(self.active_controller.close)
        publisher = MetadataPublisher(
            self.broker_id, self.metadata_cache, link, log_manager,
            self._advertised_listeners()[0].name,
        )  # fmt: skip

        def after_replay() -> None:
            publisher.publish(loader.image)
            if lifecycle.broker_epoch >= 0:
                link.registered(lifecycle.broker_epoch)

        publisher.followers += [
            lambda old, new: publish_client_quotas(old, new, self.quotas),
            self._follow_credentials,
            self._follow_broker_configs,
            self._follow_acls,
        ]
        self._publisher = publisher
        loader = MetadataLoader(self.raft, after_replay=after_replay)
        lifecycle = self._lifecycle_manager(loader)
        await loader.start()
        undo.push_async_callback(loader.close)
        self.loader = loader
        await lifecycle.start()
        undo.push_async_callback(lifecycle.close)
        self.lifecycle = lifecycle
        await self._wait_unfenced(lifecycle)
        after_replay()
        publisher.remove_stray_logs()
        host, port = self.advertised()
        endpoints = tuple(self.advertised_endpoints())
        placeholder = Controller(
            store, self.channel,
            BrokerInfo(self.broker_id, host, port, self.config.broker_rack,
                       endpoints[0].listener, endpoints),
        )  # fmt: skip
        return placeholder, None, None

    async def _start_authorizer(
        self, store: MetadataStore, undo: contextlib.AsyncExitStack
    ) -> tuple[Authorizer | None, ControllerEventManager | None]:
        """The ACL authorizer (authorizer.class.name set), holding the image's ACLs and
        following their changes."""
        cfg = self.config
        if not cfg.authorizer_class_name:
            return None, None
        authorizer = Authorizer(
            store,
            super_users=parse_super_users(cfg.super_users),
            allow_everyone_if_no_acl_found=cfg.allow_everyone_if_no_acl_found,
        )
        self._authorizer = authorizer
        if self._publisher is not None:  # the image so far; the followers do the rest
            publish_acls(EMPTY_IMAGE, self._publisher.published, authorizer)
        return authorizer, None

    def _follow_acls(self, old: MetadataImage, new: MetadataImage) -> None:
        if self._authorizer is not None:
            publish_acls(old, new, self._authorizer)

    def _follow_credentials(self, old: MetadataImage, new: MetadataImage) -> None:
        if self._credential_cache is not None:
            publish_scram_credentials(old, new, self._credential_cache)

    def _follow_broker_configs(self, old: MetadataImage, new: MetadataImage) -> None:
        """Dynamic broker configs (the cluster-wide default and this broker's) of the
        image applied as a ZooKeeper-mode broker applies stored ones."""
        layers = broker_config_layers(new, self.broker_id)
        if layers != broker_config_layers(old, self.broker_id):
            self.reconfigure(config_with_layers(self._static, *layers))
            log.info("broker %d: applied dynamic broker configs from the image", self.broker_id)

    async def _wait_unfenced(self, lifecycle: BrokerLifecycleManager) -> None:
        """As Kafka's broker, wait (as long as it takes) until the controller has
        registered and unfenced this broker: its image has caught up."""
        log.info("broker %d: registering, waiting to be unfenced", self.broker_id)
        while True:
            try:
                await lifecycle.wait_state(BrokerState.RUNNING, timeout=UNFENCE_LOG_INTERVAL_S)
                return
            except TimeoutError:
                log.warning(
                    "broker %d: still fenced (%s, metadata offset %d, controller %d)",
                    self.broker_id, lifecycle.state.value, lifecycle.loader.image.offset,
                    lifecycle.loader.client.leader_id,
                )  # fmt: skip

    def _lifecycle_manager(self, loader: MetadataLoader) -> BrokerLifecycleManager:
        assert self.meta is not None
        return BrokerLifecycleManager(
            self.broker_id,
            self.meta.cluster_id or "",
            loader,
            self.kraft.voters,
            [
                BrokerEndpoint(
                    e.listener, e.host, e.port, SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)
                )
                for e in self.advertised_endpoints()
            ],
            rack=self.config.broker_rack,
            heartbeat_interval_ms=self.kraft.broker_heartbeat_interval_ms,
            request_timeout_ms=self.kraft.request_timeout_ms,
        )

    # --- shutdown ---------------------------------------------------------------------------

    async def stop(self) -> None:
        """Leaderships handed over through the controller first (WantShutDown), while
        the listeners still serve, then as `Broker.stop`."""
        lifecycle = self.lifecycle
        if (
            self._parts is not None and not self._stopped and lifecycle is not None
            and self.config.get("controlled.shutdown.enable")
        ):  # fmt: skip
            with contextlib.suppress(asyncio.CancelledError):
                # past the session timeout the controller fences this broker anyway
                timeout = self.kraft.broker_session_timeout_ms / 1000
                if not await lifecycle.controlled_shutdown(timeout):
                    log.warning("broker %d: no controlled shutdown answer", self.broker_id)
        await super().stop()

    async def _stop_metadata(self, parts: BrokerParts) -> None:
        """The image no longer followed, the session ended, the quorum left."""
        parts.services.dynamic_config.stop()
        if self.lifecycle is not None:
            await self.lifecycle.close()
        if self.loader is not None:
            await self.loader.close()
        await self.active_controller.close()
        if self.controller_node is not None:
            await self.controller_node.stop()
        elif self.raft is not None:
            await self.raft.close()
