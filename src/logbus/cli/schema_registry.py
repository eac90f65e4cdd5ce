"""`logbus schema-registry start [schema-registry.properties] [--override k=v]...`: the
schema registry (logbus.registry) in the foreground, served by uvicorn.

The properties are Confluent Schema Registry's (`listeners`,
`kafkastore.bootstrap.servers`, `kafkastore.topic`, `schema.compatibility.level`, ...);
`--bootstrap-server` and `--listeners` are short for the first two.
"""

from __future__ import annotations

import argparse

from logbus.cli.common import fail
from logbus.cli.http_service import add_start, read_properties, serve
from logbus.common.config_def import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_start(
        subparsers,
        "schema-registry",
        "schema registry",
        properties_file="schema-registry.properties",
        bootstrap_help="the cluster keeping the schemas (kafkastore.bootstrap.servers)",
        port=8081,
        run=run,
    )


def run(args: argparse.Namespace) -> int:
    from logbus.registry import create_app
    from logbus.registry.config import RegistryConfig

    try:
        props = read_properties(args, "kafkastore.bootstrap.servers")
        config = RegistryConfig.from_properties(props)
    except ConfigError as exc:
        return fail(str(exc))
    listener = config.listeners[0]
    app = create_app(
        config.client_settings,
        topic=config.topic,
        default_level=config.compatibility_level,
        replication_factor=config.replication_factor,
        timeout_ms=config.timeout_ms,
        advertised_url=config.advertised_url,
        group_id=config.group_id,
    )
    banner = f"logbus schema registry for {config.bootstrap_servers}"
    return serve(app, listener.host, listener.port, banner)
