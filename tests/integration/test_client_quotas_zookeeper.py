"""Client quotas in a cluster on a real ZooKeeper: stored in Kafka's layout, and a change
made through one broker reaches the other through the config change notifications."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from logbus.aio import Admin
from logbus.client.admin import ClientQuotaEntity
from logbus.server.quotas.entity import QuotaEntity, QuotaType


def test_a_quota_set_through_one_broker_reaches_the_other(
    broker_factory: Any, zk_connect: str
) -> None:
    first = broker_factory(broker_id="1", zookeeper_connect=zk_connect)
    second = broker_factory(broker_id="2", zookeeper_connect=zk_connect)
    entity = ClientQuotaEntity.of({"user": "CN=alice", "client-id": "app"})

    async def alter() -> None:
        async with Admin({"bootstrap.servers": first.bootstrap}) as admin:
            await admin.alter_client_quotas({entity: {"producer_byte_rate": 2048}})
        async with Admin({"bootstrap.servers": second.bootstrap}) as admin:
            assert await admin.describe_client_quotas() == {
                entity: {"producer_byte_rate": 2048.0}
            }

    asyncio.run(asyncio.wait_for(alter(), 60))
    expected = (2048.0, QuotaEntity("CN=alice", "app"))
    deadline = time.monotonic() + 30
    for running in (first, second):
        while running.broker.quotas.quota(QuotaType.PRODUCE, "CN=alice", "app") != expected:
            assert time.monotonic() < deadline, "the change never reached the broker"
            time.sleep(0.05)
    store = first.broker.store
    assert store.get_json("/config/users/CN%3Dalice/clients/app") == {
        "version": 1, "config": {"producer_byte_rate": "2048"}
    }
    notes = [json.loads(store.get(f"/config/changes/{c}")[0]) for c in store.children(
        "/config/changes") if c.startswith("config_change_")]
    assert {"version": 2, "entity_path": "users/CN%3Dalice/clients/app"} in notes
