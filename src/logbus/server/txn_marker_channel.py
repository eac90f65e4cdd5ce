"""The transaction coordinator's channel to partition leaders (Kafka's
`TransactionMarkerChannelManager`): WriteTxnMarkers to the leader of every other partition
of a transaction, on the inter-broker listener; the partitions this broker leads get their
markers appended directly (`local`, `server/txn_marker_writer.py`: the same append and
acks=-1 wait a WriteTxnMarkers request to itself would make, without the request's
encoding, loopback round trip and decoding). Leaders come from the metadata cache; a
partition whose leader moved, is unknown for now or does not answer is retried after a
backoff until its marker is written, its topic is deleted, or the coordinator stops
wanting it.

Markers for one broker are queued and sent together, as Kafka's `TxnMarkerQueue` drains a
broker's queue into one request: the request task, when it runs, takes every marker queued
for its broker by then (transactions ending in the same turn of the event loop share one
WriteTxnMarkers), one per producer id (the answer is keyed by producer id; a second one
waits for the next request). A single transaction's markers leave as soon as before."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.transactions_marker import (
    MarkerEntry,
    MarkerResults,
    write_txn_markers,
)
from logbus.client.security import PLAINTEXT, ClientSecurity
from logbus.controller.cluster_metadata import MetadataCache
from logbus.coordinator.transaction.markers import TxnMarkers
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

FENCED = (ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
FATAL = (
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_REQUIRED_ACKS,
)
"""Answers Kafka's channel treats as a bug: the marker is not retried."""

LocalMarkerWriter = Callable[[MarkerEntry], Awaitable[dict[TopicPartition, ErrorCode]]]
"""Appends one marker to partitions this broker leads; each partition's answer."""


@dataclass(slots=True)
class _Queued:
    """A transaction's marker for some partitions of one broker, waiting for a request."""

    entry: MarkerEntry
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]]


class TxnMarkerChannel:
    """Implements `logbus.coordinator.transaction.markers.MarkerSender`. Event loop only."""

    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        listener: Callable[[], str],
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int = 100,
        local: LocalMarkerWriter | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.local = local
        """Writes the markers of partitions this broker leads (None: over the wire too)."""
        self.cache = metadata_cache
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.security: ClientSecurity = PLAINTEXT  # the inter-broker listener's (broker sets it)
        self._conns: dict[int, tuple[str, int, Connection]] = {}
        self._connecting: dict[int, asyncio.Lock] = {}
        self._closed = False
        # per broker, the markers the next request to it takes (its task is scheduled)
        self._queued: dict[int, list[_Queued]] = {}
        self._requests: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        self._closed = True
        requests = list(self._requests)
        for task in requests:
            task.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
        conns = [conn for _h, _p, conn in self._conns.values()]
        self._conns.clear()
        for conn in conns:
            await conn.close()

    def _leader(self, tp: TopicPartition) -> int | None:
        """The partition's leader; -1 when its topic is gone (nothing to mark); None when
        it has no live leader now."""
        topic = self.cache.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return -1
        leader = topic.partitions[tp.partition].leader
        return leader if leader >= 0 and leader in self.cache.brokers else None

    async def _connection(self, broker_id: int) -> Connection:
        info = self.cache.brokers[broker_id]
        endpoint = info.endpoint(self.listener())
        lock = self._connecting.setdefault(broker_id, asyncio.Lock())
        async with lock:
            known = self._conns.get(broker_id)
            if known is not None:
                host, port, conn = known
                if not conn.closed and (host, port) == (endpoint.host, endpoint.port):
                    return conn
                del self._conns[broker_id]
                await conn.close()
            timeout = self.request_timeout_ms / 1000
            conn = await Connection.connect(
                endpoint.host,
                endpoint.port,
                client_id=f"broker-{self.broker_id}-txn-marker-sender",
                connect_timeout=timeout,
                request_timeout=timeout + 5,
                security=self.security,
            )
            if self._closed:
                await conn.close()
                raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "the marker channel is closed")
            self._conns[broker_id] = (endpoint.host, endpoint.port, conn)
            return conn

    def _send(
        self, broker_id: int, markers: TxnMarkers, partitions: list[TopicPartition]
    ) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        """Queue the markers of `partitions` (all led by `broker_id`) for the next request
        to it, or append them here when this broker leads them; the awaitable is each
        partition's answer (NETWORK_EXCEPTION when the request failed)."""
        entry = MarkerEntry(
            markers.producer_id,
            markers.producer_epoch,
            markers.coordinator_epoch,
            markers.committed,
            tuple(partitions),
        )
        if broker_id == self.broker_id and self.local is not None:
            return self._append_here(self.local, entry)
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = (
            asyncio.get_running_loop().create_future()
        )
        self._enqueue(broker_id, _Queued(entry, answer))
        return answer

    @staticmethod
    async def _append_here(
        local: LocalMarkerWriter, entry: MarkerEntry
    ) -> dict[TopicPartition, ErrorCode]:
        try:
            return await local(entry)
        except Exception:  # as a failed request: retried after the backoff
            log.exception("appending the marker of producer %d failed", entry.producer_id)
            return dict.fromkeys(entry.partitions, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _enqueue(self, broker_id: int, queued: _Queued) -> None:
        queue = self._queued.get(broker_id)
        if queue is None:
            queue = self._queued[broker_id] = []
            task = asyncio.get_running_loop().create_task(
                self._send_queued(broker_id), name=f"txn-markers-to-{broker_id}"
            )
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        queue.append(queued)

    async def _send_queued(self, broker_id: int) -> None:
        """One WriteTxnMarkers to `broker_id` with the markers queued for it by now."""
        batch: list[_Queued] = []
        producer_ids: set[int] = set()
        for queued in self._queued.pop(broker_id, []):
            if queued.answer.done():
                continue  # its waiter is gone
            if queued.entry.producer_id in producer_ids:
                self._enqueue(broker_id, queued)  # one per producer id and request
            else:
                producer_ids.add(queued.entry.producer_id)
                batch.append(queued)
        results: MarkerResults | None = None
        try:
            if batch:
                conn = await self._connection(broker_id)
                results = await write_txn_markers(conn, [q.entry for q in batch])
        except (TimeoutError, KafkaError, OSError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, exc)
            dropped = self._conns.pop(broker_id, None)
            if dropped is not None:
                await dropped[2].close()
        except Exception:
            log.exception("WriteTxnMarkers to broker %d failed", broker_id)
        finally:
            # also when cancelled (close) or failed otherwise: no waiter is left hanging
            for queued in batch:
                if not queued.answer.done():
                    queued.answer.set_result(
                        dict.fromkeys(queued.entry.partitions, ErrorCode.NETWORK_EXCEPTION)
                        if results is None
                        else results.get(queued.entry.producer_id, {})
                    )

    async def write_markers(
        self, markers: TxnMarkers, still_wanted: Callable[[], bool]
    ) -> ErrorCode:
        remaining = set(markers.partitions)
        while remaining:
            if self._closed or not still_wanted():
                return ErrorCode.NOT_COORDINATOR
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self._leader(tp)
                if leader == -1:
                    remaining.discard(tp)  # deleted topic: nothing left to end there
                elif leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            leaders = list(by_leader)
            if len(leaders) == 1:  # (one broker: no task per leader)
                answers = [await self._send(leaders[0], markers, by_leader[leaders[0]])]
            else:
                answers = await asyncio.gather(
                    *(self._send(b, markers, by_leader[b]) for b in leaders)
                )
            for broker_id, answer in zip(leaders, answers, strict=True):
                for tp in by_leader[broker_id]:
                    error = answer.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                    if error is ErrorCode.NONE:
                        remaining.discard(tp)
                    elif error in FENCED:
                        log.warning(
                            "marker of %s for %s refused: %s",
                            markers.transactional_id,
                            tp,
                            error.name,
                        )
                        return error
                    elif error in FATAL:
                        log.error(
                            "marker of %s for %s failed: %s (not retried)",
                            markers.transactional_id,
                            tp,
                            error.name,
                        )
                        return error
                    elif error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._leader(tp) == -1:
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(self.retry_backoff_ms / 1000)
        return ErrorCode.NONE
