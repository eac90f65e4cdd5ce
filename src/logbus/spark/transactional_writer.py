"""The transactions of an exactly-once streaming write (`exactlyOnce=true`).

The pattern is Kafka's own exactly-once one (consume-transform-produce, KIP-98/KIP-447),
with the micro-batch id in the role of the consumed offset, fitted to Spark's two-phase
commit of a streaming write (each task's `write` returns a commit message; the driver's
`commit(messages, batchId)` runs once every task of the micro-batch succeeded):

- a task's transactional id is `<transactionalIdPrefix>-<Spark partition id>`, the same
  for every attempt of that task in every micro-batch, in this run of the query and after
  a restart from its checkpoint. `init_transactions` fences the previous holder of the id
  (an earlier attempt, a task of a killed driver) and makes its coordinator finish that
  holder's transaction: an open one is aborted, one being committed is completed first;
- the task then reads the writer's record of what it committed: the offset committed in
  the group named like the transactional id, for partition 0 of the marker topic
  (`exactlyOnceMarkerTopic`, default the `topic` option), with `require_stable` (KIP-447).
  Its metadata holds the query id and micro-batch id of the writer's last commit. When
  that is this micro-batch (or a later one) of this query, an earlier run committed the
  rows: the task writes nothing;
- otherwise it writes its rows in a transaction, waits until every one is acknowledged,
  adds the new record to the transaction (`send_offsets_to_transaction`: offset = batch
  id, metadata `{"queryId": ..., "batchId": ...}`) and returns the transaction, open, as
  its commit message (`PreparedTransaction`: transactional id, producer id and epoch);
- the driver's commit ends every task's transaction with EndTxn(commit)
  (`end_transactions`); its abort aborts them.

A task must not commit on its own: when something upstream of the sink fails (a UDF,
a shuffle fetch), Spark ends the sink's input early as if it were complete, and fails the
task only after the sink returned. Rows and record become visible together, when the
driver commits, or not at all.

Spark's task context gives the partition id and, as local properties, the micro-batch id
(`streaming.sql.batchId`) and the query id (`sql.streaming.queryId`, kept in the
checkpoint, so a restarted query has the same one; a new checkpoint starts a new query,
whose batch ids start again at 0 and are not mistaken for the old query's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from logbus.client.cluster import Cluster
from logbus.client.consumer.records import OffsetAndMetadata
from logbus.client.coordinator_lookup import COORDINATOR_ERRORS, coordinator
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.loop_thread import LoopThread
from logbus.client.producer.config import parse_producer_config
from logbus.client.producer.producer import Producer
from logbus.client.requests.find_coordinator import TRANSACTION_KEY
from logbus.client.requests.group_offsets import fetch_offsets_with_metadata
from logbus.client.requests.producer_id import ProducerIdAndEpoch
from logbus.client.requests.transactions import end_txn
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.spark.options import ExactlyOnce, LogbusSparkError

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
_RETRY_BACKOFF = 0.1
# Answers after which a request is asked again (besides the coordinator's own).
_RETRIABLE = frozenset(
    {
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
# How long a finished abort may take when the task failed (the next attempt fences anyway).
_ABORT_TIMEOUT = 10.0


@dataclass(frozen=True)
class WriterTask:
    """Which writer this task is, and which micro-batch of which query it writes."""

    transactional_id: str
    query_id: str
    batch_id: int

    @classmethod
    def current(cls, settings: ExactlyOnce) -> WriterTask:
        """From Spark's task context (LogbusSparkError outside a streaming write)."""
        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        query = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        if context is None or batch is None or query is None:
            raise LogbusSparkError(
                "exactlyOnce=true works in streaming writes only (writeStream): a batch "
                "write has no micro-batch id to commit"
            )
        return cls(
            f"{settings.transactional_id_prefix}-{context.partitionId()}", query, int(batch)
        )

    def record(self) -> str:
        """The committed metadata naming this task's micro-batch."""
        return json.dumps({"queryId": self.query_id, "batchId": self.batch_id})

    def already_committed(self, committed: tuple[int, str] | None) -> bool:
        """Whether `committed` (offset, metadata) says this micro-batch (or a later one)
        of this query was committed by this writer."""
        if committed is None:
            return False
        try:
            recorded = json.loads(committed[1])
            return bool(
                recorded["queryId"] == self.query_id
                and int(recorded["batchId"]) >= self.batch_id
            )
        except (ValueError, KeyError, TypeError):
            return False  # not a record this sink wrote


@dataclass
class PreparedTransaction(WriterCommitMessage):
    """A task's transaction, every record of it acknowledged and its record of the
    micro-batch added, left open for the driver to end (EndTxn) with the micro-batch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    records: int


class TaskTransaction:
    """The transaction of one task, driven from the task's thread through `thread`, on
    whose loop `producer` (made with the task's `transactional.id`) lives."""

    def __init__(
        self, settings: ExactlyOnce, task: WriterTask, thread: LoopThread, producer: Producer
    ) -> None:
        self.task = task
        self.thread = thread
        self.producer = producer
        self.marker = TopicPartition(settings.marker_topic, 0)
        self.open = False

    def begin(self) -> bool:
        """Fence earlier holders of the transactional id and start the transaction;
        False (and no transaction) when this micro-batch was committed already."""
        try:
            self.thread.run(self.producer.start())
            # Created, as the output topic, where the brokers create topics on first use.
            self.thread.run(self.producer.partition_count(self.marker.topic))
        except KafkaError as exc:
            raise LogbusSparkError(
                f"exactly-once writer {self.task.transactional_id!r}: the marker topic "
                f"{self.marker.topic!r} (option exactlyOnceMarkerTopic, default the topic "
                f"option) is not there: {exc}"
            ) from None
        try:
            self.thread.run(self.producer.init_transactions())
            committed = self.thread.run(self._committed())
        except KafkaError as exc:
            raise self._error(exc, "could not start") from None
        if self.task.already_committed(committed):
            return False
        self.producer.begin_transaction()
        self.open = True
        return True

    def prepare(self, records: int) -> PreparedTransaction:
        """Add the writer's record of this micro-batch to the transaction (its rows are
        all acknowledged: the caller flushed) and leave it open for the driver."""
        task = self.task
        offsets = {self.marker: OffsetAndMetadata(task.batch_id, task.record())}
        try:
            self.thread.run(
                self.producer.send_offsets_to_transaction(offsets, task.transactional_id)
            )
            producer = self.producer.sender.producer
        except KafkaError as exc:
            raise self._error(exc, f"could not prepare micro-batch {task.batch_id}") from None
        self.open = False  # from here on the driver ends it
        return PreparedTransaction(
            task.transactional_id, producer.producer_id, producer.epoch, records
        )

    def _error(self, exc: KafkaError, what: str) -> LogbusSparkError:
        return LogbusSparkError(
            f"exactly-once writer {self.task.transactional_id!r} {what}: {exc}"
        )

    def abort(self) -> None:
        """Abort after a failure, best effort: if it cannot, the next attempt's
        `init_transactions` (or the transaction timeout) aborts it."""
        if not self.open:
            return
        self.open = False
        with contextlib.suppress(Exception):
            self.thread.run(self.producer.abort_transaction(_ABORT_TIMEOUT), _ABORT_TIMEOUT + 5)

    async def _committed(self) -> tuple[int, str] | None:
        """The writer's committed record (offset, metadata), asked with require_stable
        until no transaction holds it pending, for up to max.block.ms."""
        group = self.task.transactional_id
        deadline = time.monotonic() + self.producer.config["max.block.ms"] / 1000
        cluster = await Cluster.from_config(self.producer.config)
        try:
            while True:
                try:
                    conn = await coordinator(
                        cluster, group, wait=max(deadline - time.monotonic(), 0.0)
                    )
                    found = await fetch_offsets_with_metadata(
                        conn, group, [self.marker], require_stable=True
                    )
                    return found.get(self.marker)
                except KafkaError as exc:
                    if not _again(exc) or time.monotonic() + _RETRY_BACKOFF > deadline:
                        raise
                await asyncio.sleep(_RETRY_BACKOFF)
        finally:
            await cluster.close()


def _again(exc: KafkaError) -> bool:
    """Whether a coordinator's error means: ask again (soon, perhaps elsewhere)."""
    return (
        exc.code in COORDINATOR_ERRORS
        or exc.code in _RETRIABLE
        or isinstance(exc, KafkaConnectionError)
    )


def end_transactions(
    producer_config: Mapping[str, str],
    messages: Sequence[WriterCommitMessage | None],
    *,
    commit: bool,
) -> None:
    """On the driver: commit (or abort) the micro-batch's prepared transactions, each
    with EndTxn to its coordinator. A commit that fails raises LogbusSparkError (Spark
    then fails the micro-batch; replayed, the writers that committed write nothing);
    aborts are best effort (the transactions would time out, or be fenced)."""
    prepared = [m for m in messages if isinstance(m, PreparedTransaction)]
    if not prepared:
        return
    config = parse_producer_config(dict(producer_config), {})
    wait = max(config["max.block.ms"], config["request.timeout.ms"]) / 1000

    async def end_all() -> list[BaseException | None]:
        cluster = await Cluster.from_config(config)
        try:
            return await asyncio.gather(
                *(_end(cluster, p, commit, time.monotonic() + wait) for p in prepared),
                return_exceptions=True,
            )
        finally:
            await cluster.close()

    results = asyncio.run(end_all())
    if not commit:
        return
    failed = [(p, r) for p, r in zip(prepared, results, strict=True) if r is not None]
    if failed:
        p, error = failed[0]
        raise LogbusSparkError(
            f"exactly-once writer {p.transactional_id!r} could not commit: {error} "
            f"({len(failed)} of {len(prepared)} writers failed; the micro-batch is "
            "replayed with the rows of those writers only)"
        )


async def _end(
    cluster: Cluster, prepared: PreparedTransaction, commit: bool, deadline: float
) -> None:
    txn_id = prepared.transactional_id
    producer = ProducerIdAndEpoch(prepared.producer_id, prepared.producer_epoch)
    while True:
        try:
            conn = await coordinator(
                cluster, txn_id, wait=max(deadline - time.monotonic(), 0.0),
                key_type=TRANSACTION_KEY,
            )
            await end_txn(conn, txn_id, producer, commit)
            return
        except KafkaError as exc:
            if not _again(exc) or time.monotonic() + _RETRY_BACKOFF > deadline:
                raise
        await asyncio.sleep(_RETRY_BACKOFF)
