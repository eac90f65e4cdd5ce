"""CL: Python clients side by side against the same logbus broker: records/s and MB/s for
100-byte and 1 KiB records, producer and consumer, for logbus's own client (asyncio
Producer.send and Producer.send_batch, asyncio Consumer; the blocking `logbus.Producer.send`
and `logbus.Consumer`, which most Python code calls), confluent-kafka, kafka-python and
aiokafka. Every producer gets the same tuning (acks=1, linger 5 ms, 1 MB batches, no
compression); every consumer reads the same topic (written by librdkafka) from offset 0. Each run of
each case is a fresh Python process (`in_subprocess`); the broker and the consumers' topic
are shared, made once by the parent."""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario
from bench.load_kafka import ReadClock
from bench.progress import Progress
from bench.scenarios.common import KIB, PARTITIONS
from bench.systems import Unavailable

BATCH = 1_000_000
LINGER_MS = 5
CHUNK = 10_000  # records per send_batch call / per progress update
CLIENT = {"mb_s": ("MB/s", True), "records_s": ("records/s", True)}


def _metrics(count: int, value_size: int, elapsed: float) -> Metrics:
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "seconds": elapsed, "records": float(count)}


def _checked(clock: ReadClock, client: str, value_size: int) -> Metrics:
    if not clock.done():
        raise RuntimeError(f"{client} read {clock.records} of {clock.expected} records in 300 s")
    return clock.metrics(value_size)


def _logbus_aio() -> Any:
    try:
        aio = importlib.import_module("logbus.aio")
    except ImportError as exc:
        raise Unavailable(f"logbus.aio cannot be imported: {exc}") from exc
    return aio


def _logbus_blocking() -> Any:
    try:
        return importlib.import_module("logbus")
    except ImportError as exc:
        raise Unavailable(f"logbus cannot be imported: {exc}") from exc


def _need(aio: Any, name: str) -> Any:
    if not hasattr(aio, name):
        raise Unavailable(f"logbus.aio has no {name} (the client is not merged in this tree)")
    return getattr(aio, name)


# ---- producers: each returns metrics for `count` records of `values` (cycled) ----

Produce = Callable[[str, str, list[bytes], int, Progress], Metrics]


def confluent_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                      progress: Progress) -> Metrics:
    size = len(values[0])
    return load_kafka.produce(bootstrap, topic, size, count * size, progress)


def kafka_python_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                         progress: Progress) -> Metrics:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                             batch_size=BATCH, max_request_size=2 * BATCH)
    return _blocking_produce(producer, "kafka-python produce", topic, values, count, progress)


def _blocking_produce(producer: Any, label: str, topic: str, values: list[bytes], count: int,
                      progress: Progress) -> Metrics:
    """The loop a blocking client's users write: `send` per record, `flush`, then the
    futures kept (one per CHUNK) checked; `producer` is closed at the end. Both blocking
    clients' futures have kafka-python's `get`."""
    mask = len(values) - 1
    send = producer.send
    try:
        send(topic, values[0]).get(60)  # connected, leaders known: then the clock starts
        progress.begin(f"{label} {count:,}", count)
        start = time.perf_counter()
        futures = []
        for i in range(count):
            future = send(topic, values[i & mask])
            if i % CHUNK == CHUNK - 1:
                futures.append(future)
                progress.advance(CHUNK)
        producer.flush()
        elapsed = time.perf_counter() - start
        for future in futures:
            future.get(30)  # raises the delivery error, if any
    finally:
        progress.end()
        producer.close()
    return _metrics(count, len(values[0]), elapsed)


def aiokafka_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                     progress: Progress) -> Metrics:
    from aiokafka import AIOKafkaProducer

    async def run() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                                    max_batch_size=BATCH, max_request_size=2 * BATCH)
        await producer.start()
        try:
            mask = len(values) - 1
            send = producer.send
            futures = []
            await producer.send_and_wait(topic, values[0])
            start = time.perf_counter()
            for i in range(count):
                future = await send(topic, values[i & mask])
                if i % CHUNK == CHUNK - 1:
                    futures.append(future)
                    progress.advance(CHUNK)
            await producer.flush()
            elapsed = time.perf_counter() - start
            for future in futures:
                await future
            return elapsed
        finally:
            await producer.stop()

    progress.begin(f"aiokafka produce {count:,}", count)
    try:
        return _metrics(count, len(values[0]), asyncio.run(run()))
    finally:
        progress.end()


def _logbus_producer_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS,
            "batch.size": BATCH, "buffer.memory": 256 * 1024 * 1024,
            "enable.idempotence": False}


def logbus_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                   progress: Progress) -> Metrics:
    producer_cls = _need(_logbus_aio(), "Producer")

    async def run() -> float:
        async with producer_cls(_logbus_producer_config(bootstrap)) as producer:
            mask = len(values) - 1
            send = producer.send
            futures = []
            await producer.send_and_wait(topic, values[0])
            start = time.perf_counter()
            for i in range(count):
                future = await send(topic, values[i & mask])
                if i % CHUNK == CHUNK - 1:
                    futures.append(future)
                    progress.advance(CHUNK)
            await producer.flush()
            elapsed = time.perf_counter() - start
            for future in futures:
                await future
            return elapsed

    progress.begin(f"logbus Producer.send {count:,}", count)
    try:
        return _metrics(count, len(values[0]), asyncio.run(run()))
    finally:
        progress.end()


def logbus_blocking_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                            progress: Progress) -> Metrics:
    """The blocking `logbus.Producer.send`, in the loop kafka-python's case runs."""
    producer_cls = _need(_logbus_blocking(), "Producer")
    producer = producer_cls(_logbus_producer_config(bootstrap))
    return _blocking_produce(producer, "logbus blocking Producer.send", topic, values, count,
                             progress)


def logbus_send_batch(bootstrap: str, topic: str, values: list[bytes], count: int,
                      progress: Progress, form: str = "columns") -> Metrics:
    """send_many in chunks of CHUNK records, two in flight. `form` "columns" hands each
    chunk over as a list of values (`send_many(topic=..., values=...)`, what a caller
    holding values writes, as the confluent case's values list); "records" builds a
    ProducerRecord per record (on the clock), for comparison."""
    aio = _logbus_aio()
    producer_cls = _need(aio, "Producer")
    record_cls = _need(aio, "ProducerRecord")

    async def run() -> float:
        async with producer_cls(_logbus_producer_config(bootstrap)) as producer:
            mask = len(values) - 1
            await producer.send_batch([record_cls(topic, values[0])])
            start = time.perf_counter()
            # Two chunks in flight, as docs/client.md recommends for a stream of records:
            # the next chunk is built while the broker takes the previous one.
            pending: Any = None
            for first in range(0, count, CHUNK):
                last = min(count, first + CHUNK)
                if form == "columns":
                    chunk = [values[i & mask] for i in range(first, last)]
                    sent = await producer.send_many(topic=topic, values=chunk)
                else:
                    sent = await producer.send_many(
                        [record_cls(topic, values[i & mask]) for i in range(first, last)])
                if pending is not None:
                    await pending
                pending = sent
                progress.advance(last - first)
            if pending is not None:
                await pending
            return time.perf_counter() - start

    progress.begin(f"logbus Producer.send_batch ({form}) {count:,}", count)
    try:
        return _metrics(count, len(values[0]), asyncio.run(run()))
    finally:
        progress.end()


def logbus_perf_produce(bootstrap: str, topic: str, values: list[bytes], count: int,
                        progress: Progress) -> Metrics:
    """`logbus perf produce` (issue 17) with the same producer settings, run through the
    CLI's entry point in this process; its own final line gives records/s."""
    import contextlib
    import io
    import re

    try:
        cli = importlib.import_module("logbus.cli.main")
    except ImportError as exc:
        raise Unavailable(f"logbus.cli cannot be imported: {exc}") from exc
    props = [f"{k}={v}" for k, v in _logbus_producer_config(bootstrap).items()
             if k != "bootstrap.servers"]
    argv = ["perf", "produce", "--topic", topic, "--num-records", str(count),
            "--record-size", str(len(values[0])), "--throughput", "-1",
            "--bootstrap-server", bootstrap, "--producer-props", *props]
    out = io.StringIO()
    progress.begin(f"logbus perf produce {count:,}", count)
    try:
        with contextlib.redirect_stdout(out):
            status = cli.main(argv)
    finally:
        progress.end()
    final = out.getvalue().strip().splitlines()[-1] if out.getvalue().strip() else ""
    match = re.match(r"(\d+) records sent, ([\d.]+) records/sec", final)
    if status != 0 or match is None or int(match.group(1)) != count:
        raise RuntimeError(f"logbus perf produce failed ({status}): {final!r}")
    return _metrics(count, len(values[0]), count / float(match.group(2)))


# ---- consumers: read `count` records of `topic` from offset 0 ----

Consume = Callable[[str, str, int, int, Progress], Metrics]


def confluent_consume(bootstrap: str, topic: str, count: int, value_size: int,
                      progress: Progress) -> Metrics:
    return load_kafka.consume(bootstrap, topic, PARTITIONS, count, value_size, progress)


def kafka_python_consume(bootstrap: str, topic: str, count: int, value_size: int,
                         progress: Progress) -> Metrics:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_bytes=64 * 1024 * 1024,
                             max_partition_fetch_bytes=8 * 1024 * 1024)
    clock = ReadClock(count)
    progress.begin(f"kafka-python consume {count:,}", count)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 300
        while not clock.done() and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=100, max_records=CHUNK)
            n = sum(len(records) for records in batches.values())
            clock.add(n, n * value_size)
            progress.advance(n)
    finally:
        progress.end()
        consumer.close()
    return _checked(clock, "kafka-python", value_size)


def aiokafka_consume(bootstrap: str, topic: str, count: int, value_size: int,
                     progress: Progress) -> Metrics:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    fetch_max_bytes=64 * 1024 * 1024,
                                    max_partition_fetch_bytes=8 * 1024 * 1024)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 300
            while not clock.done() and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=100, max_records=CHUNK)
                n = sum(len(records) for records in batches.values())
                clock.add(n, n * value_size)
                progress.advance(n)
        finally:
            await consumer.stop()

    clock = ReadClock(count)
    progress.begin(f"aiokafka consume {count:,}", count)
    try:
        asyncio.run(run())
    finally:
        progress.end()
    return _checked(clock, "aiokafka", value_size)


def logbus_consume(bootstrap: str, topic: str, count: int, value_size: int,
                   progress: Progress) -> Metrics:
    aio = _logbus_aio()
    consumer_cls = _need(aio, "Consumer")
    partition_cls = getattr(aio, "TopicPartition", None)
    if partition_cls is None:
        partition_cls = importlib.import_module("logbus.client.types").TopicPartition

    async def run() -> None:
        config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "max.poll.records": CHUNK,
                  "fetch.max.bytes": 64 * 1024 * 1024,
                  "max.partition.fetch.bytes": 8 * 1024 * 1024}
        async with consumer_cls(config) as consumer:
            consumer.assign([partition_cls(topic, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 300
            while not clock.done() and time.monotonic() < deadline:
                records = await consumer.poll(timeout_ms=100)
                clock.add(len(records), len(records) * value_size)
                progress.advance(len(records))

    clock = ReadClock(count)
    progress.begin(f"logbus Consumer consume {count:,}", count)
    try:
        asyncio.run(run())
    finally:
        progress.end()
    return _checked(clock, "logbus Consumer", value_size)


def logbus_blocking_consume(bootstrap: str, topic: str, count: int, value_size: int,
                            progress: Progress) -> Metrics:
    """The blocking `logbus.Consumer`, in the loop kafka-python's case runs."""
    logbus = _logbus_blocking()
    consumer_cls = _need(logbus, "Consumer")
    partition_cls = _need(logbus, "TopicPartition")
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "max.poll.records": CHUNK,
              "fetch.max.bytes": 64 * 1024 * 1024,
              "max.partition.fetch.bytes": 8 * 1024 * 1024}
    clock = ReadClock(count)
    progress.begin(f"logbus blocking Consumer consume {count:,}", count)
    try:
        with consumer_cls(config) as consumer:
            consumer.assign([partition_cls(topic, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 300
            while not clock.done() and time.monotonic() < deadline:
                records = consumer.poll(0.1)
                clock.add(len(records), len(records) * value_size)
                progress.advance(len(records))
    finally:
        progress.end()
    return _checked(clock, "logbus blocking Consumer", value_size)


PRODUCERS: dict[str, Produce] = {
    "logbus": logbus_produce,
    "logbus blocking": logbus_blocking_produce,
    "logbus send_batch": logbus_send_batch,
    "logbus perf produce": logbus_perf_produce,
    "confluent-kafka": confluent_produce,
    "kafka-python": kafka_python_produce,
    "aiokafka": aiokafka_produce,
}
CONSUMERS: dict[str, Consume] = {
    "logbus": logbus_consume,
    "logbus blocking": logbus_blocking_consume,
    "confluent-kafka": confluent_consume,
    "kafka-python": kafka_python_consume,
    "aiokafka": aiokafka_consume,
}


class _Quiet(Progress):
    """A child process's progress: silent (the parent shows the case begin and end)."""

    def __init__(self) -> None:
        super().__init__(live=False)

    def note(self, message: str, style: str | None = None) -> None:
        pass

    def begin(self, label: str, total: int | None) -> None:
        pass


def _child(fn: Callable[..., Metrics], args: tuple[Any, ...]) -> Metrics:
    return fn(*args, _Quiet())


def in_subprocess(progress: Progress, label: str, fn: Callable[..., Metrics],
                  *args: Any) -> Metrics:
    """`fn(*args, progress)` run in a fresh Python process (spawned, not forked: no
    thread, event loop, heap or GC state of an earlier case comes along), its metrics
    returned. An exception in the child is raised here with the child's type and message
    (its traceback attached as the cause); a child that dies is a RuntimeError."""
    progress.begin(f"{label} (in a subprocess)", None)
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                return pool.submit(_child, fn, args).result()
            except BrokenProcessPool as exc:
                raise RuntimeError(f"the {label} subprocess died: {exc}") from exc
    finally:
        progress.end()


def _produce_case(client: str, produce: Produce, size: int, count: int) -> Any:
    def run(ctx: Context) -> Metrics:
        server = ctx.logbus()
        topic = load_kafka.unique_name(f"CL-{client.replace(' ', '-')}")
        load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)
        try:
            return in_subprocess(ctx.progress, f"{client} produce {count:,}", produce,
                                 server.bootstrap, topic, load_kafka.make_values(size), count)
        finally:
            load_kafka.delete_topic(server.bootstrap, topic)

    return run


def _consume_case(client: str, consume: Consume, size: int, count: int) -> Any:
    def run(ctx: Context) -> Metrics:
        server = ctx.logbus()
        name = f"CL/read/{size}"
        data = ctx.datasets.get(name)
        if data is None:
            topic = load_kafka.unique_name(f"CL-read-{size}")
            load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)
            load_kafka.produce(server.bootstrap, topic, size, count * size, ctx.progress)
            data = ctx.datasets[name] = {"system": "logbus", "topic": topic}
        return in_subprocess(ctx.progress, f"{client} consume {count:,}", consume,
                             server.bootstrap, data["topic"], count, size)

    return run


def _teardown(ctx: Context) -> None:
    for name in [n for n in ctx.datasets if n.startswith("CL/")]:
        data = ctx.datasets.pop(name)
        load_kafka.delete_topic(ctx.logbus().bootstrap, data["topic"])


def _cases(ctx: Context) -> list[Case]:
    cases = []
    for label, size, count in (("1 KiB", KIB, ctx.scale.client_records_1k),
                               ("100 B", 100, ctx.scale.client_records_100)):
        for client, produce in PRODUCERS.items():
            cases.append(Case(f"producer {label}", client, _produce_case(client, produce,
                                                                            size, count),
                              note=f"{count:,} records", requires=("logbus",)))
        for client, consume in CONSUMERS.items():
            cases.append(Case(f"consumer {label}", client,
                              _consume_case(client, consume, size, count),
                              note=f"{count:,} records", requires=("logbus",)))
    cases[-1].teardown = _teardown
    return cases


CL = Scenario("CL", "Python clients against the logbus broker", _cases, CLIENT,
              "acks=1, linger 5 ms, 1 MB batches; consumers read from offset 0")
