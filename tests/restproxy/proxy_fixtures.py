"""Fixtures of the REST proxy's tests (imported by each test module): the proxy served by
uvicorn in a thread of the test process on a free loopback port, over a real broker
(with the schema registry beside it when a test asks), and an HTTP client for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from brokers import free_port
from logbus.restproxy import create_app

V2 = "application/vnd.kafka.v2+json"


def embedded(name: str) -> str:
    return f"application/vnd.kafka.{name}.v2+json"


@dataclass
class ProxyServer:
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start_proxy(bootstrap: str, **options: Any) -> ProxyServer:
    port = free_port()
    app = create_app({"bootstrap.servers": bootstrap}, **options)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="rest-proxy", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the REST proxy did not start")
        time.sleep(0.05)
    return ProxyServer(server, thread, port)


@pytest.fixture(name="proxy_factory")
def proxy_factory_fixture() -> Iterator[Callable[..., ProxyServer]]:
    started: list[ProxyServer] = []

    def make(bootstrap: str, **options: Any) -> ProxyServer:
        started.append(start_proxy(bootstrap, **options))
        return started[-1]

    yield make
    for proxy in started:
        proxy.stop()
