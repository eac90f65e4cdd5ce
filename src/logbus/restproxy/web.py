"""What the proxy's routes share: the v2 JSON response, reading a JSON body within the
size limit, and the media type checks of requests that carry no embedded format."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from logbus.restproxy import errors, json_codec
from logbus.restproxy.errors import ProxyError
from logbus.restproxy.formats import V2_JSON, embedded_format

Handler = Callable[[Request], Awaitable[Any]]

MAX_BODY_BYTES = 64 * 1024 * 1024


class V2Response(JSONResponse):
    """A v2 JSON body (`application/vnd.kafka.v2+json`)."""

    media_type = V2_JSON

    def render(self, content: Any) -> bytes:
        return json_codec.dumps(content)


async def read_json(request: Request, *, allow_empty: bool = False) -> Any:
    """The request's JSON body (400 when it is not JSON, 413 past the limit)."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise ProxyError(413, 413, "HTTP 413 Request Entity Too Large")
    if not raw.strip() and allow_empty:
        return None
    try:
        return json.loads(raw, parse_constant=_not_json)
    except ValueError as exc:
        raise errors.bad_request(f"Unexpected JSON body: {exc}") from None


def _not_json(constant: str) -> Any:
    # NaN and Infinity are not JSON: Confluent's proxy (Jackson) refuses them too
    raise ValueError(f"{constant} is not a JSON value")


def check_v2_body(request: Request) -> None:
    """Requests other than produce take the v2 JSON media type or plain JSON."""
    if embedded_format(request.headers.get("content-type"), default="") != "":
        raise ProxyError(415, 415, "HTTP 415 Unsupported Media Type")



def json_endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A route's endpoint: the handler's value as a V2Response (a Response as it is)."""

    async def endpoint(request: Request) -> Response:
        result = await handler(request)
        if isinstance(result, Response):
            return result
        return V2Response(result)

    return endpoint
