"""Fixtures of the schema registry's tests (imported by each test module): the registry
served by uvicorn in a thread of the test process, on a free loopback port, over a real
broker; `registry_factory` starts as many as a test asks for (a restart is a second one
on the same broker) and stops them at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from brokers import free_port
from logbus.registry import create_app

JSON_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class RegistryServer:
    """One registry process's worth: its uvicorn server and the thread running it."""

    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start_registry(
    bootstrap: str, settings: dict[str, Any] | None = None, **options: Any
) -> RegistryServer:
    """A registry over `bootstrap` (with `settings`, the store clients' other settings)."""
    port = free_port()
    app = create_app(
        {"bootstrap.servers": bootstrap, **(settings or {})}, replication_factor=1, **options
    )
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="schema-registry", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the schema registry did not start")
        time.sleep(0.05)
    return RegistryServer(server, thread, port)


@pytest.fixture(name="registry_factory")
def registry_factory_fixture() -> Iterator[Callable[..., RegistryServer]]:
    started: list[RegistryServer] = []

    def make(
        bootstrap: str, settings: dict[str, Any] | None = None, **options: Any
    ) -> RegistryServer:
        started.append(start_registry(bootstrap, settings, **options))
        return started[-1]

    yield make
    for registry in started:
        registry.stop()


@pytest.fixture(name="registry")
def registry_fixture(
    broker: Any, registry_factory: Callable[..., RegistryServer]
) -> RegistryServer:
    """A registry over a fresh broker."""
    return registry_factory(broker.bootstrap)


@pytest.fixture(name="shared_registry", scope="module")
def shared_registry_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RegistryServer]:
    """One broker and one registry for a module whose tests each use subjects of their
    own and leave the global config and mode alone (a broker per test would make the
    module slow)."""
    from brokers import RunningBroker

    running = RunningBroker(tmp_path_factory.mktemp("registry")).start()
    registry = start_registry(running.bootstrap)
    yield registry
    registry.stop()
    running.stop()


@pytest.fixture(name="sr_clients")
def sr_clients_fixture() -> Iterator[Callable[[RegistryServer], Any]]:
    """`sr_clients(registry)`: a confluent-kafka SchemaRegistryClient for `registry`,
    closed at the end of the test (its HTTP connections with it)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    made: list[Any] = []

    def make(registry: RegistryServer) -> Any:
        made.append(SchemaRegistryClient({"url": registry.url}))
        return made[-1]

    yield make
    for client in made:
        client.close()
