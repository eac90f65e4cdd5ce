"""Reading one offset range on an executor, exactly: Fetch from the partition's leader,
decode (and decompress) each batch, keep records in [start, end), yield Arrow batches.

Spark runs `read_range` in a Python worker process, so it opens its own connection on its
own event loop and closes both when the iterator ends (or is closed early). The rows
depend only on the range, so a retried task returns the same rows. Records missing from
the range (removed by retention after planning, or a truncated log) fail the task when
`failOnDataLoss` is true, naming the partition and the first missing offset; otherwise a
warning names the records skipped and the rows still there are read.
With `kafka.isolation.level=read_committed` the batches of aborted transactions are
dropped as Kafka's consumer drops them (`_CommittedFilter`), and the planned ranges end
at the last stable offset.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import NamedTuple

import pyarrow as pa

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.fetch import (
    FetchedData,
    FetchOptions,
    FetchPosition,
    RawFetchedPartition,
    fetch_many_raw,
    fetch_partitions,
)
from logbus.client.requests.list_offsets import list_offsets
from logbus.protocol import ErrorCode
from logbus.records.batch import BatchHeader, InvalidBatch, split_batches
from logbus.records.columnar import RecordColumns, decode_columns
from logbus.records.control import ControlType, decode_control_key
from logbus.records.reader import decode_batch
from logbus.spark.offset_range import OffsetRange
from logbus.spark.options import EARLIEST, ClientSettings, LogbusSparkError
from logbus.spark.retry import RetryBudget, is_retriable
from logbus.spark.schema import columns_to_record_batch
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

# An empty answer at an offset below the high watermark can only be a fetch that timed out
# waiting; give up after this many in a row.
_MAX_EMPTY_FETCHES = 20
# A log ending before the planned end is looked at this many times, this far apart (in
# seconds), before the records are taken as gone.
_SHORT_LOG_CHECKS = 10
_SHORT_LOG_PAUSE = 0.2


class _SkipTo(NamedTuple):
    """The position fell out of the log (retention): read on from `offset`, where the log
    now starts."""

    offset: int


def _data_loss(
    rng: OffsetRange, what: str, lost: tuple[int, int] | None = None
) -> LogbusSparkError:
    """failOnDataLoss=true: the task fails naming the partition, what happened and, when
    known, the offsets [start, end) that are gone."""
    gone = (
        "some records" if lost is None else f"offsets {lost[0]} to {lost[1] - 1}"
    )
    return LogbusSparkError(
        f"partition {rng.topic}-{rng.partition}: {what}; {gone} planned for this query "
        "are gone (set failOnDataLoss=false to read what is left)"
    )


def _warn_skipped(rng: OffsetRange, what: str, start: int, end: int) -> None:
    """failOnDataLoss=false: records of the range are gone; say which, and read on (as
    Spark's Kafka source logs a warning and skips them)."""
    log.warning(
        "partition %s-%d: %s; offsets %d to %d planned for this query are gone and "
        "skipped (failOnDataLoss=false)", rng.topic, rng.partition, what, start, end - 1,
    )


def read_range(
    settings: ClientSettings, rng: OffsetRange, schema: pa.Schema, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    """Arrow record batches holding exactly the records of `rng` still in the log."""
    if rng.size == 0:
        return
    loop = asyncio.new_event_loop()
    reader = _RangeReader(settings, rng, fail_on_data_loss)
    try:
        while True:
            columns = loop.run_until_complete(reader.next_records())
            if columns is None:
                return
            if len(columns):
                yield columns_to_record_batch(schema, rng.topic, rng.partition, columns)
    finally:
        loop.run_until_complete(reader.close())
        loop.close()


class _RangeReader:
    """The fetch loop over one range; owns its Cluster."""

    def __init__(self, settings: ClientSettings, rng: OffsetRange, fail: bool) -> None:
        self.settings = settings
        self.rng = rng
        self.fail = fail
        self.position = rng.start
        self.cluster: Cluster | None = None
        self.empty_fetches = 0
        self.short_log_checks = 0
        self.options = FetchOptions(
            max_wait_ms=settings.fetch_max_wait_ms,
            max_bytes=settings.fetch_max_bytes,
            partition_max_bytes=settings.max_partition_fetch_bytes,
            isolation_level=settings.isolation_level,
        )
        self.committed = _CommittedFilter() if settings.isolation_level == 1 else None

    async def close(self) -> None:
        if self.cluster is not None:
            await self.cluster.close()

    async def next_records(self) -> RecordColumns | None:
        """The records of the next fetch (in range only), or None when done."""
        rng = self.rng
        if self.position >= rng.end:
            return None
        if self.cluster is None:
            self.cluster = await self._connect()
        fetched = await self._fetch()
        if fetched is None:
            return None
        if isinstance(fetched, _SkipTo):
            self.position = fetched.offset
            self.empty_fetches = 0
            return decode_columns([])
        try:
            columns = decode_columns(
                fetched.batches, min_offset=self.position, end_offset=rng.end
            )
        except InvalidBatch as exc:
            raise LogbusSparkError(
                f"cannot read partition {rng.topic}-{rng.partition} at offset "
                f"{self.position}: {exc}"
            ) from None
        if fetched.next_offset > self.position:
            self.position = fetched.next_offset
            self.empty_fetches = self.short_log_checks = 0
            return columns
        # Nothing at or after the position was returned.
        if fetched.high_watermark <= self.position:
            # Just after an election the new leader's high watermark may trail the old
            # one's until its followers fetch again: look again before calling it loss.
            self.short_log_checks += 1
            if self.short_log_checks <= _SHORT_LOG_CHECKS:
                await asyncio.sleep(_SHORT_LOG_PAUSE)
                return decode_columns([])
            what = (f"the log ends at offset {fetched.high_watermark}, before the planned "
                    f"end {rng.end}")
            if self.fail:
                raise _data_loss(rng, what, (self.position, rng.end))
            _warn_skipped(rng, what, self.position, rng.end)
            return None
        self.empty_fetches += 1
        if self.empty_fetches > _MAX_EMPTY_FETCHES:
            raise LogbusSparkError(
                f"partition {rng.topic}-{rng.partition}: no records returned at offset "
                f"{self.position} below the high watermark {fetched.high_watermark}"
            )
        return decode_columns([])

    async def _connect(self) -> Cluster:
        """The task's Cluster, reached through any bootstrap server that answers, tried
        again while the budget lasts (the planner reached the cluster a moment ago)."""
        budget = self.settings.retry_budget()
        while True:
            try:
                return await Cluster.connect(
                    self.settings.bootstrap_servers,
                    client_id=self.settings.client_id,
                    connect_timeout=self.settings.connect_timeout_ms / 1000,
                    request_timeout=self.settings.request_timeout_ms / 1000,
                    security=self.settings.security(),
                )
            except KafkaError as exc:
                if not await budget.pause(exc):
                    raise LogbusSparkError(
                        f"cannot connect to logbus (option 'kafka.bootstrap.servers'): "
                        f"{budget.describe(exc)}"
                    ) from None

    async def _fetch(self) -> RawFetchedPartition | _SkipTo | None:
        """The next fetch's answer; where to skip to when the position fell out of the
        log; None when nothing of the range is left to read."""
        assert self.cluster is not None
        rng = self.rng
        tp = TopicPartition(rng.topic, rng.partition)
        budget = self.settings.retry_budget()
        while True:
            try:
                conn = await self.cluster.leader(*tp)
                if self.committed is not None:
                    return await self._fetch_committed(conn, tp)
                results = await fetch_many_raw(conn, {tp: self.position}, self.options)
                value = results[tp]
                if isinstance(value, KafkaError):
                    raise value
                return value
            except KafkaError as exc:
                if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    return await self._out_of_range()
                if (
                    exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    and await self._deleted()
                ):
                    what = "the topic or partition was deleted"
                    if self.fail:
                        raise _data_loss(rng, what, (self.position, rng.end)) from None
                    _warn_skipped(rng, what, self.position, rng.end)
                    return None
                if not await budget.pause(exc):
                    raise LogbusSparkError(
                        f"cannot read partition {rng.topic}-{rng.partition} at offset "
                        f"{self.position}: {budget.describe(exc)}"
                    ) from None
                await self._refresh(budget)

    async def _deleted(self) -> bool:
        """Whether fresh metadata lacks the partition. A broker that does not host it yet
        (a restarted one the last metadata named leader) answers UNKNOWN_TOPIC_OR_PARTITION
        too: that one is retried, as Kafka's consumer retries it."""
        assert self.cluster is not None
        try:
            fresh = await self.cluster.refresh([self.rng.topic])
        except KafkaError:
            return False  # no answer: the retry decides
        info = fresh.topics.get(self.rng.topic)
        return (
            info is None
            or info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            or self.rng.partition not in info.partitions
        )

    async def _refresh(self, budget: RetryBudget) -> None:
        """New metadata after a failed fetch (the leader moved or died); a refresh that
        fails too is left to the next fetch's retry."""
        assert self.cluster is not None
        try:
            await self.cluster.refresh([self.rng.topic])
        except KafkaError as exc:
            if not is_retriable(exc):
                raise LogbusSparkError(
                    f"cannot read partition {self.rng.topic}-{self.rng.partition}: "
                    f"{budget.describe(exc)}"
                ) from None

    async def _fetch_committed(self, conn: Connection, tp: TopicPartition) -> RawFetchedPartition:
        """A read_committed Fetch: its batches less aborted transactions' and markers."""
        assert self.committed is not None
        response = await fetch_partitions(
            conn, {tp: FetchPosition(self.position)}, self.options
        )
        check(response.error_code, "Fetch")
        data = response.partitions.get(tp)
        if data is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {tp}")
        if data.error_code != ErrorCode.NONE:
            raise KafkaError(data.error_code, f"fetching {tp.topic}-{tp.partition}")
        return self.committed.split(data, self.position)

    async def _out_of_range(self) -> _SkipTo | None:
        """The position fell out of the log (retention): fail, or skip to what is left."""
        assert self.cluster is not None
        rng = self.rng
        conn = await self.cluster.leader(rng.topic, rng.partition)
        earliest = await list_offsets(conn, rng.topic, rng.partition, EARLIEST)
        what = f"offset {self.position} is out of range (the log now starts at {earliest})"
        # Below the log's start (retention): up to it; past its end (truncation): the rest.
        lost_end = rng.end if earliest <= self.position else min(earliest, rng.end)
        if self.fail:
            raise _data_loss(rng, what, (self.position, lost_end))
        _warn_skipped(rng, what, self.position, lost_end)
        return None if lost_end == rng.end else _SkipTo(earliest)


class _CommittedFilter:
    """What a read_committed consumer keeps of the fetched batches: none of an aborted
    transaction (the broker lists those overlapping a fetch, as (producer id, first
    offset); a producer's batches are dropped from its transaction's first offset up to
    its abort marker), no control batches. Kept across the fetches of one range."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, int]] = []  # (producer id, first offset), sorted
        self.seen: set[tuple[int, int]] = set()
        self.aborting: set[int] = set()

    def split(self, data: FetchedData, offset: int) -> RawFetchedPartition:
        for aborted in data.aborted_transactions or ():
            if aborted not in self.seen:
                self.seen.add(aborted)
                self.pending.append(aborted)
        self.pending.sort(key=lambda a: a[1])
        batches: list[tuple[memoryview, BatchHeader]] = []
        next_offset = offset
        if data.records:
            view = memoryview(data.records)
            for position, header in split_batches(view):
                next_offset = max(next_offset, header.next_offset)
                if header.next_offset <= offset:
                    continue
                batch = view[position : position + header.size]
                if header.producer_id >= 0:
                    while self.pending and self.pending[0][1] <= header.last_offset:
                        self.aborting.add(self.pending.pop(0)[0])
                    if header.is_control:
                        if _is_abort_marker(batch):
                            self.aborting.discard(header.producer_id)
                        continue
                    if header.is_transactional and header.producer_id in self.aborting:
                        continue
                if not header.is_control:
                    batches.append((batch, header))
        return RawFetchedPartition(
            batches, next_offset, data.high_watermark, data.last_stable_offset,
            data.log_start_offset,
        )


def _is_abort_marker(batch: memoryview) -> bool:
    _, records = decode_batch(batch)
    return bool(records) and decode_control_key(records[0].key).type == ControlType.ABORT
