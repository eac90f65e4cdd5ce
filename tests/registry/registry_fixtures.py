"""Fixtures of the schema registry's tests (imported by each test module): the registry
served by uvicorn (with the CLI's one-write-per-answer protocol) in a thread of the test
process, on a free loopback port, over a real broker; `registry_factory` starts as many
as a test asks for (a restart is a second one on the same broker) and stops them at the
end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus.cli.http_coalescing import CoalescingHttpToolsProtocol
from logbus.registry import create_app

JSON_TYPE = "application/vnd.schemaregistry.v1+json"


RegistryServer = AsgiServer  # a registry in this process


def start_registry(
    bootstrap: str, settings: dict[str, Any] | None = None, **options: Any
) -> RegistryServer:
    """A registry over `bootstrap` (with `settings`, the store clients' other settings)."""
    app = create_app(
        {"bootstrap.servers": bootstrap, **(settings or {})}, replication_factor=1, **options
    )
    # served as `logbus schema-registry start` serves it: one write per answer
    return serve_in_thread(app, "schema registry", http=CoalescingHttpToolsProtocol)


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
