"""`logbus console`: the web console (logbus.console) for a cluster, served by uvicorn.

logbus console --bootstrap-server HOST:PORT [--bind 127.0.0.1:8080] [--command-config FILE]
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from logbus.cli.common import CommandError, add_bootstrap, client_settings, fail, security_of

DEFAULT_BIND = "127.0.0.1:8080"


def bind_address(text: str) -> tuple[str, int]:
    """HOST:PORT to listen on, for argparse."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {port}")
    return host.strip("[]"), port


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "console", help="a web console for the cluster (topics, messages, groups, lag)"
    )
    add_bootstrap(parser)
    parser.add_argument(
        "--bind",
        type=bind_address,
        default=bind_address(DEFAULT_BIND),
        metavar="HOST:PORT",
        help=f"where the console listens (default: {DEFAULT_BIND}, this machine only)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the web stack is needed by this command only.
    import uvicorn

    from logbus.console.app import LOOPBACK_HOSTS, create_app

    settings: dict[str, Any] = {**client_settings(args), "bootstrap.servers": args.bootstrap_server}
    try:
        security_of(settings, "--command-config")
    except CommandError as exc:
        return fail(str(exc))
    host, port = args.bind
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    shown = f"[{host}]" if ":" in host else host
    print(f"logbus console for {args.bootstrap_server}: http://{shown}:{port}/", flush=True)
    config = uvicorn.Config(
        create_app(settings, allowed_hosts=LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else None),
        host=host, port=port, log_level="warning", loop="asyncio",
        lifespan="on",
    )
    try:
        uvicorn.Server(config).run()
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"logbus: error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
