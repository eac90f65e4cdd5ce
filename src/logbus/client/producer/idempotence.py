"""The idempotent producer's identity: a producer id and epoch from InitProducerId
(KIP-98), bumped after errors that leave a partition's sequence in doubt (KIP-360)."""

from __future__ import annotations

from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

# InitProducerId may carry the current id and epoch, asking for a bump, from v3.
_BUMP_FROM_VERSION = 3


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int


NO_PRODUCER = ProducerIdAndEpoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


async def init_producer_id(
    conn: Connection, current: ProducerIdAndEpoch = NO_PRODUCER, *, timeout_ms: int = 60000
) -> ProducerIdAndEpoch:
    """A producer id and epoch for a non-transactional producer: a new one, or `current`
    with its epoch bumped (a broker too old to bump hands out a new id instead)."""
    version = conn.choose_version(ApiKey.INIT_PRODUCER_ID)
    if version < _BUMP_FROM_VERSION:
        current = NO_PRODUCER
    body = {
        "transactional_id": None,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": current.producer_id,
        "producer_epoch": current.epoch,
    }
    response = await conn.request(ApiKey.INIT_PRODUCER_ID, body, version)
    code = response["error_code"]
    if code != ErrorCode.NONE:
        raise KafkaError(code, "InitProducerId failed")
    return ProducerIdAndEpoch(response["producer_id"], response["producer_epoch"])
