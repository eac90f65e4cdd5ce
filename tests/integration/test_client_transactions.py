"""The logbus producer's transactions against a real broker (with its transaction
coordinator): what commits is read once by read_committed readers (confluent-kafka's
consumer and logbus's), what aborts never; a second producer with the same
transactional.id fences the first; calls out of order are refused; offsets sent with a
transaction are committed with it."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from txn_reads import confluent_values, logbus_values

import logbus
from kafka_wire import create_topic
from logbus.aio import Producer as AioProducer
from logbus.client.errors import (
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.api.registry import build_registry

TIMEOUT = 30.0








def make_topic(bootstrap: str, partitions: int = 2) -> str:
    return create_topic(bootstrap, f"txn-{uuid.uuid4().hex[:8]}", partitions)


def test_committed_records_are_read_once_and_aborted_ones_never(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-commit-abort"}
    ) as producer:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"c1-{i}".encode(), partition=i % 2)
        producer.commit_transaction(TIMEOUT)

        producer.begin_transaction()
        sent = [producer.send(topic, f"a-{i}".encode(), partition=i % 2) for i in range(4)]
        producer.flush()
        assert all(f.result().offset >= 0 for f in sent)  # written, then aborted
        producer.abort_transaction(TIMEOUT)

        producer.begin_transaction()
        producer.send(topic, b"c2-0", partition=1)
        producer.commit_transaction(TIMEOUT)

    committed = sorted([b"c1-0", b"c1-1", b"c1-2", b"c1-3", b"c2-0"])
    assert confluent_values(broker.bootstrap, topic, 2) == committed
    assert logbus_values(broker.bootstrap, topic, "read_committed", 2) == committed
    everything = logbus_values(broker.bootstrap, topic, "read_uncommitted", 2)
    assert everything == sorted(committed + [f"a-{i}".encode() for i in range(4)])


def test_asyncio_producer_transactions(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, 1)

    async def main() -> None:
        async with AioProducer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-aio"},
            linger_ms=60000,
        ) as producer:
            await producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            await producer.send_batch(topic=topic, values=[b"x", b"y"])
            await producer.abort_transaction(TIMEOUT)
            producer.begin_transaction()
            # Unsent when the transaction aborts (linger.ms holds it): never written.
            unsent = await producer.send(topic, b"dropped")
            await producer.abort_transaction(TIMEOUT)
            with pytest.raises(TransactionAbortedError):
                await unsent
            producer.begin_transaction()
            await producer.send(topic, b"z")
            await producer.commit_transaction(TIMEOUT)

    asyncio.run(main())
    assert confluent_values(broker.bootstrap, topic) == [b"z"]
    assert logbus_values(broker.bootstrap, topic, "read_uncommitted") == [b"x", b"y", b"z"]


def test_a_second_producer_with_the_same_id_fences_the_first(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, 1)
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-fence"}
    with logbus.Producer(config) as old, logbus.Producer(config) as new:
        old.init_transactions(TIMEOUT)
        old.begin_transaction()
        old.send(topic, b"old-open").result(TIMEOUT)  # written, in an open transaction
        new.init_transactions(TIMEOUT)  # fences `old` and aborts its transaction
        old.send(topic, b"old-late")
        # The leader refuses the old epoch (abortable, KIP-588, as in the Java client)...
        with pytest.raises(TransactionAbortableError) as caught:
            old.commit_transaction(TIMEOUT)
        assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        # ... and the coordinator says it was fenced: fatal from then on.
        with pytest.raises(ProducerFencedError):
            old.abort_transaction(TIMEOUT)
        for call in (old.begin_transaction, old.abort_transaction):
            with pytest.raises(ProducerFencedError):
                call()
        new.begin_transaction()
        new.send(topic, b"new")
        new.commit_transaction(TIMEOUT)
    assert confluent_values(broker.bootstrap, topic) == [b"new"]
    assert logbus_values(broker.bootstrap, topic, "read_committed") == [b"new"]


def test_calls_out_of_order_are_refused(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, 1)
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-order"}
    ) as producer:
        with pytest.raises(InvalidTxnStateError, match="before init_transactions"):
            producer.begin_transaction()
        producer.init_transactions(TIMEOUT)
        with pytest.raises(InvalidTxnStateError):
            producer.send(topic, b"outside")
        with pytest.raises(InvalidTxnStateError):
            producer.commit_transaction(TIMEOUT)
        with pytest.raises(InvalidTxnStateError):
            producer.abort_transaction(TIMEOUT)
        with pytest.raises(InvalidTxnStateError):
            producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.commit_transaction(TIMEOUT)  # an empty transaction commits
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        with pytest.raises(KafkaError) as caught:
            plain.init_transactions(TIMEOUT)
        assert caught.value.code == ErrorCode.INVALID_TXN_STATE


@pytest.mark.skipif(
    ApiKey.TXN_OFFSET_COMMIT not in build_registry(),
    reason="the broker does not serve TxnOffsetCommit yet",
)
def test_offsets_sent_with_a_transaction_commit_with_it(broker: Any) -> None:
    source, sink = make_topic(broker.bootstrap, 1), make_topic(broker.bootstrap, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.send_batch(topic=source, values=[b"1", b"2", b"3"])
    tp = logbus.TopicPartition(source, 0)
    with logbus.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    ) as consumer, logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-offsets"}
    ) as producer:
        consumer.subscribe([source])
        records: list[Any] = []
        for _ in range(100):
            records += consumer.poll(timeout=0.2)
            if len(records) == 3:
                break
        assert [r.value for r in records] == [b"1", b"2", b"3"]
        producer.init_transactions(TIMEOUT)
        # aborted: the offsets are not committed
        producer.begin_transaction()
        producer.send(sink, b"t1")
        producer.send_offsets_to_transaction({tp: 2}, consumer.group_metadata(), TIMEOUT)
        producer.abort_transaction(TIMEOUT)
        assert consumer.committed([tp])[tp] is None
        # committed: the offsets are; a read_committed consumer asking while the
        # transaction is open waits for it (OffsetFetch require_stable, KIP-447).
        producer.begin_transaction()
        producer.send(sink, b"t2")
        producer.send_offsets_to_transaction({tp: 3}, consumer.group_metadata(), TIMEOUT)
        committer = threading.Timer(0.5, producer.commit_transaction, (TIMEOUT,))
        committer.start()
        try:
            committed = consumer.committed([tp])[tp]
        finally:
            committer.join()
        assert committed is not None and committed.offset == 3
    assert confluent_values(broker.bootstrap, sink) == [b"t2"]


def test_a_transaction_past_its_timeout_is_aborted_and_the_producer_told(
    broker_factory: Any,
) -> None:
    broker = broker_factory(
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}
    )
    topic = make_topic(broker.bootstrap, 1)
    config = {
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": "t-timeout",
        "transaction.timeout.ms": 500,
    }
    with logbus.Producer(config) as producer:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send(topic, b"timed-out").result(TIMEOUT)
        # The coordinator aborts it (and bumps the epoch): the LSO moves on (the values
        # are read once no transaction is open).
        with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
            plain.send_and_wait(topic, b"plain")
        assert confluent_values(broker.bootstrap, topic) == [b"plain"]
        # The leader refuses the old epoch: abortable (KIP-588), as the Java client says.
        late = producer.send(topic, b"late")
        with pytest.raises(TransactionAbortableError) as caught:
            producer.commit_transaction(TIMEOUT)
        assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        with pytest.raises(KafkaError):
            late.result(TIMEOUT)
        # The coordinator fences the old epoch's EndTxn, as Kafka 3.x's does.
        with pytest.raises(ProducerFencedError):
            producer.abort_transaction(TIMEOUT)
    with logbus.Producer(config) as again:
        again.init_transactions(TIMEOUT)
        again.begin_transaction()
        again.send(topic, b"after")
        again.commit_transaction(TIMEOUT)
    values = confluent_values(broker.bootstrap, topic)
    assert b"after" in values and b"timed-out" not in values and b"late" not in values


def _poll(consumer: Any, want: int) -> list[Any]:
    records: list[Any] = []
    for _ in range(150):
        records += consumer.poll(timeout=0.2, max_records=want - len(records))
        if len(records) >= want:
            return records
    raise AssertionError(f"polled {len(records)} of {want} records")


def test_consume_transform_produce_is_exactly_once_across_a_crash(broker: Any) -> None:
    source, sink = make_topic(broker.bootstrap, 1), make_topic(broker.bootstrap, 2)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.send_batch(topic=source, values=[str(i).encode() for i in range(20)])
    consumer_config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    producer_config = {"bootstrap.servers": broker.bootstrap, "transactional.id": group}

    def process(consumer: Any, producer: Any, count: int, commit: bool) -> None:
        records = _poll(consumer, count)
        producer.begin_transaction()
        for r in records:
            producer.send(sink, b"out-" + r.value, key=r.value)
        tp = logbus.TopicPartition(source, 0)
        producer.send_offsets_to_transaction(
            {tp: records[-1].offset + 1}, consumer.group_metadata(), TIMEOUT
        )
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.flush()  # written, never committed: the process dies here

    with logbus.Consumer(consumer_config) as consumer, logbus.Producer(producer_config) as p:
        consumer.subscribe([source])
        p.init_transactions(TIMEOUT)
        process(consumer, p, 8, commit=True)
        process(consumer, p, 7, commit=False)
    # A new instance: fences the old producer (its open transaction is aborted) and
    # resumes from the offsets committed with the last committed transaction.
    with logbus.Consumer(consumer_config) as consumer, logbus.Producer(producer_config) as p:
        consumer.subscribe([source])
        p.init_transactions(TIMEOUT)
        process(consumer, p, 12, commit=True)
    expected = sorted(b"out-" + str(i).encode() for i in range(20))
    assert confluent_values(broker.bootstrap, sink, 2) == expected
    assert logbus_values(broker.bootstrap, sink, "read_committed", 2) == expected


def test_init_transactions_times_out_without_a_coordinator(broker_factory: Any) -> None:
    # A single broker cannot create __transaction_state with 3 replicas: no coordinator.
    broker = broker_factory(**{"transaction.state.log.replication.factor": "3"})
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-no-coordinator"}
    ) as producer:
        with pytest.raises(KafkaTimeoutError, match="COORDINATOR_NOT_AVAILABLE"):
            producer.init_transactions(1.0)
        with pytest.raises(InvalidTxnStateError, match="Initializing"):
            producer.begin_transaction()
        with pytest.raises(KafkaTimeoutError):  # may be called again
            producer.init_transactions(0.5)


def test_offsets_of_a_member_out_of_its_generation_make_the_transaction_abortable(
    broker: Any,
) -> None:
    source, sink = make_topic(broker.bootstrap, 1), make_topic(broker.bootstrap, 1)
    group = f"zombie-{uuid.uuid4().hex[:8]}"
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.send_batch(topic=source, values=[b"1", b"2"])
    tp = logbus.TopicPartition(source, 0)
    with logbus.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",  # committed() waits for the markers
        }
    ) as consumer, logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": group}
    ) as producer:
        consumer.subscribe([source])
        _poll(consumer, 2)
        current = consumer.group_metadata()
        assert current.group_id == group and current.generation_id >= 1 and current.member_id
        stale = current._replace(generation_id=current.generation_id + 7)
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send(sink, b"zombie")
        with pytest.raises(TransactionAbortableError) as caught:
            producer.send_offsets_to_transaction({tp: 2}, stale, TIMEOUT)
        assert caught.value.code == ErrorCode.ILLEGAL_GENERATION
        with pytest.raises(TransactionAbortableError):
            producer.commit_transaction(TIMEOUT)
        producer.abort_transaction(TIMEOUT)
        producer.begin_transaction()
        producer.send(sink, b"member")
        producer.send_offsets_to_transaction({tp: 2}, current, TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        committed = consumer.committed([tp])[tp]
        assert committed is not None and committed.offset == 2
    assert confluent_values(broker.bootstrap, sink) == [b"member"]
