"""TX1 and TX2 (issue 15, transactions): the cost of exactly-once against the same client
without it, both measured in the same run.

TX1: 1 KiB records in transactions of about 1 MB (begin, ~976 records, commit) against the
same client idempotent (enable.idempotence, acks=all, no transactional.id), into a 6-partition
topic: confluent-kafka (librdkafka, P1's tuning) and the logbus asyncio client (one
`send_many` per transaction; idempotent: the same chunks, two in flight). The target
compares with the idempotent producer streaming; the rows "idempotent flushed per ~1 MB"
send the transactions' records in the same pattern without a transaction (each ~1 MB
acknowledged before the next is sent), which isolates what the transaction protocol itself
costs (AddPartitionsToTxn, EndTxn, markers) from what a transaction boundary costs any
producer (nothing of the next transaction leaves before the commit).

TX2: a log written by a confluent-kafka transactional producer in transactions of ~1 MB, every
tenth aborted (10% of the records), read from offset 0 to its end by a confluent-kafka
consumer with isolation.level=read_committed against read_uncommitted; the headline is the
log read per second (the same offsets for both)."""

from __future__ import annotations

from typing import Any

from bench import load_kafka, load_txn
from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.clients import in_subprocess
from bench.scenarios.common import KIB, PARTITIONS, with_resources

ABORT_EVERY = 10  # TX2: one transaction in ten aborted

TX1_METRICS = {
    "mb_s": ("MB/s", True),
    "records_s": ("records/s", True),
    "txns_s": ("transactions/s", True),
    "cpu_s_per_gib": ("server CPU s/GiB", False),
}
TX2_METRICS = {
    "mb_s": ("log MB/s", True),
    "records_s": ("records delivered/s", True),
    "cpu_s_per_gib": ("server CPU s/GiB", False),
}


def _produce(client: str, transactional: bool, flush_each: bool = False) -> Any:
    def run(ctx: Context) -> Metrics:
        server = ctx.logbus()
        volume = ctx.scale.txn_bytes
        kind = "tx" if transactional else "idem-flushed" if flush_each else "idem"
        topic = load_kafka.unique_name(f"TX1-{client}-{kind}")
        load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)

        def measure() -> Metrics:
            if client == "confluent-kafka":
                metrics = load_txn.confluent_produce(server.bootstrap, topic, KIB, volume,
                                                     ctx.progress, transactional=transactional,
                                                     flush_each=flush_each)
            else:
                metrics = in_subprocess(ctx.progress, f"logbus produce {topic}",
                                        load_txn.logbus_produce, server.bootstrap, topic, KIB,
                                        volume, transactional, flush_each)
            metrics["bytes"] = float(KIB)
            return metrics

        try:
            return with_resources(server, measure)
        finally:
            load_kafka.delete_topic(server.bootstrap, topic)

    return run


def _tx1_cases(ctx: Context) -> list[Case]:
    per_txn, txns = load_txn.txn_shape(KIB, ctx.scale.txn_bytes)
    note = f"{txns:,} transactions of {per_txn} x 1 KiB per run"
    idem_note = f"{txns * per_txn:,} x 1 KiB per run, acks=all"
    flushed_note = f"as the transactions: {txns:,} x {per_txn} x 1 KiB, each flushed"
    return [
        Case("1 KiB transactional, confluent-kafka", "logbus",
             _produce("confluent-kafka", True), note=note),
        Case("1 KiB idempotent, confluent-kafka", "logbus",
             _produce("confluent-kafka", False), note=idem_note),
        Case("1 KiB idempotent flushed per ~1 MB, confluent-kafka", "logbus",
             _produce("confluent-kafka", False, flush_each=True), note=flushed_note),
        Case("1 KiB transactional, logbus client", "logbus",
             _produce("logbus", True), note=note + ", one send_many each"),
        Case("1 KiB idempotent, logbus client", "logbus",
             _produce("logbus", False), note=idem_note + ", send_many, 2 in flight"),
        Case("1 KiB idempotent flushed per ~1 MB, logbus client", "logbus",
             _produce("logbus", False, flush_each=True), note=flushed_note + " (awaited)"),
    ]


DATASET = "TX2/log"


def _log(ctx: Context) -> dict[str, Any]:
    """The log with 10% aborted transactions, written once (not measured)."""
    data = ctx.datasets.get(DATASET)
    if data is None:
        server = ctx.logbus()
        topic = load_kafka.unique_name("TX2")
        load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)
        ctx.progress.note("TX2: writing a log with one transaction in ten aborted")
        written = load_txn.confluent_produce(server.bootstrap, topic, KIB, ctx.scale.txn_bytes,
                                             ctx.progress, transactional=True,
                                             abort_every=ABORT_EVERY)
        ends = load_txn.end_offsets(server.bootstrap, topic, PARTITIONS)
        data = ctx.datasets[DATASET] = {"system": "logbus", "topic": topic, "ends": ends,
                                        "aborted": written["aborted_txns"]}
    return data


def _consume(isolation_level: str) -> Any:
    def run(ctx: Context) -> Metrics:
        data = _log(ctx)
        server = ctx.logbus()

        def measure() -> Metrics:
            metrics = load_txn.consume_to_end(server.bootstrap, data["topic"], data["ends"],
                                              KIB, isolation_level, ctx.progress)
            metrics["bytes"] = float(KIB)
            return metrics

        return with_resources(server, measure)

    return run


def _drop(ctx: Context) -> None:
    data = ctx.datasets.pop(DATASET, None)
    if data is not None:
        load_kafka.delete_topic(ctx.logbus().bootstrap, data["topic"])


def _tx2_cases(ctx: Context) -> list[Case]:
    per_txn, txns = load_txn.txn_shape(KIB, ctx.scale.txn_bytes)
    note = (f"{txns:,} transactions of {per_txn} x 1 KiB, every {ABORT_EVERY}th aborted, "
            "read from offset 0")
    return [
        Case("1 KiB read_committed, 10% aborted", "logbus", _consume("read_committed"),
             note=note),
        Case("1 KiB read_uncommitted, 10% aborted", "logbus", _consume("read_uncommitted"),
             note=note, teardown=_drop),
    ]


TX1 = Scenario("TX1", "Transactional produce", _tx1_cases, TX1_METRICS,
               "1 KiB records in transactions of ~1 MB against the same client idempotent")
TX2 = Scenario("TX2", "read_committed consume", _tx2_cases, TX2_METRICS,
               "a log with 10% aborted transactions read with either isolation level")
