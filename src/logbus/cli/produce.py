"""`logbus produce TOPIC`: send each line of standard input as a record, like Kafka's
console producer (`parse.key`, `key.separator`, `null.marker`, `ignore.error` properties).

Records go through logbus's own Producer (`logbus.aio.Producer`). Lines are read in large
chunks when they are already waiting (a pipe or a file), so many lines travel in one batch
per partition and one Produce request per broker; a person typing at a terminal gets each
line sent as it is entered.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_security,
    client_settings,
    key_value,
    positive_int,
    run,
    wait_for_topic,
    whole_number,
)
from logbus.client.cluster import Cluster
from logbus.client.producer import Producer, ProducerRecord, RecordMetadata
from logbus.records.compression import CompressionType

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
PROPERTIES = ("parse.key", "key.separator", "null.marker", "ignore.error")
_READ_SIZE = 1 << 20
_QUEUED_CHUNKS = 4  # chunks read ahead of what has been sent
_MAX_REQUEST_SIZE = 1024 * 1024  # the Java producer's max.request.size


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


def _reader(stream: BinaryIO) -> Callable[[int], bytes]:
    """How the stdin thread reads: straight from the file descriptor when the stream has
    one. Through the buffered reader the thread would hold its lock while it waits, and
    an interpreter exiting meanwhile (an error on an earlier line) aborts on that lock
    ("could not acquire lock ... at interpreter shutdown")."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return getattr(stream, "read1", stream.read)
    return functools.partial(os.read, fd)


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
    read = _reader(stream)
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


async def produce(args: argparse.Namespace, fmt: LineFormat, stdin: BinaryIO | None = None) -> int:
    stream = sys.stdin.buffer if stdin is None else stdin
    async with await Cluster.connect(
        args.bootstrap_server,
        client_id="logbus-console-producer",
        request_timeout=args.request_timeout_ms / 1000,
        security=client_security(args),
    ) as cluster:
        info = await wait_for_topic(cluster, args.topic, auto_create=True)
    count = len(info.partitions)
    if args.partition is not None and args.partition not in info.partitions:
        raise CommandError(
            f"Topic '{args.topic}' has no partition {args.partition} (it has {count})"
        )
    producer = Producer(
        {
            **client_settings(args),
            "bootstrap.servers": args.bootstrap_server,
            "client.id": "logbus-console-producer",
            "acks": args.acks,
            "compression.type": args.compression,
            "batch.size": args.batch_size,
            "max.request.size": max(_MAX_REQUEST_SIZE, args.batch_size),
            "request.timeout.ms": args.request_timeout_ms,
            "delivery.timeout.ms": max(120_000, args.request_timeout_ms + 5),
        }
    )
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    room = threading.Semaphore(_QUEUED_CHUNKS)
    async with producer:
        # A daemon thread, not the default executor: a read blocked on a terminal must
        # not keep the process alive after an error.
        threading.Thread(
            target=_read_stdin,
            args=(stream, loop, queue, room),
            name="logbus-stdin",
            daemon=True,
        ).start()
        splitter = LineSplitter()
        in_flight: list[asyncio.Future[list[RecordMetadata]]] = []
        try:
            while True:
                chunk = await queue.get()
                room.release()
                lines = splitter.end() if chunk is None else splitter.feed(chunk)
                first = splitter.count - len(lines) + 1
                records = []
                for number, line in enumerate(lines, first):
                    key, value = fmt.parse(line, number)
                    records.append(ProducerRecord(args.topic, value, key, args.partition))
                if records:
                    in_flight.append(await producer.send_many(records))
                _raise_failures(in_flight)
                if chunk is None:
                    break
            for done in in_flight:
                await done
        finally:
            for pending in in_flight:  # already failing: their errors are not news
                if pending.done() and not pending.cancelled():
                    pending.exception()
    return 0


def _raise_failures(in_flight: list[asyncio.Future[list[RecordMetadata]]]) -> None:
    """Forget the groups of records already acknowledged; raise the first failure."""
    while in_flight and in_flight[0].done():
        in_flight.pop(0).result()
