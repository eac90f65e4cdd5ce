"""`logbus rest-proxy start [kafka-rest.properties] [--override k=v]...`: the REST proxy
(logbus.restproxy) in the foreground, served by uvicorn.

The properties are Confluent REST Proxy's (`listeners`, `bootstrap.servers`,
`schema.registry.url`, `client.*`, `producer.*`, `consumer.*`); `--bootstrap-server` and
`--listeners` are short for the first two.
"""

from __future__ import annotations

import argparse

from logbus.cli.common import fail
from logbus.cli.http_service import add_start, read_properties, serve
from logbus.common.config_def import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_start(
        subparsers,
        "rest-proxy",
        "REST proxy",
        properties_file="kafka-rest.properties",
        bootstrap_help="the cluster (bootstrap.servers)",
        port=8082,
        run=run,
    )


def run(args: argparse.Namespace) -> int:
    from logbus.restproxy import create_app
    from logbus.restproxy.config import RestProxyConfig

    try:
        config = RestProxyConfig.from_properties(read_properties(args, "bootstrap.servers"))
    except ConfigError as exc:
        return fail(str(exc))
    listener = config.listeners[0]
    app = create_app(
        config.client_settings,
        producer_settings=config.producer_settings,
        consumer_settings=config.consumer_settings,
        schema_registry_url=config.schema_registry_url,
        instance_timeout_ms=config.instance_timeout_ms,
        request_timeout_ms=config.request_timeout_ms,
        produce_batch_max_entries=config.produce_batch_max_entries,
    )
    banner = f"logbus REST proxy for {config.bootstrap_servers}"
    return serve(app, listener.host, listener.port, banner)
