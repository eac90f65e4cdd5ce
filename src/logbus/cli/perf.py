"""`logbus perf`: load generators and latency probes, as Kafka's perf tools.

    logbus perf produce --topic T --num-records N (--record-size S | --payload-file F)
                        --throughput R [--producer-props k=v ...] [--producer.config FILE]
    logbus perf consume --topic T --messages N [--group G] [--consumer.config FILE]
    logbus perf end-to-end-latency BOOTSTRAP TOPIC N ACKS SIZE [PROPERTIES_FILE]

`produce` prints what kafka-producer-perf-test prints: a line every 5 s, then the totals
with the 50th/95th/99th/99.9th latency percentiles (latency: from handing records to the
producer to their acknowledgement). `consume` prints kafka-consumer-perf-test's summary;
`end-to-end-latency` sends one record at a time and waits to read it back (Kafka's
EndToEndLatency). On a terminal a progress bar (rich) shows how far they are.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logbus.cli import perf_consume
from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_settings,
    fail,
    key_value,
    positive_int,
    run,
    security_of,
    wait_for_topic,
    whole_number,
)
from logbus.cli.perf_common import (
    MB,
    REPORT_INTERVAL,
    Reporter,
    ToolParser,
    print_metrics,
    read_properties_file,
)
from logbus.client.cluster import Cluster
from logbus.client.producer import Producer, RecordMetadata
from logbus.common.config_def import ConfigError

PRODUCE_DEFAULTS = """\
producer defaults: Kafka's producer settings and defaults (acks=all,
enable.idempotence=true, linger.ms=5, buffer.memory=33554432, no compression),
except batch.size=1000000 (Kafka: 16384, librdkafka: 1000000): each batch costs
this Python client far more than it costs Kafka's Java client, so batches of
~1 MB reach about five times the throughput of 16 KiB ones. A batch still leaves
after linger.ms when records come slowly. Any setting can be given with
--producer-props (e.g. batch.size=16384 for Kafka's). See docs/client.md."""

# Records handed to the producer at once when not throttled: 1000, or ~1 MB of them when
# they are small (100 B records: 10,000), so that the cost of each hand-over (one
# send_many, its RecordMetadata list) is spread over a batch's worth of bytes.
_CHUNK = 1000
_CHUNK_BYTES = 1_000_000
_MAX_CHUNK_SECONDS = 0.01  # when throttled: at most this much of the rate per chunk


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    perf = subparsers.add_parser(
        "perf",
        help="producer/consumer load and latency tests (Kafka's perf tools)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tools = perf.add_subparsers(
        dest="perf_command", metavar="TOOL", required=True, parser_class=ToolParser
    )
    _register_produce(tools)
    perf_consume.register(tools)
    perf_consume.register_end_to_end(tools)


# --- perf produce -------------------------------------------------------------------


def _register_produce(tools: argparse._SubParsersAction[ToolParser]) -> None:
    parser = tools.add_parser(
        "produce",
        help="send records as fast as asked and report throughput and latency "
        "(kafka-producer-perf-test)",
        epilog=PRODUCE_DEFAULTS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=positive_int, required=True, metavar="N")
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=positive_int, metavar="BYTES")
    size.add_argument(
        "--payload-file", metavar="FILE", help="payloads to pick from at random, one per line"
    )
    parser.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="DELIM",
        help="what separates the payloads of --payload-file (default: \\n)",
    )
    parser.add_argument(
        "--throughput",
        type=_throughput,
        required=True,
        metavar="RECORDS_PER_SEC",
        help="records per second at most; -1: as fast as possible",
    )
    parser.add_argument(
        "--producer-props",
        nargs="+",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="producer settings (Kafka's names), over --producer.config",
    )
    parser.add_argument(
        "--producer.config", dest="producer_config", metavar="FILE",
        help="producer settings file (.properties)",
    )
    parser.add_argument(
        "--print-metrics", action="store_true", help="print the producer's metrics at the end"
    )
    add_bootstrap(parser)
    parser.set_defaults(func=_run_produce)


def _throughput(text: str) -> int:
    value = whole_number(text, -1, "must be -1 (unthrottled) or at least 1")
    if value == 0:
        raise argparse.ArgumentTypeError("must be -1 (unthrottled) or at least 1")
    return value


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {**client_settings(args), "bootstrap.servers": args.bootstrap_server}
    if args.producer_config:
        settings.update(read_properties_file(args.producer_config))
    settings.update(dict(args.producer_props))
    settings.setdefault("client.id", "perf-producer-client")
    return settings


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        rng = random.Random()
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    try:
        data = Path(args.payload_file).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {args.payload_file}: {exc.strerror or exc}") from None
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    payloads = [p for p in data.split(delimiter) if p]
    if not payloads:
        raise CommandError(f"no payloads in {args.payload_file}")
    return payloads


def _run_produce(args: argparse.Namespace) -> int:
    try:
        payloads = _payloads(args)
        producer = Producer(producer_settings(args))
    except (CommandError, ConfigError) as exc:
        return fail(str(exc))
    return run(perf_produce(args, producer, payloads))


@dataclass
class ProduceStats:
    """Kafka's ProducerPerformance.Stats, fed a chunk of records at a time: every record
    of a chunk gets the chunk's latency. A window line is due every `interval` s."""

    start: float
    interval: float = REPORT_INTERVAL
    count: int = 0
    bytes: int = 0
    latency_sum: float = 0.0
    latency_max: float = 0.0
    latencies: list[tuple[float, int]] = field(default_factory=list)
    window_start: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_latency_sum: float = 0.0
    window_latency_max: float = 0.0

    def __post_init__(self) -> None:
        self.window_start = self.start

    def record(self, latency_ms: float, count: int, size: int, now: float) -> str | None:
        """Count a chunk; returns the window's line when the window is over."""
        self.count += count
        self.bytes += size
        self.latency_sum += latency_ms * count
        self.latency_max = max(self.latency_max, latency_ms)
        self.latencies.append((latency_ms, count))
        self.window_count += count
        self.window_bytes += size
        self.window_latency_sum += latency_ms * count
        self.window_latency_max = max(self.window_latency_max, latency_ms)
        if now - self.window_start < self.interval:
            return None
        return self.window_line(now)

    def window_line(self, now: float) -> str:
        elapsed = max(now - self.window_start, 1e-9)
        n = self.window_count
        line = (
            f"{n} records sent, {n / elapsed:.1f} records/sec "
            f"({self.window_bytes / MB / elapsed:.2f} MB/sec), "
            f"{self.window_latency_sum / max(n, 1):.1f} ms avg latency, "
            f"{self.window_latency_max:.1f} ms max latency."
        )
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_latency_sum = self.window_latency_max = 0.0
        return line

    def percentiles(self, *ps: float) -> list[int]:
        """Latency percentiles in whole ms, as Kafka's tool prints them."""
        ordered = sorted(self.latencies)
        out = []
        for p in ps:
            rank = int(p * self.count)
            seen = 0
            value = 0.0
            for latency, count in ordered:
                value = latency
                seen += count
                if seen > rank:
                    break
            out.append(int(value))
        return out

    def total_line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        n = self.count
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return (
            f"{n} records sent, {n / elapsed:f} records/sec "
            f"({self.bytes / MB / elapsed:.2f} MB/sec), "
            f"{self.latency_sum / max(n, 1):.2f} ms avg latency, "
            f"{self.latency_max:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
            f"{p99} ms 99th, {p999} ms 99.9th."
        )


def _values(payloads: list[bytes], count: int) -> Callable[[int], list[bytes]]:
    """A function giving `n` values: the one payload repeated, or random picks."""
    if len(payloads) == 1:
        repeated = payloads * count
        return lambda n: repeated if n == count else payloads * n
    rng = random.Random()
    return lambda n: rng.choices(payloads, k=n)


async def perf_produce(args: argparse.Namespace, producer: Producer, payloads: list[bytes]) -> int:
    topic, total, throughput = args.topic, args.num_records, args.throughput
    bootstrap = producer.config["bootstrap.servers"]
    security = security_of(dict(producer.config), "producer settings")
    async with await Cluster.connect(
        ",".join(bootstrap), client_id="perf-producer", security=security
    ) as cluster:
        await wait_for_topic(cluster, topic, auto_create=True)
    if throughput < 0:
        average = sum(map(len, payloads)) // len(payloads)
        chunk = max(_CHUNK, _CHUNK_BYTES // max(average, 1))
    else:
        chunk = max(1, min(_CHUNK, int(throughput * _MAX_CHUNK_SECONDS)))
    values = _values(payloads, chunk)
    errors: list[BaseException] = []
    failed = 0
    async with producer:
        # The topic's metadata is known before the clock starts (the first send would
        # otherwise wait for it, on the clock).
        await producer.partitions_for(topic)
        with Reporter(f"perf produce {topic}", total) as out:
            start = time.monotonic()
            stats = ProduceStats(start)
            pending: set[asyncio.Future[list[RecordMetadata]]] = set()

            def settled(
                sent_at: float, n: int, size: int, future: asyncio.Future[list[RecordMetadata]]
            ) -> None:
                nonlocal failed
                pending.discard(future)
                now = time.monotonic()
                error = None if future.cancelled() else future.exception()
                if future.cancelled() or error is not None:
                    failed += n
                    if error is not None and len(errors) < 5:
                        errors.append(error)
                        print(f"logbus: error: {n} records failed: {error}", file=sys.stderr)
                    return
                line = stats.record((now - sent_at) * 1000, n, size, now)
                out.advance(n)
                if line is not None:
                    out.line(line)

            sent = 0
            while sent < total:
                n = min(chunk, total - sent)
                batch = values(n)
                size = sum(map(len, batch)) if len(payloads) > 1 else n * len(payloads[0])
                sent_at = time.monotonic()
                future = await producer.send_many(topic=topic, values=batch, metadata=False)
                pending.add(future)
                future.add_done_callback(functools.partial(settled, sent_at, n, size))
                sent += n
                if throughput > 0:
                    ahead = start + sent / throughput - time.monotonic()
                    if ahead > 0:
                        await asyncio.sleep(ahead)
            await producer.flush()
            if pending:
                await asyncio.wait(pending)
            out.line(stats.total_line(time.monotonic()))
        if args.print_metrics:
            print_metrics("producer-metrics", producer.metrics())
    if failed:
        reason = f": {errors[0]}" if errors else ""
        raise CommandError(f"{failed} of {total} records were not sent{reason}")
    return 0
