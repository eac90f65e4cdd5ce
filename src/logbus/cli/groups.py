"""`logbus groups`: list, describe and delete consumer groups (their offsets:
group_offsets), with the options and output of Kafka's `kafka-consumer-groups`, through the
Admin client. Both `logbus groups describe G` and `--describe --group G` work (see
tool_syntax)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from logbus.cli import group_offsets
from logbus.cli.common import CommandError, add_bootstrap, fail
from logbus.cli.group_offsets import (
    add_groups,
    command,
    delete_groups,
    group_ids,
    log_offsets,
    no_group,
    table,
)
from logbus.cli.tool_syntax import ToolSyntax
from logbus.client.admin import (
    Admin,
    AdminBatchError,
    ConsumerGroupDescription,
    GroupMemberInfo,
)
from logbus.client.connection import format_address
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

STATES = (
    "PreparingRebalance", "CompletingRebalance", "Stable", "Empty", "Dead",
    "Assigning", "Reconciling",
)  # fmt: skip
GROUP_TYPES = ("classic", "consumer")
SYNTAX = ToolSyntax(
    "groups",
    {
        f"--{word}": word
        for word in ("list", "describe", "delete", "reset-offsets", "delete-offsets")
    },
    "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
    "--delete-offsets",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser(
        "groups",
        help="list, describe, delete consumer groups, reset or delete their offsets",
        epilog="kafka-consumer-groups' syntax works too: logbus groups --bootstrap-server B "
        "(--list|--describe|--delete|--reset-offsets|--delete-offsets) "
        "[--group G | --all-groups] [options]",
    )
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list consumer group ids")
    listing.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATE[,STATE]",
        help="show each group's state; with states given, only groups in those states",
    )
    listing.add_argument(
        "--type",
        nargs="?",
        const="",
        metavar="TYPE[,TYPE]",
        help="show each group's type (classic, consumer); with types given, only those",
    )
    listing.set_defaults(func=command(_list))

    describe = actions.add_parser(
        "describe", help="committed offsets and lag of groups' partitions, or their members"
    )
    add_groups(describe, "the groups to describe")
    describe.add_argument("--all-groups", action="store_true", help="describe every group")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument(
        "--offsets", action="store_true", help="committed offsets and lag (the default)"
    )
    shown.add_argument("--members", action="store_true", help="list the group's members")
    shown.add_argument("--state", action="store_true", help="show the group's state")
    describe.add_argument(
        "--verbose", action="store_true",
        help="with --members: each member's epoch, assignment and target assignment; with "
        "--state: the group epoch and target assignment epoch",
    )
    describe.set_defaults(func=command(_describe, _check_describe, describe))

    delete = actions.add_parser("delete", help="delete groups with no active members")
    add_groups(delete, "the groups to delete")
    delete.add_argument("--all-groups", action="store_true", help="delete every group")
    delete.set_defaults(func=command(_delete, _check_delete, delete))

    for sub in (listing, describe, delete):
        add_bootstrap(sub)
    group_offsets.register(actions)


def _check_describe(args: argparse.Namespace) -> str | None:
    if args.all_groups and group_ids(args):
        return "give group ids or --all-groups, not both"
    if not args.all_groups and not group_ids(args):
        return "give the groups to describe (--group G), or --all-groups"
    return None


def _check_delete(args: argparse.Namespace) -> str | None:
    if args.all_groups and group_ids(args):
        return "give group ids or --all-groups, not both"
    if not args.all_groups and not group_ids(args):
        return "give the groups to delete (--group G), or --all-groups"
    return None


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
    if args.type:
        types = {t.strip().lower() for t in args.type.split(",")}
        unknown = types - set(GROUP_TYPES)
        if unknown:
            raise CommandError(
                f"unknown group type {sorted(unknown)[0]!r} (known: {', '.join(GROUP_TYPES)})"
            )
        listed = [g for g in listed if _group_type(g.group_type) in types]
    if args.state is None and args.type is None:
        for group in listed:
            print(group.group_id)
        return 0
    header = ["GROUP"]
    with_state, with_type = args.state is not None, args.type is not None
    if with_state:
        header.append("STATE")
    if with_type:
        header.append("TYPE")
    rows = [
        [
            g.group_id,
            *([g.state] if with_state else []),
            *([_group_type(g.group_type).capitalize()] if with_type else []),
        ]
        for g in listed
    ]
    print(table(header, rows))
    return 0


def _group_type(listed_type: str) -> str:
    """A group's type as ListGroups v5 gives it; older brokers only have classic groups."""
    return listed_type.lower() or "classic"


# --- describe -------------------------------------------------------------------------


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    if args.all_groups:
        wanted = [g.group_id for g in await admin.list_consumer_groups()]
    else:
        wanted = group_ids(args)
    try:
        described = await admin.describe_consumer_groups(wanted)
        missing: dict[str, KafkaError] = {}
    except AdminBatchError as exc:
        described, missing = exc.results, exc.errors
    tables = []
    for group_id in wanted:
        if group_id in described:
            tables.append(await _describe_one(admin, args, described[group_id]))
    print("\n\n".join(t for t in tables if t), end="\n" if any(tables) else "")
    for group_id, error in missing.items():
        not_found = error.code == ErrorCode.GROUP_ID_NOT_FOUND
        fail(no_group(group_id) if not_found else f"{group_id}: {error}")
    return 1 if missing else 0


async def _describe_one(
    admin: Admin, args: argparse.Namespace, described: ConsumerGroupDescription
) -> str:
    """The table `describe` prints for one group ("" for none), its warnings on stderr."""
    group_id = described.group_id
    if args.state:
        return _state_table(described, args.verbose)
    if not described.members:
        print(f"Consumer group '{group_id}' has no active members.", file=sys.stderr)
    elif described.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"Warning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
    if args.members:
        return _members_table(described, args.verbose)
    committed = await admin.list_consumer_group_offsets(group_id)
    owner: dict[TopicPartition, GroupMemberInfo] = {}
    for m in described.members:
        for topic, assigned in m.assignment.items():
            owner.update({TopicPartition(topic, p): m for p in assigned})
    partitions = sorted(set(committed) | set(owner))
    if not partitions:
        return ""
    log_end = await log_offsets(admin, dict.fromkeys(partitions, "latest"))
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
    return table(header, rows)


def _state_table(described: ConsumerGroupDescription, verbose: bool) -> str:
    """`describe --state`, as kafka-consumer-groups 4 prints it: with `--verbose` also the
    group epoch and target assignment epoch (`-` for a classic group)."""
    node = described.coordinator
    coordinator = (
        "-" if node is None else f"{format_address(node.host, node.port)} ({node.node_id})"
    )
    row = [described.group_id, coordinator, described.partition_assignor or "-",
           described.state]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    if verbose:
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [_or_missing(described.group_epoch), _or_missing(described.assignment_epoch)]
    return table([*header, "#MEMBERS"], [[*row, str(len(described.members))]])


def _members_table(described: ConsumerGroupDescription, verbose: bool) -> str:
    """`describe --members`, as kafka-consumer-groups 4 prints it: GROUP-INSTANCE-ID when
    some member has one; with `--verbose` each member's epoch and assignment beside the
    target assignment epoch and the member's target assignment (`-` where a classic group
    has none)."""
    members = sorted(described.members, key=lambda m: m.member_id)
    static = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else []), "HOST",
              "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = []
    for m in members:
        row = [described.group_id, m.member_id]
        if static:
            row.append(m.group_instance_id or "-")
        row += [m.client_host, m.client_id, str(sum(len(ps) for ps in m.assignment.values()))]
        if verbose:
            row += [
                _or_missing(m.member_epoch),
                _assignment_text(m.assignment),
                _or_missing(described.assignment_epoch),
                _assignment_text(m.target_assignment or {}),
            ]
        rows.append(row)
    return table(header, rows) if rows else ""


def _or_missing(value: int | None) -> str:
    return "-" if value is None else str(value)


def _assignment_text(assignment: Mapping[str, Sequence[int]]) -> str:
    """`topic:0,1;other:2` (topics sorted), `-` for none, as kafka-consumer-groups."""
    parts = [f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in assignment.items() if ps]
    return ";".join(sorted(parts)) or "-"


# --- delete ---------------------------------------------------------------------------


async def _delete(admin: Admin, args: argparse.Namespace) -> int:
    if args.all_groups:
        wanted = [g.group_id for g in await admin.list_consumer_groups()]
    else:
        wanted = group_ids(args)

    def refusal(group_id: str, error: KafkaError) -> str:
        if error.code == ErrorCode.NON_EMPTY_GROUP:
            return (
                f"Deletion of group '{group_id}' failed: the group is not empty "
                "(it has active members; stop its consumers first)."
            )
        if error.code == ErrorCode.GROUP_ID_NOT_FOUND:
            return no_group(group_id)
        return f"Deletion of group '{group_id}' failed: {error}"

    return await delete_groups(
        admin,
        wanted,
        lambda names: f"Deletion of requested consumer groups ({names}) was successful.",
        refusal,
    )
