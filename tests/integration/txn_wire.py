"""Transactions over the wire without a coordinator, for the log-side transaction tests:
transactional batches produced with a producer id of the test's choosing, markers written
with WriteTxnMarkers, read_committed fetches."""

from __future__ import annotations

from typing import Any

from kafka_wire import PRODUCE_V, WireClient, fetch_body
from logbus.protocol import ApiKey
from logbus.records.builder import build_batch

WRITE_TXN_MARKERS_V = 1
TXN_ID = "txn-test"


def txn_produce(
    conn: WireClient,
    topic: str,
    pid: int,
    seq: int,
    values: list[bytes],
    *,
    epoch: int = 0,
    transactional_id: str | None = TXN_ID,
    partition: int = 0,
    records: bytes | None = None,
) -> dict[str, Any]:
    batch = records or build_batch(
        [(b"k", v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    body = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
        ],
    }
    response = conn.request(ApiKey.PRODUCE, PRODUCE_V, body)
    return dict(response["responses"][0]["partition_responses"][0])


def write_marker(
    conn: WireClient,
    pid: int,
    commit: bool,
    partitions: dict[str, list[int]],
    *,
    epoch: int = 0,
    coordinator_epoch: int = 0,
) -> dict[tuple[str, int], int]:
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "topics": [
                    {"name": t, "partition_indexes": ps} for t, ps in partitions.items()
                ],
                "coordinator_epoch": coordinator_epoch,
            }
        ]
    }
    response = conn.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, body)
    (marker,) = response["markers"]
    assert marker["producer_id"] == pid
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in marker["topics"]
        for p in t["partitions"]
    }


def committed_fetch(conn: WireClient, topic: str, offset: int = 0) -> dict[str, Any]:
    body = fetch_body(topic, 0, offset)
    body["isolation_level"] = 1
    response = conn.request(ApiKey.FETCH, 12, body)
    return dict(response["responses"][0]["partitions"][0])
