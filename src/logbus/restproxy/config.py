"""The proxy's settings, by Confluent REST Proxy's names (a kafka-rest.properties file
works as it is): `listeners`, `bootstrap.servers`, `schema.registry.url`,
`consumer.instance.timeout.ms`, `consumer.request.timeout.ms`,
`api.v3.produce.batch.maximum.entries`, and client settings passed
through: `client.*` to every client, `producer.*` to the producer, `consumer.*` to the
consumer instances (the security ones, `security.protocol`, `ssl.*`, `sasl.*`, also
unprefixed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbus.client.consumer.config import CONSUMER_CONFIG
from logbus.client.producer.config import PRODUCER_CONFIG
from logbus.common.config_def import ConfigError
from logbus.registry.config import STORE_CLIENTS, Listener, known_to, parse_listener

DEFAULT_LISTENER = "http://0.0.0.0:8082"
_SECURITY_PREFIXES = ("security.protocol", "ssl.", "sasl.")
_OWN_CONSUMER = {"consumer.instance.timeout.ms", "consumer.request.timeout.ms"}


@dataclass(frozen=True)
class RestProxyConfig:
    listeners: list[Listener]
    bootstrap_servers: str
    schema_registry_url: str | None = None
    instance_timeout_ms: int = 300_000
    request_timeout_ms: int = 1000
    produce_batch_max_entries: int = 10
    client_settings: dict[str, Any] = field(default_factory=dict)
    producer_settings: dict[str, Any] = field(default_factory=dict)
    consumer_settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RestProxyConfig:
        bootstrap = ",".join(
            item.strip().split("://", 1)[-1]
            for item in props.get("bootstrap.servers", "").split(",")
            if item.strip()
        )
        if not bootstrap:
            raise ConfigError("bootstrap.servers is required")
        client = {k: v for k, v in props.items() if k.startswith(_SECURITY_PREFIXES)}
        client.update(_prefixed(props, "client."))
        client = known_to(STORE_CLIENTS, client, "client.")
        return cls(
            listeners=[
                parse_listener(item.strip())
                for item in props.get("listeners", DEFAULT_LISTENER).split(",")
                if item.strip()
            ],
            bootstrap_servers=bootstrap,
            schema_registry_url=props.get("schema.registry.url") or None,
            instance_timeout_ms=_int(props, "consumer.instance.timeout.ms", 300_000),
            request_timeout_ms=_int(props, "consumer.request.timeout.ms", 1000),
            produce_batch_max_entries=_int(props, "api.v3.produce.batch.maximum.entries", 10),
            client_settings={**client, "bootstrap.servers": bootstrap},
            producer_settings=known_to(
                PRODUCER_CONFIG.settings.keys(), _prefixed(props, "producer."), "producer."
            ),
            consumer_settings=known_to(
                CONSUMER_CONFIG.settings.keys(),
                {
                    k: v for k, v in _prefixed(props, "consumer.").items()
                    if f"consumer.{k}" not in _OWN_CONSUMER
                },
                "consumer.",
            ),
        )


def _prefixed(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {props[name]!r}") from None
