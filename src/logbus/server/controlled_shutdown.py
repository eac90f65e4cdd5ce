"""A broker's controlled shutdown (Kafka's `KafkaServer.controlledShutdown`): before a
clean stop of a cluster member with `controlled.shutdown.enable`, it asks the controller
(ControlledShutdown over the inter-broker listener, with the inter-broker security) to
move the leaderships it holds to other in-sync replicas and take it out of the ISRs, and
waits for the answer that it leads nothing movable any more. It tries
`controlled.shutdown.max.retries` times, `controlled.shutdown.retry.backoff.ms` apart
(each request bounded by `controller.socket.timeout.ms`), then stops anyway. While its
own ZooKeeper connection is down it does not try (or stops trying): the controller
cannot write a leadership without ZooKeeper, which is then most likely gone for it too.

The controller broker goes through this too: it asks itself, through its own listener,
before giving up the controllership. The listeners stay open meanwhile, so the controller's
LeaderAndIsr and StopReplica reach this broker and clients are told to go elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar, cast

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.leader_elections import controlled_shutdown
from logbus.protocol import ErrorCode
from logbus.protocol.errors import ProtocolError
from logbus.server.network.listener_security import inter_broker_security

if TYPE_CHECKING:
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.services import BrokerServices

log = logging.getLogger(__name__)

T = TypeVar("T")


class _ZooKeeperLost(Exception):
    pass


async def _unless_lost(lost: asyncio.Event, work: Awaitable[T]) -> T:
    """`work`, unless the ZooKeeper connection goes down first (_ZooKeeperLost)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise _ZooKeeperLost
    return task.result()


async def _attempt(
    services: BrokerServices, config: BrokerConfig, socket_timeout: float
) -> str | None:
    """One ControlledShutdown to the current controller: None when it agreed, else what
    went wrong."""
    controller_id = services.metadata_cache.controller_id
    info = services.metadata_cache.brokers.get(controller_id)
    if info is None:
        return "the controller is not known"
    endpoint = info.endpoint(config.inter_broker_listener_name)
    try:
        conn = await Connection.connect(
            endpoint.host,
            endpoint.port,
            client_id=f"broker-{services.broker_id}-controlled-shutdown",
            connect_timeout=socket_timeout,
            request_timeout=socket_timeout,
            security=inter_broker_security(config),
        )
        try:
            result = await controlled_shutdown(
                conn, services.broker_id, services.controller_link.broker_epoch
            )
        finally:
            await conn.close()
    except (KafkaError, ProtocolError, OSError, TimeoutError) as exc:
        return f"the request to controller {controller_id} failed: {exc}"
    if result.error != ErrorCode.NONE:
        return f"controller {controller_id} answered {result.error.name}"
    if result.remaining:
        shown = ", ".join(f"{t}-{p}" for t, p in result.remaining[:10])
        return f"{len(result.remaining)} partitions still led here ({shown})"
    return None


async def shut_down_controlled(
    services: BrokerServices, config: BrokerConfig, zookeeper_lost: asyncio.Event
) -> bool:
    """Ask the controller until this broker leads nothing movable; True when it agreed,
    False after the last attempt failed or once ZooKeeper is unreachable."""
    cfg = config
    broker_id = services.broker_id
    attempts = max(1, cast(int, cfg.get("controlled.shutdown.max.retries")))
    backoff = cast(int, cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000
    timeout = cast(int, cfg.get("controller.socket.timeout.ms")) / 1000
    try:
        for attempt in range(1, attempts + 1):
            if zookeeper_lost.is_set():
                raise _ZooKeeperLost
            outcome = await _unless_lost(zookeeper_lost, _attempt(services, cfg, timeout))
            if outcome is None:
                log.info("broker %d: controlled shutdown succeeded", broker_id)
                return True
            log.warning(
                "broker %d: controlled shutdown attempt %d of %d: %s",
                broker_id, attempt, attempts, outcome,
            )  # fmt: skip
            if attempt < attempts:
                await _unless_lost(zookeeper_lost, asyncio.sleep(backoff))
    except _ZooKeeperLost:
        log.warning(
            "broker %d: ZooKeeper is unreachable, so the controller cannot move "
            "leaderships: shutting down without a controlled shutdown",
            broker_id,
        )
        return False
    log.warning("broker %d: controlled shutdown failed; shutting down anyway", broker_id)
    return False
