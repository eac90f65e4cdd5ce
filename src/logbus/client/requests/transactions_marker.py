"""WriteTxnMarkers v0-1: a transaction coordinator asks a partition leader to append the
COMMIT or ABORT marker of each listed transaction to each listed partition (KIP-98). The
leader answers every partition of every marker: NONE once the marker is replicated, or
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, TRANSACTION_COORDINATOR_FENCED,
INVALID_PRODUCER_EPOCH, ... Used by the broker's marker channel."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from logbus.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse
from logbus.types import TopicPartition


@dataclass(frozen=True, slots=True)
class MarkerEntry:
    """One transaction's marker for some partitions of one leader."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


MarkerResults = dict[int, dict[TopicPartition, ErrorCode]]
"""Per producer id, each partition's error code."""


def build_write_txn_markers(
    version: int, markers: Iterable[MarkerEntry]
) -> WriteTxnMarkersRequest:
    body: list[WritableTxnMarker] = []
    for m in markers:
        topics: dict[str, list[int]] = {}
        for tp in m.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body.append(
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.committed,
                "topics": [{"name": name, "partition_indexes": ps} for name, ps in topics.items()],
                "coordinator_epoch": m.coordinator_epoch,
            }
        )
    return {"markers": body}


def read_write_txn_markers(
    response: WriteTxnMarkersResponse, markers: Iterable[MarkerEntry]
) -> MarkerResults:
    """Each asked partition's error; one the answer left out is UNKNOWN_SERVER_ERROR."""
    out: MarkerResults = {}
    for m in response["markers"]:
        errors = out.setdefault(m["producer_id"], {})
        for t in m["topics"]:
            for p in t["partitions"]:
                errors[TopicPartition(t["name"], p["partition_index"])] = ErrorCode(p["error_code"])
    for entry in markers:
        errors = out.setdefault(entry.producer_id, {})
        for tp in entry.partitions:
            errors.setdefault(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    return out


async def write_txn_markers(conn: Connection, markers: list[MarkerEntry]) -> MarkerResults:
    """Send the markers to the leader at `conn` (newest version both support)."""
    version = conn.choose_version(ApiKey.WRITE_TXN_MARKERS)
    body = build_write_txn_markers(version, markers)
    response = await send(conn, apis.WRITE_TXN_MARKERS, body, version)
    return read_write_txn_markers(response, markers)
