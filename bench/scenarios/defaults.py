"""D1 and D3 (issue 21): the clients as a user runs them, with nothing set but
`bootstrap.servers`, against confluent-kafka with its own defaults, in the same run.

D1 is the single broker; D3 the 3-broker cluster (bench/cluster.py) with topics of
replication factor 3 (min.insync.replicas=2, as P3). Both clients' defaults ask for
acks=all already (Kafka's producer since 3.0, librdkafka since 1.0), so D3 is acks=all
without a setting; the logbus producer is idempotent by default too, confluent-kafka's is
not.

Rows, 1 KiB records (and 100 B for the perf tool):
- `logbus perf produce` with only `--bootstrap-server`, against confluent-kafka's
  `produce()` per record and one `flush()` (target: 1.0x);
- the blocking `logbus.Producer.send` and the asyncio `logbus.aio.Producer.send` in a loop,
  then `flush()` (target: 0.5x confluent-kafka's `produce()`: a Python call per record
  against a C call per record);
- the blocking `logbus.Consumer` and the asyncio `logbus.aio.Consumer` polling with their
  defaults (max.poll.records 500), against confluent-kafka's consumer with its defaults,
  `consume(500)` per call (the same records per call), all reading one topic from offset 0
  (target: 1.0x).

Each run of each case is a fresh process (`in_subprocess`, as CL). Nothing but the
bootstrap servers is given to any client: a consumer starts at offset 0 by `seek` (logbus)
or `OFFSET_BEGINNING` in `assign` (confluent-kafka), which are calls, not settings;
confluent-kafka needs a `group.id` to make a consumer at all, and gets a fresh one."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario
from bench.load_kafka import ReadClock
from bench.progress import Progress
from bench.scenarios.clients import (
    CLIENT,
    _blocking_produce,
    _checked,
    _metrics,
    in_subprocess,
)
from bench.scenarios.cluster import REPLICATED
from bench.scenarios.common import KIB, PARTITIONS
from bench.systems import Unavailable

POLL_RECORDS = 500  # Kafka's max.poll.records default, and confluent-kafka's consume(n)
PROGRESS_EVERY = 10_000


# ---- producers: `count` records of `values` (cycled), defaults only ----


def confluent_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                      progress: Progress) -> Metrics:
    """`produce()` per record and one `flush()`, as confluent-kafka's examples; no
    delivery callback (a user with defaults sets none), so whether every record arrived
    is checked afterwards by the topic's end offsets."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    mask = len(values) - 1
    send, poll = producer.produce, producer.poll
    send(topic, values[0])
    producer.flush(60)  # connected, leaders known: then the clock starts
    progress.begin(f"confluent-kafka produce {count:,}", count)
    try:
        start = time.perf_counter()
        for i in range(count):
            value = values[i & mask]
            while True:
                try:
                    send(topic, value)
                    break
                except BufferError:  # queue.buffering.max.messages reached
                    poll(0.005)
            if i % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                poll(0)
                progress.advance(PROGRESS_EVERY)
        remaining = producer.flush(300)
        elapsed = time.perf_counter() - start
    finally:
        progress.end()
    if remaining:
        raise RuntimeError(f"{remaining} records still unacknowledged after 300 s")
    _check_written(bootstrap, topic, count + 1)
    return _metrics(count, len(values[0]), elapsed)


def _check_written(bootstrap: str, topic: str, expected: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": load_kafka.unique_name("end")})
    try:
        written = sum(reader.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
                      for p in range(PARTITIONS))
    finally:
        reader.close()
    if written != expected:
        raise RuntimeError(f"{written} records in {topic}, {expected} sent")


def _logbus(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module} cannot be imported: {exc}") from exc


def logbus_blocking_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                            progress: Progress) -> Metrics:
    producer = _logbus("logbus").Producer({"bootstrap.servers": bootstrap})
    return _blocking_produce(producer, "logbus.Producer.send", topic, values, count, progress)


def logbus_asyncio_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                           progress: Progress) -> Metrics:
    aio = _logbus("logbus.aio")

    async def run() -> float:
        async with aio.Producer({"bootstrap.servers": bootstrap}) as producer:
            mask = len(values) - 1
            send = producer.send
            futures = []
            await producer.send_and_wait(topic, values[0])
            start = time.perf_counter()
            for i in range(count):
                future = await send(topic, values[i & mask])
                if i % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                    futures.append(future)
                    progress.advance(PROGRESS_EVERY)
            await producer.flush()
            elapsed = time.perf_counter() - start
            for future in futures:
                await future  # raises the delivery error, if any
            return elapsed

    progress.begin(f"logbus.aio.Producer.send {count:,}", count)
    try:
        return _metrics(count, len(values[0]), asyncio.run(run()))
    finally:
        progress.end()


def logbus_perf_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                        progress: Progress) -> Metrics:
    """`logbus perf produce --bootstrap-server B --topic T --num-records N --record-size S
    --throughput -1`, nothing else, through the CLI's entry point in this (fresh)
    process; its final line gives records/s (the tool's own clock, after connecting)."""
    import contextlib
    import io
    import re

    cli = _logbus("logbus.cli.main")
    argv = ["perf", "produce", "--topic", topic, "--num-records", str(count),
            "--record-size", str(len(values[0])), "--throughput", "-1",
            "--bootstrap-server", bootstrap]
    out = io.StringIO()
    progress.begin(f"logbus perf produce {count:,}", count)
    try:
        with contextlib.redirect_stdout(out):
            status = cli.main(argv)
    finally:
        progress.end()
    text = out.getvalue().strip()
    final = text.splitlines()[-1] if text else ""
    match = re.match(r"(\d+) records sent, ([\d.]+) records/sec", final)
    if status != 0 or match is None or int(match.group(1)) != count:
        raise RuntimeError(f"logbus perf produce failed ({status}): {final!r}")
    return _metrics(count, len(values[0]), count / float(match.group(2)))


# ---- consumers: `count` records of `topic` from offset 0, defaults only ----


def confluent_consume(bootstrap: str, topic: str, count: int, value_size: int,
                      progress: Progress) -> Metrics:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap,
                         "group.id": load_kafka.unique_name("bench-defaults")})
    clock = ReadClock(count)
    progress.begin(f"confluent-kafka consume {count:,}", count)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 300
        while not clock.done() and time.monotonic() < deadline:
            batch = consumer.consume(POLL_RECORDS, 0.1)
            nbytes = 0
            for message in batch:
                if message.error() is not None:
                    raise KafkaException(message.error())
                nbytes += len(message.value())
            clock.add(len(batch), nbytes)
            progress.advance(len(batch))
    finally:
        progress.end()
        consumer.close()
    return _checked(clock, "confluent-kafka", value_size)


def logbus_blocking_consume(bootstrap: str, topic: str, count: int, value_size: int,
                            progress: Progress) -> Metrics:
    logbus = _logbus("logbus")
    clock = ReadClock(count)
    progress.begin(f"logbus.Consumer consume {count:,}", count)
    try:
        with logbus.Consumer({"bootstrap.servers": bootstrap}) as consumer:
            consumer.assign([logbus.TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 300
            while not clock.done() and time.monotonic() < deadline:
                records = consumer.poll(0.1)
                clock.add(len(records), sum(len(r.value) for r in records))
                progress.advance(len(records))
    finally:
        progress.end()
    return _checked(clock, "logbus.Consumer", value_size)


def logbus_asyncio_consume(bootstrap: str, topic: str, count: int, value_size: int,
                           progress: Progress) -> Metrics:
    aio = _logbus("logbus.aio")
    types = _logbus("logbus.client.types")

    async def run() -> None:
        async with aio.Consumer({"bootstrap.servers": bootstrap}) as consumer:
            consumer.assign([types.TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            deadline = time.monotonic() + 300
            while not clock.done() and time.monotonic() < deadline:
                records = await consumer.poll(timeout_ms=100)
                clock.add(len(records), sum(len(r.value) for r in records))
                progress.advance(len(records))

    clock = ReadClock(count)
    progress.begin(f"logbus.aio.Consumer consume {count:,}", count)
    try:
        asyncio.run(run())
    finally:
        progress.end()
    return _checked(clock, "logbus.aio.Consumer", value_size)


PRODUCERS = {
    "logbus perf produce": logbus_perf_produce,
    "logbus blocking": logbus_blocking_produce,
    "logbus asyncio": logbus_asyncio_produce,
    "confluent-kafka": confluent_produce,
}
CONSUMERS = {
    "logbus blocking": logbus_blocking_consume,
    "logbus asyncio": logbus_asyncio_consume,
    "confluent-kafka": confluent_consume,
}


# ---- the cases: the same on one broker (D1) and on the cluster (D3) ----


def _bootstrap(ctx: Context, cluster: bool) -> str:
    return ctx.cluster().bootstrap if cluster else ctx.logbus().bootstrap


def _topic(ctx: Context, cluster: bool, prefix: str) -> str:
    topic = load_kafka.unique_name(prefix)
    bootstrap = _bootstrap(ctx, cluster)
    if cluster:
        load_kafka.create_topic(bootstrap, topic, PARTITIONS, 3, REPLICATED)
        ctx.cluster().wait_ready(topic, PARTITIONS)
    else:
        load_kafka.create_topic(bootstrap, topic, PARTITIONS)
    return topic


def _produce_case(name: str, client: str, size: int, count: int, cluster: bool) -> Any:
    produce = PRODUCERS[client]

    def run(ctx: Context) -> Metrics:
        topic = _topic(ctx, cluster, f"{name}-{client.replace(' ', '-')}")
        bootstrap = _bootstrap(ctx, cluster)
        try:
            return in_subprocess(ctx.progress, f"{client} produce {count:,}", produce,
                                 bootstrap, topic, load_kafka.make_values(size), count)
        finally:
            load_kafka.delete_topic(bootstrap, topic)

    return run


def _consume_case(name: str, client: str, size: int, count: int, cluster: bool) -> Any:
    consume = CONSUMERS[client]
    dataset = f"{name}/read/{size}"

    def run(ctx: Context) -> Metrics:
        bootstrap = _bootstrap(ctx, cluster)
        data = ctx.datasets.get(dataset)
        if data is None:  # written once, by librdkafka (not measured)
            topic = _topic(ctx, cluster, f"{name}-read")
            load_kafka.produce(bootstrap, topic, size, count * size, ctx.progress,
                               acks="all")
            data = ctx.datasets[dataset] = {"topic": topic}
        return in_subprocess(ctx.progress, f"{client} consume {count:,}", consume,
                             bootstrap, data["topic"], count, size)

    return run


def _cases(name: str, cluster: bool) -> Any:
    def cases(ctx: Context) -> list[Case]:
        scale = ctx.scale
        out = []
        requires = ("logbus",)
        for label, size, count, clients in (
            ("1 KiB", KIB, scale.defaults_records_1k, PRODUCERS),
            ("100 B", 100, scale.defaults_records_100,
             ("logbus perf produce", "confluent-kafka")),
        ):
            for client in clients:
                out.append(Case(f"producer {label}", client,
                                _produce_case(name, client, size, count, cluster),
                                note=f"{count:,} records", requires=requires))
        count = scale.defaults_records_1k
        for client in CONSUMERS:
            out.append(Case("consumer 1 KiB", client,
                            _consume_case(name, client, KIB, count, cluster),
                            note=f"{count:,} records from offset 0", requires=requires))

        def teardown(ctx: Context) -> None:
            data = ctx.datasets.pop(f"{name}/read/{KIB}", None)
            if data is not None:
                load_kafka.delete_topic(_bootstrap(ctx, cluster), data["topic"])

        out[-1].teardown = teardown
        return out

    return cases


D1 = Scenario("D1", "Default settings, one broker", _cases("D1", False), CLIENT,
              "only bootstrap.servers set, logbus and confluent-kafka alike (acks=all)")
D3 = Scenario("D3", "Default settings, 3 brokers, rf=3", _cases("D3", True), CLIENT,
              "only bootstrap.servers set; topics of replication factor 3, "
              "min.insync.replicas=2; acks=all is both clients' default")
