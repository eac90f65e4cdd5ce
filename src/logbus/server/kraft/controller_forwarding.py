"""A KRaft broker's way to the active controller (Kafka's `NodeToControllerChannelManager`
and request forwarding, KIP-590): admin requests the broker cannot answer from its
metadata image go to the quorum's leader, and its answer goes back to the client as is.

Kafka wraps a forwarded request in an Envelope carrying the client's principal, and the
controller authorises it. Here the broker authorises it with its own ACLs (the image's;
`forwarding_authorization.py`) and sends what passes as its own request: the first step
KIP-590 allows, until the controller takes Envelope (docs/kraft.md).

The entry point is `ActiveController`. Runs on the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.topics import build_create_topics, new_topic
from logbus.controller.topic_admin import ZERO_UUID, NewTopic, TopicResult
from logbus.protocol import ApiKey, ErrorCode
from logbus.raft.quorum_config import VoterAddress
from logbus.server.api import ApiHandler, Handlers, RequestContext
from logbus.server.kraft.forwarding_authorization import screen
from logbus.server.kraft.quorum_controller import CONTROLLER_API_VERSIONS
from logbus.server.producer_ids import ProducerIdManager

if TYPE_CHECKING:
    from logbus.controller.metadata_store import MetadataStore

__all__ = [
    "FORWARDED_APIS",
    "ActiveController",
    "ControllerProducerIds",
    "forwarding_handlers",
]

logger = logging.getLogger(__name__)

FORWARDED_APIS: Final = (
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.ELECT_LEADERS,
)
"""The admin requests a KRaft broker hands to the active controller."""

RETRY_BACKOFF_S: Final = 0.1
FORWARD_TIMEOUT_S: Final = 40.0
"""How long a forwarded request waits for the controller (its own limit is 30 s)."""
CREATE_TOPICS_VERSION: Final = 7


class ActiveController:
    """One connection to the quorum's active controller (the Raft leader that `leader_id`
    names), opened again when the leader moves or the connection breaks. `request()`
    tries until its deadline; `close()` drops the connection."""

    def __init__(
        self,
        broker_id: int,
        controllers: Mapping[int, VoterAddress],
        leader_id: Callable[[], int],
        *,
        request_timeout_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.controllers = dict(controllers)
        self.leader_id = leader_id
        self.timeout = request_timeout_ms / 1000
        self._conn: tuple[int, Connection] | None = None

    async def request(
        self, api_key: int, body: Mapping[str, Any], version: int, *, timeout: float  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """The active controller's answer to `body`; TimeoutError when no controller
        answered within `timeout` seconds. An answer is never sent twice: a request whose
        connection broke after it was sent is not retried (its effect is unknown)."""
        async with asyncio.timeout(timeout):
            while True:
                conn = await self._connection()
                if conn is None:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                return await self._send(conn, api_key, body, version, timeout)

    async def _send(
        self, conn: Connection, api_key: int, body: Mapping[str, Any], version: int,
        timeout: float,  # noqa: ASYNC109
    ) -> dict[str, Any]:  # fmt: skip
        try:
            return await conn.request(api_key, body, version, response_timeout=timeout)
        except (KafkaError, OSError, TimeoutError):
            await self.close()
            raise

    async def _connection(self) -> Connection | None:
        leader = self.leader_id()
        address = self.controllers.get(leader)
        if address is None:
            return None
        if self._conn is not None and self._conn[0] == leader and not self._conn[1].closed:
            return self._conn[1]
        await self.close()
        try:
            conn = await Connection.connect(
                address.host, address.port, client_id=f"broker-{self.broker_id}-forwarding",
                connect_timeout=self.timeout, request_timeout=self.timeout,
            )  # fmt: skip
        except (KafkaError, OSError, TimeoutError) as exc:
            logger.debug("controller %d not reachable: %s", leader, exc)
            return None
        self._conn = (leader, conn)
        return conn

    async def create_topic(self, spec: NewTopic) -> TopicResult:
        """A topic a client asked for implicitly (auto-creation, the offsets and
        transaction topics), created by the controller."""
        topic = new_topic(
            spec.name, spec.num_partitions, spec.replication_factor, spec.configs,
            spec.assignments or None,
        )  # fmt: skip
        body = build_create_topics(CREATE_TOPICS_VERSION, [topic])
        try:
            answer = await self.request(
                ApiKey.CREATE_TOPICS, body, CREATE_TOPICS_VERSION, timeout=FORWARD_TIMEOUT_S
            )
        except (KafkaError, OSError, TimeoutError) as exc:
            # a retriable answer: the client asks again later
            return TopicResult(spec.name, ErrorCode.LEADER_NOT_AVAILABLE, str(exc))
        result = answer["topics"][0]
        return TopicResult(
            spec.name, ErrorCode(result["error_code"]), result.get("error_message"),
            result.get("topic_id", ZERO_UUID), result.get("num_partitions", -1),
            result.get("replication_factor", -1),
        )  # fmt: skip

    async def allocate_producer_ids(self, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids (first id, how many) for this broker."""
        answer = await self.request(
            ApiKey.ALLOCATE_PRODUCER_IDS,
            {"broker_id": self.broker_id, "broker_epoch": broker_epoch},
            0,
            timeout=FORWARD_TIMEOUT_S,
        )
        error = ErrorCode(answer["error_code"])
        if error is not ErrorCode.NONE:
            raise KafkaError(error, "the controller allocated no producer ids")
        return answer["producer_id_start"], answer["producer_id_len"]

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn[1], None
            with contextlib.suppress(Exception):
                await conn.close()




def _forward(
    api_key: ApiKey, own: Callable[[RequestContext, Any], Awaitable[Any]]
) -> Callable[[RequestContext, Any], Awaitable[Any]]:
    """The handler that forwards `api_key`: with an authorizer, only what the principal
    may do (`forwarding_authorization.screen`); a refused cluster-level request gets the
    broker's own handler's refusal (`own`)."""

    async def handle(ctx: RequestContext, body: dict[str, Any]) -> Any:
        if ctx.services.authorizer is None:
            return await _send_forwarded(ctx, api_key, body)
        screened = screen(ctx, api_key, body)
        if screened is None:
            return await own(ctx, body)
        answer = None
        if screened.body is not None:
            answer = await _send_forwarded(ctx, api_key, screened.body)
        return screened.merge(answer) if screened.results_key else answer

    return handle


async def _send_forwarded(ctx: RequestContext, api_key: ApiKey, body: dict[str, Any]) -> Any:
    forwarding = ctx.services.forwarding
    assert forwarding is not None  # installed only on KRaft brokers
    try:
        return await forwarding.request(api_key, body, ctx.version, timeout=FORWARD_TIMEOUT_S)
    except (KafkaError, OSError, TimeoutError) as exc:
        logger.warning("forwarding %s to the controller failed: %s", api_key.name, exc)
        raise


def forwarding_handlers(handlers: Handlers) -> Handlers:
    """`handlers` with each of FORWARDED_APIS answered by the active controller, at the
    versions both the broker and the controller serve."""
    out = dict(handlers)
    for api_key in FORWARDED_APIS:
        own = handlers[api_key]
        low, high = CONTROLLER_API_VERSIONS[api_key]
        out[api_key] = ApiHandler(
            api_key, max(own.min_version, low), min(own.max_version, high),
            _forward(api_key, own.handle),
        )
    return out



class ControllerProducerIds(ProducerIdManager):
    """Producer ids in blocks the active controller hands out (AllocateProducerIds, Kafka's
    `RPCProducerIdManager`): unique across the cluster and across controller failovers.
    Callers await `ensure_available` before taking an id, as in ZooKeeper mode."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        controller: ActiveController,
        broker_epoch: Callable[[], int],
    ) -> None:
        super().__init__(store, broker_id, threaded=True)
        self.controller = controller
        self.broker_epoch = broker_epoch
        self._lock = asyncio.Lock()

    async def ensure_available(self) -> None:
        if self.available():
            return
        async with self._lock:
            if not self.available():
                start, count = await self.controller.allocate_producer_ids(self.broker_epoch())
                self.take_block(start, start + count - 1)
