"""`logbus leader-election`: preferred or unclean leader elections, as Kafka's
`kafka-leader-election` runs them (ElectLeaders on the controller) and with its output.

    logbus leader-election --bootstrap-server B --election-type PREFERRED|UNCLEAN
        (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)
        [--command-config F]

The JSON file names the partitions as kafka-leader-election's does:
`{"partitions": [{"topic": "foo", "partition": 1}, ...]}`. Partitions whose leader is
already the one the election would choose are listed as "Valid replica already elected";
any other failure is printed per partition and the command exits with status 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_settings,
    command_config_file,
    run,
)
from logbus.client.admin import Admin
from logbus.client.admin.leader_elections import election_type_of
from logbus.client.errors import KafkaError
from logbus.client.requests.leader_elections import ElectionType
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

# The Java exception class names Kafka's tool prints, where the error code's name does
# not make them.
_JAVA_NAMES = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "leader-election",
        help="elect preferred or unclean leaders for partitions",
        description="Elect a new leader for partitions (ElectLeaders on the controller): "
        "PREFERRED moves leadership to each partition's first assigned replica when it "
        "is in sync; UNCLEAN elects a leader for partitions without a live one.",
    )
    parser.add_argument(
        "--election-type",
        metavar="PREFERRED|UNCLEAN",
        help="the type of election (required)",
    )
    parser.add_argument(
        "--all-topic-partitions", action="store_true", help="elect for every partition"
    )
    parser.add_argument("--topic", help="the topic of the partition to elect for")
    parser.add_argument("--partition", help="the partition to elect for (with --topic)")
    parser.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='the partitions, as {"partitions": [{"topic": "foo", "partition": 1}]}',
    )
    add_bootstrap(parser)
    parser.add_argument(
        "--admin.config", dest="admin_config", metavar="FILE", help=argparse.SUPPRESS
    )
    parser.set_defaults(func=lambda args: run(_elect(args)))


def partitions_from_json(text: str) -> list[TopicPartition]:
    """kafka-leader-election's election data; CommandError when it is not."""
    try:
        data = json.loads(text)
    except ValueError:
        raise CommandError("Replica election data is empty or not JSON") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise CommandError('Replica election data is missing "partitions" field')
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise CommandError('Replica election data: "partitions" must be a list')
    out: list[TopicPartition] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise CommandError(
                f'Replica election data: {json.dumps(entry)} needs a "topic" string '
                'and a "partition" number'
            )
        out.append(TopicPartition(topic, partition))
    duplicates = sorted({f"{t}-{p}" for t, p in out if out.count(TopicPartition(t, p)) > 1})
    if duplicates:
        raise CommandError(
            f"Replica election data contains duplicate partitions: {','.join(duplicates)}"
        )
    return out


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    chosen = [
        name
        for name, given in (
            ("--all-topic-partitions", args.all_topic_partitions),
            ("--topic", args.topic is not None),
            ("--path-to-json-file", args.path_to_json_file is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise CommandError(
            "exactly one of --all-topic-partitions, --topic (with --partition) or "
            f"--path-to-json-file is required{' (got ' + ', '.join(chosen) + ')' if chosen else ''}"
        )
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition is allowed only with --topic")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("--partition is required with --topic")
        try:
            partition = int(args.partition)
        except ValueError:
            raise CommandError(f"--partition: not a partition id: {args.partition!r}") from None
        return [TopicPartition(args.topic, partition)]
    try:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandError(f"--path-to-json-file: {exc.strerror}: {exc.filename}") from None
    return partitions_from_json(text)


def java_exception(error: KafkaError) -> str:
    """How Kafka's tool shows a partition's error: the Java exception and its message."""
    try:
        code = ErrorCode(error.code)
        name = _JAVA_NAMES.get(code) or "".join(w.capitalize() for w in code.name.split("_"))
    except ValueError:
        name = "UnknownServerException"
    if not name.endswith("Exception"):
        name += "Exception"
    text = f"org.apache.kafka.common.errors.{name}"
    return f"{text}: {error.message}" if error.message else text


def report(
    election_type: ElectionType, results: dict[TopicPartition, KafkaError | None]
) -> tuple[list[str], int]:
    """kafka-leader-election's lines for the results, and how many partitions failed."""

    def names(tps: list[TopicPartition]) -> str:
        return ", ".join(f"{t}-{p}" for t, p in tps)

    kind = election_type.name
    done = [tp for tp, e in results.items() if e is None]
    noop = [
        tp for tp, e in results.items() if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED
    ]
    failed = {
        tp: e
        for tp, e in results.items()
        if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED
    }
    lines: list[str] = []
    if done:
        lines.append(
            f"Successfully completed leader election ({kind}) for partitions {names(done)}"
        )
    if noop:
        lines.append(f"Valid replica already elected for partitions {names(noop)}")
    for (topic, p), error in failed.items():
        lines.append(
            f"Error completing leader election ({kind}) for partition: "
            f"{topic}-{p}: {java_exception(error)}"
        )
    return lines, len(failed)


async def _elect(args: argparse.Namespace) -> int:
    if args.election_type is None:
        raise CommandError("--election-type is required: PREFERRED or UNCLEAN")
    try:
        election_type = election_type_of(args.election_type)
    except ValueError as exc:
        raise CommandError(f"--election-type: {exc}") from None
    partitions = _partitions(args)
    settings: dict[str, Any] = client_settings(args)
    if args.admin_config is not None:
        try:
            settings = {**command_config_file(args.admin_config), **settings}
        except argparse.ArgumentTypeError as exc:
            raise CommandError(f"--admin.config: {exc}") from None
    async with Admin(
        settings, bootstrap_servers=args.bootstrap_server, client_id="logbus-leader-election"
    ) as admin:
        results = await admin.elect_leaders(election_type, partitions)
    lines, failed = report(election_type, dict(sorted(results.items())))
    for line in lines:
        print(line)
    if failed:
        raise CommandError(f"{failed} replica(s) could not be elected")
    return 0
