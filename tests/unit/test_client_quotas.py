"""Client quota arithmetic: Kafka's sampled rate and window, the throttle time formula,
the token bucket of controller mutations, the precedence of configured entities, and
the sanitized names of the ZooKeeper layout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from logbus.protocol import ApiKey
from logbus.server.quotas.entity import (
    DEFAULT,
    QuotaEntity,
    QuotaType,
    desanitize,
    entity_from_store,
    sanitize,
)
from logbus.server.quotas.manager import ClientQuotas, QuotaWindows
from logbus.server.quotas.rate import SampledRate, TokenBucket
from logbus.server.quotas.throttling import RequestQuota, TimedCall

PRODUCE = QuotaType.PRODUCE


def test_new_rate_is_measured_over_samples_minus_one_windows() -> None:
    rate = SampledRate(11, 1.0)
    rate.record(1000, 100.0)
    # a fresh sensor: elapsed 0, taken as 10 whole windows
    assert rate.window_size(100.0) == pytest.approx(10.0)
    assert rate.rate(100.0) == pytest.approx(100.0)
    rate.record(1000, 112.5)  # the first sample is older than 11 windows: dropped
    assert rate.total(112.5) == 1000
    assert rate.window_size(112.5) == pytest.approx(10.0)


def test_rate_over_full_windows() -> None:
    rate = SampledRate(3, 1.0)
    for second in range(3):
        rate.record(600, 10.0 + second)
    assert rate.window_size(12.5) == pytest.approx(2.5)
    assert rate.rate(12.5) == pytest.approx(1800 / 2.5)


def test_throttle_time_is_kafkas_formula() -> None:
    rate = SampledRate(11, 1.0)
    rate.record(20_000, 0.0)  # 2000/s over a 10 s window
    # (observed - quota) / quota * window = (2000 - 1000) / 1000 * 10 s
    assert rate.throttle(1000, 0.0) == pytest.approx(10.0)
    assert rate.throttle(2000, 0.0) == 0.0
    assert rate.throttle(0, 0.0) == pytest.approx(10.0)  # a zero quota: a whole window


def test_token_bucket_allows_a_burst_then_charges_debt() -> None:
    bucket = TokenBucket(11, 1.0)
    bucket.record_bounded(100, bound=10, now=0.0)  # burst: 10 * 11 * 1 s = 110 credits
    assert bucket.throttle(10, 0.0) == 0.0
    bucket.record_bounded(30, bound=10, now=0.0)  # 20 in debt
    assert bucket.throttle(10, 0.0) == pytest.approx(2.0)
    assert bucket.throttle(10, 1.0) == pytest.approx(1.0)  # 10 credits came back
    assert bucket.throttle(10, 2.0) == 0.0


def configured(*entries: tuple[QuotaEntity, float]) -> ClientQuotas:
    quotas = ClientQuotas(QuotaWindows())
    for entity, value in entries:
        quotas.set_entity(entity, {PRODUCE.value: value})
    return quotas


ALL_LEVELS = [
    (QuotaEntity("alice", "app"), 1.0),
    (QuotaEntity("alice", DEFAULT), 2.0),
    (QuotaEntity("alice", None), 3.0),
    (QuotaEntity(DEFAULT, "app"), 4.0),
    (QuotaEntity(DEFAULT, DEFAULT), 5.0),
    (QuotaEntity(DEFAULT, None), 6.0),
    (QuotaEntity(None, "app"), 7.0),
    (QuotaEntity(None, DEFAULT), 8.0),
]


@pytest.mark.parametrize("level", range(len(ALL_LEVELS)))
def test_precedence_follows_kafkas_order(level: int) -> None:
    """With every level below `level` removed, `level` is the one that applies."""
    quotas = configured(*ALL_LEVELS[level:])
    assert quotas.quota(PRODUCE, "alice", "app") == (
        ALL_LEVELS[level][1],
        ALL_LEVELS[level][0],
    )


def test_precedence_for_other_users_and_clients() -> None:
    quotas = configured(*ALL_LEVELS)
    # bob has no quota of his own: the default user's with client app
    assert quotas.quota(PRODUCE, "bob", "app")[1] == QuotaEntity(DEFAULT, "app")  # type: ignore[index]
    assert quotas.quota(PRODUCE, "bob", "other")[1] == QuotaEntity(DEFAULT, DEFAULT)  # type: ignore[index]
    assert quotas.quota(PRODUCE, "alice", "other")[1] == QuotaEntity("alice", DEFAULT)  # type: ignore[index]
    only_clients = configured((QuotaEntity(None, "app"), 7.0), (QuotaEntity(None, DEFAULT), 8.0))
    assert only_clients.quota(PRODUCE, "bob", "app") == (7.0, QuotaEntity(None, "app"))
    assert only_clients.quota(PRODUCE, "bob", "x") == (8.0, QuotaEntity(None, DEFAULT))
    assert configured().quota(PRODUCE, "bob", "x") is None


def test_each_quota_kind_is_looked_up_on_its_own() -> None:
    quotas = ClientQuotas(QuotaWindows())
    quotas.set_entity(QuotaEntity("alice", None), {"producer_byte_rate": 10.0})
    quotas.set_entity(QuotaEntity(None, "app"), {"consumer_byte_rate": 20.0})
    assert quotas.quota(QuotaType.PRODUCE, "alice", "app") == (10.0, QuotaEntity("alice", None))
    assert quotas.quota(QuotaType.FETCH, "alice", "app") == (20.0, QuotaEntity(None, "app"))


def test_a_client_id_quota_is_shared_by_its_users_a_default_one_is_not() -> None:
    quotas = configured((QuotaEntity(None, "app"), 1000.0), (QuotaEntity(None, DEFAULT), 1000.0))
    assert quotas.record(PRODUCE, "alice", "app", 6000, 0.0) == 0.0
    # bob with client id app shares alice's rate: 12000 over 10 s
    assert quotas.record(PRODUCE, "bob", "app", 6000, 0.0) == pytest.approx(2.0)
    # the default client-id quota is each client id's own
    assert quotas.record(PRODUCE, "alice", "x", 6000, 0.0) == 0.0
    assert quotas.record(PRODUCE, "alice", "y", 6000, 0.0) == 0.0


def test_unrecord_takes_bytes_back() -> None:
    quotas = configured((QuotaEntity(None, "app"), 1000.0))
    assert quotas.record(PRODUCE, "u", "app", 20_000, 0.0) > 0
    quotas.unrecord(PRODUCE, "u", "app", 20_000, 0.0)
    assert quotas.throttle_time(PRODUCE, "u", "app", 0.0) == 0.0


def test_no_quota_no_rate_kept() -> None:
    quotas = configured((QuotaEntity(None, "app"), 1000.0))
    assert quotas.record(PRODUCE, "u", "other", 10**9, 0.0) == 0.0
    assert quotas.throttle_time(PRODUCE, "u", "other", 0.0) == 0.0


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("CN=a b,O=c", "CN%3Da%20b%2CO%3Dc"),
        ("x*y", "x%2Ay"),
        ("a~b/c", "a%7Eb%2Fc"),
        ("ü", "%C3%BC"),
        ("a-b_c.d", "a-b_c.d"),
    ],
)
def test_sanitizer_matches_kafkas(name: str, sanitized: str) -> None:
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


def test_store_paths_round_trip() -> None:
    for entity in (
        QuotaEntity("CN=x/y", "app 1"),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity("u", None),
        QuotaEntity(None, DEFAULT),
    ):
        assert entity_from_store(*entity.store_path()) == entity
    assert QuotaEntity("u", "c").store_path() == ("users", "u/clients/c")
    assert entity_from_store("users", "u/other/c") is None
    assert entity_from_store("topics", "t") is None


def test_timed_call_counts_running_time_not_waiting() -> None:
    async def handler() -> str:
        await asyncio.sleep(1.0)  # parked (a long-poll fetch, an acks=all produce)
        sum(range(10_000))
        return "done"

    async def main() -> tuple[str, float]:
        timed = TimedCall(handler())
        return await timed, timed.elapsed

    result, elapsed = asyncio.run(main())
    assert result == "done"
    assert 0 < elapsed < 0.5


def test_timed_call_passes_cancellation_to_the_handler() -> None:
    cleaned: list[bool] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    async def main() -> None:
        task = asyncio.ensure_future(_run(handler))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _run(make: Any) -> None:
        await TimedCall(make())

    asyncio.run(main())
    assert cleaned == [True]


def test_inter_broker_requests_are_exempt() -> None:
    quotas = configured((QuotaEntity(None, DEFAULT), 1.0))
    follower = RequestQuota(quotas, "ANONYMOUS", "broker-1", ApiKey.FETCH, 15,
                            {"replica_id": -1, "replica_state": {"replica_id": 1}})
    consumer = RequestQuota(quotas, "ANONYMOUS", "c", ApiKey.FETCH, 12, {"replica_id": -1})
    controller = RequestQuota(quotas, "ANONYMOUS", "c", ApiKey.LEADER_AND_ISR, 5, {})
    assert follower.exempt and controller.exempt and not consumer.exempt
    assert follower.fetch_throttle_ms(10**9, 0, 0.0) == 0
