"""The REST proxy's HTTP API: Confluent REST Proxy's v2 resources (produce in the
embedded formats, consumer instances, topics, partitions and brokers metadata) and its v3
resources (`v3.ROUTES`) as a Starlette application, with Confluent's
`{"error_code", "message"}` error bodies (in each API's media type).

The entry point is `create_app`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.admin import Admin, AdminBatchError, ConfigResource, ResourceType
from logbus.client.errors import KafkaError
from logbus.client.metadata import PartitionInfo, TopicInfo
from logbus.client.producer import Producer
from logbus.restproxy import consumer_routes, errors, v3
from logbus.restproxy.consumers import ConsumerManager
from logbus.restproxy.errors import ProxyError
from logbus.restproxy.formats import embedded_format
from logbus.restproxy.produce import produce
from logbus.restproxy.schemas import SchemaRegistryClient
from logbus.restproxy.v3.resources import V3Response, v3_endpoint
from logbus.restproxy.web import V2Response, json_endpoint, read_json

log = logging.getLogger(__name__)

# -- metadata -----------------------------------------------------------------------


async def _admin(request: Request) -> Admin:
    admin: Admin = request.app.state.admin
    return admin


async def topic_info(request: Request, topic: str) -> TopicInfo:
    admin = await _admin(request)
    try:
        found = await admin.describe_topics([topic])
    except AdminBatchError:
        raise errors.topic_not_found(topic) from None
    except KafkaError as exc:
        raise errors.kafka_error(str(exc)) from None
    return found[topic]


# How long produce requests reuse a topic's partitions before asking again: a request of
# a hundred records should not pay a metadata round trip of its own.
TOPIC_CACHE_SECONDS = 5.0


async def cached_topic_info(request: Request, topic: str) -> TopicInfo:
    cache: dict[str, tuple[float, TopicInfo]] = request.app.state.topic_cache
    now = time.monotonic()
    found = cache.get(topic)
    if found is not None and now - found[0] < TOPIC_CACHE_SECONDS:
        return found[1]
    info = await topic_info(request, topic)
    cache[topic] = (now, info)
    return info


def partition_json(info: PartitionInfo) -> dict[str, Any]:
    return {
        "partition": info.partition,
        "leader": info.leader,
        "replicas": [
            {"broker": b, "leader": b == info.leader, "in_sync": b in info.isr}
            for b in info.replicas
        ],
    }


async def list_topics(request: Request) -> Any:
    return await (await _admin(request)).list_topics()


async def get_topic(request: Request) -> Any:
    topic = request.path_params["topic"]
    info = await topic_info(request, topic)
    admin = await _admin(request)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = (await admin.describe_configs([resource]))[resource]
    return {
        "name": topic,
        "configs": {name: entry.value for name, entry in sorted(configs.items())},
        "partitions": [partition_json(info.partitions[p]) for p in sorted(info.partitions)],
    }


async def list_partitions(request: Request) -> Any:
    info = await topic_info(request, request.path_params["topic"])
    return [partition_json(info.partitions[p]) for p in sorted(info.partitions)]


def _partition_param(request: Request, info: TopicInfo) -> int:
    text = request.path_params["partition"]
    if not text.lstrip("-").isdigit() or int(text) not in info.partitions:
        raise errors.partition_not_found(info.name, text)
    return int(text)


async def get_partition(request: Request) -> Any:
    info = await topic_info(request, request.path_params["topic"])
    return partition_json(info.partitions[_partition_param(request, info)])


async def list_brokers(request: Request) -> Any:
    cluster = await (await _admin(request)).describe_cluster()
    return {"brokers": sorted(node.node_id for node in cluster.nodes)}


# -- produce --------------------------------------------------------------------------


async def _produce(request: Request, with_partition: bool) -> Any:
    embedded = embedded_format(request.headers.get("content-type"))
    if embedded is None:
        raise ProxyError(415, 415, "HTTP 415 Unsupported Media Type")
    body = await read_json(request)
    topic = request.path_params["topic"]
    info = await cached_topic_info(request, topic)
    partition = _partition_param(request, info) if with_partition else None
    producer: Producer = request.app.state.producer
    return await produce(
        producer, request.app.state.schemas, topic, len(info.partitions), embedded, body,
        partition,
    )


async def produce_to_topic(request: Request) -> Any:
    return await _produce(request, with_partition=False)


async def produce_to_partition(request: Request) -> Any:
    return await _produce(request, with_partition=True)


async def root(request: Request) -> Any:
    return {}


_ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/", root, ["GET"]),
    ("/topics", list_topics, ["GET"]),
    ("/topics/{topic}", get_topic, ["GET"]),
    ("/topics/{topic}", produce_to_topic, ["POST"]),
    ("/topics/{topic}/partitions", list_partitions, ["GET"]),
    ("/topics/{topic}/partitions/{partition}", get_partition, ["GET"]),
    ("/topics/{topic}/partitions/{partition}", produce_to_partition, ["POST"]),
    ("/brokers", list_brokers, ["GET"]),
    *consumer_routes.ROUTES,
]


def _error_response(request: Request, body: dict[str, Any], status: int) -> Response:
    """An error body, in the media type of the API the request was for."""
    if request.url.path.startswith("/v3/"):
        return V3Response(body, status_code=status)
    return V2Response(body, status_code=status)


async def _proxy_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProxyError)
    return _error_response(request, exc.body(), exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, exc.detail)
    return _error_response(
        request,
        {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {phrase}"},
        exc.status_code,
    )


async def _kafka_error(request: Request, exc: Exception) -> Response:
    return _error_response(request, {"error_code": 50002, "message": f"Kafka error: {exc}"}, 500)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("the proxy failed on %s %s", request.method, request.url.path)
    return _error_response(
        request, {"error_code": 500, "message": f"Internal server error: {exc}"}, 500
    )


def create_app(
    client_settings: Mapping[str, Any],
    *,
    producer_settings: Mapping[str, Any] | None = None,
    consumer_settings: Mapping[str, Any] | None = None,
    schema_registry_url: str | None = None,
    instance_timeout_ms: int = 300_000,
    request_timeout_ms: int = 1000,
    produce_batch_max_entries: int = 10,
) -> Starlette:
    """The proxy for the cluster `client_settings` names (`bootstrap.servers` and the
    security settings every client uses); `producer_settings` and `consumer_settings`
    are added to its producer's and its consumer instances'."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = Admin({**client_settings, "client.id": "logbus-rest-proxy"})
        producer = Producer(
            # a request's records are a batch already: no lingering for more
            {"linger.ms": 0, "batch.size": 1_048_576, "client.id": "logbus-rest-proxy",
             **client_settings,
             **(producer_settings or {})}
        )
        consumers = ConsumerManager(
            {**client_settings, **(consumer_settings or {})},
            instance_timeout_ms=instance_timeout_ms,
            request_timeout_ms=request_timeout_ms,
        )
        try:
            await admin.start()
            await producer.start()
            consumers.start()
            app.state.admin = admin
            app.state.producer = producer
            app.state.consumers = consumers
            app.state.schemas = SchemaRegistryClient(schema_registry_url)
            app.state.topic_cache = {}
            app.state.produce_batch_max_entries = produce_batch_max_entries
            yield
        finally:
            await consumers.close()
            await producer.close()
            await admin.close()

    routes = [
        *(Route(path, json_endpoint(handler), methods=methods) for path, handler, methods
          in _ROUTES),
        *(Route(path, v3_endpoint(handler), methods=methods) for path, handler, methods
          in v3.ROUTES),
    ]
    return Starlette(
        debug=False,
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            ProxyError: _proxy_error,
            HTTPException: _http_error,
            KafkaError: _kafka_error,
            Exception: _internal_error,
        },
    )
