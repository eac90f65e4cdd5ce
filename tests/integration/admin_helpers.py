"""Helpers shared by the admin tests: the asyncio Admin client's, and raw CreateTopics
requests over a `WireClient`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafka_wire import CREATE_TOPICS_V, WireClient
from logbus.aio import Admin, AdminBatchError
from logbus.protocol import ApiKey


def run(broker: Any, action: Callable[[Admin], Awaitable[None]], **config: Any) -> None:
    """Run `action` with an Admin connected to `broker` (60 s at the most)."""

    async def main() -> None:
        async with Admin({"bootstrap.servers": broker.bootstrap}, **config) as admin:
            await action(admin)

    asyncio.run(asyncio.wait_for(main(), 60))


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def failure(call: Awaitable[Any]) -> AdminBatchError:
    """The AdminBatchError `call` raises (the test fails if it raises none)."""
    with pytest.raises(AdminBatchError) as info:
        await call
    return info.value


def create_topics(
    client: WireClient, topics: dict[str, int], *, validate_only: bool = False
) -> list[dict[str, Any]]:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": count,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name, count in topics.items()
        ],
        "timeout_ms": 600_000,
        "validate_only": validate_only,
    }
    return list(client.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, body)["topics"])
