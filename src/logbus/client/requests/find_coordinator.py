"""FindCoordinator v0-6 (one key; v4+ carry it in the batched form of KIP-699): which
broker coordinates a group (or, later, a transactional id)."""

from __future__ import annotations

from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from logbus.protocol.messages.find_coordinator_response import FindCoordinatorResponse

GROUP_KEY = 0
TRANSACTION_KEY = 1
_BATCHED_FROM = 4


class FoundCoordinator(NamedTuple):
    """The answer for one key; the error code is kept (COORDINATOR_NOT_AVAILABLE while the
    broker creates or loads its coordinator's topic means: ask again soon)."""

    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


def build_find_coordinator(
    version: int, key: str, key_type: int = GROUP_KEY
) -> FindCoordinatorRequest:
    return {"key": key, "key_type": key_type, "coordinator_keys": [key]}


def read_find_coordinator(response: FindCoordinatorResponse, version: int) -> FoundCoordinator:
    if version < _BATCHED_FROM:
        return FoundCoordinator(
            response["error_code"],
            response.get("error_message") or None,
            response["node_id"],
            response["host"],
            response["port"],
        )
    found = response["coordinators"][0]
    return FoundCoordinator(
        found["error_code"],
        found.get("error_message") or None,
        found["node_id"],
        found["host"],
        found["port"],
    )


async def find_coordinator(
    conn: Connection, key: str, key_type: int = GROUP_KEY
) -> FoundCoordinator:
    version = conn.choose_version(ApiKey.FIND_COORDINATOR)
    body = build_find_coordinator(version, key, key_type)
    response = await send(conn, apis.FIND_COORDINATOR, body, version)
    return read_find_coordinator(response, version)
