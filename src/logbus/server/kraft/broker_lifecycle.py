"""A KRaft broker's standing with the active controller (Kafka's
`BrokerLifecycleManager`, KIP-631): register (BrokerRegistration) with a new
incarnation id, then heartbeat every `broker.heartbeat.interval.ms` with the offset of
the metadata image the broker has replayed. The controller unfences the broker once that
offset reaches its registration; `controlled_shutdown()` sends WantShutDown until the
controller has moved the broker's leaderships away and answers ShouldShutDown.

The active controller is the quorum's leader, which the broker's `MetadataLoader`'s Raft
client (an observer) knows; a controller that answers NOT_CONTROLLER, or none reachable,
is tried again at the next interval, and a registration the controller no longer knows
(STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED) is made again.

The entry point is `BrokerLifecycleManager`. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.broker_lifecycle import broker_heartbeat, broker_registration
from logbus.protocol import ErrorCode
from logbus.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from logbus.raft.quorum_config import VoterAddress
from logbus.server.kraft.metadata_loader import MetadataLoader

__all__ = ["BrokerEndpoint", "BrokerLifecycleManager", "BrokerState"]

logger = logging.getLogger(__name__)


class BrokerState(enum.Enum):
    """Kafka's BrokerState, as far as the controller's answers tell it."""

    STARTING = "STARTING"
    RECOVERY = "RECOVERY"  # registered, fenced until caught up
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


@dataclass(frozen=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int = 0


class BrokerLifecycleManager:
    """Registers one broker and keeps its session with the active controller alive.
    `start()`, `controlled_shutdown()` (optional), then `close()`."""

    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        loader: MetadataLoader,
        controllers: Mapping[int, VoterAddress],
        endpoints: list[BrokerEndpoint],
        *,
        rack: str | None = None,
        heartbeat_interval_ms: int = 2000,
        request_timeout_ms: int = 2000,
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.loader = loader
        self.controllers = dict(controllers)
        self.endpoints = list(endpoints)
        self.rack = rack
        self.interval = heartbeat_interval_ms / 1000
        self.timeout = request_timeout_ms / 1000
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.state = BrokerState.STARTING
        self._want_shut_down = False
        self._changed = asyncio.Event()
        self._conn: tuple[int, Connection] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"broker-lifecycle-{self.broker_id}"
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._drop_connection()

    async def wait_state(self, *states: BrokerState, timeout: float) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            while self.state not in states:
                event = self._changed
                await event.wait()

    async def controlled_shutdown(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Ask the controller to move this broker's leaderships away; whether it said
        the broker may shut down within `timeout`."""
        self._want_shut_down = True
        self._set_state(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        try:
            await self.wait_state(BrokerState.SHUTTING_DOWN, timeout=timeout)
        except TimeoutError:
            return False
        return True

    # --- the loop ---------------------------------------------------------------------------

    def _set_state(self, state: BrokerState) -> None:
        if state is not self.state:
            logger.info("broker %d: %s -> %s", self.broker_id, self.state.value, state.value)
            self.state = state
            self._changed.set()
            self._changed = asyncio.Event()

    async def _run(self) -> None:
        while self.state is not BrokerState.SHUTTING_DOWN:
            try:
                await self._step()
            except (KafkaError, OSError, TimeoutError) as exc:
                logger.debug("broker %d: controller request failed: %s", self.broker_id, exc)
                await self._drop_connection()
            await asyncio.sleep(self.interval if self.broker_epoch >= 0 else self.interval / 4)

    async def _step(self) -> None:
        conn = await self._controller_connection()
        if conn is None:
            return
        if self.broker_epoch < 0:
            await self._register(conn)
        else:
            await self._heartbeat(conn)

    async def _register(self, conn: Connection) -> None:
        body: BrokerRegistrationRequest = {
            "broker_id": self.broker_id,
            "cluster_id": self.cluster_id,
            "incarnation_id": self.incarnation_id,
            "listeners": [
                {"name": e.name, "host": e.host, "port": e.port,
                 "security_protocol": e.security_protocol}
                for e in self.endpoints
            ],
            "features": [],
            "rack": self.rack,
            "previous_broker_epoch": -1,
        }  # fmt: skip
        answer = await broker_registration(conn, body, response_timeout=self.timeout)
        error = ErrorCode(answer["error_code"])
        if error is ErrorCode.NONE:
            self.broker_epoch = answer["broker_epoch"]
            logger.info("broker %d registered: epoch %d", self.broker_id, self.broker_epoch)
            self._set_state(BrokerState.RECOVERY)
        else:
            self._controller_refused(error)

    async def _heartbeat(self, conn: Connection) -> None:
        answer = await broker_heartbeat(
            conn, self.broker_id, self.broker_epoch, self.loader.image.offset,
            want_shut_down=self._want_shut_down, response_timeout=self.timeout,
        )  # fmt: skip
        error = ErrorCode(answer["error_code"])
        if error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            logger.warning("broker %d: %s: registering again", self.broker_id, error.name)
            self.broker_epoch = -1
        elif error is not ErrorCode.NONE:
            self._controller_refused(error)
        elif answer["should_shut_down"]:
            self._set_state(BrokerState.SHUTTING_DOWN)
        elif not self._want_shut_down:
            self._set_state(BrokerState.RECOVERY if answer["is_fenced"] else BrokerState.RUNNING)

    def _controller_refused(self, error: ErrorCode) -> None:
        logger.info("broker %d: the controller answered %s", self.broker_id, error.name)
        if error is ErrorCode.NOT_CONTROLLER:
            self._conn = None  # ask the quorum's leader again at the next interval

    async def _controller_connection(self) -> Connection | None:
        """A connection to the active controller (the quorum's leader), or None while
        no leader is known."""
        leader = self.loader.client.leader_id
        address = self.controllers.get(leader)
        if address is None:
            return None
        if self._conn is not None and self._conn[0] == leader and not self._conn[1].closed:
            return self._conn[1]
        await self._drop_connection()
        conn = await Connection.connect(
            address.host, address.port, client_id=f"broker-{self.broker_id}",
            connect_timeout=self.timeout, request_timeout=self.timeout,
        )  # fmt: skip
        self._conn = (leader, conn)
        return conn

    async def _drop_connection(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn[1], None
            await conn.close()
