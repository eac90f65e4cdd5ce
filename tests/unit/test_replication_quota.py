"""Replication throttles (Kafka's ReplicationQuotaManager) as values: which replicas a
throttled-replicas list names on a broker, and the byte rate a fetch loop obeying the
quota gets, on a simulated clock."""

from __future__ import annotations

from logbus.server.quotas.replication import (
    FOLLOWER_REPLICAS,
    ReplicationQuota,
    parse_throttled_replicas,
)
from logbus.types import TopicPartition


def test_the_list_names_partitions_on_this_broker() -> None:
    assert parse_throttled_replicas("0:1,1:2, 2:1", 1) == frozenset({0, 2})
    assert parse_throttled_replicas("*", 5) is None
    assert parse_throttled_replicas("0:1,junk,3:", 1) == frozenset({0})


def quota(configs: dict[str, dict[str, str]], now: list[float]) -> ReplicationQuota:
    return ReplicationQuota(1, FOLLOWER_REPLICAS, configs.get, clock=lambda: now[0])


def test_only_named_replicas_are_throttled_and_only_with_a_rate() -> None:
    now = [0.0]
    q = quota({"t": {FOLLOWER_REPLICAS: "0:1,1:2"}}, now)
    assert not q.is_throttled(TopicPartition("t", 0))  # no rate yet
    q.update_rate(1000)
    assert q.is_throttled(TopicPartition("t", 0))
    assert not q.is_throttled(TopicPartition("t", 1))
    assert not q.is_throttled(TopicPartition("other", 0))


def test_a_fetch_loop_moves_bytes_at_the_rate() -> None:
    now = [0.0]
    q = quota({"t": {FOLLOWER_REPLICAS: "*"}}, now)
    q.update_rate(1_000_000)
    moved = 0
    while now[0] < 60:
        if q.is_exceeded():
            now[0] += max(q.delay(), 0.01)
            continue
        now[0] += 0.15  # the fetch's round trip
        q.record(990_000)
        moved += 990_000
    assert 0.95 <= moved / now[0] / 1_000_000 <= 1.05
