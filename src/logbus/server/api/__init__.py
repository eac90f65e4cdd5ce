"""The API layer: one module per API family, each declaring the versions it serves.

`ApiHandler` entries are collected by `logbus.server.api.registry.build_registry`; the
ApiVersions response is built from the same declarations, never from a second list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logbus.protocol import ApiKey
from logbus.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from logbus.server.broker import Broker

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    header: RequestHeader
    peer: str

    @property
    def version(self) -> int:
        return self.header.api_version


Handle = Callable[[RequestContext, Body], Awaitable[Body | None]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: ApiKey
    min_version: int
    max_version: int
    handle: Handle

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
