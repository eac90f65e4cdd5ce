"""The transaction coordinator's APIs (KIP-98, KIP-664): AddPartitionsToTxn v0-5 (the
batched form with `verify_only` from v4), AddOffsetsToTxn v0-4, EndTxn v0-5,
DescribeTransactions v0 and ListTransactions v0-1 (the duration filter from v1).

Each turns into a call of the broker's `TransactionCoordinator`. Before v2 (KIP-588)
clients do not know PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH, as from Kafka.
"""

from __future__ import annotations

from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC
from logbus.coordinator.group.runtime import CoordinatorError
from logbus.coordinator.transaction.coordinator import TransactionCoordinator, TxnView
from logbus.coordinator.transaction.state import TxnState
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from logbus.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from logbus.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from logbus.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from logbus.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from logbus.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TransactionState,
)
from logbus.protocol.messages.end_txn_request import EndTxnRequest
from logbus.protocol.messages.end_txn_response import EndTxnResponse
from logbus.protocol.messages.list_transactions_request import ListTransactionsRequest
from logbus.protocol.messages.list_transactions_response import ListTransactionsResponse
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.types import TopicPartition

E = ErrorCode
PRODUCER_FENCED_FROM = 2


def coordinator(ctx: RequestContext) -> TransactionCoordinator:
    return ctx.services.transaction_coordinator


def fenced_for(error: ErrorCode, version: int, fenced_from: int = PRODUCER_FENCED_FROM) -> int:
    """PRODUCER_FENCED as a client of this version knows it."""
    if error is E.PRODUCER_FENCED and version < fenced_from:
        return E.INVALID_PRODUCER_EPOCH
    return error


# --- AddPartitionsToTxn --------------------------------------------------------------------


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t["name"], p) for t in topics for p in t["partitions"]]


def _topic_results(
    errors: dict[TopicPartition, int],
) -> list[AddPartitionsToTxnTopicResult]:
    topics: dict[str, AddPartitionsToTxnTopicResult] = {}
    for tp, error in errors.items():
        topic = topics.setdefault(tp.topic, {"name": tp.topic, "results_by_partition": []})
        topic["results_by_partition"].append(
            {"partition_index": tp.partition, "partition_error_code": error}
        )
    return list(topics.values())


async def _add_partitions(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: list[TopicPartition],
    verify_only: bool,
) -> dict[TopicPartition, int]:
    """One transaction's partitions with their errors: partitions of unknown topics get
    UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka answers."""
    cache = ctx.services.metadata_cache
    unknown = {
        tp
        for tp in partitions
        if (meta := cache.topics.get(tp.topic)) is None
        or not 0 <= tp.partition < len(meta.partitions)
    }
    if unknown:
        return {
            tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    if not transactional_id:
        return dict.fromkeys(partitions, E.INVALID_REQUEST)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = ctx.authorized(
        AclOperation.WRITE, ResourceType.TOPIC, (tp.topic for tp in partitions)
    )
    if len(writable) < len({tp.topic for tp in partitions}):
        return {
            tp: E.OPERATION_NOT_ATTEMPTED if tp.topic in writable else E.TOPIC_AUTHORIZATION_FAILED
            for tp in partitions
        }
    wanted = frozenset(partitions)
    if verify_only:
        verified = coordinator(ctx).verify_partitions(transactional_id, producer_id, epoch, wanted)
        return {tp: fenced_for(verified[tp], ctx.version) for tp in partitions}
    error = await coordinator(ctx).add_partitions(transactional_id, producer_id, epoch, wanted)
    return dict.fromkeys(partitions, fenced_for(error, ctx.version))


async def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.version < 4:
        errors = await _add_partitions(
            ctx,
            request["v3_and_below_transactional_id"],
            request["v3_and_below_producer_id"],
            request["v3_and_below_producer_epoch"],
            _partitions(request["v3_and_below_topics"]),
            False,
        )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        # v4+ batches transactions: only brokers send it (Kafka's check)
        return {
            "throttle_time_ms": 0,
            "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
            "results_by_transaction": [],
        }
    results: list[AddPartitionsToTxnResult] = []
    for txn in request["transactions"]:
        errors = await _add_partitions(
            ctx,
            txn["transactional_id"],
            txn["producer_id"],
            txn["producer_epoch"],
            _partitions(txn["topics"]),
            txn["verify_only"],
        )
        results.append(
            {"transactional_id": txn["transactional_id"], "topic_results": _topic_results(errors)}
        )
    return {"throttle_time_ms": 0, "error_code": E.NONE, "results_by_transaction": results}


# --- AddOffsetsToTxn -----------------------------------------------------------------------


async def handle_add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    """The group's `__consumer_offsets` partition joins the transaction, so that its
    TxnOffsetCommit is ended by the transaction's marker."""
    transactional_id = request["transactional_id"]
    if not transactional_id:
        return {"throttle_time_ms": 0, "error_code": E.INVALID_REQUEST}
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return {"throttle_time_ms": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED}
    partition = ctx.services.group_coordinator.partition_for(request["group_id"])
    error = await coordinator(ctx).add_partitions(
        transactional_id,
        request["producer_id"],
        request["producer_epoch"],
        frozenset({TopicPartition(OFFSETS_TOPIC, partition)}),
    )
    return {"throttle_time_ms": 0, "error_code": fenced_for(error, ctx.version)}


# --- EndTxn --------------------------------------------------------------------------------


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    transactional_id = request["transactional_id"]
    producer_id = request["producer_id"]
    epoch = request["producer_epoch"]
    if not transactional_id:
        error = E.INVALID_REQUEST
    elif not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        error = await coordinator(ctx).end_txn(
            transactional_id, producer_id, epoch, request["committed"]
        )
    return {
        "throttle_time_ms": 0,
        "error_code": fenced_for(error, ctx.version),
        "producer_id": producer_id if error is E.NONE else -1,
        "producer_epoch": epoch if error is E.NONE else -1,
    }


# --- DescribeTransactions / ListTransactions -----------------------------------------------


def _described(view: TxnView) -> TransactionState:
    topics: dict[str, list[int]] = {}
    for tp in sorted(view.partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return {
        "error_code": E.NONE,
        "transactional_id": view.transactional_id,
        "transaction_state": view.state.label,
        "transaction_timeout_ms": view.timeout_ms,
        "transaction_start_time_ms": view.start_timestamp_ms,
        "producer_id": view.producer_id,
        "producer_epoch": view.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
    }


async def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states: list[TransactionState] = []
    for transactional_id in request["transactional_ids"]:
        try:
            if not ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
            ):
                raise CoordinatorError(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            described = _described(coordinator(ctx).describe(transactional_id))
            # as Kafka: topics the principal may not describe are left out
            visible = ctx.authorized(
                AclOperation.DESCRIBE, ResourceType.TOPIC, (t["topic"] for t in described["topics"])
            )
            described["topics"] = [t for t in described["topics"] if t["topic"] in visible]
            states.append(described)
        except CoordinatorError as exc:
            states.append(
                {
                    "error_code": exc.error,
                    "transactional_id": transactional_id,
                    "transaction_state": "",
                    "transaction_timeout_ms": 0,
                    "transaction_start_time_ms": -1,
                    "producer_id": -1,
                    "producer_epoch": -1,
                    "topics": [],
                }
            )
    return {"throttle_time_ms": 0, "transaction_states": states}


async def handle_list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    wanted: set[TxnState] = set()
    unknown: list[str] = []
    for label in request["state_filters"]:
        state = TxnState.from_label(label)
        if state is None:
            unknown.append(label)
        else:
            wanted.add(state)
    states = frozenset(wanted) if request["state_filters"] else None
    duration = request.get("duration_filter", -1) if ctx.version >= 1 else -1
    try:
        views = (
            []
            if states is not None and not states
            else coordinator(ctx).list_transactions(
                states, frozenset(request["producer_id_filters"]), duration
            )
        )
    except CoordinatorError as exc:
        return {
            "throttle_time_ms": 0,
            "error_code": exc.error,
            "unknown_state_filters": unknown,
            "transaction_states": [],
        }
    return {
        "throttle_time_ms": 0,
        "error_code": E.NONE,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": v.transactional_id,
                "producer_id": v.producer_id,
                "transaction_state": v.state.label,
            }
            for v in views
            if ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, v.transactional_id
            )
        ],
    }


HANDLERS = [
    ApiHandler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, handle_add_partitions_to_txn),
    ApiHandler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn),
    ApiHandler(ApiKey.END_TXN, 0, 5, handle_end_txn),
    ApiHandler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle_describe_transactions),
    ApiHandler(ApiKey.LIST_TRANSACTIONS, 0, 1, handle_list_transactions),
]
