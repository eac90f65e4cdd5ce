"""The broker: wires the log manager, metadata store, controller, replica manager, API
layer and listener together and runs their lifecycle.

A stand-alone broker is a cluster of size one: the same controller runs over the
`EmbeddedStore`. `start()` recovers the logs, registers the broker, elects itself
controller and opens the listener; `stop()` closes connections, writes checkpoints and
the clean-shutdown marker. Owned by one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from logbus.common.config_def import ConfigError
from logbus.common.network.frame_stream import MemoryPool
from logbus.controller.channel import LocalChannel
from logbus.controller.cluster_controller import ClusterController
from logbus.controller.cluster_metadata import BrokerInfo, EndPoint, MetadataCache, TopicMetadata
from logbus.controller.controller import Controller, ensure_cluster_id, stored_topic_configs
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.log_dir_events import notify_log_dir_failure
from logbus.controller.metadata_store import EmbeddedStore, MetadataStore
from logbus.controller.network_channel import NetworkChannel
from logbus.coordinator.group import GroupConfig
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC
from logbus.coordinator.group.runtime import GroupCoordinatorRuntime
from logbus.coordinator.share.coordinator import ShareGroupCoordinator, ShareGroupSettings
from logbus.coordinator.share.state_coordinator import ShareCoordinator
from logbus.coordinator.share.state_records import SHARE_STATE_TOPIC
from logbus.coordinator.transaction.coordinator import TransactionCoordinator
from logbus.coordinator.transaction.runtime import TxnConfig
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC
from logbus.server.api.registry import Apis
from logbus.server.cluster_member import (
    ClusterMember,
    check_cluster_id,
    open_zookeeper,
    stored_topic_ids,
)
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.dynamic_config import DynamicConfigManager
from logbus.server.config.listeners import Listener as ListenerConfig
from logbus.server.config.topic_config import effective_topic_config, validate_topic_configs
from logbus.server.controlled_shutdown import shut_down_controlled
from logbus.server.controller_link import ControllerLink
from logbus.server.coordinator_partition_writer import CoordinatorPartitionWriter
from logbus.server.metrics.address import parse_metrics_listener
from logbus.server.metrics.broker_metrics import BrokerMetrics
from logbus.server.metrics.collector import BrokerCollector
from logbus.server.metrics.endpoint import MetricsEndpoint
from logbus.server.metrics.request_log import close_request_log, open_request_log
from logbus.server.network.connection_quotas import ConnectionQuotas
from logbus.server.network.listener import Listener
from logbus.server.network.listener_security import (
    inter_broker_security,
    listener_sasl,
    listener_ssl_context,
    principal_mapper,
    ssl_fingerprint,
)
from logbus.server.producer_ids import ProducerIdManager
from logbus.server.quotas.entity import CLIENTS as QUOTA_CLIENTS
from logbus.server.quotas.entity import USERS as QUOTA_USERS
from logbus.server.quotas.manager import ClientQuotas, QuotaWindows
from logbus.server.quotas.manager import change_handler as quota_change_handler
from logbus.server.quotas.manager import load_all as load_client_quotas
from logbus.server.replica.leader_isolation import LeaderIsolationGuard
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.server.security.authorizer import Authorizer, parse_super_users
from logbus.server.security.credential_cache import USERS, CredentialCache
from logbus.server.services import BrokerServices
from logbus.server.share.group_configs import AUTO_OFFSET_RESET, read_group_configs
from logbus.server.share.share_partition_manager import SharePartitionManager, ShareSettings
from logbus.server.share.state_store import CoordinatorStateStore
from logbus.server.txn_marker_channel import TxnMarkerChannel
from logbus.server.txn_marker_writer import own_marker_writer
from logbus.storage.log_cleaner import CleanerConfig
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import IO_THREADS, LogManager

if TYPE_CHECKING:
    from logbus.server.kraft.controller_forwarding import ActiveController
    from logbus.server.replica.alter_partition_manager import ControllerEndpoint

log = logging.getLogger(__name__)

NEVER_MS = 1 << 40


def log_config_from(values: dict[str, Any]) -> LogConfig:
    """Map Kafka's topic config names onto the storage layer's settings."""
    return LogConfig(
        segment_bytes=int(values["segment.bytes"]),
        segment_ms=int(values["segment.ms"]),
        segment_index_bytes=int(values["segment.index.bytes"]),
        index_interval_bytes=int(values["index.interval.bytes"]),
        flush_messages=int(values["flush.messages"]),
        flush_ms=int(values["flush.ms"]),
        max_message_bytes=int(values["max.message.bytes"]),
        message_timestamp_type=str(values["message.timestamp.type"]),
        retention_ms=int(values["retention.ms"]),
        retention_bytes=int(values["retention.bytes"]),
        cleanup_policy=",".join(values["cleanup.policy"])
        if isinstance(values["cleanup.policy"], list)
        else str(values["cleanup.policy"]),
        file_delete_delay_ms=int(values["file.delete.delay.ms"]),
        min_insync_replicas=int(values["min.insync.replicas"]),
        segment_jitter_ms=int(values["segment.jitter.ms"]),
        compression_type=str(values["compression.type"]),
        compression_gzip_level=int(values["compression.gzip.level"]),
        compression_lz4_level=int(values["compression.lz4.level"]),
        compression_zstd_level=int(values["compression.zstd.level"]),
        message_timestamp_before_max_ms=int(values["message.timestamp.before.max.ms"]),
        message_timestamp_after_max_ms=int(values["message.timestamp.after.max.ms"]),
        preallocate=bool(values["preallocate"]),
        unclean_leader_election_enable=bool(values["unclean.leader.election.enable"]),
        message_downconversion_enable=bool(values["message.downconversion.enable"]),
        delete_retention_ms=int(values["delete.retention.ms"]),
        min_cleanable_ratio=float(values["min.cleanable.dirty.ratio"]),
        min_compaction_lag_ms=int(values["min.compaction.lag.ms"]),
        max_compaction_lag_ms=int(values["max.compaction.lag.ms"]),
    )


def cleaner_config_from(config: BrokerConfig) -> CleanerConfig:
    """The broker's log.cleaner.* settings for the storage layer's LogCleaner."""
    return CleanerConfig(
        enable=config.log_cleaner_enable,
        num_threads=config.log_cleaner_threads,
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        io_buffer_size=config.log_cleaner_io_buffer_size,
        io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
        max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        backoff_ms=config.log_cleaner_backoff_ms,
    )


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """What `Broker.start()` built, every part constructed. The Optional ones depend on
    the configuration, not on how far start-up got: `cluster` and `network_channel` exist
    in ZooKeeper mode, `authorizer` and `acl_worker` with `authorizer.class.name`, the
    endpoint with `metrics.listener`."""

    services: BrokerServices
    credentials: CredentialCache
    txn_marker_channel: TxnMarkerChannel
    share_state_store: CoordinatorStateStore
    cluster: ClusterMember | None
    network_channel: NetworkChannel | None
    acl_worker: ControllerEventManager | None
    metrics_endpoint: MetricsEndpoint | None


class Broker:
    """The assembly of one broker's parts: `start()` builds and starts them in order and
    hands the API layer their `BrokerServices`; `stop()` stops them in Kafka's order.
    Owned by one event loop.

    The parts live in one `BrokerParts`, set once all of them are built: a start that
    fails half-way stops what it built (in reverse order) and raises, and `stop()` of a
    broker that never started does nothing. The attributes below read the parts of a
    started broker (tests and tools use them); code that runs once the broker has
    started receives the parts it uses (`BrokerServices`, or as arguments)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id: int = config.broker_id
        self.channel = LocalChannel()
        self.metadata_cache = MetadataCache("", -1)
        self.quotas = ClientQuotas(
            QuotaWindows(config.quota_window_num, float(config.quota_window_size_seconds))
        )
        self.connection_quotas = ConnectionQuotas(config.connection_limits)
        self.apis = Apis(self.started, lambda: self.config)
        self.listeners: list[Listener] = []
        self.metrics: BrokerMetrics | None = (
            BrokerMetrics() if config.get("metrics.listener") else None
        )
        """What the broker records for `metrics.listener` (None when it is unset)."""
        self._ssl_fingerprints: dict[str, tuple[object, ...]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._request_log: logging.Handler | None = None  # request.log.file's handler
        self._started = asyncio.Event()
        self._parts: BrokerParts | None = None
        self._reconfigured_while_starting = False
        self._stopped = False

    @property
    def parts(self) -> BrokerParts:
        """The parts of a started broker."""
        if self._parts is None:
            raise RuntimeError(f"broker {self.broker_id} has not started")
        return self._parts

    @property
    def services(self) -> BrokerServices:
        return self.parts.services

    @property
    def store(self) -> MetadataStore:
        return self.parts.services.store

    @property
    def log_manager(self) -> LogManager:
        return self.parts.services.log_manager

    @property
    def replica_manager(self) -> ReplicaManager:
        return self.parts.services.replica_manager

    @property
    def group_coordinator(self) -> GroupCoordinatorRuntime:
        return self.parts.services.group_coordinator

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        return self.parts.services.transaction_coordinator

    @property
    def controller(self) -> Controller:
        return self.parts.services.controller

    @property
    def dynamic_config(self) -> DynamicConfigManager:
        return self.parts.services.dynamic_config

    @property
    def authorizer(self) -> Authorizer | None:
        """The ACL authorizer (authorizer.class.name set), else None."""
        return self.parts.services.authorizer

    @property
    def credentials(self) -> CredentialCache:
        """SCRAM credentials of every user, kept in step with the metadata store."""
        return self.parts.credentials

    @property
    def txn_marker_channel(self) -> TxnMarkerChannel:
        return self.parts.txn_marker_channel

    @property
    def cluster(self) -> ClusterMember | None:
        """Cluster mode (`zookeeper.connect`): registration and the controller thread."""
        return self.parts.cluster

    @property
    def metrics_endpoint(self) -> MetricsEndpoint | None:
        return self.parts.metrics_endpoint

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port of the first listener (useful with port 0 in tests)."""
        return self.listeners[0].port

    @property
    def host(self) -> str:
        return self.advertised()[0]

    def advertised_endpoints(self) -> list[EndPoint]:
        """Every advertised listener with its bound port where it was given as 0 (the
        listener of the same name's); host "" is localhost."""
        bound = {listener.name: listener.port for listener in self.listeners}
        return [
            EndPoint(
                listener.name,
                listener.host or "localhost",
                listener.port or bound.get(listener.name, self.port),
                listener.security_protocol,
            )
            for listener in self._advertised_listeners()
        ]

    def advertised(self) -> tuple[str, int]:
        listener = self._advertised_listeners()[0]
        port = listener.port or self.port
        if listener.port == self._served_listeners()[0].port:
            port = self.port
        return (listener.host or "localhost", port)

    async def start(self) -> None:
        """Start every part in order, then serve: a request that arrived meanwhile waits
        for the services (`started`). When a part fails to start, those started before
        it are stopped (in reverse order) and the error is raised."""
        async with contextlib.AsyncExitStack() as undo:
            parts = await self._assemble(undo)
            undo.pop_all()
        self._parts = parts
        if self._reconfigured_while_starting:
            self._reconfigure_parts(parts, self.config)
        self._started.set()
        cfg = self.config
        if unused := cfg.without_effect():
            log.info(
                "settings with no effect on %s (see docs/configuration.md): %s",
                "this cluster member" if cfg.uses_zookeeper else "a stand-alone broker",
                ", ".join(unused),
            )
        host, port = self.advertised()
        log.info(
            "broker %d started, listening on %s:%d (cluster %s)",
            self.broker_id,
            host,
            port,
            self.metadata_cache.cluster_id,
        )

    def _served_listeners(self) -> list[ListenerConfig]:
        """The listeners this broker serves clients and brokers on."""
        return self.config.listeners

    def _advertised_listeners(self) -> list[ListenerConfig]:
        return self.config.advertised_listeners

    def _controller_endpoint(self) -> ControllerEndpoint | None:
        """Where ISR changes go (None: the controller the metadata cache names)."""
        return None

    def _forwarding(self) -> ActiveController | None:
        """The way to a KRaft quorum's active controller (none here)."""
        return None

    def _producer_id_manager(self, store: MetadataStore) -> ProducerIdManager:
        """Where producer id blocks come from: the metadata store."""
        return ProducerIdManager(store, self.broker_id, threaded=self.config.uses_zookeeper)

    async def _assemble(self, undo: contextlib.AsyncExitStack) -> BrokerParts:
        """Build and start the parts in order; each pushes onto `undo` how to stop it."""
        metrics_address = self._metrics_address()
        store, dynamic_config = await self._open_metadata_store(undo)
        cfg = self.config
        log_manager = await self._start_log_manager(store, undo)
        await self._load_client_quotas(store, dynamic_config)
        self.connection_quotas.reconfigure(cfg.connection_limits)
        credentials = await self._load_credentials(store, dynamic_config)
        await self._open_listeners(credentials, undo)
        replica_manager = ReplicaManager(self.broker_id, log_manager, self._log_config_for)
        replica_manager.update_replication_rates(cfg)  # the log dir copy's, stand-alone too
        self._open_request_log()
        undo.callback(self._close_request_log)
        if self.metrics is not None:
            replica_manager.metrics = self.apis.metrics = self.metrics
        group_coordinator = self._start_group_coordinator(replica_manager, undo)
        # built before the transaction coordinator, which asks it for new producer ids
        producer_ids = self._producer_id_manager(store)
        marker_channel, transaction_coordinator = self._start_transaction_coordinator(
            replica_manager, producer_ids, undo
        )
        link = ControllerLink(
            self.broker_id,
            self.metadata_cache,
            replica_manager,
            group_coordinator,
            transaction_coordinator,
        )
        self._watch_log_dirs(store, log_manager, replica_manager, link)
        # before the controller: its first LeaderAndIsr loads `__share_group_state`
        share_state = self._start_share_coordinator(replica_manager, link, undo)
        controller, cluster, network_channel = await self._start_controller(
            store, log_manager, dynamic_config, replica_manager, link, undo
        )
        authorizer, acl_worker = await self._start_authorizer(store, undo)
        share_groups, share_partitions, share_state_store = self._start_share_groups(
            store, replica_manager, share_state, undo
        )
        services = BrokerServices(
            broker_id=self.broker_id,
            metadata_cache=self.metadata_cache,
            store=store,
            log_manager=log_manager,
            replica_manager=replica_manager,
            controller=controller,
            controller_link=link,
            group_coordinator=group_coordinator,
            producer_ids=producer_ids,
            dynamic_config=dynamic_config,
            transaction_coordinator=transaction_coordinator,
            quotas=self.quotas,
            api_handlers=self.apis.handlers,
            controller_events=cluster.events if cluster is not None else None,
            metrics=self.metrics,
            authorizer=authorizer,
            share_groups=share_groups,
            share_partitions=share_partitions,
            share_state=share_state,
            share_state_store=share_state_store,
            credentials=credentials,
            forwarding=self._forwarding(),
        )
        replica_manager.start_replication(
            cfg, self.metadata_cache, broker_epoch=lambda: link.broker_epoch,
            controller=self._controller_endpoint(),
        )  # fmt: skip
        undo.push_async_callback(replica_manager.stop_replication)
        undo.push_async_callback(self._cancel_tasks)
        if cluster is not None:
            self._spawn(self._leader_isolation_guard(cluster, replica_manager).run())
        self._schedule_log_tasks(log_manager)
        endpoint = None
        if metrics_address is not None and self.metrics is not None:
            endpoint = await self._start_metrics_endpoint(
                self.metrics, services, *metrics_address, undo
            )
        return BrokerParts(
            services=services,
            credentials=credentials,
            txn_marker_channel=marker_channel,
            share_state_store=share_state_store,
            cluster=cluster,
            network_channel=network_channel,
            acl_worker=acl_worker,
            metrics_endpoint=endpoint,
        )

    def _leader_isolation_guard(
        self, cluster: ClusterMember, replica_manager: ReplicaManager
    ) -> LeaderIsolationGuard:
        """Steps aside from partitions led here while cut off from ZooKeeper and their
        followers (server/replica/leader_isolation.py)."""
        return LeaderIsolationGuard(
            replica_manager,
            self.metadata_cache,
            cluster.metadata_session,
            cluster.read_partition_state,
            silence_ms=self.config.zookeeper_session_timeout_ms,
        )

    def _metrics_address(self) -> tuple[str, int] | None:
        """Where `metrics.listener` asks the metrics to be served (checked before anything
        starts); None when it is unset."""
        listener_setting = self.config.get("metrics.listener")
        if not listener_setting:
            return None
        return parse_metrics_listener(str(listener_setting))

    async def _open_metadata_store(
        self, undo: contextlib.AsyncExitStack
    ) -> tuple[MetadataStore, DynamicConfigManager]:
        """The metadata store (ZooKeeper in a cluster, else the embedded one) and the
        dynamic config manager over it; the cluster id is known, and `self.config` becomes
        the broker config with its dynamic layers."""
        store: MetadataStore
        if self.config.uses_zookeeper:
            store = await open_zookeeper(self.config)
            undo.push_async_callback(self._close_store, store)
            cluster_id = await asyncio.to_thread(ensure_cluster_id, store)
            check_cluster_id(self.config.log_dirs, cluster_id)
            self.metadata_cache.cluster_id = cluster_id
            dynamic = self._dynamic_config_manager(store)
            self.config = await asyncio.to_thread(dynamic.load)
        else:
            store = EmbeddedStore(self.config.log_dirs[0])
            undo.push_async_callback(self._close_store, store)
            self.metadata_cache.cluster_id = ensure_cluster_id(store)
            dynamic = self._dynamic_config_manager(store)
            self.config = dynamic.load()
        return store, dynamic

    async def _close_store(self, store: MetadataStore) -> None:
        if self.config.uses_zookeeper:
            await asyncio.to_thread(store.close)
        else:
            store.close()

    def _dynamic_config_manager(self, store: MetadataStore) -> DynamicConfigManager:
        return DynamicConfigManager(
            store,
            self.broker_id,
            self.config.originals,
            self.metadata_cache,
            reconfigure=self.reconfigure,
        )

    async def _start_log_manager(
        self, store: MetadataStore, undo: contextlib.AsyncExitStack
    ) -> LogManager:
        """Every log recovered (off the loop)."""
        cfg = self.config
        log_manager = LogManager(
            cfg.log_dirs,
            broker_id=self.broker_id,
            cluster_id=self.metadata_cache.cluster_id,
            default_config=log_config_from(effective_topic_config({}, cfg)),
            # Recovery must validate each log with its own topic's settings (a topic may
            # allow larger batches than the broker default), so read them from the store.
            config_for_topic=lambda topic: self._stored_log_config(store, topic),
            cleaner_config=cleaner_config_from(cfg),
            on_flush=self.metrics.record_flush if self.metrics is not None else None,
            recovery_threads=max(IO_THREADS, cfg.num_recovery_threads_per_data_dir),
        )
        await asyncio.to_thread(log_manager.startup)
        undo.callback(log_manager.shutdown, clean=True)
        return log_manager

    async def _load_credentials(
        self, store: MetadataStore, dynamic_config: DynamicConfigManager
    ) -> CredentialCache:
        """Every user's SCRAM credentials, and their changes followed."""
        credentials = CredentialCache(store)
        if self.config.uses_zookeeper:
            await asyncio.to_thread(credentials.load)
        else:
            credentials.load()
        dynamic_config.add_entity_handler(USERS, credentials.reload_user)
        return credentials

    async def _open_listeners(
        self, credentials: CredentialCache, undo: contextlib.AsyncExitStack
    ) -> None:
        """One listener per `listeners` entry, each accepting connections at once."""
        cfg = self.config
        queued_bytes = cfg.queued_max_request_bytes
        memory_pool = MemoryPool(queued_bytes) if queued_bytes > 0 else None
        mapper = principal_mapper(cfg)
        for listener_cfg in self._served_listeners():
            listener = Listener(
                listener_cfg.host,
                listener_cfg.port,
                self.apis.handle_frame,
                max_request_size=cfg.socket_request_max_bytes,
                send_buffer=cfg.socket_send_buffer_bytes,
                receive_buffer=cfg.socket_receive_buffer_bytes,
                quotas=self.connection_quotas,
                memory_pool=memory_pool,
                idle_timeout_ms=cfg.connections_max_idle_ms,
                backlog=cfg.socket_listen_backlog_size,
                name=listener_cfg.name,
                ssl_context=listener_ssl_context(cfg, listener_cfg),
                sasl=listener_sasl(cfg, listener_cfg, credentials),
                principal_mapper=mapper,
            )
            self._ssl_fingerprints[listener_cfg.name] = ssl_fingerprint(cfg, listener_cfg.name)
            await listener.start()
            undo.push_async_callback(listener.stop)
            self.listeners.append(listener)

    def _start_group_coordinator(
        self, replica_manager: ReplicaManager, undo: contextlib.AsyncExitStack
    ) -> GroupCoordinatorRuntime:
        """The group coordinator, writing `__consumer_offsets` through the coordinators'
        partition writer; it learns of completed transactions' offsets."""
        cfg = self.config
        coordinator = GroupCoordinatorRuntime(
            CoordinatorPartitionWriter(replica_manager),
            GroupConfig(
                min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
                max_size=cfg.group_max_size,
                offsets_retention_ms=cfg.offsets_retention_minutes * 60_000,
                offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
                consumer_session_timeout_ms=cfg.group_consumer_session_timeout_ms,
                consumer_heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
                consumer_max_size=cfg.group_consumer_max_size,
                consumer_assignors=tuple(cfg.group_consumer_assignors),
                consumer_migration_policy=cfg.group_consumer_migration_policy,
            ),
            num_partitions=self._offsets_topic_partitions,
            retention_check_interval_ms=cfg.offsets_retention_check_interval_ms,
            commit_timeout_ms=cfg.offsets_commit_timeout_ms,
        )
        coordinator.start()
        undo.push_async_callback(coordinator.stop)
        replica_manager.txn_completion_listeners.append(coordinator.on_txn_completion)
        return coordinator

    def _start_share_coordinator(
        self,
        replica_manager: ReplicaManager,
        link: ControllerLink,
        undo: contextlib.AsyncExitStack,
    ) -> ShareCoordinator:
        """The share coordinator: `__share_group_state` partitions led here, loaded on
        leadership (the controller link tells it)."""

        def partitions() -> int:
            meta = self.metadata_cache.topics.get(SHARE_STATE_TOPIC)
            if meta is not None and meta.partitions:
                return len(meta.partitions)
            return cast(int, self.config.get("share.coordinator.state.topic.num.partitions"))

        coordinator = ShareCoordinator(
            CoordinatorPartitionWriter(replica_manager),
            partitions,
            commit_timeout_ms=self.config.offsets_commit_timeout_ms,
        )
        undo.push_async_callback(coordinator.stop)
        link.share_state = coordinator
        return coordinator

    def _start_share_groups(
        self,
        store: MetadataStore,
        replica_manager: ReplicaManager,
        state: ShareCoordinator,
        undo: contextlib.AsyncExitStack,
    ) -> tuple[ShareGroupCoordinator, SharePartitionManager, CoordinatorStateStore]:
        """Share groups (KIP-932): the membership of the groups coordinated here and the
        delivery state of the partitions led here (a member that leaves releases its
        records), with the store that keeps that state through the share coordinator."""

        def setting(name: str) -> int:
            return cast(int, self.config.get(name))

        coordinator = ShareGroupCoordinator(
            ShareGroupSettings(
                heartbeat_interval_ms=setting("group.share.heartbeat.interval.ms"),
                session_timeout_ms=setting("group.share.session.timeout.ms"),
                max_size=setting("group.share.max.size"),
            )
        )

        def share_settings() -> ShareSettings:
            return ShareSettings(
                record_lock_duration_ms=setting("group.share.record.lock.duration.ms"),
                delivery_count_limit=setting("group.share.delivery.count.limit"),
                max_in_flight=setting("group.share.partition.max.record.locks"),
            )

        async def auto_offset_reset(group_id: str) -> str:
            # asked by requests, so once the broker has started
            configs = await self.services.on_controller(
                lambda: read_group_configs(store, group_id)
            )
            return configs.get(AUTO_OFFSET_RESET, "latest")

        persister = CoordinatorStateStore(
            self.broker_id,
            self.metadata_cache,
            state,
            lambda: self.config.inter_broker_listener_name,
            self.config.request_timeout_ms,
        )
        persister.security = inter_broker_security(self.config)
        undo.push_async_callback(persister.close)
        manager = SharePartitionManager(
            replica_manager, share_settings, auto_offset_reset, persister
        )
        coordinator.listeners.append(manager.member_left)
        return coordinator, manager, persister

    def _schedule_log_tasks(self, manager: LogManager) -> None:
        """The logs' periodic work: checkpoints, flushes, retention, producer expiry."""
        cfg = self.config
        # Checkpoints and fsyncs run in a worker thread; retention and the unlinking of
        # deleted segments change the segment lists, so they stay on the event loop.
        # Recovery points, log start offsets and high watermarks are checkpointed together,
        # as often as the shorter of their intervals asks; log start offsets also alone.
        checkpoint_ms = min(
            cfg.log_flush_offset_checkpoint_interval_ms,
            cfg.replica_high_watermark_checkpoint_interval_ms,
        )
        self._spawn(self._every(checkpoint_ms, manager.checkpoint_all, in_thread=True))
        self._spawn(
            self._every(
                cfg.log_flush_start_offset_checkpoint_interval_ms,
                manager.checkpoint_log_start_offsets,
                in_thread=True,
            )
        )
        # Rolled segments are flushed soon after the roll (Kafka schedules that at once);
        # flush.ms is checked at the same pace unless log.flush.scheduler.interval.ms is
        # shorter.
        self._spawn(
            self._every(
                min(cfg.log_flush_scheduler_interval_ms, 1000), manager.flush_dirty, in_thread=True
            )
        )

        def _cleanup_logs() -> None:
            manager.cleanup_logs(producer_id_expiration_ms=self.config.producer_id_expiration_ms)

        def _remove_expired_producers() -> None:
            now_ms = int(time.time() * 1000)
            expiration_ms = self.config.producer_id_expiration_ms
            for partition_log in manager.all_logs():
                partition_log.remove_expired_producers(now_ms, expiration_ms)

        self._spawn(self._every(cfg.log_retention_check_interval_ms, _cleanup_logs))
        self._spawn(
            self._every(cfg.producer_id_expiration_check_interval_ms, _remove_expired_producers)
        )
        self._spawn(self._every(1000, manager.remove_deleted))

    async def _start_metrics_endpoint(
        self,
        metrics: BrokerMetrics,
        services: BrokerServices,
        host: str,
        port: int,
        undo: contextlib.AsyncExitStack,
    ) -> MetricsEndpoint:
        """Serve the metrics at `metrics.listener`."""
        endpoint = MetricsEndpoint(host, port, BrokerCollector(services, metrics))
        await endpoint.start()
        undo.push_async_callback(endpoint.stop)
        log.info("broker %d serves its metrics at %s", self.broker_id, endpoint.url)
        return endpoint

    async def _start_authorizer(
        self, store: MetadataStore, undo: contextlib.AsyncExitStack
    ) -> tuple[Authorizer | None, ControllerEventManager | None]:
        """The ACL authorizer when authorizer.class.name names one: every ACL loaded, and
        change notifications followed (on a thread of their own with ZooKeeper, returned
        beside it)."""
        cfg = self.config
        if not cfg.authorizer_class_name:
            return None, None
        authorizer = Authorizer(
            store,
            super_users=parse_super_users(cfg.super_users),
            allow_everyone_if_no_acl_found=cfg.allow_everyone_if_no_acl_found,
        )
        undo.callback(authorizer.stop)
        if not cfg.uses_zookeeper:
            authorizer.start_listening()
            authorizer.load()
            return authorizer, None
        # listen first, then load, on the thread that applies notifications: none is lost
        # between the two, and none is applied before the load
        worker = ControllerEventManager("acl-change-thread")
        worker.start()
        undo.callback(worker.stop)

        def start() -> None:
            authorizer.start_listening(run=worker.put)
            authorizer.load()

        await worker.call(start)
        return authorizer, worker

    async def _load_client_quotas(
        self, store: MetadataStore, dynamic: DynamicConfigManager
    ) -> None:
        """The stored client quotas, and their changes followed (before the config
        listener starts)."""
        if self.config.uses_zookeeper:
            stored = await asyncio.to_thread(load_client_quotas, store)
        else:
            stored = load_client_quotas(store)
        for entity, values in stored.items():
            self.quotas.set_entity(entity, values)
        loop = asyncio.get_running_loop()
        for entity_type in (QUOTA_USERS, QUOTA_CLIENTS):
            dynamic.add_entity_handler(
                entity_type,
                quota_change_handler(self.quotas, store, entity_type, loop.call_soon_threadsafe),
            )

    async def _start_controller(
        self,
        store: MetadataStore,
        log_manager: LogManager,
        dynamic_config: DynamicConfigManager,
        replica_manager: ReplicaManager,
        link: ControllerLink,
        undo: contextlib.AsyncExitStack,
    ) -> tuple[Controller, ClusterMember | None, NetworkChannel | None]:
        """This broker's controller (and, in a cluster, its membership and the channel the
        controller sends on), then what follows from the metadata it knows: stray logs
        removed, dynamic configs followed."""
        host, port = self.advertised()
        if self.config.uses_zookeeper:
            member, channel, controller = await self._start_cluster_member(
                store, host, port, link, undo
            )
            # Logs of topics deleted while this broker was down are removed now.
            topic_ids = await asyncio.to_thread(stored_topic_ids, store)
            log_manager.delete_stray_logs(topic_ids)
            dynamic_config.start(controller, replica_manager, threaded=True)
            undo.callback(dynamic_config.stop)
            return controller, member, channel
        standalone = self._start_standalone_controller(store, host, port, link)
        undo.callback(standalone.shutdown)
        # Logs of topics deleted while this broker was down, or when a crash interrupted
        # a deletion, are removed now rather than left behind.
        log_manager.delete_stray_logs(
            {topic.name: topic.topic_id for topic in standalone.topics.values()}
        )
        dynamic_config.start(standalone, replica_manager)
        undo.callback(dynamic_config.stop)
        self.metadata_cache.cluster_id = standalone.cluster_id
        self.metadata_cache.controller_id = self.broker_id
        return standalone, None, None

    def _start_standalone_controller(
        self, store: MetadataStore, host: str, port: int, link: ControllerLink
    ) -> Controller:
        """A stand-alone broker is its own controller over the embedded store."""
        cfg = self.config
        self.channel.register(self.broker_id, link)
        controller = Controller(
            store,
            self.channel,
            BrokerInfo(
                self.broker_id,
                host,
                port,
                cfg.broker_rack,
                self.advertised_endpoints()[0].listener,
                tuple(self.advertised_endpoints()),
            ),
            default_partitions=cfg.num_partitions,
            default_replication_factor=cfg.default_replication_factor,
            validate_configs=lambda configs: validate_topic_configs(configs, self.config),
            max_broker_partitions=cast(int, cfg.get("max.broker.partitions")),
        )
        controller.start()
        link.saw_controller(controller.epoch)
        # As in a cluster: the broker epoch is the registration's creation txid.
        link.registered(store.stat(f"/brokers/ids/{self.broker_id}").czxid)
        return controller

    async def _start_cluster_member(
        self,
        store: MetadataStore,
        host: str,
        port: int,
        link: ControllerLink,
        undo: contextlib.AsyncExitStack,
    ) -> tuple[ClusterMember, NetworkChannel, ClusterController]:
        """Cluster mode: register in ZooKeeper and start this broker's controller (on its
        own thread; one broker's is active), with the channel it sends requests on."""
        member = ClusterMember(store, self.broker_id, lambda: self.config)
        channel = NetworkChannel(
            asyncio.get_running_loop(),
            listener_name=self.config.inter_broker_listener_name,
            request_timeout=cast(int, self.config.get("controller.socket.timeout.ms")) / 1000,
            security=inter_broker_security(self.config),
        )
        undo.push_async_callback(channel.close)
        undo.push_async_callback(member.stop)  # a start that fails half-way is undone too
        controller = await member.start(
            channel,
            host,
            port,
            link,
            self.advertised_endpoints(),
            self.metadata_cache.cluster_id,
        )
        return member, channel, controller

    async def started(self) -> BrokerServices:
        """The services, once `start()` has built them: a request that arrives while the
        broker starts waits here (Kafka opens request processing at the end of start-up)."""
        while self._parts is None:
            await self._started.wait()
        return self._parts.services

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    def _watch_log_dirs(
        self,
        store: MetadataStore,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        link: ControllerLink,
    ) -> None:
        """Kafka's LogDirFailureChannel: a failed log dir (noticed on any thread) takes its
        partitions offline on the event loop; in a cluster the controller is told through
        ZooKeeper (`controller/log_dir_events.py`) and elects other leaders."""
        loop = asyncio.get_running_loop()

        def on_loop(path: Path) -> None:
            if path in log_manager.offline_dirs:
                return
            link.unload_offline(replica_manager.handle_log_dir_failure(path))
            if self.config.uses_zookeeper:
                self._spawn(self._notify_log_dir_failure(store))

        def on_any_thread(path: Path) -> None:
            loop.call_soon_threadsafe(on_loop, path)

        log_manager.on_dir_failure = on_any_thread

    async def _notify_log_dir_failure(self, store: MetadataStore) -> None:
        try:
            await asyncio.to_thread(notify_log_dir_failure, store, self.broker_id)
        except Exception:
            log.exception("cannot tell the controller of a failed log dir")

    async def _every(
        self, interval_ms: int, action: Callable[[], object], *, in_thread: bool = False
    ) -> None:
        if interval_ms >= NEVER_MS:
            return  # Kafka's Long.MAX_VALUE intervals mean "never"
        interval = max(interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                if in_thread:
                    await asyncio.to_thread(action)
                else:
                    action()
            except Exception:
                log.exception("background task %s failed", getattr(action, "__name__", action))

    def _open_request_log(self) -> None:
        setting = self.config.get("request.log.file")
        if setting and self._request_log is None:
            self._request_log = open_request_log(str(setting), self.config.log_dirs[0])

    def _close_request_log(self) -> None:
        if self._request_log is not None:
            close_request_log(self._request_log)
            self._request_log = None

    async def _cancel_tasks(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop(self) -> None:
        """Stop the parts in Kafka's order: leaderships handed over, listeners closed,
        coordinators and replication stopped, background tasks cancelled, then the
        metadata and the logs closed. A broker that never started has nothing to stop (a
        start that failed stopped what it had built); a second call does nothing."""
        parts = self._parts
        if parts is None or self._stopped:
            return
        self._stopped = True
        services = parts.services
        if parts.cluster is not None and self.config.get("controlled.shutdown.enable"):
            # Leaderships move away while the listeners still serve (Kafka's order).
            await shut_down_controlled(services, self.config, parts.cluster.zookeeper_lost)
        await self._stop_serving(parts)
        await self._cancel_tasks()
        await self._stop_metadata(parts)
        services.log_manager.shutdown(clean=True)
        await self._close_store(services.store)
        self._close_request_log()
        log.info("broker %d stopped", self.broker_id)

    async def _stop_serving(self, parts: BrokerParts) -> None:
        """No more requests: the metrics endpoint and listeners closed, the coordinators,
        the marker channel and replication stopped."""
        services = parts.services
        if parts.metrics_endpoint is not None:
            await parts.metrics_endpoint.stop()
        for listener in self.listeners:
            await listener.stop()
        await services.group_coordinator.stop()
        await services.transaction_coordinator.stop()
        if services.share_state is not None:
            await services.share_state.stop()
        await parts.share_state_store.close()
        await parts.txn_marker_channel.close()
        await services.replica_manager.stop_replication()

    async def _stop_metadata(self, parts: BrokerParts) -> None:
        """Config and ACL change followers stopped, the cluster membership (or the
        stand-alone controller) ended."""
        services = parts.services
        services.dynamic_config.stop()
        if services.authorizer is not None:
            services.authorizer.stop()
        if parts.acl_worker is not None:
            parts.acl_worker.stop()
        if parts.cluster is not None:
            await parts.cluster.stop()
            if parts.network_channel is not None:
                await parts.network_channel.close()
        else:
            services.controller.shutdown()

    # --- configs --------------------------------------------------------------------------

    def reconfigure(self, config: BrokerConfig) -> None:
        """Take a new broker config (dynamic broker configs changed): every log without an
        override of a changed setting gets its new effective config at once (once the
        parts are built, when the change came while they were)."""
        self.config = config
        self.connection_quotas.reconfigure(config.connection_limits)
        self._reload_listener_ssl(config)
        if self._parts is None:
            self._reconfigured_while_starting = True
            return
        self._reconfigure_parts(self._parts, config)

    def _reconfigure_parts(self, parts: BrokerParts, config: BrokerConfig) -> None:
        services = parts.services
        controller = services.controller
        if parts.cluster is not None and isinstance(controller, ClusterController):
            unclean = bool(config.get("unclean.leader.election.enable"))
            parts.cluster.events.put(lambda: controller.on_unclean_default(unclean))
        log_manager = services.log_manager
        log_manager.default_config = log_config_from(effective_topic_config({}, config))
        cleaner = log_manager.cleaner
        if cleaner is not None and cleaner.config != cleaner_config_from(config):
            cleaner.reconfigure(cleaner_config_from(config))
        services.replica_manager.update_replication_rates(config)
        for topic in list(self.metadata_cache.topics.values()):
            services.replica_manager.update_log_config(topic)

    def _reload_listener_ssl(self, new: BrokerConfig) -> None:
        """Listeners whose TLS settings or key and trust files changed take new contexts
        (new certificates); a context that cannot be built leaves the old one, with an
        error in the log."""
        served = {listener.name: listener for listener in self.listeners}
        for listener_cfg in new.listeners:
            listener = served.get(listener_cfg.name)  # none: a KRaft controller listener
            if listener is None or listener.ssl_context is None:
                continue
            name = listener_cfg.name
            fingerprint = ssl_fingerprint(new, name)
            if fingerprint == self._ssl_fingerprints.get(name):
                continue
            try:
                context = listener_ssl_context(new, listener_cfg)
                if context is not None:
                    listener.reconfigure_ssl(context)
                    self._ssl_fingerprints[name] = fingerprint
            except ConfigError as exc:
                log.error("keeping the TLS settings of listener %s: %s", name, exc)
                continue
            log.info("listener %s reloaded its TLS settings", name)

    def _stored_log_config(self, store: MetadataStore, topic: str) -> LogConfig:
        return log_config_from(
            effective_topic_config(stored_topic_configs(store, topic), self.config)
        )

    def _log_config_for(self, topic: TopicMetadata) -> LogConfig:
        return log_config_from(effective_topic_config(topic.configs, self.config))

    def _start_transaction_coordinator(
        self,
        replica_manager: ReplicaManager,
        producer_ids: ProducerIdManager,
        undo: contextlib.AsyncExitStack,
    ) -> tuple[TxnMarkerChannel, TransactionCoordinator]:
        """The transaction coordinator, writing `__transaction_state` through the
        coordinators' partition writer and sending markers over the wire (the channel it
        sends them on, returned beside it)."""
        cfg = self.config
        markers = TxnMarkerChannel(
            self.broker_id,
            self.metadata_cache,
            lambda: self.config.inter_broker_listener_name,
            request_timeout_ms=cfg.request_timeout_ms,
            local=own_marker_writer(replica_manager, cfg.request_timeout_ms),
        )
        markers.security = inter_broker_security(cfg)
        undo.push_async_callback(markers.close)
        coordinator = TransactionCoordinator(
            CoordinatorPartitionWriter(replica_manager),
            TxnConfig(
                max_timeout_ms=cfg.transaction_max_timeout_ms,
                id_expiration_ms=cfg.transactional_id_expiration_ms,
                abort_timed_out_interval_ms=(
                    cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
                ),
                remove_expired_interval_ms=(
                    cfg.transaction_remove_expired_transaction_cleanup_interval_ms
                ),
                write_timeout_ms=cfg.request_timeout_ms,
                load_buffer_bytes=cfg.transaction_state_log_load_buffer_size,
            ),
            num_partitions=self._txn_topic_partitions,
            markers=markers,
            new_producer_id=lambda: _new_producer_id(producer_ids),
        )
        coordinator.start()
        undo.push_async_callback(coordinator.stop)
        return markers, coordinator

    def _txn_topic_partitions(self) -> int:
        topic = self.metadata_cache.topics.get(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic else self.config.transaction_state_log_num_partitions

    def _offsets_topic_partitions(self) -> int:
        topic = self.metadata_cache.topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic else self.config.offsets_topic_num_partitions


async def _new_producer_id(producer_ids: ProducerIdManager) -> int:
    await producer_ids.ensure_available()
    return producer_ids.next_id()
