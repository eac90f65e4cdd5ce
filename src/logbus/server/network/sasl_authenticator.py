"""The SASL state machine of one connection on a SASL listener (Kafka's
`SaslServerAuthenticator`).

Before authentication a client may send ApiVersions (answered by the broker's handlers)
and SaslHandshake; then SaslAuthenticate (or, after a v0 handshake, the mechanism's
tokens as bare size-prefixed frames) until its mechanism completes. Anything else closes
the connection, and so does a failure, after its response: UNSUPPORTED_SASL_MECHANISM
with the enabled list, SASL_AUTHENTICATION_FAILED with the reason. Frames before
authentication are bounded by `sasl.server.max.receive.size` (the connection enforces it).

With `connections.max.reauth.ms` (KIP-368) SaslAuthenticate v1+ answers the session's
lifetime; a request after it ends, unless the client re-authenticated (a new
SaslHandshake on the authenticated connection, same mechanism and user), closes the
connection.
"""

from __future__ import annotations

import enum
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import Frame
from logbus.server.security.principal import USER_TYPE, KafkaPrincipal
from logbus.server.security.sasl_server import SaslAuthenticationFailed, SaslServer

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")


class CloseAfter(Exception):
    """Send `chunks` (the failure's response), then close the connection (after
    `delay` seconds for a failed authentication)."""

    def __init__(self, reason: str, chunks: list[Any] | None = None, delay: float = 0) -> None:
        super().__init__(reason)
        self.chunks = chunks
        self.delay = delay


class State(enum.Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake
    AUTHENTICATE = "authenticate"  # SaslAuthenticate
    AUTHENTICATE_RAW = "authenticate_raw"  # bare tokens after a v0 handshake
    COMPLETE = "complete"


@dataclass(frozen=True)
class SaslSettings:
    """One listener's SASL settings: the enabled mechanisms, a factory for each
    mechanism's server, `sasl.server.max.receive.size` and `connections.max.reauth.ms`."""

    mechanisms: list[str]
    new_server: Callable[[str], SaslServer]
    max_receive_size: int = 524288
    reauth_ms: int = 0
    failed_authentication_delay_ms: int = 100


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, peer: str) -> None:
        self.settings = settings
        self.peer = peer
        self.state = State.HANDSHAKE
        self.server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_at: float | None = None  # monotonic seconds
        self._mechanism = ""

    @property
    def _delay(self) -> float:
        return self.settings.failed_authentication_delay_ms / 1000

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def expired(self) -> bool:
        return self.session_expires_at is not None and time.monotonic() > self.session_expires_at

    def wants(self, frame: Frame) -> bool:
        """Whether this frame is the authenticator's: every frame before authentication,
        a SaslHandshake after it (re-authentication)."""
        if self.state is not State.COMPLETE:
            return True
        if self.settings.reauth_ms <= 0:
            return False
        try:
            api_key, _, _ = codec.peek_request_header(frame)
        except ProtocolError:
            return False
        return api_key == ApiKey.SASL_HANDSHAKE

    def handle(self, frame: Frame) -> list[Any] | None:
        """The response to a frame of the exchange; None for ApiVersions (the caller hands
        it to the broker's handlers). Raises `CloseAfter` to end the connection."""
        if self.state is State.AUTHENTICATE_RAW:
            return self._raw_token(bytes(frame))
        try:
            header, body = codec.decode_request(frame)
        except ProtocolError as exc:
            raise CloseAfter(f"malformed request during SASL authentication: {exc}") from None
        api_key = header.api_key
        if api_key == ApiKey.API_VERSIONS and self.state is State.HANDSHAKE:
            return None
        if api_key == ApiKey.SASL_HANDSHAKE and self.state in (State.HANDSHAKE, State.COMPLETE):
            return self._handshake(header, body)
        if api_key == ApiKey.SASL_AUTHENTICATE and self.state is State.AUTHENTICATE:
            return self._authenticate(header, body)
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        raise CloseAfter(
            f"unexpected {name} request during SASL authentication ({self.state.value})"
        )

    def _handshake(self, header: codec.RequestHeader, body: dict[str, Any]) -> list[Any]:
        mechanism = str(body.get("mechanism", ""))
        enabled = self.settings.mechanisms
        reauthenticating = self.state is State.COMPLETE
        if mechanism not in enabled or (reauthenticating and mechanism != self._mechanism):
            response = {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
            chunks = codec.encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
            raise CloseAfter(f"unsupported SASL mechanism {mechanism!r}", chunks)
        self._mechanism = mechanism
        self.server = self.settings.new_server(mechanism)
        self.state = State.AUTHENTICATE if header.api_version >= 1 else State.AUTHENTICATE_RAW
        response = {"error_code": ErrorCode.NONE, "mechanisms": enabled}
        return codec.encode_response(
            header.api_key, header.api_version, header.correlation_id, response
        )

    def _evaluate(self, token: bytes) -> bytes:
        server = self.server
        assert server is not None
        try:
            return server.evaluate(token)
        except SaslAuthenticationFailed:
            raise
        except Exception as exc:  # a mechanism's bug must not take the broker down
            log.exception("SASL %s failed unexpectedly for %s", server.mechanism, self.peer)
            raise SaslAuthenticationFailed(f"Authentication failed: {exc}") from None

    def _authenticate(self, header: codec.RequestHeader, body: dict[str, Any]) -> list[Any]:
        version, correlation_id = header.api_version, header.correlation_id
        response: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }
        try:
            response["auth_bytes"] = self._evaluate(bytes(body.get("auth_bytes") or b""))
        except SaslAuthenticationFailed as exc:
            response["error_code"] = ErrorCode.SASL_AUTHENTICATION_FAILED
            response["error_message"] = str(exc)
            chunks = codec.encode_response(
                ApiKey.SASL_AUTHENTICATE, version, correlation_id, response
            )
            raise CloseAfter(f"SASL authentication failed: {exc}", chunks, self._delay) from None
        if self._finish():
            response["session_lifetime_ms"] = self.settings.reauth_ms if version >= 1 else 0
        return codec.encode_response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, response)

    def _raw_token(self, token: bytes) -> list[Any]:
        try:
            answer = self._evaluate(token)
        except SaslAuthenticationFailed as exc:
            raise CloseAfter(f"SASL authentication failed: {exc}", None, self._delay) from None
        self._finish()
        return [_SIZE.pack(len(answer)), answer]

    def _finish(self) -> bool:
        """Whether the exchange just completed (and the principal is known)."""
        server = self.server
        assert server is not None
        if not server.complete:
            return False
        assert server.username is not None
        principal = KafkaPrincipal(USER_TYPE, server.username)
        if self.principal is not None and principal != self.principal:
            raise CloseAfter("re-authentication as a different principal is not allowed")
        self.principal = principal
        self.state = State.COMPLETE
        self.server = None
        if self.settings.reauth_ms > 0:
            self.session_expires_at = time.monotonic() + self.settings.reauth_ms / 1000
        log.debug("%s authenticated as %s with %s", self.peer, principal, server.mechanism)
        return True
