"""SaslHandshake v0-1 and SaslAuthenticate v0-2: what `Connection.connect` sends on a
SASL listener after ApiVersions (handshake v1, then one SaslAuthenticate per round of the
mechanism). This module imports no connection, so the connection can use it."""

from __future__ import annotations

from logbus.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from logbus.protocol.messages.sasl_handshake_request import SaslHandshakeRequest


def build_sasl_handshake(version: int, mechanism: str) -> SaslHandshakeRequest:
    return {"mechanism": mechanism}


def build_sasl_authenticate(version: int, token: bytes) -> SaslAuthenticateRequest:
    return {"auth_bytes": token}
