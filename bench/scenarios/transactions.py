"""TX1 and TX2 (issues 15 and 21, transactions): the cost of exactly-once against the same
client without it, both measured in the same run.

TX1: 1 KiB records produced for a fixed time (`txn_seconds`) into a 6-partition topic by a
transactional producer committing at Kafka's cadence, every 100 ms (Kafka Streams'
`commit.interval.ms` with exactly-once), and beside it every 10 ms and every ~1 MB (976
records), against the same client idempotent (enable.idempotence, acks=all, no
transactional.id) streaming for the same time: confluent-kafka (librdkafka, P1's tuning,
`produce()` per record) and the logbus asyncio client (`send_many` of ~1 MB chunks, two in
flight). The target: committing every 100 ms >= 0.95x idempotent. A commit waits for
every record of its transaction to be acknowledged and for EndTxn, and nothing of the next
transaction leaves before it: the shorter the transactions, the larger that share.

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
    "txn_ms": ("ms per transaction", False),
    "cpu_s_per_gib": ("server CPU s/GiB", False),
}
TX2_METRICS = {
    "mb_s": ("log MB/s", True),
    "records_s": ("records delivered/s", True),
    "cpu_s_per_gib": ("server CPU s/GiB", False),
}


CADENCES = {  # TX1's rows: label -> when a transaction commits
    "commit every 100 ms": load_txn.Cadence(ms=100),
    "commit every 10 ms": load_txn.Cadence(ms=10),
    "commit every ~1 MB": load_txn.Cadence(records=load_txn.TXN_BYTES // KIB),
    "idempotent": load_txn.IDEMPOTENT,
}


def _produce(client: str, cadence: load_txn.Cadence) -> Any:
    def run(ctx: Context) -> Metrics:
        server = ctx.logbus()
        seconds = ctx.scale.txn_seconds
        kind = "idem" if not cadence.transactional else f"tx-{cadence.ms or cadence.records}"
        topic = load_kafka.unique_name(f"TX1-{client}-{kind}")
        load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)

        def measure() -> Metrics:
            if client == "confluent-kafka":
                metrics = load_txn.confluent_timed(server.bootstrap, topic, KIB, seconds,
                                                   ctx.progress, cadence)
            else:
                metrics = in_subprocess(ctx.progress, f"logbus produce {topic}",
                                        load_txn.logbus_timed, server.bootstrap, topic, KIB,
                                        seconds, cadence)
            metrics["bytes"] = float(KIB)
            return metrics

        try:
            return with_resources(server, measure)
        finally:
            load_kafka.delete_topic(server.bootstrap, topic)

    return run


def _tx1_cases(ctx: Context) -> list[Case]:
    seconds = ctx.scale.txn_seconds
    cases = []
    for client, how in (("confluent-kafka", "produce() per record"),
                        ("logbus client", "send_many of ~1 MB, 2 in flight")):
        for label, cadence in CADENCES.items():
            variant = (f"1 KiB transactional, {label}, {client}" if cadence.transactional
                       else f"1 KiB idempotent, {client}")
            cases.append(Case(variant, "logbus", _produce(client.split()[0], cadence),
                              note=f"{seconds:g} s per run, acks=all, {how}"))
    return cases


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
               "1 KiB records in transactions committed every 100 ms, 10 ms or ~1 MB, "
               "against the same client idempotent")
TX2 = Scenario("TX2", "read_committed consume", _tx2_cases, TX2_METRICS,
               "a log with 10% aborted transactions read with either isolation level")
