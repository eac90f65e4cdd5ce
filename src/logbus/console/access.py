"""Who may use the console and what they may do: how passwords are checked (the cluster's
SCRAM credentials, the console's users file, or no login at all), the read-only switch,
and the middleware that gives every request its browser id and refuses what it may not
do before any view runs (401 without a session, 403 for a change on a read-only
console). CSRF tokens are checked where forms are read (`pages.posted_form`).

With SCRAM logins a user's password is checked by connecting to the cluster as that user,
and the clients made by that connection are the ones the user's pages use: the brokers'
ACLs judge what the user does, not the console."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from logbus.client.errors import KafkaError
from logbus.console.clients import ConsoleClients
from logbus.console.sessions import (
    COOKIE_NAME,
    IDLE_TIMEOUT_SECONDS,
    CookieSigner,
    SessionStore,
    SignedIn,
    new_browser_id,
)
from logbus.console.users import hash_password, verify_password
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

ErrorPage = Callable[[Request, int, str], Response]
Login = Literal["none", "users-file", "scram"]
LOGINS: tuple[Login, ...] = ("none", "users-file", "scram")
# Paths anyone may open: the login form and the style sheet and script it uses.
_PUBLIC_PREFIXES = ("/static/",)
_PUBLIC_PATHS = ("/login",)
_SAFE_METHODS = ("GET", "HEAD")
# How often the table of sessions is swept of expired ones (and their clients closed).
_SWEEP_SECONDS = 30.0
# The client settings that carry a password; a SCRAM user's clients get theirs instead.
_CREDENTIALS = ("sasl.username", "sasl.password", "sasl.jaas.config")


@dataclass(frozen=True)
class AccessSettings:
    """How the console checks who is there: `login` (none, users-file with `users` the
    names and hashes of the file, or scram), `read_only`, the secret that signs cookies
    (None: a new one at each start, which signs everyone out at a restart) and how long a
    session may stay idle."""

    login: Login = "none"
    users: Mapping[str, str] = field(default_factory=dict)
    read_only: bool = False
    secret: bytes | None = None
    session_timeout: float = IDLE_TIMEOUT_SECONDS


class LoginRefused(Exception):
    """A wrong user name or password."""


class TooManyFailures(Exception):
    """Sign-ins of this name from this address are refused for `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after:.0f} s")
        self.retry_after = retry_after


# After this many wrong passwords for one name from one address within FAILURE_WINDOW
# seconds, that name is refused from that address (without checking its password) until
# the oldest of them is FAILURE_WINDOW old. Keyed by address and name, so that no one can
# lock a user out from elsewhere.
MAX_FAILURES = 5
FAILURE_WINDOW = 15 * 60.0
# Keys kept at most (the oldest goes first): a flood of names must not grow memory.
_MAX_FAILURE_KEYS = 10_000


class FailedSignIns:
    """Recent failed sign-ins by (client address, user name); used from the event loop
    only. `clock` is monotonic seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: dict[tuple[str, str], list[float]] = {}

    def check(self, address: str, user: str) -> None:
        """TooManyFailures when this name may not try again from this address yet."""
        recent = self._recent((address, user.lower()))
        if len(recent) >= MAX_FAILURES:
            raise TooManyFailures(recent[0] + FAILURE_WINDOW - self._clock())

    def failed(self, address: str, user: str) -> None:
        key = (address, user.lower())
        recent = self._recent(key)
        recent.append(self._clock())
        self._failures.pop(key, None)  # re-inserted last: the dict stays oldest-first
        self._failures[key] = recent
        while len(self._failures) > _MAX_FAILURE_KEYS:
            del self._failures[next(iter(self._failures))]

    def succeeded(self, address: str, user: str) -> None:
        self._failures.pop((address, user.lower()), None)

    def _recent(self, key: tuple[str, str]) -> list[float]:
        since = self._clock() - FAILURE_WINDOW
        recent = [at for at in self._failures.get(key, ()) if at > since]
        if recent:
            self._failures[key] = recent
        else:
            self._failures.pop(key, None)
        return recent


class ConsoleAccess:
    """The console's sessions and its way of checking passwords, for one app; used from
    the app's event loop only."""

    def __init__(self, settings: AccessSettings, client_settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self.signer = CookieSigner(settings.secret or secrets.token_bytes(32))
        self.sessions = SessionStore(idle_timeout=settings.session_timeout)
        self.failures = FailedSignIns()
        self._client_settings = {
            k: v for k, v in client_settings.items() if k not in _CREDENTIALS
        }
        # Checked when the user is unknown, so that an unknown name takes as long as a
        # wrong password.
        self._decoy = hash_password(secrets.token_urlsafe(16)) if settings.users else ""
        self._last_sweep = time.monotonic()

    @property
    def login_required(self) -> bool:
        return self.settings.login != "none"

    @property
    def read_only(self) -> bool:
        return self.settings.read_only

    async def check_password(self, user: str, password: str) -> ConsoleClients | None:
        """The clients the user's pages use (None: the console's own) once the password is
        right; LoginRefused when it is not. With SCRAM, KafkaError when the cluster cannot
        say (not reachable)."""
        if self.settings.login == "scram":
            return await self._check_scram(user, password)
        stored = self.settings.users.get(user)
        right = await asyncio.to_thread(verify_password, password, stored or self._decoy)
        if stored is None or not right:
            raise LoginRefused
        return None

    async def _check_scram(self, user: str, password: str) -> ConsoleClients:
        if not user or not password:
            raise LoginRefused
        clients = ConsoleClients(
            {**self._client_settings, "sasl.username": user, "sasl.password": password}
        )
        try:
            await clients.admin()
        except KafkaError as exc:
            await clients.close()
            if exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
                raise LoginRefused from None
            raise
        return clients

    async def sweep(self) -> None:
        """Close the clients of expired sessions (at most every _SWEEP_SECONDS)."""
        now = time.monotonic()
        if now - self._last_sweep < _SWEEP_SECONDS:
            return
        self._last_sweep = now
        await close_sessions(self.sessions.expired())

    async def close(self) -> None:
        """Sign everyone out (at shutdown)."""
        await close_sessions(self.sessions.take_all())


async def close_sessions(sessions: list[SignedIn]) -> None:
    for session in sessions:
        if session.clients is not None:
            await session.clients.close()


def console_access(request: Request) -> ConsoleAccess:
    found: ConsoleAccess = request.app.state.access
    return found


def browser_id(request: Request) -> str:
    found: str = request.state.browser_id
    return found


def signed_in(request: Request) -> SignedIn | None:
    found: SignedIn | None = getattr(request.state, "signed_in", None)
    return found


async def sign_out(request: Request) -> SignedIn | None:
    """End this browser's session (its clients closed) and give it a new id; the session
    that ended, if there was one."""
    session = console_access(request).sessions.sign_out(browser_id(request))
    if session is not None:
        await close_sessions([session])
    request.state.browser_id = new_browser_id()
    request.state.signed_in = None
    return session


def cookie_header(access: ConsoleAccess, browser: str) -> bytes:
    """The Set-Cookie value of a browser id: never readable by scripts, never sent over
    plain HTTP to another host than this machine (browsers treat loopback as secure), and
    not sent with requests that other sites start, except top-level links."""
    return (
        f"{COOKIE_NAME}={access.signer.cookie_value(browser)}; Path=/; HttpOnly; Secure; "
        "SameSite=Lax"
    ).encode()


class AccessMiddleware:
    """Gives each request its browser id and signed-in session (request.state.browser_id,
    .signed_in), refuses it when it may not go on, and sets the cookie when the id is new
    or a view replaced it (sign-in, sign-out)."""

    def __init__(self, app: ASGIApp, access: ConsoleAccess, error_page: ErrorPage) -> None:
        self.app = app
        self.access = access
        self.error_page = error_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        access = self.access
        request = Request(scope)
        await access.sweep()
        known = access.signer.browser_id(request.cookies.get(COOKIE_NAME))
        state = scope.setdefault("state", {})
        state["browser_id"] = known or new_browser_id()
        state["signed_in"] = access.sessions.find(known)

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and state["browser_id"] != known:
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", cookie_header(access, state["browser_id"])))
                message = {**message, "headers": headers}
            await send(message)

        refusal = refuse(request, access, state["signed_in"], self.error_page)
        if refusal is not None:
            await refusal(scope, receive, send_with_cookie)
            return
        await self.app(scope, receive, send_with_cookie)


def refuse(
    request: Request, access: ConsoleAccess, session: SignedIn | None, error_page: ErrorPage
) -> Response | None:
    """Why this request may not reach its view, as the response to send; None when it
    may. Without a session a page is sent to the login form and anything else is 401; on a
    read-only console every change is 403."""
    path = request.url.path
    if path in _PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES):
        return None
    if access.login_required and session is None:
        if request.method in _SAFE_METHODS and request.headers.get("HX-Request") != "true":
            target = path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)
        return error_page(request, 401, "Sign in first: this console needs a user name "
                             "and password, and this request had no live session.")
    if access.read_only and request.method not in _SAFE_METHODS and path != "/logout":
        return error_page(request, 403, "Refused: this console is read-only; it changes "
                             "nothing in the cluster.")
    return None

