"""SASL PLAIN (RFC 4616), the server side: one message `[authzid] NUL authcid NUL passwd`,
checked against the users of the listener's JAAS config (`user_<name>="<password>"`), as
Kafka's `PlainServerCallbackHandler`."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from logbus.server.security.sasl_server import SaslAuthenticationFailed, SaslServer

MAX_PLAIN_TOKEN = 4096


class PlainServer(SaslServer):
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN authentication is already complete")
        if len(token) > MAX_PLAIN_TOKEN:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: too long")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                "Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts))
            )
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = username
        self.complete = True
        return b""
