"""`logbus schema-registry start [schema-registry.properties] [--override k=v]...`: the
schema registry (logbus.registry) in the foreground, served by uvicorn.

The properties are Confluent Schema Registry's (`listeners`,
`kafkastore.bootstrap.servers`, `kafkastore.topic`, `schema.compatibility.level`, ...);
`--bootstrap-server` and `--listeners` are short for the first two.
"""

from __future__ import annotations

import argparse
import logging
import sys

from logbus.cli.common import fail, key_value
from logbus.common.config_def import ConfigError
from logbus.common.properties import load_properties


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "schema-registry", help="a schema registry with Confluent's REST API"
    )
    actions = parser.add_subparsers(dest="registry_command", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start the schema registry in the foreground")
    start.add_argument(
        "properties", nargs="?", default=None, metavar="schema-registry.properties",
        help="registry configuration file (Confluent's names)",
    )
    start.add_argument(
        "--override", action="append", default=[], type=key_value, metavar="KEY=VALUE",
        help="set a configuration property, over the file (repeatable)",
    )
    start.add_argument(
        "--bootstrap-server", metavar="HOST:PORT",
        help="the cluster keeping the schemas (kafkastore.bootstrap.servers)",
    )
    start.add_argument(
        "--listeners", metavar="URL", help="where to listen, e.g. http://127.0.0.1:8081"
    )
    start.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the web stack is needed by this command only.
    import uvicorn

    from logbus.registry import create_app
    from logbus.registry.config import RegistryConfig

    try:
        props = load_properties(args.properties) if args.properties else {}
        props.update(dict(args.override))
        if args.bootstrap_server:
            props["kafkastore.bootstrap.servers"] = args.bootstrap_server
        if args.listeners:
            props["listeners"] = args.listeners
        config = RegistryConfig.from_properties(props)
    except ConfigError as exc:
        return fail(str(exc))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
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
    uv_config = uvicorn.Config(
        app, host=listener.host, port=listener.port, log_level="warning",
        # uvloop and httptools (C event loop, C HTTP parser) when installed: the lookups
        # and produce requests are many and small, and parsing them in Python costs
        loop="auto", http="auto", lifespan="on",
    )
    print(
        f"logbus schema registry for {config.bootstrap_servers}: "
        f"http://{listener.host}:{listener.port}/",
        flush=True,
    )
    try:
        uvicorn.Server(uv_config).run()
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"logbus: error: cannot listen on {listener.host}:{listener.port}: {exc}",
              file=sys.stderr)
        return 1
    return 0
