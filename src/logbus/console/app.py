"""The console's ASGI application: the routes of every view, static assets, the shared
clients (started when first needed, closed at shutdown) and the error pages."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.console.access import (
    AccessMiddleware,
    AccessSettings,
    ConsoleAccess,
    sign_out,
    signed_in,
)
from logbus.console.clients import ConsoleClients
from logbus.console.errors import ConsoleError, kafka_message, kafka_status
from logbus.console.lag import LagHistory
from logbus.console.pages import clients, is_fragment, render, template_environment
from logbus.console.schemas import RegistryClient
from logbus.console.views import groups, login, messages, overview, produce, schemas, topics
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

_HTTP_MESSAGES = {
    404: "There is no such page.",
    405: "This page does not take that method.",
}


# The names a browser uses for a console bound to loopback; a page of another name (a DNS
# name rebound to 127.0.0.1 by a hostile site) is refused.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def create_app(
    settings: Mapping[str, Any],
    *,
    allowed_hosts: Sequence[str] | None = None,
    access: AccessSettings | None = None,
    schema_registry_url: str | None = None,
) -> Starlette:
    """The console for the cluster `settings` names (client settings: `bootstrap.servers`
    and the security ones). With `allowed_hosts`, requests naming another host in their
    Host header are refused (400). `access` says who may sign in and whether the console
    is read-only (by default: no login, changes allowed). With `schema_registry_url`, the
    registry's subjects and versions have pages too."""
    checks = ConsoleAccess(access or AccessSettings(), settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # With SCRAM logins the console has no principal of its own to connect as.
        if checks.settings.login != "scram":
            try:
                await app.state.clients.admin()
            except KafkaError as exc:
                # Serve anyway: the pages say the cluster is unreachable until it answers.
                log.warning("the cluster is not reachable yet: %s", exc)
        try:
            yield
        finally:
            await checks.close()
            await app.state.clients.close()

    routes: list[BaseRoute] = [
        *login.routes,
        *overview.routes,
        *topics.routes,
        *messages.routes,
        *groups.routes,
        *produce.routes,
        *schemas.routes,
        Mount("/static", StaticFiles(packages=[("logbus.console", "static")]), name="static"),
    ]
    middleware = (
        [] if allowed_hosts is None
        else [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    )
    middleware.append(Middleware(AccessMiddleware, access=checks, error_page=_error_page))
    app = Starlette(
        debug=False,
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            ConsoleError: _console_error,
            KafkaError: _kafka_error,
            HTTPException: _http_error,
            TimeoutError: _timeout,
            Exception: _internal_error,
        },
    )
    app.state.templates = template_environment()
    app.state.lag_history = LagHistory()
    app.state.clients = ConsoleClients(settings)
    app.state.access = checks
    app.state.registry = RegistryClient(schema_registry_url) if schema_registry_url else None
    return app


def _error_page(request: Request, status: int, message: str) -> Response:
    template = "error_banner.html" if is_fragment(request) else "error.html"
    return render(request, template, status, message=message, status=status)


async def _console_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleError)
    return _error_page(request, exc.status, exc.message)


async def _kafka_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KafkaError)
    status = kafka_status(exc)
    if status == 503:
        # The cluster went away: the next page starts over with new connections.
        await clients(request).reset()
    message = kafka_message(exc)
    session = signed_in(request)
    if (
        exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        and session is not None
        and session.clients is not None
    ):
        await sign_out(request)
        return _error_page(request, 401, (
            f"The cluster no longer accepts the password {session.user} signed in with "
            f"({exc}): sign in again."
        ))
    if status == 403 and session is not None and session.clients is not None:
        message += (f" The cluster refused this to User:{session.user}: its ACLs decide what "
                    "each user may do.")
    return _error_page(request, status, message)


async def _timeout(request: Request, exc: Exception) -> Response:
    await clients(request).reset()
    return _error_page(request, 503, kafka_message(KafkaConnectionError("timed out")))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = _HTTP_MESSAGES.get(exc.status_code, str(exc.detail))
    return _error_page(request, exc.status_code, message)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("console error on %s %s", request.method, request.url.path)
    return _error_page(
        request, 500, f"The console failed to answer this page ({type(exc).__name__}: {exc})."
    )
