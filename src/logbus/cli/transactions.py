"""`logbus transactions`: list and describe transactions, describe a partition's active
producers and abort a hanging transaction, with the output of Kafka's
`kafka-transactions`, through the Admin client.

    logbus transactions list
    logbus transactions describe --transactional-id T
    logbus transactions describe-producers --topic T --partition P
    logbus transactions abort --topic T --partition P --start-offset O
    logbus transactions abort --topic T --partition P --producer-id I --producer-epoch E
                              --coordinator-epoch C
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from logbus.cli.common import add_bootstrap, admin_command, non_negative_int
from logbus.client.admin import AbortTransactionSpec, Admin
from logbus.client.types import TopicPartition

_Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "transactions", help="list, describe and abort transactions; describe producers"
    )
    actions = parser.add_subparsers(dest="transactions_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the transactions every broker coordinates")
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser("describe", help="a transactional id's state")
    describe.add_argument("--transactional-id", required=True, help="the transactional id")
    describe.set_defaults(func=_command(_describe))

    producers = actions.add_parser(
        "describe-producers", help="the producers active on a partition (from its leader)"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=non_negative_int, required=True)
    producers.set_defaults(func=_command(_describe_producers))

    abort = actions.add_parser(
        "abort",
        help="abort a hanging transaction on a partition",
        description="Write the ABORT marker of a transaction to one partition, as its "
        "coordinator would: the transaction that started at --start-offset, or the one of "
        "--producer-id, --producer-epoch and --coordinator-epoch.",
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=non_negative_int, required=True)
    abort.add_argument("--start-offset", type=non_negative_int, help="where it started")
    abort.add_argument("--producer-id", type=non_negative_int)
    abort.add_argument("--producer-epoch", type=non_negative_int)
    abort.add_argument("--coordinator-epoch", type=non_negative_int)
    abort.set_defaults(func=_command(_abort, _check_abort, abort))
    for sub in (listing, describe, producers, abort):
        add_bootstrap(sub)


def _command(
    action: _Action,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> Callable[[argparse.Namespace], int]:
    return admin_command(action, "logbus-transactions", check, parser, first_error=True)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [list(header), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _or_none(value: int) -> str:
    return "None" if value < 0 else str(value)


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    listed = await admin.list_transactions()
    rows = [
        [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state] for t in listed
    ]
    print(_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows))
    return 0


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    txn_id = args.transactional_id
    d = (await admin.describe_transactions([txn_id]))[txn_id]
    now = int(time.time() * 1000)
    duration = "None" if d.start_time_ms < 0 else str(max(now - d.start_time_ms, 0))
    header = [
        "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
        "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
        "TopicPartitions",
    ]
    row = [
        str(d.coordinator_id), d.transactional_id, str(d.producer_id), str(d.producer_epoch),
        d.state, str(d.timeout_ms), _or_none(d.start_time_ms), duration,
        ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions),
    ]
    print(_table(header, [row]))
    return 0


async def _describe_producers(admin: Admin, args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    found = (await admin.describe_producers([tp]))[tp]
    header = [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
        "LastTimestamp", "CurrentTransactionStartOffset",
    ]
    rows = [
        [
            str(p.producer_id), str(p.producer_epoch), _or_none(p.coordinator_epoch),
            str(p.last_sequence), str(p.last_timestamp), _or_none(p.current_txn_start_offset),
        ]
        for p in sorted(found, key=lambda p: p.producer_id)
    ]
    print(_table(header, rows))
    return 0


def _check_abort(args: argparse.Namespace) -> str | None:
    given = [args.producer_id, args.producer_epoch, args.coordinator_epoch]
    if args.start_offset is not None:
        if any(v is not None for v in given):
            return "give --start-offset, or the producer's id, epoch and coordinator epoch"
        return None
    if any(v is None for v in given):
        return (
            "give --start-offset, or all of --producer-id, --producer-epoch and "
            "--coordinator-epoch"
        )
    return None


async def _abort(admin: Admin, args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        spec = await admin.find_hanging_transaction(tp, args.start_offset)
    else:
        spec = AbortTransactionSpec(
            tp, args.producer_id, args.producer_epoch, args.coordinator_epoch
        )
    await admin.abort_transaction(spec)
    return 0
