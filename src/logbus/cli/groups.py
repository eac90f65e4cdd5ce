"""`logbus groups`: list, describe and delete consumer groups and reset their committed
offsets, with the output of Kafka's `kafka-consumer-groups`, through the Admin client."""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from logbus.cli.common import CommandError, add_bootstrap, client_settings, fail, run
from logbus.client.admin import (
    Admin,
    AdminBatchError,
    ConsumerGroupDescription,
    GroupMemberInfo,
    OffsetSpec,
)
from logbus.client.connection import format_address
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

_Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Empty", "Dead")
_INACTIVE = ("Empty", "Dead")
# java.time.Duration's text form: PnDTnHnMn.nS, each part optional, an optional sign.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?"
    r"(?:(?P<seconds>[-+]?\d+(?:[.,]\d{0,9})?)S)?)?",
    re.IGNORECASE,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser("groups", help="list, describe, delete, reset consumer groups")
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list consumer group ids")
    listing.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATE[,STATE]",
        help="show each group's state; with states given, only groups in those states",
    )
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser(
        "describe", help="committed offsets and lag of groups' partitions, or their members"
    )
    describe.add_argument("group", nargs="*", help="the groups to describe")
    describe.add_argument("--all-groups", action="store_true", help="describe every group")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="list the group's members")
    shown.add_argument("--state", action="store_true", help="show the group's state")
    describe.add_argument(
        "--verbose", action="store_true", help="with --members: each member's partitions"
    )
    describe.set_defaults(func=_command(_describe, _check_describe, describe))

    delete = actions.add_parser("delete", help="delete groups with no active members")
    delete.add_argument("group", nargs="+", help="the groups to delete")
    delete.set_defaults(func=_command(_delete))

    reset = actions.add_parser(
        "reset-offsets",
        help="change a group's committed offsets (dry run unless --execute)",
        description="Plan new committed offsets for an inactive group and print them; "
        "commit them with --execute. Offsets are kept within each partition's log.",
    )
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        type=_topic_spec,
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
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    target.add_argument(
        "--to-datetime",
        type=_datetime_ms,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (local time unless an offset such as "
        "Z or +02:00 follows)",
    )
    target.add_argument(
        "--by-duration",
        type=_duration_ms,
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
    reset.set_defaults(func=_command(_reset, _check_reset, reset))

    for sub in (listing, describe, delete, reset):
        add_bootstrap(sub)


def _topic_spec(text: str) -> tuple[str, list[int] | None]:
    """"topic" or "topic:0,2" (Kafka's --topic syntax)."""
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


def _datetime_ms(text: str) -> int:
    """Kafka's reset format `yyyy-MM-ddTHH:mm:SS.sss`, optionally with a UTC offset; without
    one it is local time. Returns epoch milliseconds."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected YYYY-MM-DDTHH:mm:SS.sss (optionally with Z or +HH:MM), got {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)  # naive datetimes count as local time


def _duration_ms(text: str) -> int:
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


def _command(
    action: _Action,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> Callable[[argparse.Namespace], int]:
    """A subcommand's function; `check` finds argument combinations argparse cannot
    express, reported as usage errors by `parser` before anything is sent."""

    def runner(args: argparse.Namespace) -> int:
        complaint = check(args) if check is not None else None
        if complaint is not None and parser is not None:
            parser.error(complaint)
        return run(_with_admin(action, args))

    return runner


def _check_describe(args: argparse.Namespace) -> str | None:
    if args.all_groups and args.group:
        return "give group ids or --all-groups, not both"
    if not args.all_groups and not args.group:
        return "give the groups to describe, or --all-groups"
    return None


def _check_reset(args: argparse.Namespace) -> str | None:
    if args.from_file is None and not (args.topic or args.all_topics):
        return "one of the arguments --topic --all-topics is required"
    if args.from_file is not None and (args.topic or args.all_topics):
        return "--from-file names its own partitions: leave out --topic and --all-topics"
    return None


async def _with_admin(action: _Action, args: argparse.Namespace) -> int:
    async with Admin(
        client_settings(args),
        bootstrap_servers=args.bootstrap_server,
        client_id="logbus-consumer-groups",
    ) as admin:
        return await action(admin, args)


def _no_group(group_id: str) -> str:
    return f"Consumer group '{group_id}' does not exist."


# --- list -----------------------------------------------------------------------------


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    states: list[str] = []
    if args.state:
        by_lower = {s.lower(): s for s in STATES}
        for name in args.state.split(","):
            state = by_lower.get(name.strip().lower())
            if state is None:
                raise CommandError(f"unknown group state {name!r} (known: {', '.join(STATES)})")
            states.append(state)
    listed = await admin.list_consumer_groups(states=states)
    if args.state is None:
        for group in listed:
            print(group.group_id)
    else:
        print(_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in listed]))
    return 0


# --- describe -------------------------------------------------------------------------


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    if args.all_groups:
        group_ids = [g.group_id for g in await admin.list_consumer_groups()]
    else:
        group_ids = list(dict.fromkeys(args.group))
    try:
        described = await admin.describe_consumer_groups(group_ids)
        missing: dict[str, KafkaError] = {}
    except AdminBatchError as exc:
        described, missing = exc.results, exc.errors
    tables = []
    for group_id in group_ids:
        if group_id in described:
            tables.append(await _describe_one(admin, args, described[group_id]))
    print("\n\n".join(t for t in tables if t), end="\n" if any(tables) else "")
    for group_id, error in missing.items():
        not_found = error.code == ErrorCode.GROUP_ID_NOT_FOUND
        fail(_no_group(group_id) if not_found else f"{group_id}: {error}")
    return 1 if missing else 0


async def _describe_one(
    admin: Admin, args: argparse.Namespace, described: ConsumerGroupDescription
) -> str:
    """The table `describe` prints for one group ("" for none), its warnings on stderr."""
    group_id = described.group_id
    if args.state:
        node = described.coordinator
        coordinator = (
            "-" if node is None else f"{format_address(node.host, node.port)} ({node.node_id})"
        )
        row = [group_id, coordinator, described.partition_assignor or "-", described.state]
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        return _table(header, [[*row, str(len(described.members))]])
    if not described.members:
        print(f"Consumer group '{group_id}' has no active members.", file=sys.stderr)
    elif described.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"Warning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
    if args.members:
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if args.verbose:
            header.append("ASSIGNMENT")
        rows = []
        for m in sorted(described.members, key=lambda m: m.member_id):
            row = [group_id, m.member_id, m.client_host, m.client_id]
            row.append(str(sum(len(ps) for ps in m.assignment.values())))
            if args.verbose:
                row.append(_assignment_text(m.assignment))
            rows.append(row)
        return _table(header, rows) if rows else ""
    committed = await admin.list_consumer_group_offsets(group_id)
    owner: dict[TopicPartition, GroupMemberInfo] = {}
    for m in described.members:
        for topic, assigned in m.assignment.items():
            owner.update({TopicPartition(topic, p): m for p in assigned})
    partitions = sorted(set(committed) | set(owner))
    if not partitions:
        return ""
    log_end = await _log_offsets(admin, dict.fromkeys(partitions, "latest"))
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        end = log_end.get(tp)
        lag = "-" if current is None or end is None else str(max(0, end - current))
        member = owner.get(tp)
        rows.append(
            [
                group_id,
                tp.topic,
                str(tp.partition),
                "-" if current is None else str(current),
                "-" if end is None else str(end),
                lag,
                "-" if member is None else member.member_id,
                "-" if member is None else member.client_host,
                "-" if member is None else member.client_id,
            ]
        )
    header = [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    return _table(header, rows)


def _assignment_text(assignment: Mapping[str, Sequence[int]]) -> str:
    if not assignment:
        return "-"
    return ",".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items()))


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns left-aligned to their widest cell, separated by two spaces."""
    lines = [list(header), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


async def _log_offsets(
    admin: Admin, specs: Mapping[TopicPartition, OffsetSpec]
) -> dict[TopicPartition, int]:
    """ListOffsets of each partition; a partition whose leader cannot answer is left out."""
    try:
        found = await admin.list_offsets(specs)
    except AdminBatchError as exc:
        found = exc.results
    return {tp: listed.offset for tp, listed in found.items()}


# --- delete ---------------------------------------------------------------------------


async def _delete(admin: Admin, args: argparse.Namespace) -> int:
    group_ids = list(dict.fromkeys(args.group))
    try:
        await admin.delete_consumer_groups(group_ids)
        failed: dict[str, KafkaError] = {}
    except AdminBatchError as exc:
        failed = exc.errors
    deleted = [g for g in group_ids if g not in failed]
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    for group_id, error in failed.items():
        if error.code == ErrorCode.NON_EMPTY_GROUP:
            fail(
                f"Deletion of group '{group_id}' failed: the group is not empty "
                "(it has active members; stop its consumers first)."
            )
        elif error.code == ErrorCode.GROUP_ID_NOT_FOUND:
            fail(_no_group(group_id))
        else:
            fail(f"Deletion of group '{group_id}' failed: {error}")
    return 1 if failed else 0


# --- reset-offsets --------------------------------------------------------------------


async def _reset(admin: Admin, args: argparse.Namespace) -> int:
    group_id = args.group
    from_file = _read_plan(args.from_file, group_id) if args.from_file is not None else {}
    state = await _group_state(admin, group_id)
    if state not in _INACTIVE:
        raise CommandError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, "
            f"but the current state is {state}."
        )
    committed = await admin.list_consumer_group_offsets(group_id)
    if args.from_file is not None:
        partitions = await _existing_partitions(admin, sorted(from_file))
    else:
        partitions = await _reset_scope(admin, args, committed)
    start = await _log_offsets(admin, dict.fromkeys(partitions, "earliest"))
    end = await _log_offsets(admin, dict.fromkeys(partitions, "latest"))
    moment = args.to_datetime
    if args.by_duration is not None:
        moment = max(0, int(time.time() * 1000) - args.by_duration)
    at_time: dict[TopicPartition, int] = {}
    if moment is not None:
        at_time = await _log_offsets(admin, dict.fromkeys(partitions, moment))
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
        plan[tp] = min(max(wanted, start[tp]), end[tp])
    if args.execute:
        if plan:
            await admin.alter_consumer_group_offsets(group_id, plan)
    elif not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "Add --execute to reset the offsets (--dry-run only plans them).",
            file=sys.stderr,
        )
    rows = [[group_id, t, str(p), str(offset)] for (t, p), offset in sorted(plan.items())]
    if rows:
        print(_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    return 0


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
