"""Transactional load (TX1, TX2): librdkafka (confluent-kafka) and logbus producers writing
1 KiB records in transactions committed at a cadence (every 100 ms, every 10 ms, or every
~1 MB), or the same producer idempotent; a confluent-kafka consumer reading a log to its
end with either isolation level."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Producer as ConfluentProducer

from bench.core import Metrics
from bench.load_kafka import (
    ADVANCE_EVERY,
    VALUE_POOL,
    DeliveryErrors,
    make_values,
    producer_config,
    unique_name,
)
from bench.progress import Progress

TXN_BYTES = 1_000_000  # "transactions of ~1 MB"
TIMEOUT_S = 120.0
CLOCK_EVERY = 256  # records between two looks at the clock (confluent-kafka's loop)


@dataclass(frozen=True)
class Cadence:
    """When a transactional producer commits: every `ms` milliseconds of producing (from
    the previous commit's return), or every `records` records; neither: the producer is
    idempotent only (no transactional.id) and flushes once at the end."""

    ms: float | None = None
    records: int | None = None

    @property
    def transactional(self) -> bool:
        return self.ms is not None or self.records is not None

    def due(self, since: float, now: float, records: int) -> bool:
        """Whether a transaction begun at `since` holding `records` records commits now."""
        if self.ms is not None:
            return (now - since) * 1000 >= self.ms
        return self.records is not None and records >= self.records


IDEMPOTENT = Cadence()


def _timed_metrics(count: int, value_size: int, txns: int, elapsed: float) -> Metrics:
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "txns_s": txns / elapsed, "txn_ms": elapsed * 1000 / txns if txns else 0.0,
            "seconds": elapsed, "records": float(count)}


def confluent_timed(bootstrap: str, topic: str, value_size: int, seconds: float,
                    progress: Progress, cadence: Cadence) -> Metrics:
    """confluent-kafka (P1's tuning, acks=all, enable.idempotence) producing `produce()`
    per record for `seconds`: transactional, committing at `cadence` (the records of a
    transaction produced, then `commit_transaction`, which flushes them and ends it); or
    idempotent, one `flush()` at the end. The clock stops once the last transaction is
    committed, or every record acknowledged."""
    errors = DeliveryErrors()
    config = producer_config(bootstrap, on_delivery=errors, acks="all",
                             **{"enable.idempotence": True})
    if cadence.transactional:
        config["transactional.id"] = unique_name("bench-tx")
    producer = ConfluentProducer(config)
    values = make_values(value_size)
    mask = VALUE_POOL - 1
    send, poll = producer.produce, producer.poll
    # connecting, the producer id and the leaders are not on the clock
    if cadence.transactional:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
    send(topic, values[0])
    if cadence.transactional:
        producer.commit_transaction(TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    label = "transactional" if cadence.transactional else "idempotent"
    progress.begin(f"{label} produce {seconds:g} s x {value_size} B", None)
    start = time.perf_counter()
    end = start + seconds
    i = txns = in_txn = shown = 0
    since = start
    if cadence.transactional:
        producer.begin_transaction()
    while True:
        n = CLOCK_EVERY if cadence.records is None else min(CLOCK_EVERY,
                                                             cadence.records - in_txn)
        for _ in range(n):
            value = values[i & mask]
            i += 1
            while True:
                try:
                    send(topic, value)
                    break
                except BufferError:
                    poll(0.005)
        in_txn += n
        if i - shown >= ADVANCE_EVERY:
            poll(0)
            progress.advance(i - shown, (i - shown) * value_size)
            shown = i
        now = time.perf_counter()
        last = now >= end
        if cadence.transactional and (last or cadence.due(since, now, in_txn)):
            producer.commit_transaction(TIMEOUT_S)
            txns += 1
            in_txn = 0
            if not last:
                producer.begin_transaction()
            since = time.perf_counter()
        if last:
            break
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    progress.end()
    if remaining:
        raise RuntimeError(f"{remaining} records still unacknowledged after 300 s")
    errors.check()
    return _timed_metrics(i, value_size, txns, elapsed)


def logbus_timed(bootstrap: str, topic: str, value_size: int, seconds: float,
                 cadence: Cadence, progress: Progress) -> Metrics:
    """The logbus asyncio client (acks=all, enable.idempotence, 1 MB batches), handing
    over chunks of ~1 MB (976 x 1 KiB) with `send_many` (columnar, `metadata=False`), two
    in flight, for `seconds`: transactional, committing at `cadence` (`commit_transaction`,
    which flushes the chunks in flight; at the ~1 MB cadence one chunk per transaction), or
    idempotent without commits (as the CL scenario's `send_batch`). Runs in its own
    process (`in_subprocess`)."""
    import logbus.aio as aio

    values = make_values(value_size)
    per_chunk = max(1, TXN_BYTES // value_size)
    if cadence.records is not None:
        per_chunk = min(per_chunk, cadence.records)
    mask = VALUE_POOL - 1
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "batch.size": 1_000_000, "max.request.size": 2_000_000,
        "compression.type": "none",
    }
    if cadence.transactional:
        config["transactional.id"] = unique_name("bench-tx-logbus")
    sent = txns = 0

    async def run() -> float:
        nonlocal sent, txns
        async with aio.Producer(config) as producer:
            if cadence.transactional:
                await producer.init_transactions(TIMEOUT_S)
                producer.begin_transaction()
            await producer.send_and_wait(topic, values[0])
            if cadence.transactional:
                await producer.commit_transaction(TIMEOUT_S)
            start = time.perf_counter()
            end = start + seconds
            since = start
            in_txn = 0
            pending: Any = None
            if cadence.transactional:
                producer.begin_transaction()
            while True:
                chunk = [values[i & mask] for i in range(sent, sent + per_chunk)]
                future = await producer.send_many(topic=topic, values=chunk, metadata=False)
                if pending is not None:
                    await pending
                pending = future
                sent += per_chunk
                in_txn += per_chunk
                progress.advance(per_chunk, per_chunk * value_size)
                now = time.perf_counter()
                last = now >= end
                if cadence.transactional and (last or cadence.due(since, now, in_txn)):
                    # commit_transaction flushes: EndTxn leaves the moment the last batch
                    # is acknowledged, and the chunks' futures are done when it returns
                    await producer.commit_transaction(TIMEOUT_S)
                    await pending
                    pending = None
                    txns += 1
                    in_txn = 0
                    if not last:
                        producer.begin_transaction()
                    since = time.perf_counter()
                if last:
                    break
            if pending is not None:
                await pending
            return time.perf_counter() - start

    label = "transactional" if cadence.transactional else "idempotent"
    progress.begin(f"logbus {label} produce {seconds:g} s x {value_size} B", None)
    try:
        elapsed = asyncio.run(run())
    finally:
        progress.end()
    return _timed_metrics(sent, value_size, txns, elapsed)


def txn_shape(value_size: int, total_bytes: int, txn_bytes: int = TXN_BYTES) -> tuple[int, int]:
    """(records per transaction, transactions) for about `total_bytes` of values."""
    per_txn = max(1, txn_bytes // value_size)
    txns = max(1, round(total_bytes / value_size / per_txn))
    return per_txn, txns


def confluent_produce(bootstrap: str, topic: str, value_size: int, total_bytes: int,
                      progress: Progress, *, transactional: bool, abort_every: int = 0,
                      flush_each: bool = False, txn_bytes: int = TXN_BYTES) -> Metrics:
    """confluent-kafka, idempotent (acks=all, as every idempotent producer) with or without
    a transactional.id. Transactional: begin, ~`txn_bytes` of records, commit (every
    `abort_every`-th transaction flushed, then aborted: all its records are in the log);
    idempotent: the same records produced back to back and flushed at the end, or with
    `flush_each` flushed after each ~`txn_bytes` (a transaction's pattern without the
    transaction). The clock stops when every record is acknowledged (and the last
    transaction committed)."""
    errors = DeliveryErrors()
    config = producer_config(bootstrap, on_delivery=errors, acks="all",
                             **{"enable.idempotence": True})
    if transactional:
        config["transactional.id"] = unique_name("bench-tx")
    producer = ConfluentProducer(config)
    values = make_values(value_size)
    per_txn, txns = txn_shape(value_size, total_bytes, txn_bytes)
    count = per_txn * txns
    mask = VALUE_POOL - 1
    send = producer.produce
    poll = producer.poll
    # connecting, the producer id and the leaders are not on the clock
    if transactional:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
    send(topic, values[0])
    if transactional:
        producer.commit_transaction(TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    aborted = 0
    progress.begin(f"{'transactional' if transactional else 'idempotent'} produce "
                   f"{txns:,} x {per_txn} x {value_size} B", count)
    start = time.perf_counter()
    i = 0
    for t in range(txns):
        if transactional:
            producer.begin_transaction()
        for _ in range(per_txn):
            value = values[i & mask]
            i += 1
            while True:
                try:
                    send(topic, value)
                    break
                except BufferError:
                    poll(0.005)
            if i % ADVANCE_EVERY == 0:
                poll(0)
                progress.advance(ADVANCE_EVERY, ADVANCE_EVERY * value_size)
        if transactional:
            if abort_every and t % abort_every == abort_every - 1:
                producer.flush(TIMEOUT_S)  # the records reach the log, then are aborted
                producer.abort_transaction(TIMEOUT_S)
                aborted += 1
            else:
                producer.commit_transaction(TIMEOUT_S)
        elif flush_each:
            producer.flush(TIMEOUT_S)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    progress.end()
    if remaining:
        raise RuntimeError(f"{remaining} records still unacknowledged after 300 s")
    errors.check()
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "txns_s": (txns if transactional else 0) / elapsed, "seconds": elapsed,
            "records": float(count), "aborted_txns": float(aborted)}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end once every transaction in it is complete: the last stable
    offset (a read_committed ListOffsets) caught up with the high watermark. After
    EndTxn the markers are written in the background, so this waits for them."""
    readers = {level: Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("end"),
                                "isolation.level": level})
               for level in ("read_committed", "read_uncommitted")}
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            ends = {level: {p: reader.get_watermark_offsets(TopicPartition(topic, p),
                                                            30, cached=False)[1]
                            for p in range(partitions)}
                    for level, reader in readers.items()}
            if ends["read_committed"] == ends["read_uncommitted"]:
                return ends["read_committed"]
            if time.monotonic() > deadline:
                raise RuntimeError(f"the last stable offsets of {topic} stay below the high "
                                   f"watermarks: {ends}")
            time.sleep(0.05)
    finally:
        for reader in readers.values():
            reader.close()


def consume_to_end(bootstrap: str, topic: str, ends: dict[int, int], value_size: int,
                   isolation_level: str, progress: Progress) -> Metrics:
    """Read every partition of `topic` from offset 0 to its end with a fresh
    confluent-kafka consumer (assigned, no group). As `load_kafka.ReadClock`, the clock
    starts at the first batch, whose part of the log is not counted: the headline is
    the log read per second (offsets passed, aborted records and markers included, as
    1 KiB each), the same work for both isolation levels; `records_s` counts the records
    handed to the application (read_committed skips the aborted ones)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": unique_name("bench-tx"),
        "enable.auto.commit": False,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        "enable.partition.eof": True,
        "isolation.level": isolation_level,
    })
    total = sum(ends.values())
    reached: set[int] = {p for p, end in ends.items() if end == 0}
    start_pos: dict[int, int] = {}
    delivered = 0
    start = end = 0.0
    first_records = 0
    created = time.perf_counter()
    progress.begin(f"{isolation_level} consume {total:,} offsets", total)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + 600
        while len(reached) < len(ends):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{isolation_level}: {len(reached)} of {len(ends)} "
                                   "partitions read to their end in 600 s")
            batch = consumer.consume(10_000, 0.05)
            if not batch:
                continue
            now = time.perf_counter()
            records = 0
            for message in batch:
                err = message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if offset >= ends[partition]:
                            reached.add(partition)
                        continue
                    raise KafkaException(err)
                records += 1
                if not start:
                    start_pos[partition] = offset + 1
            if not start:
                start, first_records = now, records
            else:
                delivered += records
            end = now
            progress.advance(records, records * value_size)
    finally:
        consumer.close()
        progress.end()
    passed = total - sum(start_pos.values())
    all_delivered = first_records + delivered
    if not delivered:  # the whole log came in the first batch: timed from the consumer's start
        start, passed, delivered = created, total, first_records
    elapsed = max(end - start, 1e-9)
    return {"mb_s": passed * value_size / elapsed / 1e6, "records_s": delivered / elapsed,
            "offsets_s": passed / elapsed, "seconds": elapsed, "records": float(passed),
            "delivered": float(all_delivered)}
