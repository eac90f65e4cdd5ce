"""A broker's controlled shutdown (Kafka's `KafkaServer.controlledShutdown`): before a
clean stop of a cluster member with `controlled.shutdown.enable`, it asks the controller
(ControlledShutdown over the inter-broker listener, with the inter-broker security) to
move the leaderships it holds to other in-sync replicas and take it out of the ISRs, and
waits for the answer that it leads nothing movable any more. It tries
`controlled.shutdown.max.retries` times, `controlled.shutdown.retry.backoff.ms` apart
(each request bounded by `controller.socket.timeout.ms`), then stops anyway.

The controller broker goes through this too: it asks itself, through its own listener,
before giving up the controllership. The listeners stay open meanwhile, so the controller's
LeaderAndIsr and StopReplica reach this broker and clients are told to go elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.leader_elections import controlled_shutdown
from logbus.protocol import ErrorCode
from logbus.protocol.errors import ProtocolError
from logbus.server.network.listener_security import inter_broker_security

if TYPE_CHECKING:
    from logbus.server.broker import Broker

log = logging.getLogger(__name__)


async def shut_down_controlled(broker: Broker) -> bool:
    """Ask the controller until this broker leads nothing movable; True when it agreed,
    False after the last attempt failed."""
    cfg = broker.config
    attempts = max(1, cast(int, cfg.get("controlled.shutdown.max.retries")))
    backoff = cast(int, cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000
    timeout = cast(int, cfg.get("controller.socket.timeout.ms")) / 1000
    security = inter_broker_security(cfg)
    listener = cfg.inter_broker_listener_name
    for attempt in range(1, attempts + 1):
        controller_id = broker.metadata_cache.controller_id
        info = broker.metadata_cache.brokers.get(controller_id)
        outcome = "the controller is not known"
        if info is not None:
            endpoint = info.endpoint(listener)
            try:
                conn = await Connection.connect(
                    endpoint.host,
                    endpoint.port,
                    client_id=f"broker-{broker.broker_id}-controlled-shutdown",
                    connect_timeout=timeout,
                    request_timeout=timeout,
                    security=security,
                )
                try:
                    result = await controlled_shutdown(conn, broker.broker_id, broker.broker_epoch)
                finally:
                    await conn.close()
            except (KafkaError, ProtocolError, OSError, TimeoutError) as exc:
                outcome = f"the request to controller {controller_id} failed: {exc}"
            else:
                if result.error == ErrorCode.NONE and not result.remaining:
                    log.info("broker %d: controlled shutdown succeeded", broker.broker_id)
                    return True
                if result.error != ErrorCode.NONE:
                    outcome = f"controller {controller_id} answered {result.error.name}"
                else:
                    shown = ", ".join(f"{t}-{p}" for t, p in result.remaining[:10])
                    outcome = f"{len(result.remaining)} partitions still led here ({shown})"
        log.warning(
            "broker %d: controlled shutdown attempt %d of %d: %s",
            broker.broker_id, attempt, attempts, outcome,
        )  # fmt: skip
        if attempt < attempts:
            await asyncio.sleep(backoff)
    log.warning("broker %d: controlled shutdown failed; shutting down anyway", broker.broker_id)
    return False
