"""Fixtures of the REST proxy's tests (imported by each test module): the proxy served by
uvicorn in a thread of the test process on a free loopback port, over a real broker
(with the schema registry beside it when a test asks), and an HTTP client for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus import Admin
from logbus.client.admin import NewTopic
from logbus.restproxy import create_app

V2 = "application/vnd.kafka.v2+json"


def embedded(name: str) -> str:
    return f"application/vnd.kafka.{name}.v2+json"


ProxyServer = AsgiServer  # a REST proxy in this process


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def error_of(response: httpx.Response) -> tuple[int, int]:
    """The (status, error_code) of a Confluent error answer, whose message is not empty."""
    body = response.json()
    assert isinstance(body["message"], str) and body["message"], body
    return response.status_code, body["error_code"]


def start_proxy(bootstrap: str, **options: Any) -> ProxyServer:
    app = create_app({"bootstrap.servers": bootstrap}, **options)
    return serve_in_thread(app, "REST proxy")


@pytest.fixture(name="proxy_factory")
def proxy_factory_fixture() -> Iterator[Callable[..., ProxyServer]]:
    started: list[ProxyServer] = []

    def make(bootstrap: str, **options: Any) -> ProxyServer:
        started.append(start_proxy(bootstrap, **options))
        return started[-1]

    yield make
    for proxy in started:
        proxy.stop()
