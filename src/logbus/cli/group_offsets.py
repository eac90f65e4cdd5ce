"""`logbus groups reset-offsets` and `delete-offsets`: change or forget a consumer group's
committed offsets, as kafka-consumer-groups' `--reset-offsets` and `--delete-offsets`, and
what every `logbus groups` action shares (its admin client, group arguments, tables)."""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from logbus.cli.common import CommandError, add_bootstrap, admin_command, fail
from logbus.client.admin import Admin, AdminBatchError, OffsetSpec
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]
_INACTIVE = ("Empty", "Dead")
# java.time.Duration's text form: PnDTnHnMn.nS, each part optional, an optional sign.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?"
    r"(?:(?P<seconds>[-+]?\d+(?:[.,]\d{0,9})?)S)?)?",
    re.IGNORECASE,
)
# What kafka-consumer-groups prints for the errors of --delete-offsets (Java's messages).
_DELETE_ERRORS: dict[int, str] = {
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the "
    "consumer group is actively subscribed to it.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


# --- shared by every `logbus groups` action -----------------------------------------------


def command(
    action: Action,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A `logbus groups` subcommand's function (see `admin_command`)."""
    return admin_command(action, "logbus-consumer-groups", check, parser)


def add_groups(parser: argparse.ArgumentParser, what: str) -> None:
    """Groups named as arguments (`logbus groups describe G`) or with kafka-consumer-groups'
    repeatable `--group G`."""
    parser.add_argument("group", nargs="*", help=what)
    parser.add_argument(
        "--group",
        dest="group_option",
        action="append",
        default=[],
        metavar="GROUP",
        help=f"{what} (repeatable)",
    )


def group_ids(args: argparse.Namespace) -> list[str]:
    """The groups named, in order, each once."""
    return list(dict.fromkeys([*args.group, *args.group_option]))


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns left-aligned to their widest cell, separated by two spaces."""
    lines = [list(header), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


async def log_offsets(
    admin: Admin, specs: Mapping[TopicPartition, OffsetSpec]
) -> dict[TopicPartition, int]:
    """ListOffsets of each partition; a partition whose leader cannot answer is left out."""
    try:
        found = await admin.list_offsets(specs)
    except AdminBatchError as exc:
        found = exc.results
    return {tp: listed.offset for tp, listed in found.items()}


def topic_spec(text: str) -> tuple[str, list[int] | None]:
    """ "topic" or "topic:0,2" (Kafka's --topic syntax)."""
    topic, sep, listed = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., got {text!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in listed.split(",")})
    except ValueError:
        partitions = []
    if not partitions or partitions[0] < 0:
        raise argparse.ArgumentTypeError(f"expected partition numbers after ':', got {text!r}")
    return topic, partitions


def datetime_ms(text: str) -> int:
    """Kafka's reset format `yyyy-MM-ddTHH:mm:SS.sss`, optionally with a UTC offset; without
    one it is local time. Returns epoch milliseconds."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +HH:MM), got {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)  # naive datetimes count as local time


def duration_ms(text: str) -> int:
    """An ISO-8601 duration as java.time.Duration reads it (`PT1H30M`, `P2DT3H`, `PT0.5S`,
    `-PT5M`) in milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    parts = match and [match["days"], match["hours"], match["minutes"], match["seconds"]]
    if not match or not parts or not any(parts) or text.strip().upper().endswith("T"):
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 duration such as PT1H30M or P1DT12H, got {text!r}"
        )
    days, hours, minutes = (int(part or 0) for part in parts[:3])
    seconds = float((parts[3] or "0").replace(",", "."))
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    return round(total * 1000) * (-1 if match["sign"] == "-" else 1)


def offset(text: str) -> int:
    """A --to-offset value. One outside a partition's log (a negative one too) is moved to
    the nearest end with a warning, as kafka-consumer-groups does."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an offset, got {text!r}") from None


def no_group(group_id: str) -> str:
    return f"Consumer group '{group_id}' does not exist."


# --- the parsers ----------------------------------------------------------------------------


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_reset(actions)
    _register_delete_offsets(actions)


def _register_reset(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    reset = actions.add_parser(
        "reset-offsets",
        help="change a group's committed offsets (dry run unless --execute)",
        description="Plan new committed offsets for inactive groups and print them; "
        "commit them with --execute. Offsets are kept within each partition's log.",
    )
    add_groups(reset, "the group whose offsets to reset")
    reset.add_argument("--all-groups", action="store_true", help="reset every consumer group")
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        type=topic_spec,
        metavar="TOPIC[:P,P...]",
        help="reset this topic, or only the partitions listed (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="reset every topic the group has offsets for"
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument(
        "--to-current", action="store_true", help="the committed offset (else the log end)"
    )
    target.add_argument("--to-offset", type=offset, metavar="N", help="offset N")
    target.add_argument(
        "--to-datetime",
        type=datetime_ms,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (local time unless an offset such as "
        "Z or +02:00 follows)",
    )
    target.add_argument(
        "--by-duration",
        type=duration_ms,
        metavar="PnDTnHnMnS",
        help="the first offset at or after this long ago (ISO-8601 duration, e.g. PT1H30M)",
    )
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)"
    )
    target.add_argument(
        "--from-file",
        type=Path,
        metavar="CSV",
        help="the offsets in a CSV file of TOPIC,PARTITION,OFFSET lines (which also choose "
        "the partitions)",
    )
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument(
        "--export",
        action="store_true",
        help="print the plan as CSV (TOPIC,PARTITION,OFFSET; with several groups "
        "GROUP,TOPIC,PARTITION,OFFSET), the format --from-file reads",
    )
    reset.set_defaults(func=command(_reset, _check_reset, reset))
    add_bootstrap(reset)


def _register_delete_offsets(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    delete = actions.add_parser(
        "delete-offsets",
        help="forget a group's committed offsets of some topics (OffsetDelete)",
    )
    add_groups(delete, "the group whose offsets to delete")
    delete.add_argument(
        "--topic",
        action="append",
        type=topic_spec,
        required=True,
        metavar="TOPIC[:P,P...]",
        help="this topic's partitions, or only those listed (repeatable)",
    )
    delete.set_defaults(func=command(_delete_offsets, _check_delete_offsets, delete))
    add_bootstrap(delete)


def _check_reset(args: argparse.Namespace) -> str | None:
    named = group_ids(args)
    if not named and not args.all_groups:
        return "give the group with --group, or --all-groups"
    if named and args.all_groups:
        return "give groups or --all-groups, not both"
    if args.from_file is None and not (args.topic or args.all_topics):
        return "one of the arguments --topic --all-topics is required"
    if args.from_file is not None and (args.topic or args.all_topics):
        return "--from-file names its own partitions: leave out --topic and --all-topics"
    return None


def _check_delete_offsets(args: argparse.Namespace) -> str | None:
    if len(group_ids(args)) != 1:
        return "give exactly one group (--group G)"
    return None


# --- reset-offsets --------------------------------------------------------------------------


async def _reset(admin: Admin, args: argparse.Namespace) -> int:
    if args.all_groups:
        groups = [g.group_id for g in await admin.list_consumer_groups()]
    else:
        groups = group_ids(args)
    plans: dict[str, dict[TopicPartition, int]] = {}
    refused = False
    for group_id in groups:
        state = await _group_state(admin, group_id)
        if state not in _INACTIVE:
            fail(
                f"Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {state}."
            )
            refused = True
            continue
        plans[group_id] = await _plan(admin, args, group_id)
        if args.execute and plans[group_id]:
            await admin.alter_consumer_group_offsets(group_id, plans[group_id])
    if not args.execute and not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --execute to reset the offsets (--dry-run only plans them).",
            file=sys.stderr,
        )
    if args.export:
        several = args.all_groups or len(groups) > 1
        for group_id, plan in plans.items():
            for (t, p), new in sorted(plan.items()):
                print(f"{group_id},{t},{p},{new}" if several else f"{t},{p},{new}")
    else:
        rows = [
            [group_id, t, str(p), str(new)]
            for group_id, plan in plans.items()
            for (t, p), new in sorted(plan.items())
        ]
        if rows:
            print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    return 1 if refused else 0


async def _plan(admin: Admin, args: argparse.Namespace, group_id: str) -> dict[TopicPartition, int]:
    """The new offset of each partition of the reset, clamped to its log."""
    from_file = _read_plan(args.from_file, group_id) if args.from_file is not None else {}
    committed = await admin.list_consumer_group_offsets(group_id)
    if args.from_file is not None:
        partitions = await _existing_partitions(admin, sorted(from_file))
    else:
        partitions = await _reset_scope(admin, args, committed)
    start = await log_offsets(admin, dict.fromkeys(partitions, "earliest"))
    end = await log_offsets(admin, dict.fromkeys(partitions, "latest"))
    moment = args.to_datetime
    if args.by_duration is not None:
        moment = max(0, int(time.time() * 1000) - args.by_duration)
    at_time: dict[TopicPartition, int] = {}
    if moment is not None:
        at_time = await log_offsets(admin, dict.fromkeys(partitions, moment))
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        if tp not in start or tp not in end:
            raise CommandError(f"cannot read the log offsets of {tp.topic}-{tp.partition}")
        if args.to_earliest:
            wanted = start[tp]
        elif args.to_latest:
            wanted = end[tp]
        elif args.to_current:
            wanted = committed.get(tp, end[tp])
        elif args.to_offset is not None:
            wanted = args.to_offset
        elif moment is not None:
            found = at_time.get(tp, -1)
            wanted = end[tp] if found < 0 else found  # nothing that late: the log end
        elif args.from_file is not None:
            wanted = from_file[tp]
        else:
            if tp not in committed:
                raise CommandError(
                    f"Cannot shift the offset of {tp.topic}-{tp.partition}: "
                    "the group has no committed offset for it."
                )
            wanted = committed[tp] + args.shift_by
        plan[tp] = _within_log(tp, wanted, start[tp], end[tp])
    return plan


def _within_log(tp: TopicPartition, wanted: int, start: int, end: int) -> int:
    """`wanted` moved into [log start, log end], warning as kafka-consumer-groups does."""
    name = f"{tp.topic}-{tp.partition}"
    if wanted < start:
        print(f"WARN New offset ({wanted}) is lower than earliest offset for topic partition "
              f"{name}. Value will be set to {start}", file=sys.stderr)
        return start
    if wanted > end:
        print(f"WARN New offset ({wanted}) is higher than latest offset for topic partition "
              f"{name}. Value will be set to {end}", file=sys.stderr)
        return end
    return wanted


async def _group_state(admin: Admin, group_id: str) -> str:
    """The group's state, "Dead" if it does not exist."""
    try:
        return (await admin.describe_consumer_groups([group_id]))[group_id].state
    except KafkaError as exc:
        if exc.code == ErrorCode.GROUP_ID_NOT_FOUND:
            return "Dead"
        raise


def _read_plan(path: Path, group_id: str) -> dict[TopicPartition, int]:
    """A reset plan as kafka-consumer-groups exports it: TOPIC,PARTITION,OFFSET lines, or
    GROUP,TOPIC,PARTITION,OFFSET lines of which this group's are taken."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    plan: dict[TopicPartition, int] = {}
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if len(cells) == 4:
            if cells[0] != group_id:
                continue
            cells = cells[1:]
        if len(cells) != 3:
            raise CommandError(
                f"{path}:{number}: expected TOPIC,PARTITION,OFFSET, got {','.join(row)!r}"
            )
        topic, partition, offset = cells
        if not topic or not partition.isdigit() or not offset.lstrip("-").isdigit():
            raise CommandError(
                f"{path}:{number}: expected TOPIC,PARTITION,OFFSET with whole numbers, "
                f"got {','.join(row)!r}"
            )
        plan[TopicPartition(topic, int(partition))] = int(offset)
    if not plan:
        raise CommandError(f"{path} has no offsets for group '{group_id}'")
    return plan


async def _existing_partitions(
    admin: Admin, partitions: Sequence[TopicPartition]
) -> list[TopicPartition]:
    """`partitions`, checked against the topics' metadata."""
    described = await admin.describe_topics(sorted({tp.topic for tp in partitions}))
    for topic, partition in partitions:
        info = described[topic]
        if partition not in info.partitions:
            raise CommandError(
                f"Topic '{topic}' has no partition {partition} (it has {len(info.partitions)})"
            )
    return sorted(partitions)


async def _reset_scope(
    admin: Admin, args: argparse.Namespace, committed: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    specs: list[tuple[str, list[int] | None]] = args.topic
    described = await admin.describe_topics(sorted({t for t, _ in specs}))
    partitions: set[TopicPartition] = set()
    for topic, listed in specs:
        available = described[topic].partitions
        partitions.update(
            TopicPartition(topic, p) for p in (available if listed is None else listed)
        )
    return await _existing_partitions(admin, sorted(partitions))


# --- delete-offsets -------------------------------------------------------------------------


async def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """kafka-consumer-groups --delete-offsets: a line on the outcome, then the status of
    each partition (TOPIC PARTITION STATUS); a partition of a topic that does not exist
    is `Not Provided` when none were listed."""
    group_id = group_ids(args)[0]
    specs: list[tuple[str, list[int] | None]] = args.topic
    partitions: list[TopicPartition] = []
    results: dict[tuple[str, int], KafkaError | None] = {}
    whole = sorted({topic for topic, listed in specs if listed is None})
    try:
        described = await admin.describe_topics(whole) if whole else {}
    except AdminBatchError as exc:
        described = exc.results
        for topic, error in exc.errors.items():
            results[(topic, -1)] = error
    for topic, listed in specs:
        if listed is not None:
            partitions.extend(TopicPartition(topic, p) for p in listed)
        elif topic in described:
            partitions.extend(TopicPartition(topic, p) for p in sorted(described[topic].partitions))
    partitions = sorted(set(partitions))
    top: KafkaError | None = None
    try:
        if partitions:
            await admin.delete_consumer_group_offsets(group_id, partitions)
        results.update({(tp.topic, tp.partition): None for tp in partitions})
    except AdminBatchError as exc:
        results.update({(tp.topic, tp.partition): exc.errors.get(tp) for tp in partitions})
        codes = {error.code for error in exc.errors.values()}
        if len(codes) == 1 and codes <= _GROUP_LEVEL:
            top = next(iter(exc.errors.values()))
    except KafkaError as exc:
        if exc.code not in _GROUP_LEVEL:
            raise
        top = exc
        results.update({(tp.topic, tp.partition): exc for tp in partitions})
    failed = any(error is not None for error in results.values())
    topics = ", ".join(dict.fromkeys(topic for topic, _ in specs))
    if top is not None and top.code == ErrorCode.GROUP_ID_NOT_FOUND:
        fail(f"'{group_id}' does not exist.")
    elif top is not None and top.code == ErrorCode.NON_EMPTY_GROUP:
        fail(
            f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group "
            "is not empty."
        )
    elif top is not None and top.code == ErrorCode.INVALID_GROUP_ID:
        fail(f"'{group_id}' is not valid.")
    elif failed:
        fail("Encounter some partition level error, see the follow-up details:")
    else:
        print(f"Request succeed for deleting offsets with topic {topics} group {group_id}")
    rows = [
        [topic, "Not Provided" if partition < 0 else str(partition), _status(error)]
        for (topic, partition), error in sorted(results.items())
    ]
    print()
    print(table(["TOPIC", "PARTITION", "STATUS"], rows))
    return 1 if failed else 0


_GROUP_LEVEL = frozenset(
    {ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP, ErrorCode.INVALID_GROUP_ID}
)


def _status(error: KafkaError | None) -> str:
    if error is None:
        return "Successful"
    return f"Error: {_DELETE_ERRORS.get(error.code, str(error))}"


async def delete_groups(
    admin: Admin,
    wanted: list[str],
    deleted_line: Callable[[str], str],
    refusal: Callable[[str, KafkaError], str],
) -> int:
    """DeleteGroups of `wanted`: one line (`deleted_line` of their quoted names) for those
    deleted, one error line (`refusal`) per group refused; 1 if any was refused."""
    try:
        await admin.delete_consumer_groups(wanted)
        failed: dict[str, KafkaError] = {}
    except AdminBatchError as exc:
        failed = exc.errors
    deleted = [g for g in wanted if g not in failed]
    if deleted:
        print(deleted_line(", ".join(f"'{g}'" for g in deleted)))
    for group_id, error in failed.items():
        fail(refusal(group_id, error))
    return 1 if failed else 0
