"""`logbus get-offsets`: partitions' offsets by time, as Kafka's GetOffsetShell prints them.

    logbus get-offsets --bootstrap-server B [--topic REGEX] [--partitions 0,1]
                       [--time -1|-2|-3|latest|earliest|max-timestamp|MS]

One `topic:partition:offset` line per partition, sorted. `--topic` is a regular
expression matched against whole topic names (every topic when left out; internal ones
unless `--exclude-internal-topics`). `--time` -1 (latest) is the log end offset, -2
(earliest) the log start offset, -3 (max-timestamp) the offset of the record with the
largest timestamp, and a time in ms the first offset whose record is at least that
recent; a partition without such a record is left out, as Kafka's tool leaves it out.
"""

from __future__ import annotations

import argparse
import re
import sys

from logbus.cli.common import CommandError, add_bootstrap, client_settings, fail, run
from logbus.client.admin import Admin, AdminBatchError
from logbus.client.admin.types import OffsetSpec
from logbus.client.types import TopicPartition

_TIMES: dict[str, OffsetSpec] = {
    "-1": "latest",
    "latest": "latest",
    "-2": "earliest",
    "earliest": "earliest",
    "-3": "max_timestamp",
    "max-timestamp": "max_timestamp",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "get-offsets",
        help="print partitions' offsets (Kafka's GetOffsetShell)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap(parser)
    # Checked by the command, not argparse: a bad value exits with status 1, as
    # GetOffsetShell does.
    parser.add_argument("--topic", metavar="REGEX", help="topics to look at (default: all)")
    parser.add_argument(
        "--partitions",
        metavar="P[,P...]",
        help="comma-separated partition numbers (default: all)",
    )
    parser.add_argument(
        "--time",
        default="-1",
        metavar="-1|-2|-3|MS",
        help="-1/latest (default), -2/earliest, -3/max-timestamp or a time in ms",
    )
    parser.add_argument(
        "--exclude-internal-topics", action="store_true", help="leave out internal topics"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        topic = None if args.topic is None else _regex(args.topic)
        partitions = None if args.partitions is None else _partitions(args.partitions)
        spec = _time(args.time)
    except CommandError as exc:
        return fail(str(exc))
    return run(get_offsets(args.bootstrap_server, topic, partitions, spec,
                           exclude_internal=args.exclude_internal_topics,
                           settings=client_settings(args)))


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise CommandError(f"--topic: bad regular expression {text!r}: {exc}") from None


def _partitions(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise CommandError(
                f"--partitions: expected comma-separated partition numbers, got {text!r}"
            )
        out.add(int(part))
    return out


def _time(text: str) -> OffsetSpec:
    spec = _TIMES.get(text.strip().lower())
    if spec is not None:
        return spec
    try:
        value = int(text)
    except ValueError:
        raise CommandError(
            "--time: expected -1, -2, -3, latest, earliest, max-timestamp or a time in ms, "
            f"got {text!r}"
        ) from None
    if value < 0:
        raise CommandError(f"--time: a time in ms must not be negative, got {value}")
    return value


async def get_offsets(
    bootstrap: str,
    topic: re.Pattern[str] | None,
    partitions: set[int] | None,
    spec: OffsetSpec,
    *,
    exclude_internal: bool = False,
    settings: dict[str, str] | None = None,
) -> int:
    """Print `topic:partition:offset` for every partition the filters select."""
    async with Admin(
        settings or {}, bootstrap_servers=bootstrap, client_id="logbus-get-offsets"
    ) as admin:
        topics = await admin.describe_topics()
        wanted: list[TopicPartition] = []
        for name, info in sorted(topics.items()):
            if exclude_internal and info.is_internal:
                continue
            if topic is not None and not topic.fullmatch(name):
                continue
            wanted += [
                TopicPartition(name, p)
                for p in sorted(info.partitions)
                if partitions is None or p in partitions
            ]
        if not wanted:
            raise CommandError("Could not match any topic-partitions with the specified filters")
        try:
            found = await admin.list_offsets(dict.fromkeys(wanted, spec))
        except AdminBatchError as exc:
            found = dict(exc.results)
            for tp, error in exc.errors.items():
                print(
                    f"Skip getting offsets for topic-partition {tp.topic}-{tp.partition} "
                    f"due to error: {error}",
                    file=sys.stderr,
                )
    for tp in sorted(found):
        offset = found[tp].offset
        if offset >= 0:
            print(f"{tp.topic}:{tp.partition}:{offset}")
    return 0
