"""The registry's HTTP API: Confluent Schema Registry's REST resources (subjects,
versions, schemas by id, compatibility, config, mode) as a Starlette application. Bodies
are JSON (`application/vnd.schemaregistry.v1+json`, `application/vnd.schemaregistry+json`
or `application/json`); errors are Confluent's `{"error_code", "message"}` bodies.

The entry point is `create_app`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from logbus.registry import errors
from logbus.registry.compatibility import DEFAULT_LEVEL
from logbus.registry.election import PrimaryElection
from logbus.registry.errors import RegistryError, StoreFencedError
from logbus.registry.schema_types import SCHEMA_TYPES
from logbus.registry.service import SchemaRegistry
from logbus.registry.store import KafkaStore

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_BODIES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
)
# A schema larger than this is refused (413) before it is read whole.
MAX_BODY_BYTES = 16 * 1024 * 1024


class RegistryResponse(JSONResponse):
    media_type = MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


Handler = Callable[[Request], Awaitable[Any]]


def _registry(request: Request) -> SchemaRegistry:
    registry: SchemaRegistry = request.app.state.registry
    return registry


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> Any:
    raw: bytes | None = getattr(request.state, "body", None)
    if raw is None:
        raw = await _read_body(request)
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise errors.bad_request(f"Unrecognized JSON body: {exc}") from None


async def _read_body(request: Request) -> bytes:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type not in ACCEPTED_BODIES:
        raise RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise RegistryError(413, 413, "HTTP 413 Request Entity Too Large")
    # kept for a write this registry turns out not to be the one to do (`_write`)
    body = bytes(raw)
    request.state.body = body
    return body


def _param(request: Request, name: str) -> str:
    """A path segment, percent-decoded (the routes match the undecoded path: see
    `RawPath`)."""
    return urllib.parse.unquote(request.path_params[name])


def _int_path(request: Request, name: str) -> int:
    text = _param(request, name)
    try:
        return int(text)
    except ValueError:
        raise RegistryError(404, 404, "HTTP 404 Not Found") from None


# -- /schemas -------------------------------------------------------------------------


async def schema_by_id(request: Request) -> Any:
    return _registry(request).id_body(
        _int_path(request, "id"), fetch_max_id=_flag(request, "fetchMaxId")
    )


async def schema_text_by_id(request: Request) -> Response:
    found = _registry(request).schema_by_id(_int_path(request, "id"))
    return Response(found.schema, media_type=MEDIA_TYPE)


async def subjects_of_id(request: Request) -> Any:
    registry = _registry(request)
    schema_id = _int_path(request, "id")
    registry.schema_by_id(schema_id)
    versions = registry.state.versions_with_id(schema_id, deleted=_flag(request, "deleted"))
    return sorted({v.subject for v in versions})


async def versions_of_id(request: Request) -> Any:
    registry = _registry(request)
    schema_id = _int_path(request, "id")
    registry.schema_by_id(schema_id)
    versions = registry.state.versions_with_id(schema_id, deleted=_flag(request, "deleted"))
    return [{"subject": v.subject, "version": v.version} for v in versions]


async def schema_types(request: Request) -> Any:
    return list(SCHEMA_TYPES)


async def all_schemas(request: Request) -> Any:
    registry = _registry(request)
    prefix = request.query_params.get("subjectPrefix", "")
    deleted = _flag(request, "deleted")
    latest_only = _flag(request, "latestOnly")
    found = []
    for subject in registry.subjects(deleted=deleted, prefix=prefix):
        versions = registry.state.live_versions(subject, deleted=deleted)
        found += versions[-1:] if latest_only else versions
    return [v.as_json() for v in found]


# -- /subjects ------------------------------------------------------------------------


async def list_subjects(request: Request) -> Any:
    return _registry(request).subjects(
        deleted=_flag(request, "deleted"), prefix=request.query_params.get("subjectPrefix", "")
    )


async def list_versions(request: Request) -> Any:
    return _registry(request).versions(
        _param(request, "subject"), deleted=_flag(request, "deleted")
    )


async def get_version(request: Request) -> Any:
    deleted = _flag(request, "deleted")
    found = _registry(request).version(
        _param(request, "subject"), _param(request, "version"), deleted=deleted
    )
    return found.as_json()


async def get_version_schema(request: Request) -> Response:
    deleted = _flag(request, "deleted")
    found = _registry(request).version(
        _param(request, "subject"), _param(request, "version"), deleted=deleted
    )
    return Response(found.schema, media_type=MEDIA_TYPE)


async def referenced_by(request: Request) -> Any:
    registry = _registry(request)
    found = registry.version(_param(request, "subject"), _param(request, "version"), deleted=True)
    return registry.state.referenced_by(found.subject, found.version)


async def register(request: Request) -> Any:
    schema_id = await _registry(request).register(
        _param(request, "subject"), await _body(request), normalize=_flag(request, "normalize")
    )
    return {"id": schema_id}


async def lookup(request: Request) -> Any:
    found = _registry(request).lookup(
        _param(request, "subject"),
        await _body(request),
        normalize=_flag(request, "normalize"),
        deleted=_flag(request, "deleted"),
    )
    return found.as_json()


async def delete_subject(request: Request) -> Any:
    return await _registry(request).delete_subject(
        _param(request, "subject"), permanent=_flag(request, "permanent")
    )


async def delete_version(request: Request) -> Any:
    return await _registry(request).delete_version(
        _param(request, "subject"), _param(request, "version"),
        permanent=_flag(request, "permanent"),
    )


# -- /compatibility -------------------------------------------------------------------


async def _compatibility(request: Request, version: str | None) -> Any:
    messages = _registry(request).test_compatibility(
        _param(request, "subject"),
        version,
        await _body(request),
        normalize=_flag(request, "normalize"),
    )
    body: dict[str, Any] = {"is_compatible": not messages}
    if _flag(request, "verbose"):
        body["messages"] = messages
    return body


async def compatibility_with_version(request: Request) -> Any:
    return await _compatibility(request, _param(request, "version"))


async def compatibility_with_subject(request: Request) -> Any:
    return await _compatibility(request, None)


# -- /config and /mode ----------------------------------------------------------------


def _subject(request: Request) -> str | None:
    """The subject of a /config or /mode route; None for the global one."""
    if "subject" not in request.path_params:
        return None
    return _param(request, "subject")


async def get_config(request: Request) -> Any:
    level = _registry(request).get_config(
        _subject(request), default_to_global=_flag(request, "defaultToGlobal")
    )
    return {"compatibilityLevel": level}


async def put_config(request: Request) -> Any:
    level = await _registry(request).set_config(_subject(request), await _body(request))
    return {"compatibility": level}


async def delete_config(request: Request) -> Any:
    return {"compatibilityLevel": await _registry(request).delete_config(_subject(request))}


async def get_mode(request: Request) -> Any:
    mode = _registry(request).get_mode(
        _subject(request), default_to_global=_flag(request, "defaultToGlobal")
    )
    return {"mode": mode}


async def put_mode(request: Request) -> Any:
    mode = await _registry(request).set_mode(
        _subject(request), await _body(request), force=_flag(request, "force")
    )
    return {"mode": mode}


async def delete_mode(request: Request) -> Any:
    return {"mode": await _registry(request).delete_mode(_param(request, "subject"))}


async def root(request: Request) -> Any:
    return {}


async def contexts(request: Request) -> Any:
    return ["."]


def _json(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        result = await handler(request)
        if isinstance(result, Response):
            return result
        return RegistryResponse(result)

    return endpoint


def _send(method: str, url: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body or None, method=method,
        headers={"Content-Type": content_type, "Accept": MEDIA_TYPE},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _write(handler: Handler) -> Handler:
    """A change: done here on the primary, else forwarded to it (as Confluent's
    registries forward), its answer passed back once this registry has read the store
    up to what the primary wrote. A primary that finds itself fenced (another was elected
    while it was paused) forwards the change too."""

    async def endpoint(request: Request) -> Any:
        election: PrimaryElection | None = request.app.state.election
        if election is None:
            return await handler(request)
        if election.is_primary:
            try:
                return await handler(request)
            except StoreFencedError:
                election.lost_writes()
        primary = await election.wait_for_primary(_registry(request).store.timeout)
        if primary is None:
            raise RegistryError(500, 50004, "Unknown primary: no registry is elected yet")
        if primary == election.url:
            return await handler(request)
        return await _forward(request, primary)

    return endpoint


async def _forward(request: Request, primary: str) -> Response:
    target = primary.rstrip("/") + request.url.path
    if request.url.query:
        target += "?" + request.url.query
    body: bytes | None = getattr(request.state, "body", None)
    if body is None:
        body = await request.body()
    content_type = request.headers.get("content-type", MEDIA_TYPE)
    try:
        status, content = await asyncio.to_thread(
            _send, request.method, target, body, content_type
        )
    except OSError as exc:
        raise RegistryError(
            500, 50003, f"Error while forwarding the request to the primary: {exc}"
        ) from None
    await _registry(request).store.catch_up()
    return Response(content, status_code=status, media_type=MEDIA_TYPE)


_ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/", root, ["GET"]),
    ("/contexts", contexts, ["GET"]),
    ("/schemas", all_schemas, ["GET"]),
    ("/schemas/types", schema_types, ["GET"]),
    ("/schemas/ids/{id}", schema_by_id, ["GET"]),
    ("/schemas/ids/{id}/schema", schema_text_by_id, ["GET"]),
    ("/schemas/ids/{id}/subjects", subjects_of_id, ["GET"]),
    ("/schemas/ids/{id}/versions", versions_of_id, ["GET"]),
    ("/subjects", list_subjects, ["GET"]),
    ("/subjects/{subject}", lookup, ["POST"]),
    ("/subjects/{subject}", _write(delete_subject), ["DELETE"]),
    ("/subjects/{subject}/versions", list_versions, ["GET"]),
    ("/subjects/{subject}/versions", _write(register), ["POST"]),
    ("/subjects/{subject}/versions/{version}", get_version, ["GET"]),
    ("/subjects/{subject}/versions/{version}", _write(delete_version), ["DELETE"]),
    ("/subjects/{subject}/versions/{version}/schema", get_version_schema, ["GET"]),
    ("/subjects/{subject}/versions/{version}/referencedby", referenced_by, ["GET"]),
    ("/compatibility/subjects/{subject}/versions", compatibility_with_subject, ["POST"]),
    (
        "/compatibility/subjects/{subject}/versions/{version}",
        compatibility_with_version,
        ["POST"],
    ),
    ("/config", get_config, ["GET"]),
    ("/config", _write(put_config), ["PUT"]),
    ("/config", _write(delete_config), ["DELETE"]),
    ("/config/{subject}", get_config, ["GET"]),
    ("/config/{subject}", _write(put_config), ["PUT"]),
    ("/config/{subject}", _write(delete_config), ["DELETE"]),
    ("/mode", get_mode, ["GET"]),
    ("/mode", _write(put_mode), ["PUT"]),
    ("/mode/{subject}", get_mode, ["GET"]),
    ("/mode/{subject}", _write(put_mode), ["PUT"]),
    ("/mode/{subject}", _write(delete_mode), ["DELETE"]),
]


class RawPath:
    """Routes match the path as the client sent it, still percent-encoded, and handlers
    decode each segment (`_param`). A subject may be any string, "/" included, and
    clients send it encoded (`/subjects/a%2Fb/versions`, as confluent-kafka's client
    quotes it); the server's decoded `path` would split it into two segments. The
    undecoded path is also what a forwarded write sends on to the primary."""

    # what stays as it is when the raw path is re-quoted: its escapes and reserved
    # characters (RFC 3986); anything else (a client's unencoded UTF-8) is encoded
    _SAFE = "/%:@!$&'()*+,;=~"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw: bytes | None = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            path = urllib.parse.quote(raw, safe=self._SAFE)
            if path != scope["path"]:
                scope = {**scope, "path": path}
        await self.app(scope, receive, send)


class IdLookups:
    """`GET /schemas/ids/{id}` answered before routing: the serializers' hot path (each
    new id a consumer meets is looked up), served without the router's walk over every
    route, the id looked up in the state on each request and answered with the bytes
    encoded once beside its schema (`SchemaVersion.id_answer`). Anything else, and an id
    not found, goes on to the routes."""

    _PREFIX = "/schemas/ids/"
    _CONTENT_TYPE = (b"content-type", MEDIA_TYPE.encode())

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope["query_string"]:
            path: str = scope["path"]
            if path.startswith(self._PREFIX) and path[len(self._PREFIX):].isdigit():
                registry: SchemaRegistry = scope["app"].state.registry
                found = registry.state.schema_by_id(int(path[len(self._PREFIX):]))
                if found is not None:
                    await self._answer(send, found.id_answer)
                    return
        await self.app(scope, receive, send)

    async def _answer(self, send: Send, body: bytes) -> None:
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"%d" % len(body)), self._CONTENT_TYPE],
        })
        await send({"type": "http.response.body", "body": body})


async def _registry_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RegistryError)
    return RegistryResponse(exc.body(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, exc.detail)
    return RegistryResponse(
        {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {phrase}"},
        status_code=exc.status_code,
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("the registry failed on %s %s", request.method, request.url.path)
    return RegistryResponse(
        {"error_code": 50001, "message": f"Error in the backend data store - {exc}"},
        status_code=500,
    )


def create_app(
    client_settings: Mapping[str, Any],
    *,
    topic: str = "_schemas",
    default_level: str = DEFAULT_LEVEL,
    replication_factor: int = 3,
    timeout_ms: int = 10_000,
    advertised_url: str | None = None,
    group_id: str = "schema-registry",
) -> Starlette:
    """The registry for the cluster `client_settings` names (`bootstrap.servers` and the
    security settings of the store's clients), keeping its schemas in `topic`. With
    `advertised_url` it joins the registries' group (`group_id`) and writes only when
    elected primary, forwarding writes to the primary otherwise; without, it writes."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store = KafkaStore(
            client_settings, topic, replication_factor=replication_factor, timeout_ms=timeout_ms
        )
        try:
            await store.start()
        except BaseException:
            await store.close()
            raise
        app.state.registry = SchemaRegistry(store, default_level)
        election = None
        if advertised_url is not None:
            election = PrimaryElection(
                client_settings, topic, advertised_url, group_id, on_primary=store.claim_writes
            )
        app.state.election = election
        try:
            if election is not None:
                await election.start()
            else:  # the only registry: it writes
                await store.claim_writes()
            yield
        finally:
            if election is not None:
                await election.close()
            await store.close()

    routes = [
        Route(path, _json(handler), methods=methods) for path, handler, methods in _ROUTES
    ]
    return Starlette(
        debug=False,
        routes=routes,
        middleware=[Middleware(RawPath), Middleware(IdLookups)],
        lifespan=lifespan,
        exception_handlers={
            RegistryError: _registry_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )
