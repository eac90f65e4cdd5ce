"""The transaction coordinator's marker channel (`logbus.server.txn_marker_channel`) on a
real broker: markers for partitions the broker leads itself are appended there without a
WriteTxnMarkers request; over the wire (as to another leader: the tests below switch the
local path off to reach the broker's own listener), markers of transactions that end in
the same turn of the event loop go to a leader in one WriteTxnMarkers request (Kafka's
TxnMarkerQueue), one marker per producer id and request; every marker reaches its
partition's log."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import logbus.server.txn_marker_channel as channel_module
from logbus.client.connection import Connection
from logbus.client.requests.transactions_marker import MarkerEntry, MarkerResults
from logbus.coordinator.transaction.markers import TxnMarkers
from logbus.protocol import ApiKey, ErrorCode
from logbus.types import TopicPartition

TIMEOUT = 20


@pytest.fixture
def running(broker_factory: Any) -> Any:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("m", 2, 1)]).values():
        future.result(TIMEOUT)
    return broker


def _markers(producer_id: int, partitions: list[int]) -> TxnMarkers:
    return TxnMarkers(
        transactional_id=f"t{producer_id}",
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        committed=True,
        partitions=frozenset(TopicPartition("m", p) for p in partitions),
    )


async def _end_offsets(bootstrap: str) -> list[int]:
    host, port = bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        response = await conn.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": "m", "partitions": [
                        {"partition_index": p, "timestamp": -1} for p in (0, 1)
                    ]}
                ],
            },
            5,
        )
    return [p["offset"] for p in response["topics"][0]["partitions"]]


def _count_requests(monkeypatch: pytest.MonkeyPatch) -> list[list[MarkerEntry]]:
    requests: list[list[MarkerEntry]] = []
    real = channel_module.write_txn_markers

    async def counted(conn: Connection, markers: list[MarkerEntry]) -> MarkerResults:
        requests.append(list(markers))
        return await real(conn, markers)

    monkeypatch.setattr(channel_module, "write_txn_markers", counted)
    return requests


def test_markers_for_partitions_led_here_are_appended_without_a_request(
    running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _count_requests(monkeypatch)
    channel = running.broker.txn_marker_channel
    assert channel is not None and channel.local is not None

    async def end_together() -> list[ErrorCode]:
        return list(
            await asyncio.gather(
                channel.write_markers(_markers(3000, [0, 1]), lambda: True),
                channel.write_markers(_markers(3001, [1]), lambda: True),
            )
        )

    assert running.loop.run(end_together()) == [ErrorCode.NONE] * 2
    # a marker the producer's state refuses is refused here too: a coordinator epoch
    # below the last one seen for producer 3000 is fenced
    stale = TxnMarkers("t3000", 3000, 0, -1, True, frozenset({TopicPartition("m", 0)}))
    refused = running.loop.run(channel.write_markers(stale, lambda: True))
    assert refused is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert requests == []
    assert asyncio.run(_end_offsets(running.bootstrap)) == [1, 2]


def test_markers_of_transactions_ending_together_share_one_request(
    running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _count_requests(monkeypatch)
    channel = running.broker.txn_marker_channel
    assert channel is not None
    monkeypatch.setattr(channel, "local", None)  # over the wire, to its own listener

    async def end_together() -> list[ErrorCode]:
        return list(
            await asyncio.gather(
                channel.write_markers(_markers(1000, [0, 1]), lambda: True),
                channel.write_markers(_markers(1001, [0]), lambda: True),
                channel.write_markers(_markers(1002, [1]), lambda: True),
                # the same producer id again: it waits for the next request
                channel.write_markers(_markers(1000, [1]), lambda: True),
            )
        )

    assert running.loop.run(end_together()) == [ErrorCode.NONE] * 4
    assert [sorted(e.producer_id for e in r) for r in requests] == [[1000, 1001, 1002], [1000]]
    first = {e.producer_id: e.partitions for e in requests[0]}
    assert first[1000] == (TopicPartition("m", 0), TopicPartition("m", 1))
    # every marker is a control record in its partition: 2 on m-0, 3 on m-1
    assert asyncio.run(_end_offsets(running.bootstrap)) == [2, 3]


def test_a_single_transactions_markers_leave_in_their_own_request(
    running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _count_requests(monkeypatch)
    channel = running.broker.txn_marker_channel
    monkeypatch.setattr(channel, "local", None)
    for producer_id in (2000, 2001):
        error = running.loop.run(channel.write_markers(_markers(producer_id, [0]), lambda: True))
        assert error is ErrorCode.NONE
    assert [[e.producer_id for e in r] for r in requests] == [[2000], [2001]]
    assert asyncio.run(_end_offsets(running.bootstrap)) == [2, 0]
