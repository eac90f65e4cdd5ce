"""`logbus rest-proxy start [kafka-rest.properties] [--override k=v]...`: the REST proxy
(logbus.restproxy) in the foreground, served by uvicorn.

The properties are Confluent REST Proxy's (`listeners`, `bootstrap.servers`,
`schema.registry.url`, `client.*`, `producer.*`, `consumer.*`); `--bootstrap-server` and
`--listeners` are short for the first two.
"""

from __future__ import annotations

import argparse
import logging
import sys

from logbus.cli.common import fail, key_value
from logbus.common.config_def import ConfigError
from logbus.common.properties import load_properties


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("rest-proxy", help="a REST proxy with Confluent's v2 API")
    actions = parser.add_subparsers(dest="proxy_command", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start the REST proxy in the foreground")
    start.add_argument(
        "properties", nargs="?", default=None, metavar="kafka-rest.properties",
        help="proxy configuration file (Confluent's names)",
    )
    start.add_argument(
        "--override", action="append", default=[], type=key_value, metavar="KEY=VALUE",
        help="set a configuration property, over the file (repeatable)",
    )
    start.add_argument(
        "--bootstrap-server", metavar="HOST:PORT", help="the cluster (bootstrap.servers)"
    )
    start.add_argument(
        "--listeners", metavar="URL", help="where to listen, e.g. http://127.0.0.1:8082"
    )
    start.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the web stack is needed by this command only.
    import uvicorn

    from logbus.restproxy import create_app
    from logbus.restproxy.config import RestProxyConfig

    try:
        props = load_properties(args.properties) if args.properties else {}
        props.update(dict(args.override))
        if args.bootstrap_server:
            props["bootstrap.servers"] = args.bootstrap_server
        if args.listeners:
            props["listeners"] = args.listeners
        config = RestProxyConfig.from_properties(props)
    except ConfigError as exc:
        return fail(str(exc))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    listener = config.listeners[0]
    app = create_app(
        config.client_settings,
        producer_settings=config.producer_settings,
        consumer_settings=config.consumer_settings,
        schema_registry_url=config.schema_registry_url,
        instance_timeout_ms=config.instance_timeout_ms,
        request_timeout_ms=config.request_timeout_ms,
    )
    uv_config = uvicorn.Config(
        app, host=listener.host, port=listener.port, log_level="warning",
        # uvloop and httptools (C event loop, C HTTP parser) when installed: the lookups
        # and produce requests are many and small, and parsing them in Python costs
        loop="auto", http="auto", lifespan="on",
    )
    print(
        f"logbus REST proxy for {config.bootstrap_servers}: "
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
