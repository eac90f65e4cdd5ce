"""Transactions across replicas (brokers in one process): followers rebuild open
transactions, the last stable offset and the aborted index from what they copy, so a new
leader answers read_committed readers exactly as the old one did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replication_cluster import InProcessCluster
from txn_wire import committed_fetch, txn_produce, write_marker

from kafka_wire import WireClient
from logbus.storage.transaction_index import AbortedTxn

T = "replicated-txns"
P1, P2, P3 = 8101, 8102, 8103


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path, replica_fetch_wait_max_ms="100")
    running.start()
    try:
        yield running
    finally:
        running.close()


def test_followers_keep_lso_and_aborted_index_and_take_over(cluster: InProcessCluster) -> None:
    cluster.create_topic(T, {0: [0, 1, 2]})
    cluster.wait_for(lambda: cluster.partition(0, T, 0).is_leader, "leadership")
    with WireClient(f"127.0.0.1:{cluster.ports[0]}") as conn:
        assert txn_produce(conn, T, P1, 0, [b"x1", b"x2"])["error_code"] == 0  # 0-1
        assert txn_produce(conn, T, P2, 0, [b"c1"])["error_code"] == 0  # 2
        assert write_marker(conn, P1, False, {T: [0]}) == {(T, 0): 0}  # 3
        assert write_marker(conn, P2, True, {T: [0]}) == {(T, 0): 0}  # 4
        assert txn_produce(conn, T, P3, 0, [b"o1"])["error_code"] == 0  # 5, open
        before = committed_fetch(conn, T)
    assert before["last_stable_offset"] == 5
    assert before["aborted_transactions"] == [{"producer_id": P1, "first_offset": 0}]

    def replicated() -> bool:
        parts = [cluster.partition(b, T, 0) for b in (0, 1, 2)]
        return all(p.log.log_end_offset == 6 and p.high_watermark == 6 for p in parts)

    cluster.wait_for(replicated, "every replica at the high watermark")
    for broker_id in (0, 1, 2):
        log = cluster.call(lambda b=broker_id: cluster.partition(b, T, 0).log)  # type: ignore[misc]
        assert cluster.call(lambda log=log: log.last_stable_offset) == 5  # type: ignore[misc]
        # P2's transaction (from 2) was open when P1's aborted: the LSO then
        assert cluster.call(lambda log=log: log.collect_aborted_transactions(0, 6)) == [
            AbortedTxn(P1, 0, 3, 2)
        ]

    cluster.elect(T, 0, 1, (0, 1, 2))
    cluster.wait_for(lambda: cluster.partition(1, T, 0).is_leader, "the new leader")
    with WireClient(f"127.0.0.1:{cluster.ports[1]}") as conn:
        after = committed_fetch(conn, T)
        assert after["last_stable_offset"] == 5
        assert after["aborted_transactions"] == before["aborted_transactions"]
        # the coordinator ends the open transaction on the new leader
        assert write_marker(conn, P3, True, {T: [0]}) == {(T, 0): 0}  # 6
        assert committed_fetch(conn, T)["last_stable_offset"] == 7
