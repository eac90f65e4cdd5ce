"""What `logbus schema-registry start` and `logbus rest-proxy start` share: the `start`
action's arguments (a properties file of Confluent's names, `--override`,
`--bootstrap-server`, `--listeners`), reading them into properties, and serving the app
with uvicorn in the foreground."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

from logbus.cli.common import key_value
from logbus.common.properties import load_properties


def add_start(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    command: str,
    what: str,
    *,
    properties_file: str,
    bootstrap_help: str,
    port: int,
    run: Callable[[argparse.Namespace], int],
) -> None:
    """`logbus COMMAND start [PROPERTIES] [--override k=v]... [--bootstrap-server B]
    [--listeners URL]`."""
    parser = subparsers.add_parser(command, help=f"a {what} with Confluent's API")
    actions = parser.add_subparsers(dest="service_command", metavar="ACTION", required=True)
    start = actions.add_parser("start", help=f"start the {what} in the foreground")
    start.add_argument(
        "properties", nargs="?", default=None, metavar=properties_file,
        help="configuration file (Confluent's names)",
    )
    start.add_argument(
        "--override", action="append", default=[], type=key_value, metavar="KEY=VALUE",
        help="set a configuration property, over the file (repeatable)",
    )
    start.add_argument("--bootstrap-server", metavar="HOST:PORT", help=bootstrap_help)
    start.add_argument(
        "--listeners", metavar="URL", help=f"where to listen, e.g. http://127.0.0.1:{port}"
    )
    start.set_defaults(func=run)


def read_properties(args: argparse.Namespace, bootstrap_key: str) -> dict[str, str]:
    """The file's properties, then the overrides, then the two short options."""
    props = load_properties(args.properties) if args.properties else {}
    props.update(dict(args.override))
    if args.bootstrap_server:
        props[bootstrap_key] = args.bootstrap_server
    if args.listeners:
        props["listeners"] = args.listeners
    return props


def _http_protocol() -> Any:
    try:
        from logbus.cli.http_coalescing import CoalescingHttpToolsProtocol
    except ImportError:  # httptools is not installed: uvicorn's own choice
        return "auto"
    return CoalescingHttpToolsProtocol


def serve(app: Any, host: str, port: int, banner: str) -> int:
    """Serve `app` until interrupted; 1 with a message when the port cannot be bound."""
    # Imported here: the web stack is needed by these commands only.
    import uvicorn

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning",
        # uvloop and httptools (C event loop, C HTTP parser) when installed: the lookups
        # and produce requests are many and small, and parsing them in Python costs; with
        # httptools, one write per answer (http_coalescing)
        loop="auto", http=_http_protocol(), lifespan="on",
        # no line per request (the registry's id lookups are thousands a second)
        access_log=False,
    )
    print(f"{banner}: http://{host}:{port}/", flush=True)
    try:
        uvicorn.Server(config).run()
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"logbus: error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
