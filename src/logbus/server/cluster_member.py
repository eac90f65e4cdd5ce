"""A broker's membership of a cluster on ZooKeeper (`zookeeper.connect` set): its session,
its cluster id check, its registration and broker epoch, and the controller event thread
with the `ClusterController` every broker runs (one of them active).

Kafka's `KafkaServer` start-up order: connect to ZooKeeper (fail fast when it cannot be
reached), read or create `/cluster/id` and compare it with `meta.properties`, recover the
logs, open the listeners, register `/brokers/ids/<id>`, start the controller. Every
ZooKeeper call runs off the event loop: in a worker thread (`asyncio.to_thread`) or on the
controller thread; callbacks come back to the loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from logbus.controller.broker_registration import BrokerIdRegistered, BrokerRegistration, Endpoint
from logbus.controller.cluster_controller import ClusterController, ControllerMovedError
from logbus.controller.cluster_metadata import BrokerInfo
from logbus.controller.controller import ensure_cluster_id
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.leader_elections import rebalance_preferred_leaders
from logbus.controller.metadata_store import (
    MetadataStore,
    NoNode,
    SessionEvent,
    StoreUnavailable,
)
from logbus.server.config.topic_config import validate_topic_configs
from logbus.server.metadata_session import MetadataSession
from logbus.storage.meta_properties import read_meta_properties

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import EndPoint
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.controller_link import ControllerLink

log = logging.getLogger(__name__)


class BrokerStartupError(Exception):
    """The broker cannot start; the message says why (the command exits non-zero)."""


class InconsistentClusterIdError(BrokerStartupError):
    """meta.properties names another cluster than ZooKeeper's `/cluster/id`."""


async def open_zookeeper(config: Any) -> MetadataStore:
    """A ZooKeeper session for `zookeeper.connect`; BrokerStartupError when no server
    answers within zookeeper.connection.timeout.ms."""
    from logbus.controller.zookeeper_store import ZooKeeperStore

    connect = cast(str, config.zookeeper_connect)
    try:
        return await asyncio.to_thread(
            ZooKeeperStore,
            connect,
            config.zookeeper_session_timeout_ms,
            config.zookeeper_connection_timeout_ms,
        )
    except StoreUnavailable as exc:
        raise BrokerStartupError(
            f"cannot connect to ZooKeeper at {connect} within "
            f"zookeeper.connection.timeout.ms ({config.zookeeper_connection_timeout_ms} ms): "
            f"{exc}"
        ) from exc


def check_cluster_id(log_dirs: list[str], cluster_id: str) -> None:
    """Kafka's InconsistentClusterIdException: a log dir of another cluster refuses the
    start (the configured zookeeper.connect may be wrong)."""
    for log_dir in log_dirs:
        meta = read_meta_properties(Path(log_dir))
        if meta is not None and meta.cluster_id not in (None, cluster_id):
            raise InconsistentClusterIdError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                f"{meta.cluster_id} in meta.properties of {log_dir}. The broker is trying to "
                f"join the wrong cluster. Configured zookeeper.connect may be wrong."
            )


def stored_topic_ids(store: MetadataStore) -> dict[str, Any]:
    """Every topic in `/brokers/topics` with its id (for removing stray logs)."""
    from logbus.controller.cluster_metadata import topic_id_from_str

    out: dict[str, Any] = {}
    try:
        names = store.children("/brokers/topics")
    except NoNode:
        return out
    for name in names:
        try:
            value = store.get_json(f"/brokers/topics/{name}")
        except NoNode:
            continue
        if isinstance(value, dict) and "topic_id" in value:
            out[name] = topic_id_from_str(value["topic_id"])
    return out


class ClusterMember:
    """The cluster side of one broker. Built and started by `Broker.start`."""

    def __init__(
        self, store: MetadataStore, broker_id: int, config: Callable[[], BrokerConfig]
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.config = config
        """The broker's current config."""
        self.events = ControllerEventManager()
        self.registration: BrokerRegistration | None = None
        self.controller: ClusterController | None = None
        self._rebalance: asyncio.Task[None] | None = None
        self.zookeeper_lost = asyncio.Event()
        """Set while this broker's ZooKeeper connection is down (suspended or expired);
        on the event loop."""
        self.metadata_session = MetadataSession()
        """The same, as the leader isolation guard asks it (fed with kazoo's states)."""

    async def start(
        self,
        channel: object,
        host: str,
        port: int,
        link: ControllerLink,
        advertised: list[EndPoint],
        cluster_id: str,
    ) -> ClusterController:
        """Register in ZooKeeper with the `advertised` endpoints (the registration's
        epoch goes to `link`) and start this broker's controller."""
        cfg = self.config()
        broker_id = self.broker_id
        loop = asyncio.get_running_loop()
        endpoints = [
            Endpoint(
                listener.name,
                listener.host or host,
                port if i == 0 else advertised.port,
                listener.security_protocol,
            )
            for i, (listener, advertised) in enumerate(
                zip(cfg.advertised_listeners, advertised, strict=True)
            )
        ]
        self.registration = registration = BrokerRegistration(
            self.store, broker_id, endpoints, cfg.broker_rack
        )
        try:
            link.registered(await asyncio.to_thread(registration.register))
        except BrokerIdRegistered as exc:
            raise BrokerStartupError(str(exc)) from None
        log.info("broker %d registered (broker epoch %d)", broker_id, link.broker_epoch)

        def on_registered(epoch: int) -> None:
            loop.call_soon_threadsafe(link.registered, epoch)

        first = endpoints[0]
        self.controller = controller = ClusterController(
            self.store,
            channel,
            BrokerInfo(broker_id, first.host, first.port, cfg.broker_rack, first.listener),
            self.events,
            registration,
            on_registered=on_registered,
            default_partitions=cfg.num_partitions,
            default_replication_factor=cfg.default_replication_factor,
            validate_configs=lambda configs: validate_topic_configs(configs, self.config()),
            max_broker_partitions=cast(int, cfg.get("max.broker.partitions")),
            unclean_default=bool(cfg.get("unclean.leader.election.enable")),
        )
        controller.cluster_id = cluster_id

        def on_session(event: SessionEvent) -> None:
            lost = event is not SessionEvent.CONNECTED
            loop.call_soon_threadsafe(
                self.zookeeper_lost.set if lost else self.zookeeper_lost.clear
            )
            session = self.metadata_session
            if lost:
                expired = event is SessionEvent.EXPIRED
                loop.call_soon_threadsafe(lambda: session.mark_lost(expired=expired))
            else:
                loop.call_soon_threadsafe(session.mark_held)

        self.store.add_session_listener(on_session)
        self.events.start()
        controller.startup()
        if cfg.get("auto.leader.rebalance.enable"):
            self._rebalance = loop.create_task(self._check_leader_imbalance(controller))
        return controller

    async def _check_leader_imbalance(self, controller: ClusterController) -> None:
        """Every leader.imbalance.check.interval.seconds, the controller thread moves
        leaderships back to preferred replicas where a broker's share of partitions led
        by another is above leader.imbalance.per.broker.percentage (only the active
        controller does anything)."""
        cfg = self.config()
        interval = cast(int, cfg.get("leader.imbalance.check.interval.seconds"))
        percentage = cast(int, cfg.get("leader.imbalance.per.broker.percentage"))

        def check() -> None:
            try:
                rebalance_preferred_leaders(controller, percentage)
            except ControllerMovedError:
                log.info("leader imbalance check stopped: no longer the controller")

        while True:
            await asyncio.sleep(interval)
            self.events.put(check, "AutoLeaderBalance")

    async def read_partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's state node as the controller wrote it, with the node's version
        as "partition_epoch"; None when it has none."""
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        try:
            data, version = await asyncio.to_thread(self.store.get, path)
        except NoNode:
            return None
        value = json.loads(data)
        if not isinstance(value, dict):
            return None
        value["partition_epoch"] = version
        return value

    async def call(self, action: Any) -> Any:
        """Run `action` on the controller thread and await it."""
        return await self.events.call(action)

    async def stop(self) -> None:
        """Give up the controllership (freeing `/controller` at once for another broker),
        stop the controller thread; the registration ends with the session."""
        if self._rebalance is not None:
            self._rebalance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rebalance
            self._rebalance = None
        controller = self.controller
        if controller is not None:
            try:
                await asyncio.wait_for(self.events.call(controller.resign_and_release), 10)
            except Exception:
                log.exception("resigning the controllership failed")
        await asyncio.to_thread(self.events.stop)
        if self.registration is not None:
            try:
                await asyncio.to_thread(self.registration.deregister)
            except Exception:
                log.debug("cannot remove the broker registration", exc_info=True)


__all__ = [
    "BrokerStartupError",
    "ClusterMember",
    "InconsistentClusterIdError",
    "check_cluster_id",
    "ensure_cluster_id",
    "open_zookeeper",
    "stored_topic_ids",
]
