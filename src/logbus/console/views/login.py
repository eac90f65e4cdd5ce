"""Signing in and out: the login form (user name and password, checked as `access` says),
and sign-out. A sign-in gives the browser a new id; a refused one says only that the name
or the password is wrong, whichever it was."""

from __future__ import annotations

import logging
import math

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from logbus.console.access import (
    LoginRefused,
    TooManyFailures,
    browser_id,
    close_sessions,
    console_access,
    sign_out,
    signed_in,
)
from logbus.console.errors import ConsoleError
from logbus.console.pages import posted_form, render

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
# Longer names and passwords are refused unread (scrypt and SCRAM would still take them).
_MAX_FIELD = 1024


def _next_page(target: str | None) -> str:
    """Where to go after signing in: a path of this console only (never another site's
    address, which would make the login form an open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login_enabled(request: Request) -> None:
    if not console_access(request).login_required:
        raise ConsoleError("This console has no login: it was started without users.", 404)


async def login_form(request: Request) -> Response:
    _login_enabled(request)
    target = _next_page(request.query_params.get("next"))
    if signed_in(request) is not None:
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", next_page=target, error="", name="",
                  cookie_warning=_cookie_warning(request))


def _cookie_warning(request: Request) -> bool:
    """True when the browser will drop the session cookie: a Secure cookie is kept from
    HTTPS pages, and from plain HTTP on this machine's loopback names only."""
    return request.url.scheme != "https" and request.url.hostname not in _LOOPBACK_NAMES


async def login(request: Request) -> Response:
    _login_enabled(request)
    form = await posted_form(request)
    name = str(form.get("username", "")).strip()
    password = str(form.get("password", ""))
    target = _next_page(str(form.get("next", "")))
    access = console_access(request)
    address = request.client.host if request.client else "?"
    try:
        access.failures.check(address, name)
        if len(name) > _MAX_FIELD or len(password) > _MAX_FIELD:
            raise LoginRefused
        clients = await access.check_password(name, password)
    except TooManyFailures as exc:
        log.warning("console sign-in of %r from %s not tried: too many failures", name, address)
        minutes = max(1, math.ceil(exc.retry_after / 60))
        refused = render(request, "login.html", 429, next_page=target, name=name, status=429,
                         error=f"Too many wrong passwords for {name} from your address: try "
                         f"again in {minutes} minute{'s' if minutes > 1 else ''}.",
                         cookie_warning=_cookie_warning(request))
        refused.headers["Retry-After"] = str(math.ceil(exc.retry_after))
        return refused
    except LoginRefused:
        access.failures.failed(address, name)
        log.warning("console sign-in refused for %r from %s", name, address)
        return render(request, "login.html", 401, next_page=target, name=name, status=401,
                      error="Wrong user name or password.",
                      cookie_warning=_cookie_warning(request))
    access.failures.succeeded(address, name)
    previous = access.sessions.sign_out(browser_id(request))
    new_id, evicted = access.sessions.sign_in(name, clients)
    await close_sessions([s for s in (previous, *evicted) if s is not None])
    request.state.browser_id = new_id
    log.info("console sign-in: %s", name)
    return RedirectResponse(target, status_code=303)


async def logout(request: Request) -> Response:
    await posted_form(request)
    session = await sign_out(request)
    if session is not None:
        log.info("console sign-out: %s", session.user)
    return RedirectResponse(
        "/login" if console_access(request).login_required else "/", status_code=303
    )


routes = [
    Route("/login", login_form, name="login"),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"], name="logout"),
]
