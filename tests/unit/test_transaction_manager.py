"""The transactional producer's state machine (`TransactionManager`) and settings,
without a broker: which calls each state allows, how errors sort (fatal, abortable,
epoch bump), and which partitions the sender may send to."""

from __future__ import annotations

from typing import Any

import pytest

from logbus.client.cluster import Cluster
from logbus.client.errors import (
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from logbus.client.producer.config import parse_producer_config
from logbus.client.producer.transaction_manager import TransactionManager, TxnState
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

TP = TopicPartition("t", 0)


def manager() -> TransactionManager:
    cluster = Cluster("127.0.0.1:1")  # never connected: nothing here does I/O
    return TransactionManager(
        "txn-1", 60000, cluster, retry_backoff=0.01, retry_backoff_max=0.1,
        delivery_timeout=5.0,
    )


def ready() -> TransactionManager:
    tm = manager()
    tm.state = TxnState.READY  # as initialize() leaves it
    return tm


def test_nothing_before_init_transactions() -> None:
    tm = manager()
    for call in (tm.check_send, tm.begin):
        with pytest.raises(InvalidTxnStateError, match="before init_transactions"):
            call()


def test_send_only_inside_a_transaction() -> None:
    tm = ready()
    with pytest.raises(InvalidTxnStateError, match="in state Ready"):
        tm.check_send()
    tm.begin()
    tm.check_send()
    with pytest.raises(InvalidTxnStateError, match="InTransaction"):
        tm.begin()


def test_a_partition_is_sent_to_only_once_added() -> None:
    tm = ready()
    assert not tm.send_allowed(TP)
    assert tm.pending == set()  # outside a transaction nothing is queued to be added
    tm.begin()
    assert not tm.send_allowed(TP)
    assert tm.pending == {TP}
    tm.partitions.add(TP)
    assert tm.send_allowed(TP)


@pytest.mark.parametrize("code", [ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH])
def test_fenced_is_fatal_and_raised_by_every_later_call(code: int) -> None:
    tm = ready()
    tm.begin()
    raised = tm.fail(KafkaError(code, "produce"))
    assert isinstance(raised, ProducerFencedError)
    assert tm.state is TxnState.FATAL_ERROR
    for call in (tm.check_send, tm.begin):
        with pytest.raises(ProducerFencedError):
            call()
    # a later abortable error does not hide the fatal one
    tm.batch_failed(KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS))
    assert tm.state is TxnState.FATAL_ERROR
    assert isinstance(tm.last_error, ProducerFencedError)


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    tm = ready()
    tm.begin()
    tm.batch_failed(KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, "batch"))
    assert tm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError) as caught:
        tm.check_send()
    assert caught.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert not tm.bump_required
    # the first error is the one reported
    tm.batch_failed(KafkaError(ErrorCode.MESSAGE_TOO_LARGE))
    assert tm.last_error is not None and tm.last_error.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_batches_dropped_by_an_abort_are_no_error() -> None:
    tm = ready()
    tm.begin()
    tm.batch_failed(TransactionAbortedError("the transaction was aborted"))
    assert tm.state is TxnState.IN_TRANSACTION


@pytest.mark.parametrize(
    "code", [ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
)
def test_a_lost_sequence_asks_for_an_epoch_bump_at_abort(code: int) -> None:
    tm = ready()
    tm.begin()
    tm.fail(KafkaError(code))
    assert tm.state is TxnState.ABORTABLE_ERROR and tm.bump_required


@pytest.mark.parametrize(
    "code", [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE]
)
def test_authorization_and_state_errors_are_fatal(code: int) -> None:
    tm = ready()
    tm.begin()
    tm.fail(KafkaError(code))
    assert tm.state is TxnState.FATAL_ERROR


def _config(**settings: Any) -> dict[str, Any]:
    return parse_producer_config({"transactional.id": "t1"}, settings)


def test_transactional_id_forces_idempotence() -> None:
    values = _config()
    assert values["enable.idempotence"] is True
    assert values["transaction.timeout.ms"] == 60000
    assert _config(transaction_timeout_ms=900)["transaction.timeout.ms"] == 900


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"enable_idempotence": False}, "without also enabling idempotence"),
        ({"acks": 1}, "acks must be all"),
        ({"max_in_flight_requests_per_connection": 6}, "at most 5"),
        ({"retries": 0}, "retries must be above 0"),
    ],
)
def test_transactional_id_makes_conflicts_errors(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**settings)


def test_an_empty_transactional_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        parse_producer_config({"transactional.id": ""}, {})


def test_a_stale_epoch_from_a_leader_is_abortable_and_bumps_at_abort() -> None:
    # KIP-588: the coordinator bumped the epoch when it aborted a timed-out transaction.
    tm = ready()
    tm.begin()
    tm.batch_failed(KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, "produce"))
    assert tm.state is TxnState.ABORTABLE_ERROR and tm.bump_required


def test_no_offsets_to_send_asks_no_coordinator() -> None:
    import asyncio

    from logbus.client.types import ConsumerGroupMetadata

    tm = ready()
    with pytest.raises(InvalidTxnStateError):
        asyncio.run(tm.send_offsets({}, ConsumerGroupMetadata("g"), 1.0))
    tm.begin()
    asyncio.run(tm.send_offsets({}, ConsumerGroupMetadata("g"), 1.0))  # no I/O: no broker
    assert not tm.started
