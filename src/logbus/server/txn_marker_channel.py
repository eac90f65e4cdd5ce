"""The transaction coordinator's channel to partition leaders (Kafka's
`TransactionMarkerChannelManager`): WriteTxnMarkers to the leader of every partition of a
transaction, this broker included (over the wire, as Kafka does), on the inter-broker
listener. Leaders come from the metadata cache; a partition whose leader moved, is
unknown for now or does not answer is retried after a backoff until its marker is written,
its topic is deleted, or the coordinator stops wanting it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.transactions_marker import MarkerEntry, write_txn_markers
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
    ) -> None:
        self.broker_id = broker_id
        self.cache = metadata_cache
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.security: ClientSecurity = PLAINTEXT  # the inter-broker listener's (broker sets it)
        self._conns: dict[int, tuple[str, int, Connection]] = {}
        self._connecting: dict[int, asyncio.Lock] = {}
        self._closed = False

    async def close(self) -> None:
        self._closed = True
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

    async def _send(
        self, broker_id: int, markers: TxnMarkers, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        entry = MarkerEntry(
            markers.producer_id,
            markers.producer_epoch,
            markers.coordinator_epoch,
            markers.committed,
            tuple(partitions),
        )
        try:
            conn = await self._connection(broker_id)
            results = await write_txn_markers(conn, [entry])
        except (TimeoutError, KafkaError, OSError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", broker_id, exc)
            dropped = self._conns.pop(broker_id, None)
            if dropped is not None:
                await dropped[2].close()
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        return results.get(markers.producer_id, {})

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
            answers = await asyncio.gather(*(self._send(b, markers, by_leader[b]) for b in leaders))
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
