"""The API layer: one module per API family, each declaring the versions it serves.

`ApiHandler` entries are collected by `logbus.server.api.registry.build_registry`; the
ApiVersions response is built from the same declarations, never from a second list.

A handler takes its request body and returns its response body typed with the message's
generated TypedDicts (`logbus.protocol.messages.<name>_request.<Name>Request`, ...), so
mypy checks every field name it reads or writes. `Body` is the untyped form, for code that
handles any message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from logbus.protocol import ApiKey
from logbus.protocol.codec import RequestHeader
from logbus.server.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from logbus.server.security.authorizer import host_of
from logbus.server.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.services import BrokerServices

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body: the broker's services,
    all constructed (the collaborators it uses, never the `Broker` itself), and the
    broker's config as the request found it."""

    services: BrokerServices
    config: BrokerConfig
    header: RequestHeader
    peer: str
    # the connection's authenticated principal (User:ANONYMOUS when none)
    principal: KafkaPrincipal = ANONYMOUS
    # the name of the listener the request came in on ("" when not known)
    listener: str = ""

    @property
    def version(self) -> int:
        return self.header.api_version

    def authorize(
        self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> bool:
        """Whether this request's principal may perform `operation` on the resource (always
        when the broker has no authorizer)."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            self.principal, host_of(self.peer), operation, resource_type, name
        )

    def authorized(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names among `names` this request may perform `operation` on."""
        if self.services.authorizer is None:
            return set(names)
        return {name for name in set(names) if self.authorize(operation, resource_type, name)}

    def authorized_operations(self, resource_type: ResourceType, name: str, supported: int) -> int:
        """Kafka's `*_authorized_operations` bit field: which of the `supported` operations
        (bits at AclOperation codes) the principal may perform on the resource."""
        return sum(
            1 << op
            for op in AclOperation
            if supported & (1 << op) and self.authorize(op, resource_type, name)
        )

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may perform `operation` on some resource of the type."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(
            self.principal, host_of(self.peer), operation, resource_type
        )


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
