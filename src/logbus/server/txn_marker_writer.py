"""A partition leader's side of a transaction marker (Kafka's `handleWriteTxnMarkersRequest`
body): the COMMIT or ABORT control batch of one producer appended as leader with the
coordinator's origin to each partition, then the wait acks=-1 does until the high
watermark passes it (at most the timeout). Used by the WriteTxnMarkers handler
(`server/api/write_txn_markers.py`) for markers from any coordinator, and by this broker's
own coordinator (`server/txn_marker_channel.py`) for the partitions it leads itself,
without a WriteTxnMarkers request to itself.

Per partition: NONE; UNKNOWN_TOPIC_OR_PARTITION when this broker holds no replica of it;
NOT_LEADER_OR_FOLLOWER when it is not the leader; TRANSACTION_COORDINATOR_FENCED for a
coordinator epoch below the last one the producer's state saw; INVALID_PRODUCER_EPOCH for
a producer epoch below the producer's; INVALID_RECORD for a negative producer id or epoch;
NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT as acks=-1 produce answers.

Once a marker is in a partition's log, the replica manager's `txn_completion_listeners`
are called with (partition, producer id, committed), on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from logbus.client.requests.transactions_marker import MarkerEntry
from logbus.protocol import ErrorCode
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.types import TopicPartition

log = logging.getLogger(__name__)


def _notify(
    replica_manager: ReplicaManager, partition: TopicPartition, producer_id: int, committed: bool
) -> None:
    for listener in list(replica_manager.txn_completion_listeners):
        try:
            listener(partition, producer_id, committed)
        except Exception:
            log.exception("transaction completion listener failed for %s", partition)


async def append_markers(
    replica_manager: ReplicaManager,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    partitions: Sequence[TopicPartition],
    timeout_ms: int,
) -> dict[TopicPartition, ErrorCode]:
    """Append one producer's marker to `partitions` (in order) and wait for them to be
    replicated; each partition's answer."""
    if producer_id < 0 or producer_epoch < 0:
        # no producer to end a transaction of: the batch would be invalid (as Kafka's
        # validation of a transactional batch without a producer id)
        return dict.fromkeys(partitions, ErrorCode.INVALID_RECORD)
    batch = memoryview(
        build_end_txn_batch(
            ControlType.COMMIT if committed else ControlType.ABORT,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=int(time.time() * 1000),
        )
    )
    entries: list[tuple[str, int, memoryview | None]] = [
        (tp.topic, tp.partition, batch) for tp in partitions
    ]
    results = await replica_manager.append_records(
        -1,
        timeout_ms,
        entries,
        # As Kafka: a partition without a replica here is unknown (its coordinator
        # refreshes its metadata and retries).
        lambda _t, _p: False,
        from_client=False,
        on_appended=lambda tp: _notify(replica_manager, tp, producer_id, committed),
    )
    answers: dict[TopicPartition, ErrorCode] = {}
    for tp, result in zip(partitions, results, strict=True):
        answers[tp] = ErrorCode(result.error)
        if result.error != ErrorCode.NONE:
            log.info(
                "transaction marker for producer %d on %s failed: %s %s",
                producer_id, tp, ErrorCode(result.error).name, result.message or "",
            )
    return answers


def own_marker_writer(
    replica_manager: ReplicaManager, timeout_ms: int
) -> Callable[[MarkerEntry], Awaitable[dict[TopicPartition, ErrorCode]]]:
    """The marker channel's `local` writer: this broker's coordinator's markers for the
    partitions this broker leads, appended here (timeout_ms: request.timeout.ms, as a
    WriteTxnMarkers request's wait)."""

    async def write(entry: MarkerEntry) -> dict[TopicPartition, ErrorCode]:
        return await append_markers(
            replica_manager,
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            committed=entry.committed,
            partitions=entry.partitions,
            timeout_ms=timeout_ms,
        )

    return write
