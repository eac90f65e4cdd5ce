"""`logbus perf consume` (kafka-consumer-perf-test) and `logbus perf end-to-end-latency`
(Kafka's EndToEndLatency): see `logbus.cli.perf`."""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    bootstrap_servers,
    client_settings,
    fail,
    key_value,
    positive_int,
    run,
    security_of,
    wait_for_topic,
)
from logbus.cli.perf_common import (
    MB,
    Reporter,
    ToolParser,
    print_metrics,
    read_properties_file,
)
from logbus.client.admin import Admin, NewTopic
from logbus.client.cluster import Cluster
from logbus.client.consumer import Consumer, ConsumerRebalanceListener
from logbus.client.errors import KafkaError
from logbus.client.producer import Producer
from logbus.client.types import TopicPartition
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode

HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
_POLL_MS = 100
_E2E_POLL_TIMEOUT_MS = 10_000
_E2E_ACKS = {"1": 1, "all": -1, "-1": -1}


def register(tools: argparse._SubParsersAction[ToolParser]) -> None:
    parser = tools.add_parser(
        "consume",
        help="read records as a group member and report throughput "
        "(kafka-consumer-perf-test)",
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=positive_int, required=True, metavar="N")
    parser.add_argument("--group", help="consumer group (default: perf-consumer-NNNNN)")
    parser.add_argument(
        "--consumer.config", dest="consumer_config", metavar="FILE",
        help="consumer settings file (.properties)",
    )
    parser.add_argument(
        "--consumer-props", nargs="+", type=key_value, default=[], metavar="KEY=VALUE",
        help="consumer settings (Kafka's names), over --consumer.config",
    )
    parser.add_argument(
        "--timeout", type=positive_int, default=10_000, metavar="MS",
        help="give up after this long without a record (default: 10000)",
    )
    parser.add_argument(
        "--from-latest", action="store_true",
        help="start at the end of the log when the group has no offsets",
    )
    parser.add_argument("--hide-header", action="store_true", help="no header line")
    parser.add_argument(
        "--print-metrics", action="store_true", help="print the consumer's metrics at the end"
    )
    add_bootstrap(parser)
    parser.set_defaults(func=_run_consume)


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {**client_settings(args), "bootstrap.servers": args.bootstrap_server}
    if args.consumer_config:
        settings.update(read_properties_file(args.consumer_config))
    settings.update(dict(args.consumer_props))
    settings["group.id"] = args.group or settings.get(
        "group.id", f"perf-consumer-{random.randrange(100_000)}"
    )
    settings.setdefault("client.id", "perf-consumer-client")
    settings.setdefault("auto.offset.reset", "latest" if args.from_latest else "earliest")
    return settings


def _run_consume(args: argparse.Namespace) -> int:
    try:
        consumer = Consumer(consumer_settings(args))
    except (CommandError, ConfigError) as exc:
        return fail(str(exc))
    return run(perf_consume(args, consumer))


class _JoinClock(ConsumerRebalanceListener):
    """Kafka's ConsumerPerformance listener: the time spent joining, summed."""

    def __init__(self) -> None:
        self.join_start = time.monotonic()
        self.join_ms = 0.0

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self.join_start = time.monotonic()

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        self.join_ms += (time.monotonic() - self.join_start) * 1000


def _stamp(wall: float) -> str:
    """Kafka's tools' date format, yyyy-MM-dd HH:mm:ss:SSS."""
    moment = datetime.fromtimestamp(wall)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


async def perf_consume(args: argparse.Namespace, consumer: Consumer) -> int:
    bootstrap = consumer.config["bootstrap.servers"]
    security = security_of(dict(consumer.config), "consumer settings")
    async with await Cluster.connect(
        ",".join(bootstrap), client_id="perf-consumer", security=security
    ) as cluster:
        await wait_for_topic(cluster, args.topic, auto_create=False)
    total, timeout = args.messages, args.timeout / 1000
    records = size = 0
    async with consumer:
        with Reporter(f"perf consume {args.topic}", total) as out:
            clock = _JoinClock()
            start_wall, start = time.time(), time.monotonic()
            consumer.subscribe([args.topic], listener=clock)
            last = time.monotonic()
            while records < total and time.monotonic() - last <= timeout:
                batch = await consumer.poll(_POLL_MS)
                if batch:
                    last = time.monotonic()
                    records += len(batch)
                    size += sum(
                        (len(r.key) if r.key is not None else 0)
                        + (len(r.value) if r.value is not None else 0)
                        for r in batch
                    )
                    out.advance(len(batch))
            end_wall, end = time.time(), time.monotonic()
        if records < total:
            print(
                "WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({args.timeout} ms) exceeded. You can use the --timeout option to increase "
                "the timeout.",
                file=sys.stderr,
            )
        elapsed = max(end - start, 1e-9)
        fetch_ms = max(elapsed * 1000 - clock.join_ms, 0.0)
        fetch_s = max(fetch_ms / 1000, 1e-9)
        if not args.hide_header:
            print(HEADER)
        print(
            f"{_stamp(start_wall)}, {_stamp(end_wall)}, {size / MB:.4f}, "
            f"{size / MB / elapsed:.4f}, {records}, {records / elapsed:.4f}, "
            f"{int(clock.join_ms)}, {int(fetch_ms)}, {size / MB / fetch_s:.4f}, "
            f"{records / fetch_s:.4f}"
        )
        if args.print_metrics:
            print_metrics("consumer-metrics", consumer.metrics())
    return 0


# --- end-to-end latency -----------------------------------------------------------


def register_end_to_end(tools: argparse._SubParsersAction[ToolParser]) -> None:
    parser = tools.add_parser(
        "end-to-end-latency",
        help="send one record at a time and time its arrival at a consumer "
        "(Kafka's EndToEndLatency)",
    )
    parser.add_argument("bootstrap", type=bootstrap_servers, metavar="BOOTSTRAP")
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("num_messages", type=positive_int, metavar="N")
    parser.add_argument("acks", choices=list(_E2E_ACKS), metavar="ACKS", help="1 or all")
    parser.add_argument("size", type=positive_int, metavar="SIZE", help="bytes per record")
    parser.add_argument("properties", nargs="?", metavar="PROPERTIES_FILE",
                        help="client settings for both producer and consumer")
    parser.set_defaults(func=_run_end_to_end)


def _run_end_to_end(args: argparse.Namespace) -> int:
    try:
        extra = read_properties_file(args.properties) if args.properties else {}
        producer = Producer(
            {**extra, "bootstrap.servers": args.bootstrap, "acks": _E2E_ACKS[args.acks],
             "linger.ms": 0, "client.id": "e2e-latency-producer"}
        )
        consumer = Consumer(
            {**extra, "bootstrap.servers": args.bootstrap,
             "group.id": f"test-group-{int(time.time() * 1000)}",
             "enable.auto.commit": False, "auto.offset.reset": "latest",
             "fetch.max.wait.ms": 0, "client.id": "e2e-latency-consumer"}
        )
    except (CommandError, ConfigError) as exc:
        return fail(str(exc))
    return run(end_to_end_latency(args, producer, consumer))


async def _ensure_topic(bootstrap: str, topic: str) -> int:
    """The topic's partition count, creating it (1 partition) when missing, as Kafka's
    tool does."""
    async with Admin(bootstrap_servers=bootstrap, client_id="e2e-latency-admin") as admin:
        try:
            await admin.create_topics([NewTopic(topic, 1, -1)])
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
    async with await Cluster.connect(bootstrap, client_id="e2e-latency") as cluster:
        info = await wait_for_topic(cluster, topic, auto_create=False)
    return len(info.partitions)


async def end_to_end_latency(
    args: argparse.Namespace, producer: Producer, consumer: Consumer
) -> int:
    partitions = await _ensure_topic(args.bootstrap, args.topic)
    rng = random.Random()
    latencies: list[float] = []
    async with producer, consumer:
        tps = [TopicPartition(args.topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        for tp in tps:
            await consumer.position(tp)  # the end, looked up before the first send
        with Reporter(f"end-to-end latency {args.topic}", args.num_messages) as out:
            for i in range(args.num_messages):
                message = bytes(rng.randrange(65, 91) for _ in range(args.size))
                begin = time.perf_counter()
                await producer.send_and_wait(args.topic, message)
                received: list[Any] = []
                deadline = time.monotonic() + _E2E_POLL_TIMEOUT_MS / 1000
                while not received:
                    if time.monotonic() >= deadline:
                        raise CommandError("poll timed out: the record sent was not read back")
                    received = await consumer.poll(_POLL_MS)
                elapsed_ms = (time.perf_counter() - begin) * 1000
                if received[0].value != message:
                    raise CommandError(
                        f"the record read ({len(received[0].value or b'')} bytes) is not the "
                        "record sent"
                    )
                if len(received) > 1:
                    raise CommandError(
                        f"only one record was expected, {len(received)} were read"
                    )
                latencies.append(elapsed_ms)
                out.advance(1)
                if i % 1000 == 0:
                    out.line(f"{i}\t{elapsed_ms:.3f}")
    latencies.sort()
    n = len(latencies)
    print(f"Avg latency: {sum(latencies) / n:.4f} ms")
    p50, p99, p999 = (int(latencies[int(n * p)]) for p in (0.5, 0.99, 0.999))
    print(f"Percentiles: 50th = {p50}, 99th = {p99}, 99.9th = {p999}")
    return 0

