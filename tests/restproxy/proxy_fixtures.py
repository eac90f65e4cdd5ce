"""Fixtures of the REST proxy's tests (imported by each test module): the proxy served by
uvicorn in a thread of the test process on a free loopback port, over a real broker
(with the schema registry beside it when a test asks), and an HTTP client for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus.restproxy import create_app

V2 = "application/vnd.kafka.v2+json"


def embedded(name: str) -> str:
    return f"application/vnd.kafka.{name}.v2+json"


ProxyServer = AsgiServer  # a REST proxy in this process


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
