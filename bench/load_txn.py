"""Transactional load (TX1, TX2): librdkafka (confluent-kafka) and logbus producers writing
1 KiB records in transactions of about 1 MB, or the same producer idempotent; a
confluent-kafka consumer reading a log to its end with either isolation level."""

from __future__ import annotations

import asyncio
import time
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


def logbus_produce(bootstrap: str, topic: str, value_size: int, total_bytes: int,
                   transactional: bool, flush_each: bool, progress: Progress,
                   txn_bytes: int = TXN_BYTES) -> Metrics:
    """The logbus asyncio client, idempotent (acks=all) with or without a
    transactional.id: each ~`txn_bytes` of records handed over with one `send_many`
    (columnar), then committed; idempotent, the same chunks with two in flight (as the CL
    scenario's `send_batch`), or with `flush_each` each awaited before the next (a
    transaction's pattern without the transaction). Runs in its own process
    (`in_subprocess`)."""
    import logbus.aio as aio

    values = make_values(value_size)
    per_txn, txns = txn_shape(value_size, total_bytes, txn_bytes)
    count = per_txn * txns
    mask = VALUE_POOL - 1
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "batch.size": 1_000_000, "max.request.size": 2_000_000,
        "compression.type": "none",
    }
    if transactional:
        config["transactional.id"] = unique_name("bench-tx-logbus")

    async def run() -> float:
        async with aio.Producer(config) as producer:
            if transactional:
                await producer.init_transactions(TIMEOUT_S)
                producer.begin_transaction()
            await producer.send_and_wait(topic, values[0])
            if transactional:
                await producer.commit_transaction(TIMEOUT_S)
            start = time.perf_counter()
            pending: Any = None
            for t in range(txns):
                chunk = [values[i & mask] for i in range(t * per_txn, (t + 1) * per_txn)]
                if transactional:
                    producer.begin_transaction()
                    await producer.send_many(topic=topic, values=chunk)
                    await producer.commit_transaction(TIMEOUT_S)
                elif flush_each:
                    await (await producer.send_many(topic=topic, values=chunk))
                else:
                    sent = await producer.send_many(topic=topic, values=chunk)
                    if pending is not None:
                        await pending
                    pending = sent
                progress.advance(per_txn, per_txn * value_size)
            if pending is not None:
                await pending
            return time.perf_counter() - start

    progress.begin(f"logbus {'transactional' if transactional else 'idempotent'} produce "
                   f"{txns:,} x {per_txn} x {value_size} B", count)
    try:
        elapsed = asyncio.run(run())
    finally:
        progress.end()
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "txns_s": (txns if transactional else 0) / elapsed, "seconds": elapsed,
            "records": float(count), "aborted_txns": 0.0}


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
