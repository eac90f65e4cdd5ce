"""`logbus share-groups`: list, describe, delete share groups (KIP-932), describe, reset and
delete their start offsets, with the options of Kafka's `kafka-share-groups` (`--list`,
`--describe`, `--delete`, `--reset-offsets`, `--delete-offsets`) or as action words
(`logbus share-groups describe G`).

A share group's offsets are its share-partition start offsets. Describing reads them with
DescribeShareGroupOffsets; resetting sends AlterShareGroupOffsets and deleting
DeleteShareGroupOffsets to the group's coordinator, which refuses both while the group has
members, as Kafka does: its members, when they come back, read from the new start offsets
(or, where they were deleted, from where `share.auto.offset.reset` says).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from logbus.cli.common import AdminAction, CommandError, add_bootstrap, admin_command, fail
from logbus.cli.group_offsets import (
    add_groups,
    datetime_ms,
    delete_groups,
    group_ids,
    table,
    topic_spec,
)
from logbus.cli.tool_syntax import ToolSyntax
from logbus.client import coordinator_lookup
from logbus.client.admin import AdminBatchError
from logbus.client.admin.client import Admin
from logbus.client.admin.types import OffsetSpec
from logbus.client.errors import KafkaError
from logbus.client.requests.share_groups import describe_share_groups
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.protocol.messages.share_group_describe_response import DescribedGroup

SYNTAX = ToolSyntax(
    "share-groups",
    {
        f"--{word}": word
        for word in ("list", "describe", "delete", "reset-offsets", "delete-offsets")
    },
    "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
    "--delete-offsets",
)
MISSING = "-"


def _command(
    action: AdminAction,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> Callable[[argparse.Namespace], int]:
    return admin_command(action, "logbus-share-groups", check, parser)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    share = subparsers.add_parser(
        "share-groups",
        help="list, describe, delete share groups, reset and delete their start offsets",
        epilog="kafka-share-groups' syntax works too: logbus share-groups --bootstrap-server B "
        "(--list|--describe|--delete|--reset-offsets|--delete-offsets) [--group G] [options]",
    )
    actions = share.add_subparsers(dest="share_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list share group ids")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser(
        "describe", help="a share group's start offsets (the default), state or members"
    )
    add_groups(describe, "the groups to describe")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true",
                       help="each partition's start offset (the default)")
    shown.add_argument("--state", action="store_true", help="the group's state")
    shown.add_argument("--members", action="store_true", help="the members")
    describe.add_argument(
        "--verbose", action="store_true",
        help="with --offsets: each leader epoch; with --members: each member's partitions",
    )
    describe.set_defaults(func=_command(_describe, _need_groups("describe"), describe))

    delete = actions.add_parser("delete", help="delete share groups with no members")
    add_groups(delete, "the groups to delete")
    delete.set_defaults(func=_command(_delete, _need_groups("delete"), delete))

    reset = _register_reset(actions)
    delete_offsets = actions.add_parser(
        "delete-offsets", help="forget an empty share group's start offsets of topics"
    )
    add_groups(delete_offsets, "the group whose offsets to delete")
    delete_offsets.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                                help="a topic whose offsets to delete (repeatable)")
    delete_offsets.set_defaults(func=_command(
        _delete_offsets, _need_groups("delete-offsets", one=True), delete_offsets
    ))

    for sub in (listing, describe, delete, reset, delete_offsets):
        add_bootstrap(sub)


def _register_reset(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    reset = actions.add_parser(
        "reset-offsets", help="move an empty share group's start offsets (dry run by default)"
    )
    add_groups(reset, "the group whose offsets to reset")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", type=topic_spec, metavar="TOPIC[:P,P]",
                       help="the topic (and partitions) to reset (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has a start offset for")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true", help="to the log start")
    where.add_argument("--to-latest", action="store_true", help="to the log end")
    where.add_argument("--to-datetime", type=datetime_ms, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                       help="to the first record at or after that time")
    where.add_argument("--to-offset", type=int, metavar="N", help="to offset N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the result (the default)")
    mode.add_argument("--execute", action="store_true", help="write the new offsets")
    reset.set_defaults(func=_command(_reset, _need_groups("reset-offsets", one=True), reset))
    return reset


def _need_groups(
    action: str, *, one: bool = False
) -> Callable[[argparse.Namespace], str | None]:
    def check(args: argparse.Namespace) -> str | None:
        found = group_ids(args)
        if not found:
            return f"give the share groups to {action} (--group G)"
        if one and len(found) > 1:
            return f"{action} takes one group"
        return None

    return check


def no_share_group(group_id: str) -> str:
    return f"Share group '{group_id}' does not exist."


# --- list -----------------------------------------------------------------------------


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    groups = {g.group_id: g.state for g in await admin.list_share_groups()}
    if args.state:
        print(table(["GROUP", "STATE"], [[g, s] for g, s in groups.items()]))
    else:
        for group_id in groups:
            print(group_id)
    return 0


# --- describe -------------------------------------------------------------------------


async def _describe_group(admin: Admin, group_id: str) -> DescribedGroup:
    conn = await coordinator_lookup.coordinator(admin.cluster, group_id)
    described = (await describe_share_groups(conn, [group_id]))[0]
    error = ErrorCode(described["error_code"])
    if error == ErrorCode.GROUP_ID_NOT_FOUND:
        raise CommandError(no_share_group(group_id))
    if error != ErrorCode.NONE:
        raise KafkaError(error, described.get("error_message") or "")
    return described


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    status = 0
    for group_id in group_ids(args):
        try:
            described = await _describe_group(admin, group_id)
        except CommandError as exc:
            status = fail(str(exc))
            continue
        if args.state:
            _print_state(group_id, described)
        elif args.members:
            _print_members(group_id, described, args.verbose)
        else:
            await _print_offsets(admin, group_id, args.verbose)
    return status


def _print_state(group_id: str, described: DescribedGroup) -> None:
    print(table(
        ["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
        [[group_id, described["group_state"], str(described["group_epoch"]),
          str(described["assignment_epoch"]), str(len(described["members"]))]],
    ))


def _print_members(group_id: str, described: DescribedGroup, verbose: bool) -> None:
    members = described["members"]
    if not members:
        print(f"Share group '{group_id}' has no active members.")
        return
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "#PARTITIONS"]
    rows = []
    for m in members:
        assigned = [
            f"{t['topic_name']}:{','.join(str(p) for p in t['partitions'])}"
            for t in m["assignment"]["topic_partitions"]
        ]
        count = sum(len(t["partitions"]) for t in m["assignment"]["topic_partitions"])
        row = [group_id, m["member_id"], m["client_host"], m["client_id"],
               str(m["member_epoch"]), str(count)]
        if verbose:
            row.append(";".join(assigned) or "-")
        rows.append(row)
    print(table(header + (["ASSIGNMENT"] if verbose else []), rows))


async def _print_offsets(admin: Admin, group_id: str, verbose: bool) -> None:
    """kafka-share-groups --describe --offsets: each partition's start offset ("-" for
    none), with --verbose its leader epoch too."""
    offsets = await admin.describe_share_group_offsets(group_id)
    rows = []
    for tp, found in offsets.items():
        start = MISSING if found is None else str(found.start_offset)
        epoch = MISSING if found is None or found.leader_epoch < 0 else str(found.leader_epoch)
        rows.append(
            [group_id, tp.topic, str(tp.partition), *([epoch] if verbose else []), start]
        )
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []),
              "START-OFFSET"]
    print(table(header, rows))


# --- delete ---------------------------------------------------------------------------


async def _delete(admin: Admin, args: argparse.Namespace) -> int:
    def refusal(group_id: str, error: KafkaError) -> str:
        if error.code == ErrorCode.NON_EMPTY_GROUP:
            return f"Deletion of share group '{group_id}' failed: the group is not empty."
        if error.code == ErrorCode.GROUP_ID_NOT_FOUND:
            return no_share_group(group_id)
        return f"Deletion of share group '{group_id}' failed: {error}"

    return await delete_groups(
        admin,
        group_ids(args),
        lambda names: f"Deletion of requested share groups ({names}) was successful.",
        refusal,
    )


# --- reset-offsets --------------------------------------------------------------------


async def _partitions_to_reset(
    admin: Admin, group_id: str, args: argparse.Namespace
) -> list[TopicPartition]:
    if args.all_topics:
        return list(await admin.describe_share_group_offsets(group_id))
    specs: list[tuple[str, list[int] | None]] = args.topic
    whole = sorted({topic for topic, listed in specs if listed is None})
    try:
        described = await admin.describe_topics(whole) if whole else {}
    except AdminBatchError as exc:
        missing = next(iter(exc.errors))
        raise CommandError(f"Topic '{missing}' does not exist.") from None
    found: list[TopicPartition] = []
    for topic, listed in specs:
        partitions = listed if listed is not None else sorted(described[topic].partitions)
        found += [TopicPartition(topic, p) for p in partitions]
    return sorted(set(found))


async def _targets(
    admin: Admin, partitions: list[TopicPartition], args: argparse.Namespace
) -> dict[TopicPartition, int]:
    if args.to_offset is not None:
        return dict.fromkeys(partitions, args.to_offset)
    when: OffsetSpec = (
        "earliest" if args.to_earliest else "latest" if args.to_latest else args.to_datetime
    )
    listed = await admin.list_offsets(dict.fromkeys(partitions, when))
    targets = {tp: listed[tp].offset for tp in partitions}
    missing = [tp for tp, offset in targets.items() if offset < 0]
    if missing:  # no record at or after that time: the log end, as Kafka's tool
        ends = await admin.list_offsets(dict.fromkeys(missing, "latest"))
        targets.update({tp: ends[tp].offset for tp in missing})
    return targets


async def _reset(admin: Admin, args: argparse.Namespace) -> int:
    """kafka-share-groups --reset-offsets: the new start offsets (GROUP TOPIC PARTITION
    NEW-OFFSET), written with --execute (AlterShareGroupOffsets)."""
    group_id = group_ids(args)[0]
    try:
        described = await _describe_group(admin, group_id)
    except CommandError:
        described = None  # the coordinator says whether a group with state exists
    if described is not None and described["members"]:
        return fail(f"Share group '{group_id}' is not empty.")
    partitions = await _partitions_to_reset(admin, group_id, args)
    targets = await _targets(admin, partitions, args)
    if args.execute:
        try:
            await admin.alter_share_group_offsets(group_id, targets)
        except AdminBatchError as exc:
            return fail(_alter_refusal(group_id, exc))
    rows = [[group_id, tp.topic, str(tp.partition), str(targets[tp])] for tp in partitions]
    print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    return 0


def _alter_refusal(group_id: str, exc: AdminBatchError) -> str:
    codes = {error.code for error in exc.errors.values()}
    if codes == {ErrorCode.GROUP_ID_NOT_FOUND}:
        return no_share_group(group_id)
    if codes == {ErrorCode.NON_EMPTY_GROUP}:
        return f"Share group '{group_id}' is not empty."
    return "; ".join(f"{tp.topic}-{tp.partition}: {error}" for tp, error in exc.errors.items())


# --- delete-offsets -------------------------------------------------------------------


async def _delete_offsets(admin: Admin, args: argparse.Namespace) -> int:
    """kafka-share-groups --delete-offsets: the status of each topic (TOPIC STATUS), or the
    group's error alone."""
    group_id = group_ids(args)[0]
    topics: list[str] = list(dict.fromkeys(args.topic))
    try:
        await admin.delete_share_group_offsets(group_id, topics)
        failed: dict[str, KafkaError] = {}
    except AdminBatchError as exc:
        failed = exc.errors
    codes = {error.code for error in failed.values()}
    if len(failed) == len(topics) and len(codes) == 1:
        code = next(iter(codes))
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            return fail(no_share_group(group_id))
        if code == ErrorCode.NON_EMPTY_GROUP:
            return fail(f"Share group '{group_id}' is not empty.")
        if code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            return fail(str(next(iter(failed.values()))))
    rows = [
        [topic, "Successful" if topic not in failed else f"Error: {failed[topic]}"]
        for topic in sorted(topics)
    ]
    print(table(["TOPIC", "STATUS"], rows))
    return 1 if failed else 0
