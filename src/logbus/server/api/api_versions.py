"""ApiVersions (KIP-35, KIP-511): what this broker serves, built from the handlers' own
version declarations. An unsupported request version gets a v0 answer with
UNSUPPORTED_VERSION and the supported list, so the client can retry."""

from __future__ import annotations

import re

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.api_versions_request import ApiVersionsRequest
from logbus.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from logbus.server.api import ApiHandler, Handlers, RequestContext

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_keys(handlers: Handlers) -> list[ApiVersion]:
    return [
        {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
        for h in sorted(handlers.values(), key=lambda h: h.api_key)
    ]


def unsupported_version_response(handlers: Handlers) -> ApiVersionsResponse:
    return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_keys(handlers)}


async def handle_api_versions(
    ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    handlers = ctx.services.api_handlers
    if ctx.version >= 3:
        for field in ("client_software_name", "client_software_version"):
            if not _SOFTWARE.match(request[field] or ""):
                return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": []}
    return {"error_code": ErrorCode.NONE, "api_keys": api_keys(handlers), "throttle_time_ms": 0}


HANDLERS = [ApiHandler(ApiKey.API_VERSIONS, 0, 4, handle_api_versions)]
