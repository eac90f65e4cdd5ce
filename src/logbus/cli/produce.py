"""`logbus produce TOPIC`: send each line of standard input as a record, like Kafka's
console producer (`parse.key`, `key.separator`, `null.marker`, `ignore.error` properties).

Lines are read in large chunks when they are already waiting (a pipe or a file), so many
lines travel in one batch per partition and one Produce request per broker; a person
typing at a terminal gets each line sent as it is entered.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    key_value,
    positive_int,
    run,
    whole_number,
)
from logbus.cli.sender import Sender, TopicPartition, wait_for_topic
from logbus.client.cluster import Cluster
from logbus.client.partitioner import StickyPartitioner, partition_for_key
from logbus.records.builder import NewRecord
from logbus.records.compression import CompressionType

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
PROPERTIES = ("parse.key", "key.separator", "null.marker", "ignore.error")
_READ_SIZE = 1 << 20
_QUEUED_CHUNKS = 4  # chunks read ahead of what has been sent
# Record overhead in a batch beyond key and value, at its largest for small records.
_RECORD_OVERHEAD = 24


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "produce", help="send lines of standard input to a topic", description=__doc__
    )
    parser.add_argument("topic")
    add_bootstrap(parser)
    parser.add_argument(
        "--acks",
        choices=list(ACKS),
        default="all",
        help="acknowledgements to wait for: 0 (none), 1 (leader), all/-1 (every in-sync "
        "replica; the default)",
    )
    parser.add_argument(
        "--compression",
        choices=[c.config_name for c in CompressionType],
        default="none",
        help="compression codec for record batches (default: none)",
    )
    parser.add_argument(
        "--partition", type=_partition, help="send every record to this partition"
    )
    parser.add_argument(
        "--property",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="line reader property: " + ", ".join(PROPERTIES) + " (repeatable)",
    )
    parser.add_argument("--parse-key", action="store_true", help="same as parse.key=true")
    parser.add_argument(
        "--key-separator", metavar="SEP", help="what splits key from value (default: tab)"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=256 * 1024,
        metavar="BYTES",
        help="largest batch of records to one partition before compression "
        "(default: 262144)",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=positive_int,
        default=30_000,
        metavar="MS",
        help="how long to wait for a broker's answer (default: 30000)",
    )

    def run_produce(args: argparse.Namespace) -> int:
        try:
            fmt = line_format(args)
        except CommandError as exc:
            parser.error(str(exc))
        return run(produce(args, fmt))

    parser.set_defaults(func=run_produce)


def _partition(text: str) -> int:
    return whole_number(text, 0, "partition must not be negative", "a partition number")


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line becomes a record (Kafka's LineMessageReader properties)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    null_marker: bytes | None = None
    ignore_error: bool = False

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None]:
        key: bytes | None = None
        value: bytes | None = line
        if self.parse_key:
            head, sep, tail = line.partition(self.key_separator)
            if sep:
                key, value = head, tail
            elif not self.ignore_error:
                text = line.decode("utf-8", "replace")
                raise CommandError(f"No key separator found on line number {number}: '{text}'")
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return key, value


def _bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise CommandError(f"property {name} must be true or false, got {text!r}")
    return lowered == "true"


def line_format(args: argparse.Namespace) -> LineFormat:
    props = dict(args.property)
    unknown = sorted(set(props) - set(PROPERTIES))
    if unknown:
        raise CommandError(
            f"unknown property {unknown[0]!r} (known: {', '.join(PROPERTIES)})"
        )
    parse_key = args.parse_key or _bool("parse.key", props.get("parse.key", "false"))
    separator = args.key_separator if args.key_separator is not None else props.get(
        "key.separator", "\t"
    )
    if not separator:
        raise CommandError("the key separator must not be empty")
    marker = props.get("null.marker")
    return LineFormat(
        parse_key=parse_key,
        key_separator=separator.encode("utf-8"),
        null_marker=None if marker is None else marker.encode("utf-8"),
        ignore_error=_bool("ignore.error", props.get("ignore.error", "false")),
    )


@dataclass(slots=True)
class LineSplitter:
    """Cuts chunks of bytes into lines ("\\n", with a "\\r" before it dropped); the text
    after the last newline waits for the next chunk, or for `end()`."""

    _rest: bytes = b""
    count: int = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        self.count += len(lines)
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def end(self) -> list[bytes]:
        rest, self._rest = self._rest, b""
        if not rest:
            return []
        self.count += 1
        return [rest[:-1] if rest.endswith(b"\r") else rest]


def _read_stdin(
    stream: BinaryIO,
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue[bytes | None],
    room: threading.Semaphore,
) -> None:
    """Thread body: hand over whatever standard input has, as soon as it has it. Each
    chunk takes one of `room`'s slots (the reader gives it back), so a large file is read
    only as fast as it is sent. No coroutine is made here: one left unscheduled when the
    loop closes would print a "never awaited" warning."""
    read = getattr(stream, "read1", stream.read)
    try:
        while True:
            try:
                chunk: bytes | None = read(_READ_SIZE) or None
            except (OSError, ValueError):
                chunk = None
            room.acquire()
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
            if chunk is None:
                return
    except BaseException:  # the loop closed: the command is over
        return


@dataclass(slots=True)
class Accumulator:
    """Records waiting to be sent, per partition, and when a partition's batch is full."""

    batch_size: int
    pending: dict[int, list[NewRecord]] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)

    def add(self, partition: int, key: bytes | None, value: bytes | None) -> bool:
        """Queue a record; True when the partition's batch has reached batch_size."""
        self.pending.setdefault(partition, []).append(NewRecord(key, value))
        size = self.sizes.get(partition, 0) + _RECORD_OVERHEAD
        size += (len(key) if key else 0) + (len(value) if value else 0)
        self.sizes[partition] = size
        return size >= self.batch_size

    def take(self, partition: int) -> list[NewRecord]:
        self.sizes.pop(partition, None)
        return self.pending.pop(partition, [])

    def take_all(self) -> Iterator[tuple[int, list[NewRecord]]]:
        for partition in list(self.pending):
            yield partition, self.take(partition)


async def produce(args: argparse.Namespace, fmt: LineFormat, stdin: BinaryIO | None = None) -> int:
    stream = sys.stdin.buffer if stdin is None else stdin
    async with await Cluster.connect(
        args.bootstrap_server,
        client_id="logbus-console-producer",
        request_timeout=args.request_timeout_ms / 1000,
    ) as cluster:
        info = await wait_for_topic(cluster, args.topic, auto_create=True)
        count = len(info.partitions)
        if args.partition is not None and args.partition not in info.partitions:
            raise CommandError(
                f"Topic '{args.topic}' has no partition {args.partition} (it has {count})"
            )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        room = threading.Semaphore(_QUEUED_CHUNKS)
        # A daemon thread, not the default executor: a read blocked on a terminal must
        # not keep the process alive after an error.
        threading.Thread(
            target=_read_stdin,
            args=(stream, loop, queue, room),
            name="logbus-stdin",
            daemon=True,
        ).start()
        sender = Sender(
            cluster,
            acks=ACKS[args.acks],
            compression=CompressionType.from_name(args.compression),
            timeout_ms=args.request_timeout_ms,
        )
        splitter = LineSplitter()
        acc = Accumulator(args.batch_size)
        sticky = StickyPartitioner(count)
        async with sender:
            while True:
                chunk = await queue.get()
                room.release()
                lines = splitter.end() if chunk is None else splitter.feed(chunk)
                first = splitter.count - len(lines) + 1
                for number, line in enumerate(lines, first):
                    key, value = fmt.parse(line, number)
                    if args.partition is not None:
                        partition = args.partition
                    elif key is not None:
                        partition = partition_for_key(key, count)
                    else:
                        partition = sticky.current
                    if acc.add(partition, key, value):
                        await sender.send({(args.topic, partition): acc.take(partition)})
                        if partition == sticky.current:
                            sticky.next_batch()
                if chunk is not None and not queue.empty():
                    continue  # more input is already waiting: keep filling batches
                ready: dict[TopicPartition, list[NewRecord]] = {
                    (args.topic, p): records for p, records in acc.take_all()
                }
                if ready:
                    await sender.send(ready)
                    sticky.next_batch()
                if chunk is None:
                    break
    return 0
