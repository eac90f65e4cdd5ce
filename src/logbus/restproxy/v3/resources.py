"""What every v3 resource shares: the JSON body (`application/json`), the `kind` /
`metadata.self` / `related` envelope of Confluent's v3 API, the cluster id check, reading
a request body, and Kafka's errors as the statuses and codes Confluent's proxy gives them
(its `KafkaExceptionMapper`: 40403 for an unknown topic or partition, 40002 for a refused
request, 40301 for a denied one, 50003 for a retriable failure, 50002 otherwise)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from logbus.client.admin import Admin
from logbus.client.errors import KafkaError
from logbus.protocol import RETRIABLE, ErrorCode
from logbus.restproxy import errors
from logbus.restproxy.errors import ProxyError
from logbus.restproxy.web import read_json

V3_JSON = "application/json"

Handler = Callable[[Request], Awaitable[Any]]


class V3Response(JSONResponse):
    """A v3 JSON body (`application/json`)."""

    media_type = V3_JSON

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


def v3_endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A v3 route's endpoint: the handler's value as a V3Response (a Response as it is),
    a KafkaError as the v3 error it maps to."""

    async def endpoint(request: Request) -> Response:
        try:
            result = await handler(request)
        except KafkaError as exc:
            raise kafka_error(exc) from None
        if isinstance(result, Response):
            return result
        return V3Response(result)

    return endpoint


def no_content() -> Response:
    return Response(status_code=204)


# -- Kafka's errors -------------------------------------------------------------------

_BAD_REQUEST = frozenset({
    ErrorCode.INVALID_REPLICATION_FACTOR,
    ErrorCode.SECURITY_DISABLED,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_PARTITIONS,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.POLICY_VIOLATION,
    ErrorCode.TOPIC_ALREADY_EXISTS,
    ErrorCode.INVALID_CONFIG,
    ErrorCode.INVALID_TOPIC_EXCEPTION,
})
_DENIED = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
})
# Kafka's UnknownTopicOrPartitionException message, which Confluent's clients see
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def kafka_error(exc: KafkaError) -> ProxyError:
    """A KafkaError as Confluent's proxy answers it."""
    message = exc.message or exc.name
    if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return ProxyError(404, 40403, UNKNOWN_TOPIC_MESSAGE)
    if exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        return ProxyError(401, 40101, message)
    if exc.code in _DENIED:
        return ProxyError(403, 40301, message)
    if exc.code == ErrorCode.BROKER_NOT_AVAILABLE:
        return ProxyError(503, 50302, message)
    if exc.code in _BAD_REQUEST:
        return ProxyError(400, 40002, message)
    if exc.code in RETRIABLE:
        return ProxyError(500, 50003, message)
    return ProxyError(500, 50002, message)


def not_found(message: str) -> ProxyError:
    """A resource that does not exist, as JAX-RS's NotFoundException answers."""
    return ProxyError(404, 404, message)


def bad_request(message: str) -> ProxyError:
    return ProxyError(400, 400, message)


def invalid_payload(message: str) -> ProxyError:
    return ProxyError(422, 42206, f"Payload error. {message}")


# -- the envelope ---------------------------------------------------------------------


def admin(request: Request) -> Admin:
    found: Admin = request.app.state.admin
    return found


async def cluster_id(request: Request) -> str:
    """The id of the proxy's cluster, asked once (a cluster keeps its id)."""
    state = request.app.state
    found: str | None = getattr(state, "cluster_id", None)
    if found is None:
        description = await admin(request).describe_cluster()
        found = state.cluster_id = description.cluster_id or ""
    return found


async def checked_cluster(request: Request) -> str:
    """The request's `{cluster_id}`, 404 unless it names the proxy's cluster."""
    wanted = request.path_params["cluster_id"]
    if wanted != await cluster_id(request):
        raise not_found(f"Cluster {wanted} cannot be found.")
    return str(wanted)


class Links:
    """The absolute URLs of one request's resources (`metadata.self`, `related`) and
    their resource names (`crn:///kafka=<cluster>/topic=<name>`)."""

    def __init__(self, request: Request, cluster: str) -> None:
        self.base = str(request.base_url).rstrip("/")
        self.cluster = cluster

    def url(self, *segments: object, query: Mapping[str, str] | None = None) -> str:
        path = "/".join(quote(str(s), safe="") for s in ("v3", "clusters", self.cluster, *segments))
        tail = f"?{urlencode(query, safe='*')}" if query else ""
        return f"{self.base}/{path}{tail}"

    def related(self, *segments: object) -> dict[str, str]:
        return {"related": self.url(*segments)}

    def crn(self, *pairs: tuple[str, object]) -> str:
        return "crn:///kafka=" + "/".join([self.cluster, *(f"{k}={v}" for k, v in pairs)])

    def resource(
        self, kind: str, segments: tuple[object, ...], crn: tuple[tuple[str, object], ...] | None,
        **fields: Any,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"self": self.url(*segments)}
        if crn is not None:
            metadata["resource_name"] = self.crn(*crn)
        return {"kind": kind, "metadata": metadata, "cluster_id": self.cluster, **fields}

    def collection(
        self, kind: str, segments: tuple[object, ...], data: list[dict[str, Any]],
        query: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        return {
            "kind": kind,
            "metadata": {"self": self.url(*segments, query=query), "next": None},
            "data": data,
        }


async def links(request: Request) -> Links:
    """The request's links, once its cluster id is checked."""
    return Links(request, await checked_cluster(request))


# -- request bodies -------------------------------------------------------------------


def check_json_body(request: Request) -> None:
    """v3 requests with a body take `application/json` (415 otherwise)."""
    text = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if text not in ("application/json", ""):
        raise ProxyError(415, 415, "HTTP 415 Unsupported Media Type")


async def object_body(request: Request, *, allow_empty: bool = False) -> dict[str, Any]:
    """The request's JSON object (415 for another media type, 400 for bad JSON, 422 for
    no body or one that is not an object)."""
    check_json_body(request)
    body = await read_json(request, allow_empty=True)
    if body is None:
        if allow_empty:
            return {}
        raise invalid_payload("Request body is empty. Data is required.")
    if not isinstance(body, dict):
        raise errors.bad_request("Unexpected JSON body: expected an object")
    return body


def int_param(request: Request, name: str) -> int:
    """A path parameter that must be a whole number (404 otherwise, as for a missing
    resource)."""
    text = str(request.path_params[name])
    if not text.lstrip("-").isdigit():
        raise not_found("HTTP 404 Not Found")
    return int(text)
