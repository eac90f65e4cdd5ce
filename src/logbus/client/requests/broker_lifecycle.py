"""A KRaft broker's requests to the active controller (KIP-631): BrokerRegistration v3
and BrokerHeartbeat v1, sent by the broker's lifecycle manager."""

from __future__ import annotations

from typing import Final

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol.messages import apis
from logbus.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from logbus.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from logbus.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from logbus.protocol.messages.broker_registration_response import BrokerRegistrationResponse

__all__ = ["broker_heartbeat", "broker_registration"]

REGISTRATION_VERSION: Final = 3
HEARTBEAT_VERSION: Final = 1


async def broker_registration(
    conn: Connection, body: BrokerRegistrationRequest, *, response_timeout: float
) -> BrokerRegistrationResponse:
    return await send(
        conn,
        apis.BROKER_REGISTRATION,
        body,
        REGISTRATION_VERSION,
        response_timeout=response_timeout,
    )


async def broker_heartbeat(
    conn: Connection,
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    *,
    want_shut_down: bool = False,
    response_timeout: float,
) -> BrokerHeartbeatResponse:
    body: BrokerHeartbeatRequest = {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "current_metadata_offset": current_metadata_offset,
        "want_fence": False,
        "want_shut_down": want_shut_down,
    }
    return await send(
        conn, apis.BROKER_HEARTBEAT, body, HEARTBEAT_VERSION, response_timeout=response_timeout
    )
