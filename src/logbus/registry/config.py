"""The registry's settings, by Confluent Schema Registry's names (a
schema-registry.properties file works as it is): `listeners`,
`kafkastore.bootstrap.servers`, `kafkastore.topic`, `kafkastore.topic.replication.factor`,
`kafkastore.timeout.ms`, `schema.compatibility.level`, `host.name` and
`schema.registry.group.id` (how the other registries reach this one, and their group),
and the store clients' security
settings as `kafkastore.security.protocol`, `kafkastore.ssl.*`, `kafkastore.sasl.*`."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from logbus.client.admin.config import ADMIN_CONFIG
from logbus.client.consumer.config import CONSUMER_CONFIG
from logbus.client.producer.config import PRODUCER_CONFIG
from logbus.common.config_def import ConfigError
from logbus.registry.compatibility import DEFAULT_LEVEL, LEVELS

log = logging.getLogger(__name__)

DEFAULT_LISTENER = "http://0.0.0.0:8081"
_STORE_PREFIX = "kafkastore."
# kafkastore.* settings of the registry itself, not of its clients
_STORE_OWN = {"bootstrap.servers", "topic", "topic.replication.factor", "timeout.ms"}


@dataclass(frozen=True)
class Listener:
    host: str
    port: int


@dataclass(frozen=True)
class RegistryConfig:
    listeners: list[Listener]
    bootstrap_servers: str
    topic: str = "_schemas"
    replication_factor: int = 3
    timeout_ms: int = 10_000
    compatibility_level: str = DEFAULT_LEVEL
    client_settings: dict[str, Any] = field(default_factory=dict)
    # the URL the other registries forward writes to (host.name and the first listener)
    advertised_url: str = ""
    group_id: str = "schema-registry"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RegistryConfig:
        bootstrap = props.get("kafkastore.bootstrap.servers", "").strip()
        if not bootstrap:
            raise ConfigError("kafkastore.bootstrap.servers is required")
        level = props.get("schema.compatibility.level", DEFAULT_LEVEL).strip().upper()
        if level not in LEVELS:
            raise ConfigError(
                f"schema.compatibility.level: {level!r} is not one of {', '.join(LEVELS)}"
            )
        clients = known_to(
            STORE_CLIENTS,
            {
                name.removeprefix(_STORE_PREFIX): value
                for name, value in props.items()
                if name.startswith(_STORE_PREFIX)
                and name.removeprefix(_STORE_PREFIX) not in _STORE_OWN
            },
            _STORE_PREFIX,
        )
        listeners = [parse_listener(item) for item in _items(
            props.get("listeners", DEFAULT_LISTENER)
        )]
        host = props.get("host.name", "").strip() or listeners[0].host
        if host in ("0.0.0.0", "::", ""):
            host = socket.getfqdn()
        return cls(
            listeners=listeners,
            advertised_url=f"http://{host}:{listeners[0].port}",
            group_id=props.get("schema.registry.group.id", "schema-registry"),
            bootstrap_servers=",".join(_host_port(item) for item in _items(bootstrap)),
            topic=props.get("kafkastore.topic", "_schemas").strip() or "_schemas",
            replication_factor=_int(props, "kafkastore.topic.replication.factor", 3),
            timeout_ms=_int(props, "kafkastore.timeout.ms", 10_000),
            compatibility_level=level,
            client_settings={**clients, "bootstrap.servers": ",".join(
                _host_port(item) for item in _items(bootstrap)
            )},
        )


# what every client of the store (admin, producer, consumer) takes: the connection and
# security settings
STORE_CLIENTS = (
    ADMIN_CONFIG.settings.keys() & PRODUCER_CONFIG.settings.keys() & CONSUMER_CONFIG.settings.keys()
)


def known_to(names: Set[str], settings: Mapping[str, str], prefix: str) -> dict[str, str]:
    """The settings a client takes; the others (Confluent's settings of their Java
    clients or services that logbus's clients do not have) are logged and left out."""
    unknown = sorted(set(settings) - names)
    if unknown:
        log.warning("ignoring %s", ", ".join(prefix + name for name in unknown))
    return {name: value for name, value in settings.items() if name in names}


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _host_port(item: str) -> str:
    """HOST:PORT of a bootstrap server given as HOST:PORT or PROTOCOL://HOST:PORT."""
    return item.split("://", 1)[-1]


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {props[name]!r}") from None


def parse_listener(text: str) -> Listener:
    """A listener URL, http://HOST:PORT (https is not served)."""
    url = urlsplit(text)
    if url.scheme != "http" or url.port is None or url.hostname is None:
        raise ConfigError(f"listeners: expected http://HOST:PORT, got {text!r}")
    return Listener(url.hostname, url.port)
