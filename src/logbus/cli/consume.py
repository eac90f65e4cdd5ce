"""`logbus consume TOPIC`: print a topic's records, one a line, like Kafka's console
consumer, reading with logbus's own `Consumer`. Without `--group` it reads the chosen
partitions from their leaders (assign); with it the command joins the group as a
consumer, reads the partitions assigned to it from their committed offsets, and commits
what it printed."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_settings,
    key_value,
    non_negative_int,
    run,
)
from logbus.client.consumer import Consumer, ConsumerRecord
from logbus.client.consumer.config import CONSUMER_CONFIG
from logbus.client.consumer.records import TIMESTAMP_LOG_APPEND_TIME
from logbus.client.requests.list_offsets import EARLIEST, LATEST
from logbus.client.types import TopicPartition
from logbus.common.config_def import ConfigError

PROPERTIES = (
    "print.key", "print.offset", "print.partition", "print.timestamp", "print.value",
    "key.separator", "line.separator", "null.literal",
)
CLIENT_ID = "logbus-console-consumer"
_MAX_WAIT_MS = 500
# Settings the command makes itself; every other consumer setting may be given.
_FIXED_SETTINGS = frozenset(
    {"bootstrap.servers", "group.id", "client.id", "key.deserializer", "value.deserializer"}
)
CONSUMER_PROPERTIES = (
    "session.timeout.ms", "heartbeat.interval.ms", "auto.commit.interval.ms",
    "enable.auto.commit",
)
_DEFAULT_HEARTBEAT_MS = 3000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("consume", help="print records of a topic", description=__doc__)
    parser.add_argument("topic")
    add_bootstrap(parser)
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset, not the end"
    )
    parser.add_argument("--partition", type=non_negative_int, help="read only this partition")
    parser.add_argument(
        "--offset",
        type=_offset,
        metavar="N|earliest|latest",
        help="where to start in --partition (default: latest)",
    )
    parser.add_argument(
        "--group", metavar="GROUP", help="consume as a member of this consumer group"
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="with --group: a consumer setting, such as "
        + ", ".join(CONSUMER_PROPERTIES)
        + " (repeatable)",
    )
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        help="read_committed: only records of committed transactions, up to the last "
        "stable offset (default: read_uncommitted)",
    )
    parser.add_argument(
        "--max-messages", type=non_negative_int, metavar="N", help="exit after N records"
    )
    parser.add_argument(
        "--timeout-ms",
        type=non_negative_int,
        metavar="MS",
        help="exit after MS ms without a record",
    )
    for flag in ("key", "offset", "partition", "timestamp"):
        parser.add_argument(f"--print-{flag}", action="store_true", help=f"print each {flag}")
    parser.add_argument(
        "--key-separator", metavar="SEP", help="what follows each printed field (default: tab)"
    )
    parser.add_argument(
        "--property",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="formatter property: " + ", ".join(PROPERTIES) + " (repeatable)",
    )

    def run_consume(args: argparse.Namespace) -> int:
        if args.offset is not None and args.partition is None:
            parser.error("the partition is required when an offset is given")
        if args.offset is not None and args.from_beginning:
            parser.error("--from-beginning and --offset cannot be given together")
        unknown = sorted({k for k, _ in args.property} - set(PROPERTIES))
        if unknown:
            parser.error(f"unknown property {unknown[0]!r} (known: {', '.join(PROPERTIES)})")
        if args.group is not None:
            if args.partition is not None:
                parser.error("--partition cannot be used with --group")
            try:
                settings = group_settings(dict(args.consumer_property))
            except ConfigError as exc:
                parser.error(str(exc))
            return run(consume_group(args, settings, sys.stdout.buffer))
        if args.consumer_property:
            parser.error("--consumer-property needs --group")
        return run(consume(args, sys.stdout.buffer))

    parser.set_defaults(func=run_consume)


def _offset(text: str) -> int:
    named = {"earliest": EARLIEST, "latest": LATEST}
    if text.lower() in named:
        return named[text.lower()]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative offset, 'earliest' or 'latest', got {text!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """How a record is printed (Kafka's DefaultMessageFormatter): the chosen fields, each
    followed by the key separator, then the value and the line separator."""

    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_timestamp: bool = False
    print_value: bool = True
    separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    null_literal: bytes = b"null"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RecordFormat:
        props = dict(args.property)

        def flag(name: str, given: bool, default: bool = False) -> bool:
            value = props.get(name)
            return given or (default if value is None else value.strip().lower() == "true")

        separator = args.key_separator or props.get("key.separator", "\t")
        return cls(
            print_key=flag("print.key", args.print_key),
            print_offset=flag("print.offset", args.print_offset),
            print_partition=flag("print.partition", args.print_partition),
            print_timestamp=flag("print.timestamp", args.print_timestamp),
            print_value=flag("print.value", False, default=True),
            separator=separator.encode("utf-8"),
            line_separator=props.get("line.separator", "\n").encode("utf-8"),
            null_literal=props.get("null.literal", "null").encode("utf-8"),
        )

    def line(self, record: ConsumerRecord) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            log_append = record.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
            kind = "LogAppendTime" if log_append else "CreateTime"
            stamp = "NO_TIMESTAMP" if record.timestamp < 0 else f"{kind}:{record.timestamp}"
            parts.append(stamp.encode())
        if self.print_partition:
            parts.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            parts.append(b"Offset:%d" % record.offset)
        if self.print_key:
            parts.append(self._text(record.key))
        out = b"".join(part + self.separator for part in parts)
        if self.print_value:
            out += self._text(record.value)
        return out + self.line_separator

    def _text(self, data: bytes | None) -> bytes:
        if data is None:
            return self.null_literal
        return data.decode("utf-8", "replace").encode("utf-8")


class _Printer:
    """Polls a consumer and prints what it returns, until --max-messages records or
    --timeout-ms without one. Polls for no more records than it may still print, so the
    consumer's position (what a group commits) is exactly what was printed."""

    def __init__(self, args: argparse.Namespace, out: BinaryIO) -> None:
        self.args = args
        self.out = out
        self.format = RecordFormat.from_args(args)
        self.count = 0

    async def run(self, consumer: Consumer) -> None:
        args = self.args
        last_record = time.monotonic()
        while args.max_messages is None or self.count < args.max_messages:
            wait_ms = _MAX_WAIT_MS
            if args.timeout_ms is not None:
                left = args.timeout_ms - (time.monotonic() - last_record) * 1000
                if left <= 0:
                    break
                wait_ms = max(0, min(wait_ms, int(left)))
            limit = None if args.max_messages is None else args.max_messages - self.count
            records = await consumer.poll(timeout_ms=wait_ms, max_records=limit)
            if records:
                line = self.format.line
                self.out.write(b"".join([line(r) for r in records]))
                self.out.flush()
                self.count += len(records)
                last_record = time.monotonic()

    def report(self) -> None:
        print(f"Processed a total of {self.count} messages", file=sys.stderr)


async def consume(args: argparse.Namespace, out: BinaryIO) -> int:
    """Read the topic's partitions (or --partition) from --offset, the beginning or the
    end, without a group."""
    printer = _Printer(args, out)
    consumer = Consumer(
        client_settings(args),
        bootstrap_servers=args.bootstrap_server,
        client_id=CLIENT_ID,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        enable_auto_commit=False,
        isolation_level=args.isolation_level or "read_uncommitted",
    )
    async with consumer:
        partitions = await consumer.partitions_for_topic(args.topic)
        if args.partition is not None and args.partition not in partitions:
            raise CommandError(
                f"Topic '{args.topic}' has no partition {args.partition} "
                f"(it has {len(partitions)})"
            )
        chosen = [args.partition] if args.partition is not None else sorted(partitions)
        consumer.assign([TopicPartition(args.topic, p) for p in chosen])
        if args.offset is not None:
            tp = TopicPartition(args.topic, args.partition)
            if args.offset == EARLIEST:
                consumer.seek_to_beginning(tp)
            elif args.offset == LATEST:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, args.offset)
        try:
            await printer.run(consumer)
        finally:
            printer.report()
    return 0


def group_settings(props: dict[str, str]) -> dict[str, Any]:
    """The consumer settings of `--consumer-property` pairs (ConfigError for a name the
    consumer does not know or the command sets itself, or a bad value)."""
    for name in props:
        if name not in CONSUMER_CONFIG.settings or name in _FIXED_SETTINGS:
            raise ConfigError(
                f"unknown consumer property {name!r} (known: {', '.join(CONSUMER_PROPERTIES)}, "
                "and the other consumer settings)"
            )
    settings: dict[str, Any] = dict(props)
    if "session.timeout.ms" in props and "heartbeat.interval.ms" not in props:
        # Kafka's console consumer heartbeats at most every third of the session.
        session = CONSUMER_CONFIG.settings["session.timeout.ms"].check(props["session.timeout.ms"])
        settings["heartbeat.interval.ms"] = max(1, min(_DEFAULT_HEARTBEAT_MS, session // 3))
    CONSUMER_CONFIG.parse(settings)  # bad values are reported before anything starts
    return settings


async def consume_group(args: argparse.Namespace, settings: dict[str, Any], out: BinaryIO) -> int:
    """Consume as a member of `args.group` (see `_consume_group`). SIGTERM ends it as Ctrl-C
    does, offsets committed and the group left, with exit status 143."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await _consume_group(args, settings, out)
    except asyncio.CancelledError:
        if not terminated:
            raise
        task.uncancel()
        return 128 + signal.SIGTERM
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _consume_group(
    args: argparse.Namespace, settings: dict[str, Any], out: BinaryIO
) -> int:
    """Subscribe as a member of the group; the consumer starts each assigned partition at
    the committed offset (else per --from-beginning), commits what was printed every
    auto.commit.interval.ms, before a rebalance and at exit, then leaves the group."""
    printer = _Printer(args, out)
    if args.isolation_level is not None:
        settings = {**settings, "isolation.level": args.isolation_level}
    consumer = Consumer(
        {**client_settings(args), **settings},
        bootstrap_servers=args.bootstrap_server,
        client_id=CLIENT_ID,
        group_id=args.group,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
    )
    async with consumer:
        await consumer.partitions_for_topic(args.topic)  # the topic must exist
        consumer.subscribe([args.topic])
        try:
            await printer.run(consumer)
        finally:
            printer.report()
    return 0
