"""InitProducerId v0-5: a producer id and epoch for an idempotent producer (KIP-98), or the
current one's epoch bumped (v3+, KIP-360)."""

from __future__ import annotations

from typing import Any, NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import check
from logbus.protocol import ApiKey
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
) -> dict[str, Any]:
    """Ask for a new id, or (v3+) for `current`'s epoch bumped; below v3 always a new id."""
    if version < _BUMP_FROM:
        current = NO_PRODUCER
    return {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": current.producer_id,
        "producer_epoch": current.epoch,
    }


def read_init_producer_id(response: dict[str, Any]) -> ProducerIdAndEpoch:
    check(response["error_code"], "InitProducerId failed")
    return ProducerIdAndEpoch(response["producer_id"], response["producer_epoch"])


async def init_producer_id(
    conn: Connection, current: ProducerIdAndEpoch = NO_PRODUCER, *, timeout_ms: int = 60000
) -> ProducerIdAndEpoch:
    """A producer id and epoch for a non-transactional producer: a new one, or `current`
    with its epoch bumped (a broker too old to bump hands out a new id instead)."""
    version = conn.choose_version(ApiKey.INIT_PRODUCER_ID)
    body = build_init_producer_id(version, current, timeout_ms=timeout_ms)
    return read_init_producer_id(await conn.request(ApiKey.INIT_PRODUCER_ID, body, version))
