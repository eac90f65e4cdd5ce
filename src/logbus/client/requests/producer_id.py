"""InitProducerId v0-5: a producer id and epoch for an idempotent producer (KIP-98), or the
current one's epoch bumped (v3+, KIP-360)."""

from __future__ import annotations

from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import check
from logbus.client.requests.common import send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.init_producer_id_request import InitProducerIdRequest
from logbus.protocol.messages.init_producer_id_response import InitProducerIdResponse
from logbus.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

_BUMP_FROM = 3


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int


NO_PRODUCER = ProducerIdAndEpoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


def build_init_producer_id(
    version: int,
    current: ProducerIdAndEpoch = NO_PRODUCER,
    *,
    transactional_id: str | None = None,
    timeout_ms: int = 60000,
) -> InitProducerIdRequest:
    """Ask for a new id, or (v3+) for `current`'s epoch bumped; below v3 always a new id."""
    if version < _BUMP_FROM:
        current = NO_PRODUCER
    return {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": current.producer_id,
        "producer_epoch": current.epoch,
    }


def read_init_producer_id(response: InitProducerIdResponse) -> ProducerIdAndEpoch:
    check(response["error_code"], "InitProducerId failed")
    return ProducerIdAndEpoch(response["producer_id"], response["producer_epoch"])


async def init_producer_id(
    conn: Connection, current: ProducerIdAndEpoch = NO_PRODUCER, *, timeout_ms: int = 60000
) -> ProducerIdAndEpoch:
    """A producer id and epoch for a non-transactional producer: a new one, or `current`
    with its epoch bumped (a broker too old to bump hands out a new id instead)."""
    version = conn.choose_version(ApiKey.INIT_PRODUCER_ID)
    body = build_init_producer_id(version, current, timeout_ms=timeout_ms)
    response = await send(conn, apis.INIT_PRODUCER_ID, body, version)
    return read_init_producer_id(response)
