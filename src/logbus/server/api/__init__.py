"""The API layer: one module per API family, each declaring the versions it serves.

`ApiHandler` entries are collected by `logbus.server.api.registry.build_registry`; the
ApiVersions response is built from the same declarations, never from a second list.

A handler takes its request body and returns its response body typed with the message's
generated TypedDicts (`logbus.protocol.messages.<name>_request.<Name>Request`, ...), so
mypy checks every field name it reads or writes. `Body` is the untyped form, for code that
handles any message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from logbus.protocol import ApiKey
from logbus.protocol.codec import RequestHeader
from logbus.server.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from logbus.server.broker import Broker
    from logbus.server.services import BrokerServices

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body: the broker (its config
    and metadata cache) and its services, all constructed."""

    broker: Broker
    services: BrokerServices
    header: RequestHeader
    peer: str
    # the connection's authenticated principal (User:ANONYMOUS when none)
    principal: KafkaPrincipal = ANONYMOUS
    # the name of the listener the request came in on ("" when not known)
    listener: str = ""

    @property
    def version(self) -> int:
        return self.header.api_version


Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True, slots=True)
class ApiHandler(Generic[Req, Resp]):
    """One API's handler and the versions it serves; `Req` and `Resp` are the request's
    and response's TypedDicts (the registry holds `ApiHandler[Any, Any]`: the codec
    decodes whichever message arrives)."""

    api_key: ApiKey
    min_version: int
    max_version: int
    handle: Callable[[RequestContext, Req], Awaitable[Resp | None]]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


Handlers = dict[int, ApiHandler[Any, Any]]
"""Every handler of a broker by API key (`registry.build_registry`)."""
