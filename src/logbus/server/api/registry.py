"""Dispatch on the API key (Kafka's KafkaApis): decode, check the version against the
handler's declaration, handle, encode.

Malformed requests and unsupported versions close the connection, as Kafka does, except
ApiVersions, which answers an unsupported version with a v0 response (KIP-511).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from logbus.protocol import ApiKey, codec, schema
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import Frame
from logbus.server.api import Handlers, RequestContext
from logbus.server.api.api_versions import unsupported_version_response
from logbus.server.network.connection import CloseConnection, Connection

if TYPE_CHECKING:
    from logbus.server.broker import Broker

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
    """Owns the handler table; shared by every connection of a broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.handlers = build_registry()

    async def handle_frame(self, conn: Connection, frame: Frame) -> list[Any] | None:
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
        services = self.broker.services or await self.broker.started()
        ctx = RequestContext(
            self.broker, services, header, conn.peer, conn.principal, conn.listener_name
        )
        try:
            response = await handler.handle(ctx, body)
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("error handling %s v%d from %s", ApiKey(api_key).name, version, conn.peer)
            raise CloseConnection(f"internal error: {exc}") from exc
        if response is None:
            return None
        return codec.encode_response(api_key, version, correlation_id, response)
