"""`logbus groups`: list, describe and delete consumer groups and reset their committed
offsets, with the output of Kafka's `kafka-consumer-groups`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime

from logbus.cli.common import CommandError, add_bootstrap, run
from logbus.client import admin_ops, group_ops
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.group_ops import GroupDescription, TopicPartition
from logbus.protocol import ErrorCode

_Action = Callable[[Cluster, argparse.Namespace], Awaitable[int]]
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Empty", "Dead")
_INACTIVE = ("Empty", "Dead")


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
        "describe", help="committed offsets and lag of a group's partitions, or its members"
    )
    describe.add_argument("group")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="list the group's members")
    shown.add_argument("--state", action="store_true", help="show the group's state")
    describe.add_argument(
        "--verbose", action="store_true", help="with --members: each member's partitions"
    )
    describe.set_defaults(func=_command(_describe))

    delete = actions.add_parser("delete", help="delete a group with no active members")
    delete.add_argument("group")
    delete.set_defaults(func=_command(_delete))

    reset = actions.add_parser(
        "reset-offsets",
        help="change a group's committed offsets (dry run unless --execute)",
        description="Plan new committed offsets for an inactive group and print them; "
        "commit them with --execute. Offsets are kept within each partition's log.",
    )
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group(required=True)
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
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    target.add_argument(
        "--to-datetime",
        type=_datetime_ms,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (local time unless an offset such as "
        "Z or +02:00 follows)",
    )
    target.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)"
    )
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(func=_command(_reset))

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


def _command(action: _Action) -> Callable[[argparse.Namespace], int]:
    def runner(args: argparse.Namespace) -> int:
        return run(_with_cluster(action, args))

    return runner


async def _with_cluster(action: _Action, args: argparse.Namespace) -> int:
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-consumer-groups"
    ) as cluster:
        return await action(cluster, args)


# --- list -----------------------------------------------------------------------------


async def _list(cluster: Cluster, args: argparse.Namespace) -> int:
    states: list[str] = []
    if args.state:
        by_lower = {s.lower(): s for s in STATES}
        for name in args.state.split(","):
            state = by_lower.get(name.strip().lower())
            if state is None:
                raise CommandError(f"unknown group state {name!r} (known: {', '.join(STATES)})")
            states.append(state)
    md = await cluster.refresh([])
    found: dict[str, group_ops.ListedGroup] = {}
    for node_id in sorted(md.brokers):  # each broker lists the groups it coordinates
        for group in await group_ops.list_groups(await cluster.node(node_id), states):
            found[group.group_id] = group
    listed = [found[g] for g in sorted(found)]
    if args.state is None:
        for group in listed:
            print(group.group_id)
    else:
        print(_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in listed]))
    return 0


# --- describe -------------------------------------------------------------------------


async def _existing(cluster: Cluster, group_id: str) -> tuple[Connection, GroupDescription]:
    conn = await group_ops.until_loaded(cluster, group_id)
    described = await group_ops.describe_group(conn, group_id)
    if not described.exists:
        raise CommandError(f"Consumer group '{group_id}' does not exist.")
    return conn, described


async def _describe(cluster: Cluster, args: argparse.Namespace) -> int:
    group_id = args.group
    conn, described = await _existing(cluster, group_id)
    if args.state:
        coordinator = f"{conn.address} ({_node_id(cluster, conn)})"
        row = [group_id, coordinator, described.protocol, described.state]
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        print(_table(header, [[*row, str(len(described.members))]]))
        return 0
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
        if rows:
            print(_table(header, rows))
        return 0
    committed = await group_ops.fetch_offsets(conn, group_id)
    owner: dict[TopicPartition, group_ops.GroupMemberInfo] = {}
    for m in described.members:
        for topic, assigned in m.assignment.items():
            owner.update({(topic, p): m for p in assigned})
    partitions = sorted(set(committed) | set(owner))
    if not partitions:
        return 0
    log_end = await _offsets(cluster, dict.fromkeys(partitions, admin_ops.LATEST))
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        end = log_end.get(tp)
        lag = "-" if current is None or end is None else str(max(0, end - current))
        member = owner.get(tp)
        rows.append(
            [
                group_id,
                tp[0],
                str(tp[1]),
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
    print(_table(header, rows))
    return 0


def _node_id(cluster: Cluster, conn: Connection) -> str:
    md = cluster.metadata
    if md is not None:
        for broker in md.brokers.values():
            if (broker.host, broker.port) == (conn.host, conn.port):
                return str(broker.node_id)
    return "?"


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


async def _offsets(
    cluster: Cluster, requests: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """ListOffsets (EARLIEST, LATEST or a timestamp) of each partition, from its leader;
    a partition whose leader cannot answer is left out."""
    topics = sorted({t for t, _ in requests})
    md = await cluster.refresh(topics)
    by_leader: dict[int, dict[TopicPartition, int]] = {}
    for (topic, partition), timestamp in requests.items():
        try:
            leader = md.leader(topic, partition)
        except KafkaError:
            continue
        by_leader.setdefault(leader, {})[(topic, partition)] = timestamp
    out: dict[TopicPartition, int] = {}
    for leader, asked in by_leader.items():
        found = await admin_ops.list_offsets_many(await cluster.node(leader), asked)
        out.update({tp: value for tp, value in found.items() if isinstance(value, int)})
    return out


# --- delete ---------------------------------------------------------------------------


async def _delete(cluster: Cluster, args: argparse.Namespace) -> int:
    group_id = args.group
    conn = await group_ops.until_loaded(cluster, group_id)
    try:
        await group_ops.delete_group(conn, group_id)
    except KafkaError as exc:
        if exc.code == ErrorCode.NON_EMPTY_GROUP:
            raise CommandError(
                f"Deletion of group '{group_id}' failed: the group is not empty "
                "(it has active members; stop its consumers first)."
            ) from None
        if exc.code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise CommandError(f"Consumer group '{group_id}' does not exist.") from None
        raise
    print(f"Deletion of requested consumer groups ('{group_id}') was successful.")
    return 0


# --- reset-offsets --------------------------------------------------------------------


async def _reset(cluster: Cluster, args: argparse.Namespace) -> int:
    group_id = args.group
    conn = await group_ops.until_loaded(cluster, group_id)
    described = await group_ops.describe_group(conn, group_id)
    if described.state not in _INACTIVE:
        raise CommandError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, "
            f"but the current state is {described.state}."
        )
    committed = await group_ops.fetch_offsets(conn, group_id)
    partitions = await _reset_scope(cluster, args, committed)
    start = await _offsets(cluster, dict.fromkeys(partitions, admin_ops.EARLIEST))
    end = await _offsets(cluster, dict.fromkeys(partitions, admin_ops.LATEST))
    at_time: dict[TopicPartition, int] = {}
    if args.to_datetime is not None:
        at_time = await _offsets(cluster, dict.fromkeys(partitions, args.to_datetime))
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        if tp not in start or tp not in end:
            raise CommandError(f"cannot read the log offsets of {tp[0]}-{tp[1]}")
        if args.to_earliest:
            wanted = start[tp]
        elif args.to_latest:
            wanted = end[tp]
        elif args.to_offset is not None:
            wanted = args.to_offset
        elif args.to_datetime is not None:
            found = at_time.get(tp, -1)
            wanted = end[tp] if found < 0 else found  # nothing that late: the log end
        else:
            if tp not in committed:
                raise CommandError(
                    f"Cannot shift the offset of {tp[0]}-{tp[1]}: "
                    "the group has no committed offset for it."
                )
            wanted = committed[tp] + args.shift_by
        plan[tp] = min(max(wanted, start[tp]), end[tp])
    if args.execute:
        if plan:
            await group_ops.commit_offsets(conn, group_id, plan)
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


async def _reset_scope(
    cluster: Cluster, args: argparse.Namespace, committed: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    specs: list[tuple[str, list[int] | None]] = args.topic
    md = await cluster.refresh(sorted({t for t, _ in specs}))
    partitions: set[TopicPartition] = set()
    for topic, listed in specs:
        info = md.topic(topic)
        for partition in listed if listed is not None else list(info.partitions):
            if partition not in info.partitions:
                raise CommandError(
                    f"Topic '{topic}' has no partition {partition} "
                    f"(it has {len(info.partitions)})"
                )
            partitions.add((topic, partition))
    return sorted(partitions)
