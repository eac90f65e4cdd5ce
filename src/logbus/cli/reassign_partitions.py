"""`logbus reassign-partitions`: move partitions between brokers (KIP-455), as Kafka's
`kafka-reassign-partitions` does, with its JSON documents and its output.

    logbus reassign-partitions --bootstrap-server B
        --generate --topics-to-move-json-file F --broker-list 0,1,2 [--disable-rack-aware]
      | --execute --reassignment-json-file F [--additional] [--throttle BYTES/S]
                  [--replica-alter-log-dirs-throttle BYTES/S] [--timeout MS]
      | --verify --reassignment-json-file F [--preserve-throttles]
      | --cancel --reassignment-json-file F [--preserve-throttles]
      | --list

`--generate` proposes an assignment of the topics' partitions over the brokers listed
(nothing changes); `--execute` starts the moves (AlterPartitionReassignments on the
controller) after printing the current assignment to keep for a rollback, and the moves
between log dirs the document's `log_dirs` ask for (reassignment_log_dirs.py); `--verify`
tells, per partition, whether its move completed, and once all did removes the
replication throttles; `--cancel` reverts moves in progress to their original replicas;
`--list` shows the moves in progress. The JSON formats are in `reassignment_json.py`.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence

from logbus.cli.common import CommandError, add_bootstrap, admin_command, positive_int
from logbus.cli.reassignment_json import (
    ReplicaLogDir,
    format_reassignment,
    parse_reassignment,
    parse_replica_log_dirs,
    parse_topics_to_move,
)
from logbus.cli.reassignment_log_dirs import log_dir_move_states, start_log_dir_moves
from logbus.cli.reassignment_throttles import (
    add_log_dir_throttle,
    add_throttles,
    clear_throttles,
    throttle_rate,
)
from logbus.client.admin import Admin, AdminBatchError
from logbus.client.errors import KafkaError
from logbus.controller.assignment import ControllerError, assign_replicas
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

ACTIONS = ("generate", "execute", "verify", "cancel", "list")

# Which options each action accepts (kafka-reassign-partitions refuses the others).
_OPTIONS = {
    "topics_to_move_json_file": ("--topics-to-move-json-file", {"generate"}),
    "broker_list": ("--broker-list", {"generate"}),
    "disable_rack_aware": ("--disable-rack-aware", {"generate"}),
    "reassignment_json_file": ("--reassignment-json-file", {"execute", "verify", "cancel"}),
    "additional": ("--additional", {"execute"}),
    "throttle": ("--throttle", {"execute"}),
    "replica_alter_log_dirs_throttle": ("--replica-alter-log-dirs-throttle", {"execute"}),
    "timeout": ("--timeout", {"execute"}),
    "preserve_throttles": ("--preserve-throttles", {"verify", "cancel"}),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reassign-partitions",
        help="move partitions to other brokers, change replication factors",
        description="Generate, execute, verify, cancel or list partition reassignments "
        "(kafka-reassign-partitions' options and JSON formats).",
    )
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=_HELP[action])
    parser.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='with --generate: {"version":1,"topics":[{"topic":"foo"}]}',
    )
    parser.add_argument(
        "--broker-list", metavar="0,1,2", help="with --generate: the brokers to spread over"
    )
    parser.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="with --generate: ignore the brokers' racks",
    )
    parser.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help="the reassignment to execute, verify or cancel (--generate's proposal format)",
    )
    parser.add_argument(
        "--additional",
        action="store_true",
        help="with --execute: start these moves although others are in progress",
    )
    parser.add_argument(
        "--throttle",
        type=throttle_rate,
        metavar="BYTES/S",
        help="with --execute: cap the replication traffic of the moves (bytes/s per broker)",
    )
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=throttle_rate,
        metavar="BYTES/S",
        help="with --execute: cap the copy of replicas between log dirs (bytes/s per broker)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_int,
        metavar="MS",
        help="with --execute: how long to wait for the log dir moves to start (default: 10000)",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify or --cancel: keep the replication throttles",
    )
    add_bootstrap(parser)
    parser.set_defaults(
        func=admin_command(_run, "logbus-reassign-partitions", _check, parser, first_error=True)
    )


_HELP = {
    "generate": "propose an assignment of the topics over the brokers (changes nothing)",
    "execute": "start the reassignment of the JSON file",
    "verify": "tell whether the reassignment completed; then remove the throttles",
    "cancel": "revert the moves in progress of the JSON file to their original replicas",
    "list": "list the reassignments in progress",
}


def _check(args: argparse.Namespace) -> str | None:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return (
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, or --list"
        )
    action = chosen[0]
    for dest, (flag, allowed) in _OPTIONS.items():
        value = getattr(args, dest)
        if value not in (None, False) and action not in allowed:
            return f'Option "{flag}" can\'t be used with action "--{action}"'
    if action == "generate" and (args.topics_to_move_json_file is None or not args.broker_list):
        return "--generate needs --topics-to-move-json-file and --broker-list"
    if action in ("execute", "verify", "cancel") and args.reassignment_json_file is None:
        return f"--{action} needs --reassignment-json-file"
    return None


def _read(path: str, flag: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"{flag}: {exc.strerror}: {path}") from None


async def _run(admin: Admin, args: argparse.Namespace) -> int:
    if args.generate:
        return await _generate(admin, args)
    if args.list:
        return await _list(admin)
    text = _read(args.reassignment_json_file, "--reassignment-json-file")
    proposed = parse_reassignment(text)
    log_dirs = parse_replica_log_dirs(text)
    if args.execute:
        status = await _execute(admin, args, proposed)
        return await _execute_log_dirs(admin, args, log_dirs) if log_dirs else status
    if args.verify:
        return await _verify(admin, args, proposed, log_dirs)
    return await _cancel(admin, args, proposed)


def _names(tps: Sequence[TopicPartition]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps))


# --- current state ------------------------------------------------------------------------


async def current_replicas(
    admin: Admin, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, list[int]]:
    """The replicas of each partition now; CommandError naming a missing one."""
    topics = sorted({tp.topic for tp in partitions})
    try:
        described = await admin.describe_topics(topics)
    except AdminBatchError as exc:
        missing = sorted(exc.errors)
        raise CommandError(
            f"Topic(s) {','.join(str(t) for t in missing)} do(es) not exist"
        ) from None
    out: dict[TopicPartition, list[int]] = {}
    for tp in partitions:
        info = described[tp.topic].partitions.get(tp.partition)
        if info is None:
            raise CommandError(f"Unable to find partition: {tp.topic}-{tp.partition}")
        out[tp] = list(info.replicas)
    return out


async def _broker_racks(admin: Admin) -> dict[int, str | None]:
    described = await admin.describe_cluster()
    return {int(node.node_id): node.rack for node in described.nodes}


def _check_brokers(proposed: dict[TopicPartition, list[int]], known: set[int]) -> None:
    unknown = sorted({b for rs in proposed.values() for b in rs} - known)
    if unknown:
        raise CommandError(f"Unknown broker id(s) {','.join(map(str, unknown))}")


# --- actions ------------------------------------------------------------------------------


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"--broker-list: not a list of broker ids: {text!r}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise CommandError(
            f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}"
        )
    return brokers


async def _generate(admin: Admin, args: argparse.Namespace) -> int:
    text = _read(args.topics_to_move_json_file, "--topics-to-move-json-file")
    topics = parse_topics_to_move(text)
    brokers = _broker_list(args.broker_list)
    racks = await _broker_racks(admin)
    unknown = sorted(set(brokers) - set(racks))
    if unknown:
        raise CommandError(f"Unknown broker id(s) in --broker-list: {','.join(map(str, unknown))}")
    try:
        described = await admin.describe_topics(topics)
    except AdminBatchError as exc:
        raise CommandError(
            f"Topic(s) {','.join(str(t) for t in sorted(exc.errors))} do(es) not exist"
        ) from None
    current: dict[TopicPartition, list[int]] = {}
    proposed: dict[TopicPartition, list[int]] = {}
    for name in topics:
        parts = described[name].partitions
        for p, info in parts.items():
            current[TopicPartition(name, p)] = list(info.replicas)
        rf = len(next(iter(parts.values())).replicas)
        try:
            assignment = assign_replicas(
                brokers,
                len(parts),
                rf,
                start_index=random.randrange(len(brokers)),
                racks=None if args.disable_rack_aware else {b: racks[b] for b in brokers},
            )
        except ControllerError as exc:
            raise CommandError(f"Topic {name}: {exc.message}") from None
        for p, replicas in assignment.items():
            proposed[TopicPartition(name, p)] = replicas
    print("Current partition replica assignment")
    print(format_reassignment(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_reassignment(proposed))
    return 0


async def _execute(
    admin: Admin, args: argparse.Namespace, proposed: dict[TopicPartition, list[int]]
) -> int:
    current = await current_replicas(admin, list(proposed))
    _check_brokers(proposed, set(await _broker_racks(admin)))
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise CommandError(
            "Cannot execute because there is an existing partition assignment.  Use "
            "--additional to override this and create a new partition assignment in "
            "addition to the existing one. The --additional flag can also be used to "
            "change the throttle by resubmitting the current reassignment."
        )
    print("Current partition replica assignment")
    print()
    print(format_reassignment(current))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None:
        await add_throttles(admin, current, proposed, args.throttle)
        print(
            "Warning: You must run --verify periodically, until the reassignment "
            "completes, to ensure the throttle is removed."
        )
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    results = await admin.alter_partition_reassignments(dict(proposed))
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        lines = [f"{t}-{p}: {e}" for (t, p), e in sorted(failed.items())]
        raise CommandError("Error reassigning partition(s):\n" + "\n".join(lines))
    plural = "" if len(results) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {_names(list(results))}")
    return 0


async def _execute_log_dirs(
    admin: Admin, args: argparse.Namespace, moves: dict[ReplicaLogDir, str]
) -> int:
    if args.replica_alter_log_dirs_throttle is not None:
        rate = args.replica_alter_log_dirs_throttle
        await add_log_dir_throttle(admin, [r.broker for r in moves], rate)
        print(f"The replica-alter-dir throttle limit was set to {rate} B/s")
    await start_log_dir_moves(admin, moves, args.timeout or 10_000)
    plural = "" if len(moves) == 1 else "s"
    print(f"Successfully started log directory move{plural} for: {','.join(map(str, moves))}")
    return 0


async def _verify(
    admin: Admin,
    args: argparse.Namespace,
    proposed: dict[TopicPartition, list[int]],
    log_dirs: dict[ReplicaLogDir, str],
) -> int:
    ongoing = await admin.list_partition_reassignments(list(proposed))
    current = await current_replicas(admin, list(proposed))
    print("Status of partition reassignment:")
    done = True
    for tp, target in sorted(proposed.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in ongoing:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
        elif current[tp] == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, target))}."
            )
    if log_dirs:
        print()
        print("Status of replica log directory movement:")
        for completed, line in (await log_dir_move_states(admin, log_dirs)).values():
            done = done and completed
            print(line)
    if done and not args.preserve_throttles:
        print()
        await clear_throttles(admin, sorted({tp.topic for tp in proposed}))
    return 0


async def _cancel(
    admin: Admin, args: argparse.Namespace, proposed: dict[TopicPartition, list[int]]
) -> int:
    await current_replicas(admin, list(proposed))
    results = await admin.alter_partition_reassignments(dict.fromkeys(proposed))
    cancelled = [tp for tp, e in results.items() if e is None]
    failed = {
        tp: e
        for tp, e in results.items()
        if isinstance(e, KafkaError) and e.code != ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    }
    if failed:
        lines = [f"{t}-{p}: {e}" for (t, p), e in sorted(failed.items())]
        raise CommandError("Error cancelling partition reassignment(s):\n" + "\n".join(lines))
    if not args.preserve_throttles:
        await clear_throttles(admin, sorted({tp.topic for tp in proposed}))
    if not cancelled:
        raise CommandError("None of the specified partition reassignments are active.")
    plural = "" if len(cancelled) == 1 else "s"
    print(f"Successfully cancelled partition reassignment{plural} for: {_names(cancelled)}")
    return 0


async def _list(admin: Admin) -> int:
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, p), a in sorted(ongoing.items()):
        print(
            f"{topic}-{p}: replicas: {','.join(map(str, a.replicas))}. "
            f"adding: {','.join(map(str, a.adding_replicas))}. "
            f"removing: {','.join(map(str, a.removing_replicas))}."
        )
    return 0
