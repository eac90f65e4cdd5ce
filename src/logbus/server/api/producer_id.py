"""InitProducerId v0-5 for idempotent producers (KIP-98; KIP-360 epoch bumps from v3).

A request without a transactional id gets a new producer id with epoch 0. From v3 it may
carry the producer's current id and epoch to ask for an epoch bump (KIP-360): a producer
this broker handed out gets its next epoch, and a new id when the epoch is exhausted or
the broker does not know the producer (`ProducerIdManager.bump_epoch`). Kafka's broker
always hands a non-transactional producer a new id, bump or not; both answers are valid
for the client, and bumping spares ids and producer state on the partitions.

A request with a transactional id goes to the transaction coordinator after Kafka's
validation (an empty id is INVALID_REQUEST, a timeout outside
(0, transaction.max.timeout.ms] INVALID_TRANSACTION_TIMEOUT): the id's producer gets its
next epoch, fencing the previous one (an open transaction is aborted first, answering
CONCURRENT_TRANSACTIONS meanwhile). Before v4 (KIP-588) PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from logbus.controller.metadata_store import StoreUnavailable
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.init_producer_id_request import InitProducerIdRequest
from logbus.protocol.messages.init_producer_id_response import InitProducerIdResponse
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
PRODUCER_FENCED_FROM = 4


def _error(error: ErrorCode) -> InitProducerIdResponse:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "producer_id": NO_PRODUCER_ID,
        "producer_epoch": NO_PRODUCER_EPOCH,
    }


async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    producer_id: int = request["producer_id"]
    producer_epoch: int = request["producer_epoch"]
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    transactional_id: str | None = request["transactional_id"]
    if transactional_id is not None:
        if not transactional_id:
            return _error(ErrorCode.INVALID_REQUEST)
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        timeout_ms: int = request["transaction_timeout_ms"]
        if not 0 < timeout_ms <= ctx.config.transaction_max_timeout_ms:
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        try:
            result = await ctx.services.transaction_coordinator.init_producer_id(
                transactional_id, timeout_ms, expected
            )
        except StoreUnavailable:
            return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if result.error is not ErrorCode.NONE:
            error = result.error
            if error is ErrorCode.PRODUCER_FENCED and ctx.version < PRODUCER_FENCED_FROM:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            return _error(error)
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }
    # an idempotent producer: IdempotentWrite on the cluster, or Write on some topic
    # (Kafka 3.x, KIP-679)
    if not (
        ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
        or ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    manager = ctx.services.producer_ids
    try:
        await manager.ensure_available()
    except StoreUnavailable:
        # No block of ids can be reserved while ZooKeeper is unreachable: retriable, as
        # Kafka answers while its producer id manager has no block
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    if producer_id == NO_PRODUCER_ID:
        new_id, epoch = manager.new_producer()
    else:
        new_id, epoch = manager.bump_epoch(producer_id, producer_epoch)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": new_id,
        "producer_epoch": epoch,
    }


HANDLERS = [ApiHandler(ApiKey.INIT_PRODUCER_ID, 0, 5, handle_init_producer_id)]
