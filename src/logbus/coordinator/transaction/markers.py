"""What the transaction coordinator needs to end a transaction in its partitions: a
`MarkerSender` that writes a COMMIT or ABORT marker to every partition through
WriteTxnMarkers to each partition's leader (Kafka's `TransactionMarkerChannelManager`),
the partitions of the coordinator's own broker appended there directly. The broker
implements it (`logbus.server.txn_marker_channel`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from logbus.protocol import ErrorCode
from logbus.types import TopicPartition


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """The markers ending one transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]


class MarkerSender(Protocol):
    async def write_markers(
        self, markers: TxnMarkers, still_wanted: Callable[[], bool]
    ) -> ErrorCode:
        """Write the markers to every partition's leader, retrying (leaders move, brokers
        restart) until each is written or its topic is gone, or until `still_wanted()`
        turns False (this broker no longer coordinates the transaction). NONE when every
        marker is written; TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH when a
        leader refused them for good (a newer coordinator or producer epoch); NOT_COORDINATOR
        when it stopped because `still_wanted()` turned False."""
        ...
