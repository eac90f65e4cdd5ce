"""What every server-side SASL mechanism offers the connection's authenticator."""

from __future__ import annotations


class SaslAuthenticationFailed(Exception):
    """The client's credentials or messages are refused; the message goes to the client
    (SaslAuthenticate's error_message) and the connection is closed."""


class SaslServer:
    """One authentication exchange: `evaluate` takes each client message and returns the
    answer; once `complete`, `username` is who authenticated."""

    mechanism: str
    username: str | None
    complete: bool

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError
