"""Who a browser is: a signed cookie carrying a random browser id, the table of signed-in
sessions kept by the console process, and the CSRF token of each id.

Every browser gets an id, signed in or not (the login form needs a CSRF token as much as
any other form). A sign-in replaces the id (a fixed id planted before login is worth
nothing after it) and adds it to the table with the user and the user's clients; sign-out
and expiry remove it. The table lives in memory: a restarted console signs everyone out.
The CSRF token of an id is an HMAC of it under the console's secret, so tokens need no
storage and a token of one id is worthless with another. `SessionStore` is used from the
console's event loop only."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from logbus.console.clients import ConsoleClients

COOKIE_NAME = "logbus_console"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
# A signed-in session ends after this long without a request (the default of
# --session-timeout), and after MAX_SESSION_SECONDS whatever happens.
IDLE_TIMEOUT_SECONDS = 30 * 60
MAX_SESSION_SECONDS = 12 * 60 * 60
# Signed-in sessions kept at most; the longest idle one goes first.
MAX_SESSIONS = 10_000
_ID_BYTES = 24


@dataclass
class SignedIn:
    """One signed-in browser: its user, its clients (None: the console's own, for users
    of the users file) and when it started and was last used (monotonic seconds)."""

    user: str
    clients: ConsoleClients | None
    started: float
    last_seen: float = field(default=0.0)


class CookieSigner:
    """Signs browser ids and derives their CSRF tokens with the console's secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the session secret must be at least 16 bytes")
        self._secret = secret

    def _mac(self, purpose: str, browser_id: str) -> str:
        digest = hmac.new(self._secret, f"{purpose}:{browser_id}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")

    def cookie_value(self, browser_id: str) -> str:
        return f"{browser_id}.{self._mac('cookie', browser_id)}"

    def browser_id(self, cookie: str | None) -> str | None:
        """The id a cookie carries, or None when it is missing, malformed or forged."""
        if not cookie:
            return None
        browser_id, sep, mac = cookie.rpartition(".")
        if not sep or not browser_id:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac("cookie", browser_id).encode()):
            return None
        return browser_id

    def csrf_token(self, browser_id: str) -> str:
        return self._mac("csrf", browser_id)

    def csrf_matches(self, browser_id: str, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(
            token.encode(), self.csrf_token(browser_id).encode()
        )


def new_browser_id() -> str:
    return secrets.token_urlsafe(_ID_BYTES)


class SessionStore:
    """The signed-in sessions by browser id. `clock` is monotonic seconds."""

    def __init__(
        self,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
        max_age: float = MAX_SESSION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.idle_timeout = idle_timeout
        self.max_age = max_age
        self._clock = clock
        self._max_sessions = max_sessions
        self._sessions: dict[str, SignedIn] = {}

    def sign_in(self, user: str, clients: ConsoleClients | None) -> tuple[str, list[SignedIn]]:
        """A new browser id signed in as `user`, and the sessions pushed out to make room
        (their clients are the caller's to close)."""
        now = self._clock()
        evicted: list[SignedIn] = []
        while len(self._sessions) >= self._max_sessions:
            oldest = min(self._sessions, key=lambda key: self._sessions[key].last_seen)
            evicted.append(self._sessions.pop(oldest))
        browser_id = new_browser_id()
        self._sessions[browser_id] = SignedIn(user, clients, now, now)
        return browser_id, evicted

    def find(self, browser_id: str | None) -> SignedIn | None:
        """The live session of `browser_id` (its last use now), or None. An expired one
        stays in the table until `expired()` takes it."""
        if browser_id is None:
            return None
        session = self._sessions.get(browser_id)
        if session is None or self._is_expired(session, self._clock()):
            return None
        session.last_seen = self._clock()
        return session

    def sign_out(self, browser_id: str) -> SignedIn | None:
        return self._sessions.pop(browser_id, None)

    def expired(self) -> list[SignedIn]:
        """Remove and return the sessions that have expired."""
        now = self._clock()
        gone = [key for key, s in self._sessions.items() if self._is_expired(s, now)]
        return [self._sessions.pop(key) for key in gone]

    def take_all(self) -> list[SignedIn]:
        """Remove and return every session (at shutdown)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        return sessions

    def __len__(self) -> int:
        return len(self._sessions)

    def _is_expired(self, session: SignedIn, now: float) -> bool:
        return (
            now - session.last_seen >= self.idle_timeout or now - session.started >= self.max_age
        )
