"""`logbus log-dirs`: the log dirs of brokers with the size of every partition replica
they hold, printed as Kafka's `kafka-log-dirs --describe` prints them (two progress
lines, then one line of JSON).

    logbus log-dirs --describe [--broker-list 0,1] [--topic-list a,b]

Every broker by default; `--topic-list` keeps only those topics' partitions.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from logbus.cli.common import CommandError, add_bootstrap, client_settings, run
from logbus.client.admin import Admin, LogDirDescription
from logbus.client.errors import KafkaError
from logbus.protocol import ErrorCode

# What kafka-log-dirs prints as a dir's "error": the Java exception's class name.
_JAVA_ERRORS = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
}


def _broker_list(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected broker ids separated by commas, got {text!r}"
        ) from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return ids


def _topic_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "log-dirs",
        help="describe brokers' log dirs and the size of each partition in them",
        description="Query brokers for their log dirs (DescribeLogDirs) and print, as JSON, "
        "each dir with the size, offset lag and future flag of every partition in it.",
    )
    parser.add_argument(
        "--describe", action="store_true", required=True, help="describe the log dirs"
    )
    parser.add_argument(
        "--broker-list",
        type=_broker_list,
        default=None,
        metavar="0,1",
        help="the brokers to query (default: every broker)",
    )
    parser.add_argument(
        "--topic-list",
        type=_topic_list,
        default=[],
        metavar="a,b",
        help="only these topics' partitions (default: every topic)",
    )
    add_bootstrap(parser)
    parser.set_defaults(func=lambda args: run(_describe(args)))


def _error(error: KafkaError | None) -> str | None:
    if error is None:
        return None
    return _JAVA_ERRORS.get(ErrorCode(error.code), error.name)


def log_dirs_json(
    found: dict[int, dict[str, LogDirDescription]], topics: list[str]
) -> dict[str, Any]:
    """kafka-log-dirs' JSON document for the described brokers, partitions of `topics`
    only (every topic when empty)."""
    wanted = set(topics)
    brokers = []
    for broker_id in sorted(found):
        dirs = []
        for path, described in found[broker_id].items():
            partitions = [
                {
                    "partition": f"{tp.topic}-{tp.partition}",
                    "size": info.size,
                    "offsetLag": info.offset_lag,
                    "isFuture": info.is_future,
                }
                for tp, info in sorted(described.replicas.items())
                if not wanted or tp.topic in wanted
            ]
            error = _error(described.error)
            dirs.append({"logDir": path, "error": error, "partitions": partitions})
        brokers.append({"broker": broker_id, "logDirs": dirs})
    return {"version": 1, "brokers": brokers}


async def _describe(args: argparse.Namespace) -> int:
    async with Admin(
        client_settings(args), bootstrap_servers=args.bootstrap_server, client_id="logbus-log-dirs"
    ) as admin:
        existing = [node.node_id for node in (await admin.describe_cluster()).nodes]
        brokers = existing if args.broker_list is None else args.broker_list
        missing = [b for b in brokers if b not in existing]
        if missing:
            raise CommandError(
                "The given brokers do not exist from --broker-list: "
                f"{','.join(map(str, missing))}. Current existent brokers: "
                f"{','.join(map(str, existing))}"
            )
        print("Querying brokers for log directories information")
        found = await admin.describe_log_dirs(brokers)
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(json.dumps(log_dirs_json(found, args.topic_list), separators=(",", ":")))
    return 0
