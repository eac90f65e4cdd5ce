"""Helpers shared by the asyncio Admin client's tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from logbus.aio import Admin, AdminBatchError


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
