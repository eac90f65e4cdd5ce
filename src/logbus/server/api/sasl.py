"""SaslHandshake v0-1 and SaslAuthenticate v0-2.

On a SASL listener the connection's authenticator (`server/network/sasl_authenticator.py`)
answers them before authentication and for re-authentication; these handlers declare the
versions (ApiVersions lists them) and answer what reaches the broker otherwise, as Kafka's
KafkaApis does: ILLEGAL_SASL_STATE (a listener without SASL, or after authentication).
"""

from __future__ import annotations

from typing import Any

from logbus.protocol import ApiKey, ErrorCode
from logbus.server.api import ApiHandler, RequestContext


async def handle_sasl_handshake(ctx: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


async def handle_sasl_authenticate(
    ctx: RequestContext, request: dict[str, Any]
) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


HANDLERS = [
    ApiHandler(ApiKey.SASL_HANDSHAKE, 0, 1, handle_sasl_handshake),
    ApiHandler(ApiKey.SASL_AUTHENTICATE, 0, 2, handle_sasl_authenticate),
]
