"""Dispatch on the API key (Kafka's KafkaApis): decode, check the version against the
handler's declaration, handle, encode.

Malformed requests and unsupported versions close the connection, as Kafka does, except
ApiVersions, which answers an unsupported version with a v0 response (KIP-511).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from logbus.protocol import ApiKey, codec, schema
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import Frame
from logbus.server.api import ApiHandler, Handlers, RequestContext
from logbus.server.api.api_versions import unsupported_version_response
from logbus.server.metrics.broker_metrics import BrokerMetrics
from logbus.server.metrics.request_timing import RequestTiming, tracking
from logbus.server.network.connection import CloseConnection, Connection
from logbus.server.quotas.throttling import (
    RequestQuota,
    TimedCall,
    client_throttles,
    set_throttle_time,
    throttled_fetch_response,
)
from logbus.storage.file_slice import FileSlice

if TYPE_CHECKING:
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.services import BrokerServices

log = logging.getLogger(__name__)

MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "topics",
    "configs",
    "cluster",
    "producer_id",
    "find_coordinator",
    "group_membership",
    "group_offsets",
    "consumer_group",
    "alter_configs",
    "delete_records",
    "controller_requests",
    "offset_for_leader_epoch",
    "alter_partition",
    "write_txn_markers",
    "describe_producers",
    "transactions",
    "sasl",
    "scram_credentials",
    "acls",
    "client_quotas",
    "log_dirs",
    "leader_elections",
    "share_groups",
    "share_fetch",
    "share_state",
    "share_group_offsets",
    "reassignments",
)


def build_registry() -> Handlers:
    handlers: Handlers = {}
    for name in MODULES:
        module = importlib.import_module(f"logbus.server.api.{name}")
        for handler in module.HANDLERS:
            message = schema.request(handler.api_key)
            lo, hi = message.valid_versions
            assert lo <= handler.min_version <= handler.max_version <= hi, handler
            handlers[handler.api_key] = handler
    return handlers


class Apis:
    """Owns the handler table; shared by every connection of a broker.

    `services` are what handlers are given (awaited: a request that arrives while the
    broker starts waits for them); `config` is the broker's current config."""

    def __init__(
        self,
        services: Callable[[], Awaitable[BrokerServices]],
        config: Callable[[], BrokerConfig],
    ) -> None:
        self._services = services
        self._config = config
        self.handlers = build_registry()
        # The broker's metrics (metrics.listener set): requests are timed and counted.
        self.metrics: BrokerMetrics | None = None

    async def handle_frame(self, conn: Connection, frame: Frame) -> list[Any] | None:
        started = time.perf_counter()
        try:
            api_key, version, correlation_id = codec.peek_request_header(frame)
        except ProtocolError as exc:
            raise CloseConnection(str(exc)) from exc
        handler = self.handlers.get(api_key)
        if handler is None or not handler.supports(version):
            if api_key == ApiKey.API_VERSIONS:
                return codec.encode_response(
                    api_key, 0, correlation_id, unsupported_version_response(self.handlers)
                )
            raise CloseConnection(f"unsupported API key {api_key} version {version}")
        try:
            header, body = codec.decode_request(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {ApiKey(api_key).name} request: {exc}") from exc
        services = await self._services()
        config = self._config()
        ctx = RequestContext(
            services, config, header, conn.peer, conn.principal, conn.listener_name
        )
        timing = None
        if tracking(self.metrics):  # metrics kept, or the request log at DEBUG
            queue_s = asyncio.get_running_loop().time() - conn.stream.last_received
            timing = conn.timing = RequestTiming(
                self.metrics, header, started, queue_s, len(frame)
            )
        if not services.quotas.enabled:  # no quota configured: nothing to count
            return await self._serve(ctx, conn, handler, body, timing)
        return await self._serve_with_quotas(ctx, conn, handler, body, timing, frame, started)

    async def _serve(
        self,
        ctx: RequestContext,
        conn: Connection,
        handler: ApiHandler[Any, Any],
        body: Any,
        timing: RequestTiming | None,
    ) -> list[Any] | None:
        """Handle a request and encode its response (no client quota to count)."""
        header = ctx.header
        try:
            if timing is None:
                response = await handler.handle(ctx, body)
            else:
                handler_started = time.perf_counter()
                timed = TimedCall(handler.handle(ctx, body))
                response = await timed
                timing.handled(time.perf_counter() - handler_started, timed.elapsed)
        except CloseConnection:
            raise
        except Exception as exc:
            raise _internal_error(ctx, conn, exc) from exc
        encoded = None
        if response is not None:
            encoded = codec.encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
        if timing is not None:
            timing.encoded = time.perf_counter()
        return encoded

    async def _serve_with_quotas(
        self,
        ctx: RequestContext,
        conn: Connection,
        handler: ApiHandler[Any, Any],
        body: Any,
        timing: RequestTiming | None,
        frame: Frame,
        started: float,
    ) -> list[Any] | None:
        """Handle a request under client quotas (see logbus.server.quotas.throttling):
        refused or answered, then throttled by what it cost."""
        header = ctx.header
        api_key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
        services = ctx.services
        quota = RequestQuota(
            services.quotas, conn.principal.name, header.client_id or "", api_key, version, body
        )
        quota.cap_fetch()
        loop_time = time.perf_counter() - started
        now = time.monotonic()
        response = quota.refuse_if_over(services.metadata_cache, now)
        if response is None:
            timed = TimedCall(handler.handle(ctx, body))
            handler_started = time.perf_counter()
            response = await self._handle(ctx, timed, conn)
            loop_time += timed.elapsed
            if timing is not None:
                timing.handled(time.perf_counter() - handler_started, timed.elapsed)
        encode_started = time.perf_counter()
        chunks = None
        if response is not None:
            chunks = codec.encode_response(api_key, version, correlation_id, response)
        loop_time += time.perf_counter() - encode_started
        if timing is not None:
            timing.encoded = time.perf_counter()
        now = time.monotonic()
        default_partitions = self._config().num_partitions
        throttle_ms = quota.throttle_ms(default_partitions, response, len(frame), loop_time, now)
        if api_key == ApiKey.FETCH and response is not None and chunks and not quota.exempt:
            size = sum(c.size if isinstance(c, FileSlice) else len(c) for c in chunks)
            throttle_ms = max(throttle_ms, quota.fetch_throttle_ms(size, throttle_ms, now))
            if throttle_ms > 0:  # a throttled consumer gets an empty fetch, as Kafka
                response = throttled_fetch_response(response, throttle_ms)
        if throttle_ms <= 0:
            return chunks
        if timing is not None:
            timing.throttle_ms = throttle_ms
        if client_throttles(api_key, version):
            conn.throttle(throttle_ms / 1000)  # answered now, then the channel muted
        else:
            await asyncio.sleep(throttle_ms / 1000)  # an older client: answered late
        if response is None:
            return None
        set_throttle_time(api_key, version, response, throttle_ms)
        return codec.encode_response(api_key, version, correlation_id, response)

    async def _handle(self, ctx: RequestContext, call: Awaitable[Any], conn: Connection) -> Any:
        try:
            return await call
        except CloseConnection:
            raise
        except Exception as exc:
            raise _internal_error(ctx, conn, exc) from exc


def _internal_error(ctx: RequestContext, conn: Connection, exc: Exception) -> CloseConnection:
    log.exception(
        "error handling %s v%d from %s", ApiKey(ctx.header.api_key).name, ctx.version, conn.peer
    )
    return CloseConnection(f"internal error: {exc}")
