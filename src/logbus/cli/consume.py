"""`logbus consume TOPIC`: print a topic's records, one a line, like Kafka's console
consumer. Without `--group` partitions are read directly from their leaders; with it the
command joins the group as a consumer, reads the partitions assigned to it from their
committed offsets, and commits what it printed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from dataclasses import dataclass
from typing import BinaryIO

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    first_error,
    key_value,
    non_negative_int,
    run,
)
from logbus.client import admin_ops, group_ops
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.group_member import DEFAULT_SESSION_TIMEOUT_MS, GroupMember
from logbus.client.metadata import NO_LEADER
from logbus.protocol import ErrorCode
from logbus.records.batch import BatchHeader
from logbus.records.record import Record

PROPERTIES = (
    "print.key", "print.offset", "print.partition", "print.timestamp", "print.value",
    "key.separator", "line.separator", "null.literal",
)
_MAX_WAIT_MS = 500
_MAX_FAILURES = 10
_BACKOFF = 0.2

Positions = dict[int, int]
CONSUMER_PROPERTIES = (
    "session.timeout.ms", "heartbeat.interval.ms", "auto.commit.interval.ms",
    "enable.auto.commit",
)
_AUTO_COMMIT_INTERVAL_MS = 5000
# A commit refused because the group moved on without this member: its partitions are
# someone else's now, so the offsets are dropped (as Kafka's consumer does).
_STALE_MEMBER_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)


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
        help="with --group: " + ", ".join(CONSUMER_PROPERTIES) + " (repeatable)",
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
                settings = GroupSettings.from_properties(dict(args.consumer_property))
            except ValueError as exc:
                parser.error(str(exc))
            return run(consume_group(args, settings, sys.stdout.buffer))
        if args.consumer_property:
            parser.error("--consumer-property needs --group")
        return run(consume(args, sys.stdout.buffer))

    parser.set_defaults(func=run_consume)


def _offset(text: str) -> int:
    named = {"earliest": admin_ops.EARLIEST, "latest": admin_ops.LATEST}
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

    def line(self, partition: int, header: BatchHeader, record: Record) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if header.is_log_append_time else "CreateTime"
            stamp = "NO_TIMESTAMP" if record.timestamp < 0 else f"{kind}:{record.timestamp}"
            parts.append(stamp.encode())
        if self.print_partition:
            parts.append(b"Partition:%d" % partition)
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


async def consume(args: argparse.Namespace, out: BinaryIO) -> int:
    fmt = RecordFormat.from_args(args)
    count = 0
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-console-consumer"
    ) as cluster:
        info = (await cluster.refresh([args.topic])).topic(args.topic)
        if args.partition is not None and args.partition not in info.partitions:
            raise CommandError(
                f"Topic '{args.topic}' has no partition {args.partition} "
                f"(it has {len(info.partitions)})"
            )
        partitions = [args.partition] if args.partition is not None else list(info.partitions)
        reset = admin_ops.EARLIEST if args.from_beginning else admin_ops.LATEST
        start = args.offset if args.offset is not None else reset
        reader = _PartitionReader(cluster, args.topic, reset)
        try:
            await reader.seek(partitions, start)
            last_record = time.monotonic()
            while args.max_messages is None or count < args.max_messages:
                wait_ms = _MAX_WAIT_MS
                if args.timeout_ms is not None:
                    left = args.timeout_ms - (time.monotonic() - last_record) * 1000
                    if left <= 0:
                        break
                    wait_ms = max(0, min(wait_ms, int(left)))
                lines: list[bytes] = []
                for partition, header, record in await reader.poll(wait_ms):
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                    lines.append(fmt.line(partition, header, record))
                    count += 1
                if lines:
                    out.write(b"".join(lines))
                    out.flush()
                    last_record = time.monotonic()
        finally:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The `--consumer-property` settings of a group consumer (Kafka's names)."""

    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int | None = None
    auto_commit_interval_ms: int = _AUTO_COMMIT_INTERVAL_MS
    enable_auto_commit: bool = True

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> GroupSettings:
        unknown = sorted(set(props) - set(CONSUMER_PROPERTIES))
        if unknown:
            raise ValueError(
                f"unknown consumer property {unknown[0]!r} "
                f"(known: {', '.join(CONSUMER_PROPERTIES)})"
            )

        def number(name: str, default: int | None) -> int | None:
            if name not in props:
                return default
            try:
                value = int(props[name])
            except ValueError:
                value = 0
            if value <= 0:
                raise ValueError(f"{name} must be a positive number of ms, got {props[name]!r}")
            return value

        session = number("session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS)
        auto_commit = number("auto.commit.interval.ms", _AUTO_COMMIT_INTERVAL_MS)
        assert session is not None and auto_commit is not None
        return cls(
            session_timeout_ms=session,
            heartbeat_interval_ms=number("heartbeat.interval.ms", None),
            auto_commit_interval_ms=auto_commit,
            enable_auto_commit=props.get("enable.auto.commit", "true").strip().lower() == "true",
        )


async def consume_group(args: argparse.Namespace, settings: GroupSettings, out: BinaryIO) -> int:
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
    args: argparse.Namespace, settings: GroupSettings, out: BinaryIO
) -> int:
    """Join, read the assigned partitions from their committed offsets (or per
    --from-beginning), commit what was printed every auto.commit.interval.ms, before
    rejoining and at exit, then leave the group."""
    fmt = RecordFormat.from_args(args)
    count = 0
    topic = args.topic
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-console-consumer"
    ) as cluster:
        (await cluster.refresh([topic])).topic(topic)
        member = GroupMember(
            cluster,
            args.group,
            [topic],
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
        )
        reset = admin_ops.EARLIEST if args.from_beginning else admin_ops.LATEST
        # Offsets to commit: one past the last record printed, per partition.
        consumed: Positions = {}
        committed: Positions = {}

        async def commit() -> None:
            pending = {(topic, p): o for p, o in consumed.items() if committed.get(p) != o}
            if not pending:
                return
            try:
                await member.commit(pending)
            except KafkaError as exc:
                if exc.code in _STALE_MEMBER_ERRORS:
                    consumed.clear()  # no longer ours to commit
                elif not (exc.retriable or exc.code in group_ops.COORDINATOR_ERRORS):
                    raise
                # Otherwise the offsets stay pending, for the next commit.
                print(f"logbus: warning: offsets not committed: {exc}", file=sys.stderr)
                return
            committed.update({p: o for (_, p), o in pending.items()})

        async def assign() -> _PartitionReader:
            assignment = await member.join()
            partitions = sorted(assignment.get(topic, []))
            reader = _PartitionReader(cluster, topic, reset)
            found = await member.committed([(topic, p) for p in partitions])
            starts = {p: found[(topic, p)] for p in partitions if (topic, p) in found}
            for partition, offset in starts.items():
                await reader.seek([partition], offset)
            await reader.seek([p for p in partitions if p not in starts], reset)
            consumed.clear()
            committed.clear()
            committed.update(starts)
            return reader

        try:
            async with member:
                try:
                    reader = await assign()
                    last_record = last_commit = time.monotonic()
                    while args.max_messages is None or count < args.max_messages:
                        wait_ms = _MAX_WAIT_MS
                        if args.timeout_ms is not None:
                            left = args.timeout_ms - (time.monotonic() - last_record) * 1000
                            if left <= 0:
                                break
                            wait_ms = max(0, min(wait_ms, int(left)))
                        if member.rejoin_needed.is_set():
                            member.raise_heartbeat_error()
                            await commit()
                            reader = await assign()
                            continue
                        if settings.enable_auto_commit and (
                            time.monotonic() - last_commit
                        ) * 1000 >= settings.auto_commit_interval_ms:
                            await commit()
                            last_commit = time.monotonic()
                        if not reader.positions:
                            await _wait_for(member.rejoin_needed, wait_ms / 1000)
                            continue
                        lines: list[bytes] = []
                        for partition, header, record in await reader.poll(wait_ms):
                            if args.max_messages is not None and count >= args.max_messages:
                                break
                            lines.append(fmt.line(partition, header, record))
                            consumed[partition] = record.offset + 1
                            count += 1
                        if lines:
                            out.write(b"".join(lines))
                            out.flush()
                            last_record = time.monotonic()
                finally:
                    if settings.enable_auto_commit:
                        await commit()
        finally:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


async def _wait_for(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class _PartitionReader:
    """Positions in some partitions of one topic, advanced by fetching from each leader.
    Retriable errors (leader moves, lost connections) refresh metadata and try again, a
    few times in a row at most. Not shared between tasks."""

    def __init__(self, cluster: Cluster, topic: str, reset: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.reset = reset
        self.positions: Positions = {}
        self._failures = 0

    def _by_leader(self, partitions: list[int]) -> dict[int, list[int]]:
        md = self.cluster.metadata
        groups: dict[int, list[int]] = {}
        for partition in partitions:
            try:
                leader = md.leader(self.topic, partition) if md is not None else NO_LEADER
            except KafkaError:
                leader = NO_LEADER
            groups.setdefault(leader, []).append(partition)
        return groups

    async def seek(self, partitions: list[int], offset: int) -> None:
        """Set positions: a real offset as it is, EARLIEST/LATEST asked of the leaders."""
        if offset >= 0:
            self.positions.update(dict.fromkeys(partitions, offset))
            return
        pending = list(partitions)
        while pending:
            failed: list[int] = []
            for leader, group in self._by_leader(pending).items():
                if leader == NO_LEADER:
                    failed += group
                    continue
                try:
                    conn = await self.cluster.node(leader)
                    found = await admin_ops.list_offsets_many(
                        conn, {(self.topic, p): offset for p in group}
                    )
                except KafkaConnectionError:
                    failed += group
                    continue
                for (_, partition), value in found.items():
                    if isinstance(value, KafkaError):
                        if not value.retriable:
                            raise value
                        failed.append(partition)
                    else:
                        self.positions[partition] = value
            pending = failed
            if pending:
                await self._back_off(KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "ListOffsets"))

    async def poll(self, wait_ms: int) -> list[tuple[int, BatchHeader, Record]]:
        """Fetch once from every leader (in parallel); records in partition order."""
        groups = self._by_leader(list(self.positions))
        results: dict[int, admin_ops.FetchedPartition | KafkaError] = {}
        try:
            async with asyncio.TaskGroup() as tasks:
                for leader, group in groups.items():
                    tasks.create_task(self._fetch(leader, group, wait_ms, results))
        except BaseExceptionGroup as group_error:
            raise first_error(group_error) from None
        records: list[tuple[int, BatchHeader, Record]] = []
        retry: KafkaError | None = None
        for partition in sorted(results):
            result = results[partition]
            if isinstance(result, KafkaError):
                if result.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self.seek([partition], self.reset)
                elif result.retriable:
                    retry = result
                else:
                    raise result
                continue
            for header, batch in result.batches:
                records.extend((partition, header, record) for record in batch)
            self.positions[partition] = result.next_offset
        if retry is not None:
            await self._back_off(retry)
        else:
            self._failures = 0
        return records

    async def _fetch(
        self,
        leader: int,
        partitions: list[int],
        wait_ms: int,
        results: dict[int, admin_ops.FetchedPartition | KafkaError],
    ) -> None:
        if leader == NO_LEADER:
            error = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {self.topic}")
            results.update(dict.fromkeys(partitions, error))
            return
        md = self.cluster.metadata
        info = md.topics.get(self.topic) if md is not None else None
        topic_id = info.topic_id if info is not None else None
        try:
            conn = await self.cluster.node(leader)
            fetched = await admin_ops.fetch_many(
                conn,
                {(self.topic, p): self.positions[p] for p in partitions},
                max_wait_ms=wait_ms,
                topic_ids={self.topic: topic_id} if topic_id is not None else None,
            )
        except KafkaConnectionError as exc:
            results.update(dict.fromkeys(partitions, exc))
            return
        for (_, partition), value in fetched.items():
            results[partition] = value

    async def _back_off(self, error: KafkaError) -> None:
        self._failures += 1
        if self._failures > _MAX_FAILURES:
            raise error
        await asyncio.sleep(_BACKOFF * self._failures)
        await self.cluster.refresh([self.topic])
