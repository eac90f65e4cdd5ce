"""`logbus share-groups`: list, describe, delete share groups (KIP-932) and reset their start
offsets, with the options of Kafka's `kafka-share-groups` (`--list`, `--describe`,
`--delete`, `--reset-offsets`) or as action words (`logbus share-groups describe G`).

Resetting writes the new share-partition start offset to each partition's share coordinator
(WriteShareGroupState, with a newer state epoch); the group must be empty, as Kafka requires:
its members, when they come back, read from there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from logbus.cli.common import AdminAction, CommandError, add_bootstrap, admin_command, fail
from logbus.cli.group_offsets import add_groups, delete_groups, group_ids, table
from logbus.cli.tool_syntax import ToolSyntax
from logbus.client import coordinator_lookup
from logbus.client.admin import Admin
from logbus.client.admin.types import OffsetSpec
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.client.requests.group_membership import read_list_groups
from logbus.client.requests.share_groups import describe_share_groups
from logbus.client.requests.share_state import read_share_group_state, write_share_group_state
from logbus.client.types import TopicPartition
from logbus.coordinator.share.state_records import (
    SHARE_STATE_TOPIC,
    ShareStateKey,
    state_partition_for,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.list_groups_request import ListGroupsRequest
from logbus.protocol.messages.share_group_describe_response import DescribedGroup

SYNTAX = ToolSyntax(
    "share-groups",
    {f"--{word}": word for word in ("list", "describe", "delete", "reset-offsets")},
    "Command must include exactly one action: --list, --describe, --delete, --reset-offsets",
)
LIST_GROUPS_TYPES_FROM = 5


def _command(
    action: AdminAction,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> Callable[[argparse.Namespace], int]:
    return admin_command(action, "logbus-share-groups", check, parser)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    share = subparsers.add_parser(
        "share-groups",
        help="list, describe, delete share groups, reset their start offsets",
        epilog="kafka-share-groups' syntax works too: logbus share-groups --bootstrap-server B "
        "(--list|--describe|--delete|--reset-offsets) [--group G] [options]",
    )
    actions = share.add_subparsers(dest="share_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list share group ids")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser("describe", help="a share group's state and members")
    add_groups(describe, "the groups to describe")
    describe.add_argument("--state", action="store_true", help="only the group's state")
    describe.add_argument("--members", action="store_true", help="the members (the default)")
    describe.add_argument(
        "--verbose", action="store_true", help="with --members: each member's partitions"
    )
    describe.set_defaults(func=_command(_describe, _need_groups("describe"), describe))

    delete = actions.add_parser("delete", help="delete share groups with no members")
    add_groups(delete, "the groups to delete")
    delete.set_defaults(func=_command(_delete, _need_groups("delete"), delete))

    reset = actions.add_parser(
        "reset-offsets", help="move an empty share group's start offsets (dry run by default)"
    )
    add_groups(reset, "the group whose offsets to reset")
    reset.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P]",
                       help="the topic (and partitions) to reset")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true", help="to the log start")
    where.add_argument("--to-latest", action="store_true", help="to the log end")
    where.add_argument("--to-offset", type=int, metavar="N", help="to offset N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the result (the default)")
    mode.add_argument("--execute", action="store_true", help="write the new offsets")
    reset.set_defaults(func=_command(_reset, _need_groups("reset-offsets", one=True), reset))

    for sub in (listing, describe, delete, reset):
        add_bootstrap(sub)


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


async def _list_on(conn: Connection) -> list[tuple[str, str]]:
    version = conn.choose_version(ApiKey.LIST_GROUPS)
    if version < LIST_GROUPS_TYPES_FROM:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "the broker cannot list share groups")
    body: ListGroupsRequest = {"states_filter": [], "types_filter": ["share"]}
    response = await send(conn, apis.LIST_GROUPS, body, version)
    return [(g.group_id, g.state) for g in read_list_groups(response)]


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    found = await admin.calls.on_each_broker(None, _list_on, None)
    groups = dict(sorted(g for listed in found.values() for g in listed))
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
        members = described["members"]
        if args.state:
            print(table(
                ["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
                [[group_id, described["group_state"], str(described["group_epoch"]),
                  str(described["assignment_epoch"]), str(len(members))]],
            ))
            continue
        if not members:
            print(f"Share group '{group_id}' has no active members.")
            continue
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
            if args.verbose:
                row.append(";".join(assigned) or "-")
            rows.append(row)
        print(table(header + (["ASSIGNMENT"] if args.verbose else []), rows))
    return status


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


def _topic_partitions(admin: Admin, specs: Sequence[str]) -> list[TopicPartition]:
    md = admin.cluster.metadata
    found: list[TopicPartition] = []
    for spec in specs:
        topic, _, wanted = spec.partition(":")
        info = md.topics.get(topic) if md is not None else None
        if info is None:
            raise CommandError(f"Topic '{topic}' does not exist.")
        partitions = (
            [int(p) for p in wanted.split(",")] if wanted else sorted(info.partitions)
        )
        found += [TopicPartition(topic, p) for p in partitions]
    return found


async def _reset(admin: Admin, args: argparse.Namespace) -> int:
    group_id = group_ids(args)[0]
    try:
        described = await _describe_group(admin, group_id)
    except CommandError:
        described = None  # no members known: a group that only has state may be reset
    if described is not None and described["members"]:
        return fail(
            f"Share group '{group_id}' is not empty: stop its consumers before resetting."
        )
    await admin.cluster.refresh([SHARE_STATE_TOPIC, *(t.partition(":")[0] for t in args.topic)])
    partitions = _topic_partitions(admin, args.topic)
    if args.to_offset is not None:
        targets = dict.fromkeys(partitions, args.to_offset)
    else:
        when: OffsetSpec = "earliest" if args.to_earliest else "latest"
        listed = await admin.list_offsets(dict.fromkeys(partitions, when))
        targets = {tp: listed[tp].offset for tp in partitions}
    rows = [[group_id, tp.topic, str(tp.partition), str(targets[tp])] for tp in partitions]
    print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows))
    if not args.execute:
        return 0
    # (listing offsets replaced the metadata with that of the topics alone)
    await admin.cluster.refresh([SHARE_STATE_TOPIC, *{tp.topic for tp in partitions}])
    for tp in partitions:
        await _write_start(admin, group_id, tp, targets[tp])
    return 0


async def _write_start(admin: Admin, group_id: str, tp: TopicPartition, offset: int) -> None:
    md = admin.cluster.metadata
    assert md is not None
    topic = md.topics[tp.topic]
    state_topic = md.topics.get(SHARE_STATE_TOPIC)
    if state_topic is None:
        return  # the group never fetched: there is no state to move
    key = ShareStateKey(group_id, topic.topic_id, tp.partition)
    index = state_partition_for(key, len(state_topic.partitions))
    conn = await admin.cluster.node(state_topic.partitions[index].leader)
    current = await read_share_group_state(conn, group_id, topic.topic_id, tp.partition, -1)
    error = ErrorCode(current["error_code"])
    if error != ErrorCode.NONE:
        raise KafkaError(error, f"reading the share state of {tp.topic}-{tp.partition}")
    written = await write_share_group_state(
        conn, group_id, topic.topic_id, tp.partition, current["state_epoch"] + 1, -1,
        offset, [],
    )
    if written != ErrorCode.NONE:
        raise KafkaError(written, f"writing the share state of {tp.topic}-{tp.partition}")
