"""Client quotas enforced on a real broker: `throttle_time_ms` in the response, the
connection muted afterwards (KIP-219), quotas reaching the broker through config change
notifications, user quotas through the connection's principal, the request-time quota,
and the controller mutation quota (KIP-599: strict versions refused, older throttled).

The throughput acceptance tests (librdkafka) are in test_client_quotas_clients.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from admin_helpers import name

from logbus.aio import Admin
from logbus.client.admin import ClientQuotaEntity
from logbus.client.connection import Connection
from logbus.client.requests.produce import build_produce
from logbus.client.requests.topics import build_create_topics, build_delete_topics, new_topic
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.server.quotas.entity import QuotaType
from logbus.server.security.principal import KafkaPrincipal
from logbus.types import TopicPartition

RATE = "producer_byte_rate"


def run(broker: Any, action: Callable[[Admin], Awaitable[None]]) -> None:
    async def main() -> None:
        async with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            await action(admin)

    asyncio.run(asyncio.wait_for(main(), 60))


async def connect(broker: Any, client_id: str) -> Connection:
    host, port = broker.bootstrap.split(":")
    return await Connection.connect(host, int(port), client_id=client_id)


def produce_body(topic: str, size: int, version: int = 9) -> dict[str, Any]:
    batch = build_batch([NewRecord(None, b"x" * size)])
    return build_produce(version, {TopicPartition(topic, 0): batch}, acks=1)


async def wait_for_quota(broker: Any, user: str, client_id: str, kind: str) -> None:
    """The change notification reaches the broker's quotas (applied on its loop)."""
    deadline = time.monotonic() + 10
    while broker.broker.quotas.quota(QuotaType(kind), user, client_id) is None:
        assert time.monotonic() < deadline, "quota never applied"
        await asyncio.sleep(0.01)


def test_throttled_produce_reports_throttle_time_and_mutes_the_connection(broker: Any) -> None:
    topic = name("t")

    async def action(admin: Admin) -> None:
        # 1000 B/s: a 11 kB produce is 1100 B/s over the first 10 s window -> ~1 s
        await admin.alter_client_quotas({ClientQuotaEntity.of({"client-id": "slow"}): {RATE: 1000}})
        await wait_for_quota(broker, "ANONYMOUS", "slow", RATE)
        slow, free = await connect(broker, "slow"), await connect(broker, "free")
        try:
            await free.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                 "allow_auto_topic_creation": True})
            first = await slow.request(ApiKey.PRODUCE, produce_body(topic, 100), 9)
            assert first["throttle_time_ms"] == 0
            response = await slow.request(ApiKey.PRODUCE, produce_body(topic, 11_000), 9)
            [[part]] = [t["partition_responses"] for t in response["responses"]]
            assert part["error_code"] == ErrorCode.NONE  # the records were appended
            throttle_ms = response["throttle_time_ms"]
            assert 500 <= throttle_ms <= 2000
            answered = time.monotonic()
            # the logbus client holds its next request back for that long (KIP-219)
            assert slow.last_throttle_ms == throttle_ms
            held = slow.throttled_until - asyncio.get_running_loop().time()
            assert 0 < held <= throttle_ms / 1000
            # the other client is served at once, with no throttle
            other = await free.request(ApiKey.PRODUCE, produce_body(topic, 11_000), 9)
            assert other["throttle_time_ms"] == 0
            # the throttled connection is not read until its throttle time has passed
            await slow.request(ApiKey.API_VERSIONS, {}, 3)
            assert time.monotonic() - answered >= throttle_ms / 1000 * 0.9
        finally:
            await slow.close()
            await free.close()

    run(broker, action)


def test_a_client_too_old_to_throttle_itself_gets_its_response_late(broker: Any) -> None:
    """Produce before v6 (KIP-219): the broker holds the response for the throttle time."""
    topic = name("t")

    async def action(admin: Admin) -> None:
        await admin.alter_client_quotas({ClientQuotaEntity.of({"client-id": "old"}): {RATE: 1000}})
        await wait_for_quota(broker, "ANONYMOUS", "old", RATE)
        old = await connect(broker, "old")
        try:
            await old.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                "allow_auto_topic_creation": True})
            await old.request(ApiKey.PRODUCE, produce_body(topic, 100, 5), 5)
            sent = time.monotonic()
            response = await old.request(ApiKey.PRODUCE, produce_body(topic, 11_000, 5), 5)
            throttle_ms = response["throttle_time_ms"]
            assert 500 <= throttle_ms <= 2000
            assert time.monotonic() - sent >= throttle_ms / 1000 * 0.9
        finally:
            await old.close()

    run(broker, action)


def test_user_quota_applies_through_the_principal(broker: Any) -> None:
    """Until SASL sets it, the principal of a test connection is set on the broker side."""
    topic = name("t")

    async def action(admin: Admin) -> None:
        await admin.alter_client_quotas(
            {
                ClientQuotaEntity.of({"user": "alice"}): {RATE: 1000},
                # a <user, client-id> quota comes first for alice with client id "app"
                ClientQuotaEntity.of({"user": "alice", "client-id": "app"}): {RATE: 10**9},
            }
        )
        await wait_for_quota(broker, "alice", "other", RATE)
        conns = [await connect(broker, cid) for cid in ("other", "app", "other")]
        try:
            server_side = sorted(
                broker.broker.listeners[0]._connections, key=lambda c: c.peer
            )
            assert len(server_side) >= 3
            for conn in server_side:
                conn.principal = KafkaPrincipal("User", "alice")
            bob = conns[2]
            for conn in server_side:  # the third connection is bob's
                if conn.peer.endswith(f":{bob._stream.get_extra_info('sockname')[1]}"):
                    conn.principal = KafkaPrincipal("User", "bob")
            await conns[0].request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                     "allow_auto_topic_creation": True})
            alice = await conns[0].request(ApiKey.PRODUCE, produce_body(topic, 11_000), 9)
            assert alice["throttle_time_ms"] > 0
            alice_app = await conns[1].request(ApiKey.PRODUCE, produce_body(topic, 11_000), 9)
            assert alice_app["throttle_time_ms"] == 0
            as_bob = await bob.request(ApiKey.PRODUCE, produce_body(topic, 11_000), 9)
            assert as_bob["throttle_time_ms"] == 0
        finally:
            for conn in conns:
                await conn.close()

    run(broker, action)


def test_removed_quota_stops_throttling(broker: Any) -> None:
    topic = name("t")
    entity = ClientQuotaEntity.of({"client-id": None})  # every client id

    async def action(admin: Admin) -> None:
        await admin.alter_client_quotas({entity: {RATE: 1000}})
        await wait_for_quota(broker, "ANONYMOUS", "any", RATE)
        await admin.alter_client_quotas({entity: {RATE: None}})
        deadline = time.monotonic() + 10
        while broker.broker.quotas.enabled:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        conn = await connect(broker, "any")
        try:
            await conn.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                 "allow_auto_topic_creation": True})
            response = await conn.request(ApiKey.PRODUCE, produce_body(topic, 50_000), 9)
            assert response["throttle_time_ms"] == 0
        finally:
            await conn.close()

    run(broker, action)


def test_request_percentage_throttles_every_api(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        # connected first: their ApiVersions are not throttled
        busy, calm = await connect(broker, "busy"), await connect(broker, "calm")
        # a millionth of the loop: any request is over it (the response still comes at
        # once; the connection is muted after it)
        await admin.alter_client_quotas(
            {ClientQuotaEntity.of({"client-id": "busy"}): {"request_percentage": 0.000001}}
        )
        await wait_for_quota(broker, "ANONYMOUS", "busy", "request_percentage")
        try:
            response = await busy.request(ApiKey.METADATA, {"topics": []}, 12)
            assert response["throttle_time_ms"] > 0
            response = await calm.request(ApiKey.METADATA, {"topics": []}, 12)
            assert response["throttle_time_ms"] == 0
        finally:
            await busy.close()
            await calm.close()

    run(broker, action)


def test_controller_mutation_quota_strict_and_permissive(broker: Any) -> None:
    first, second, third = name("a"), name("b"), name("c")

    async def action(admin: Admin) -> None:
        # 0.1 partitions/s: a burst of 1 (0.1 x 10 windows), then 10 s per partition
        await admin.alter_client_quotas(
            {ClientQuotaEntity.of({"client-id": "ops"}): {"controller_mutation_rate": 0.1}}
        )
        await wait_for_quota(broker, "ANONYMOUS", "ops", "controller_mutation_rate")
        conns = [await connect(broker, "ops") for _ in range(4)]
        try:
            created = await conns[0].request(
                ApiKey.CREATE_TOPICS, build_create_topics(7, [new_topic(first, 3)]), 7
            )
            assert created["topics"][0]["error_code"] == ErrorCode.NONE
            assert created["throttle_time_ms"] > 0  # in debt now
            # strict (v6+): refused while over the quota, nothing created
            refused = await conns[1].request(
                ApiKey.CREATE_TOPICS, build_create_topics(7, [new_topic(second, 1)]), 7
            )
            assert refused["topics"][0]["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
            assert refused["throttle_time_ms"] > 0
            assert second not in broker.broker.metadata_cache.topics
            gone = await conns[2].request(
                ApiKey.DELETE_TOPICS, build_delete_topics(6, [first]), 6
            )
            assert gone["responses"][0]["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
            assert first in broker.broker.metadata_cache.topics
            # permissive (v5): done, and throttled
            allowed = await conns[3].request(
                ApiKey.CREATE_TOPICS, build_create_topics(5, [new_topic(third, 1)]), 5
            )
            assert allowed["topics"][0]["error_code"] == ErrorCode.NONE
            assert allowed["throttle_time_ms"] > 0
        finally:
            for conn in conns:
                await conn.close()
        # other clients are not limited
        await admin.delete_topics([first, third])

    run(broker, action)


def fetch_body(topic: str, offset: int, max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }


def fetched(response: dict[str, Any]) -> int:
    return sum(len(p["records"] or b"") for t in response["responses"] for p in t["partitions"])


def test_a_throttled_consumer_gets_an_empty_fetch(broker: Any) -> None:
    topic = name("t")

    async def action(admin: Admin) -> None:
        free, reader = await connect(broker, "free"), await connect(broker, "reader")
        try:
            await free.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                 "allow_auto_topic_creation": True})
            for _ in range(8):
                await free.request(ApiKey.PRODUCE, produce_body(topic, 2000), 9)
            # 1000 B/s: one fetch may take 10 kB (the quota over 10 windows)
            await admin.alter_client_quotas(
                {ClientQuotaEntity.of({"client-id": "reader"}): {"consumer_byte_rate": 1000}}
            )
            await wait_for_quota(broker, "ANONYMOUS", "reader", "consumer_byte_rate")
            first = await reader.request(ApiKey.FETCH, fetch_body(topic, 0, 5000), 12)
            assert first["throttle_time_ms"] == 0
            assert fetched(first) == 5000
            # more (at most 10 kB, the cap) takes the reader over its quota: an empty
            # answer, throttled, and the bytes not counted
            second = await reader.request(ApiKey.FETCH, fetch_body(topic, 2), 12)
            assert second["throttle_time_ms"] > 0
            assert second["responses"] == []
            quotas = broker.broker.quotas
            now = time.monotonic()
            assert quotas.throttle_time(QuotaType.FETCH, "ANONYMOUS", "reader", now) == 0
            # another client reads everything at once
            everything = await free.request(ApiKey.FETCH, fetch_body(topic, 0), 12)
            assert everything["throttle_time_ms"] == 0 and fetched(everything) > 16_000
        finally:
            await free.close()
            await reader.close()

    run(broker, action)
