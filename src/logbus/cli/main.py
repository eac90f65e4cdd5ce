"""`logbus`: run a broker, manage topics, produce and consume from the command line.

logbus server start [server.properties] [--override key=value]...
logbus cluster up [--brokers N] [--zookeeper HOST:PORT/CHROOT] ...
logbus topics {create,list,describe,alter,delete} ...
logbus topics --bootstrap-server B {--create,--list,--describe,--alter,--delete} [--topic T] ...
logbus produce TOPIC [options] < lines
logbus consume TOPIC [--group GROUP] [options]
logbus groups {list,describe,delete,reset-offsets,delete-offsets} ...
logbus groups {--list,--describe,--delete,--reset-offsets,--delete-offsets} [--group G] ...
logbus share-groups {--list,--describe,--delete,--reset-offsets} [--group G] ...
logbus configs {describe,alter} ...
logbus configs --entity-type users|clients ... {--describe,--alter}
logbus delete-records --topic T --partition P --before OFFSET
logbus transactions {list,describe,describe-producers,abort} ...
logbus dump-log FILE... [--deep-iteration] [--print-data-log] ...
logbus perf {produce,consume,end-to-end-latency} ...
logbus log-dirs --describe [--broker-list 0,1] [--topic-list a,b]
logbus leader-election --election-type PREFERRED|UNCLEAN (--all-topic-partitions | --topic T ...)
logbus reassign-partitions (--generate | --execute | --verify | --cancel | --list) ...
logbus get-offsets [--topic REGEX] [--partitions 0,1] [--time -1|-2|-3|MS]
logbus mirror --consumer.config F --producer.config F (--include REGEX | --whitelist REGEX) ...
logbus acls {--add,--remove,--list} [--allow-principal P] [--operation O] [--topic T] ...
logbus console [--bootstrap-server HOST:PORT] [--bind 127.0.0.1:8080] [--users-file F] [--read-only]
logbus metadata-quorum --bootstrap-controller B describe {--status,--replication}
logbus storage {random-uuid,format -t ID -c FILE [--ignore-formatted],info -c FILE}
logbus schema-registry start [schema-registry.properties] [--override k=v] [--bootstrap-server B]
logbus rest-proxy start [kafka-rest.properties] [--override k=v] [--bootstrap-server B]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from logbus import __version__
from logbus.cli import tool_syntax
from logbus.cli.common import fail

# Each command word and the module under logbus.cli that registers and runs it. A command
# imports only its own module (all of them only for `logbus --help` or a mistyped word):
# the modules pull in the admin client, the console's web stack, Spark's helpers, ..., and
# every process paid for all of them, the broker (`server start`) and each short command of
# a script included.
COMMANDS: dict[str, str] = {
    "cluster": "cluster",
    "topics": "topics",
    "produce": "produce",
    "consume": "consume",
    "groups": "groups",
    "share-groups": "share_groups",
    "configs": "configs",
    "delete-records": "delete_records",
    "dump-log": "dump_log",
    "transactions": "transactions",
    "perf": "perf",
    "get-offsets": "get_offsets",
    "log-dirs": "log_dirs",
    "leader-election": "leader_election",
    "mirror": "mirror",
    "reassign-partitions": "reassign_partitions",
    "acls": "acls",
    "console": "console",
    "storage": "storage",
    "metadata-quorum": "metadata_quorum",
    "schema-registry": "schema_registry",
    "rest-proxy": "rest_proxy",
}


def command_module(command: str) -> Any:
    return importlib.import_module(f"logbus.cli.{COMMANDS[command]}")


def _run_server(args: argparse.Namespace) -> int:
    # Imported only when asked for: the broker pulls in far more than the client commands.
    server = importlib.import_module("logbus.cli.server")
    return int(server.run(args))


def _register_server(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    server = subparsers.add_parser("server", help="run a broker")
    actions = server.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start a broker in the foreground")
    start.add_argument(
        "properties",
        nargs="?",
        default=None,
        metavar="server.properties",
        help="broker configuration file (Kafka's format)",
    )
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a configuration property, over the file (repeatable)",
    )
    start.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="broker log level (default: INFO)",
    )
    start.set_defaults(func=_run_server)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command`'s alone when it is one (`server`
    included)."""
    parser = argparse.ArgumentParser(
        prog="logbus",
        description="A distributed commit log that speaks the Apache Kafka protocol.",
    )
    parser.add_argument("--version", action="version", version=f"logbus {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _register_server(subparsers)
    if command in COMMANDS:
        command_module(command).register(subparsers)
    elif command != "server":
        for word in COMMANDS:
            command_module(word).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv else None
    parser = build_parser(command)
    module = command_module(command) if command in COMMANDS else None
    try:
        words, kafka_style = tool_syntax.translate(
            argv, [module.SYNTAX] if module is not None and hasattr(module, "SYNTAX") else []
        )
    except tool_syntax.ToolSyntaxError as exc:
        return fail(str(exc))
    try:
        args = parser.parse_args(words)
        status: int = args.func(args)
    except SystemExit as exc:
        if kafka_style and exc.code == 2:
            return 1  # a usage error: Kafka's tools exit with status 1
        raise
    return status


if __name__ == "__main__":
    sys.exit(main())
