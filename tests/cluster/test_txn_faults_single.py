"""Transactions under faults on one broker (issue 15's acceptance tests), with
confluent-kafka's transactional producers and the transactional checker on what fresh
read_committed and read_uncommitted consumers (and kcat) read:

- kill -9 of the broker (the transaction coordinator, the group coordinator and every
  partition's leader) under a consume-transform-produce loop and a plain transactional
  producer, with one transaction held open across the restart and committed after it;
- a broker killed with a transaction open keeps its last stable offset and aborted
  index: read_committed answers are the same before and after;
- two producers with one transactional.id: the older is fenced, nothing it sends
  afterwards becomes visible;
- a transaction left open past its timeout is aborted by the coordinator and
  read_committed readers move past it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from txn_checker import TxnHistory, TxnOutcome, check_transactions
from txn_loads import (
    TIMEOUT,
    ConsumeTransformProduce,
    TransactionalProducer,
    group_offsets,
    kcat_read_committed,
    produce_input,
    read_topic,
)

SMALL = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
FENCED = {47, 90, -144}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, librdkafka's _FENCED


def overrides(**extra: str) -> list[str]:
    settings = {**SMALL, **{k.replace("_", "."): v for k, v in extra.items()}}
    return [arg for k, v in settings.items() for arg in ("--override", f"{k}={v}")]


def create_topics(bootstrap: str, **topics: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, partitions, 1) for name, partitions in topics.items()]
    for future in admin.create_topics(new).values():
        future.result(TIMEOUT)


def open_transaction(bootstrap: str, history: TxnHistory, name: str, topic: str, n: int) -> Any:
    """A producer with a transaction of `n` records written (flushed) and left open."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, "log_level": 0})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    txn = history.begin(name)
    for i in range(n):
        send = txn.send(topic, i % 2)
        producer.produce(
            topic, send.value, partition=send.partition, on_delivery=send.confluent_callback()
        )
    assert producer.flush(TIMEOUT) == 0
    return producer, txn


@pytest.mark.timeout(240)
def test_broker_killed_under_consume_transform_produce(broker_process: Any) -> None:
    proc = broker_process(*overrides())
    create_topics(proc.bootstrap, **{"in": 2, "out": 3, "plain": 2})
    produce_input(proc.bootstrap, "in", 2, 4000)
    history = TxnHistory()
    ctp = ConsumeTransformProduce(
        proc.bootstrap, history, "in", "out", "ctp", "ctp-group",
        source_partitions=2, sink_partitions=3,
    )  # fmt: skip
    plain = TransactionalProducer(proc.bootstrap, history, "plain", "plain", partitions=2)
    with ctp, plain:
        ctp.wait_committed(6)
        plain.wait_committed(6)
        held, held_txn = open_transaction(proc.bootstrap, history, "held", "plain", 6)
        ctp.hold()  # in the middle of a transaction, its offsets sent
        plain.hold()
        proc.kill()
        proc.start()
        ctp.release(replace=True)
        plain.release(replace=True)
        ctp.wait_committed(ctp.committed() + 6)
        plain.wait_committed(plain.committed() + 6)
    # the transaction open across the crash is still there, and commits
    held.commit_transaction(TIMEOUT)
    held_txn.committed()
    held.flush(TIMEOUT)

    out = read_topic(proc.bootstrap, "out", 3, "read_committed")
    uncommitted = read_topic(proc.bootstrap, "out", 3, "read_uncommitted") + read_topic(
        proc.bootstrap, "plain", 2, "read_uncommitted"
    )
    # the control: read_uncommitted taken for read_committed shows the aborted records
    assert check_transactions(history, uncommitted).aborted_reads
    result = check_transactions(
        history,
        out + read_topic(proc.bootstrap, "plain", 2, "read_committed"),
        uncommitted=uncommitted,
        group_offsets=group_offsets(proc.bootstrap, "ctp-group", "in", 2),
    )
    print(result)
    assert result.ok, result
    assert result.aborted >= 2 and result.committed >= 24
    assert sorted(kcat_read_committed(proc.bootstrap, "out", 3)) == sorted(out)


@pytest.mark.timeout(180)
def test_broker_killed_at_an_unchosen_moment_under_transactions(broker_process: Any) -> None:
    """No hold point: the broker dies wherever two transactional producers are (producing,
    adding partitions, committing, aborting); the same clients go on after the restart."""
    proc = broker_process(*overrides())
    create_topics(proc.bootstrap, plain=2)
    history = TxnHistory()
    loads = [
        TransactionalProducer(proc.bootstrap, history, "plain", name, partitions=2)
        for name in ("plain", "other")
    ]
    with loads[0], loads[1]:
        for load in loads:
            load.wait_committed(20)
        proc.kill()
        proc.start()
        for load in loads:
            load.wait_committed(load.committed() + 20)
    result = check_transactions(
        history,
        read_topic(proc.bootstrap, "plain", 2, "read_committed"),
        uncommitted=read_topic(proc.bootstrap, "plain", 2, "read_uncommitted"),
    )
    print(result)
    assert result.ok, result


@pytest.mark.timeout(180)
def test_a_broker_killed_mid_transaction_keeps_lso_and_aborted_index(broker_process: Any) -> None:
    proc = broker_process(*overrides())
    create_topics(proc.bootstrap, plain=2)
    history = TxnHistory()
    with TransactionalProducer(
        proc.bootstrap, history, "plain", "plain", partitions=2, abort_every=2
    ) as plain:
        plain.wait_committed(4)
    held, held_txn = open_transaction(proc.bootstrap, history, "held", "plain", 4)
    with TransactionalProducer(proc.bootstrap, history, "plain", "after", partitions=2) as after:
        after.wait_committed(2)  # committed behind the open transaction: not yet readable
    before = read_topic(proc.bootstrap, "plain", 2, "read_committed")
    before_kcat = kcat_read_committed(proc.bootstrap, "plain", 2)
    assert sorted(before) == sorted(before_kcat)
    behind = {
        s.value
        for t in history.txns
        if t.producer == "after" and t.outcome is TxnOutcome.COMMITTED
        for s in t.sends
    }
    assert behind and not {r.value for r in before} & behind  # held back by the LSO
    proc.kill()
    proc.start()
    assert sorted(read_topic(proc.bootstrap, "plain", 2, "read_committed")) == sorted(before)
    assert sorted(kcat_read_committed(proc.bootstrap, "plain", 2)) == sorted(before_kcat)
    held.commit_transaction(TIMEOUT)
    held_txn.committed()
    held.flush(TIMEOUT)
    result = check_transactions(
        history,
        read_topic(proc.bootstrap, "plain", 2, "read_committed"),
        uncommitted=read_topic(proc.bootstrap, "plain", 2, "read_uncommitted"),
    )
    assert result.ok, result
    assert result.read_committed > len(before)


def test_the_older_of_two_producers_is_fenced_and_nothing_it_sends_is_visible(
    broker_factory: Any,
) -> None:
    broker = broker_factory(**{k.replace(".", "_"): v for k, v in SMALL.items()})
    create_topics(broker.bootstrap, out=2)
    history = TxnHistory()
    old, old_txn = open_transaction(broker.bootstrap, history, "same", "out", 4)
    new = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "same", "log_level": 0}
    )
    new.init_transactions(TIMEOUT)  # fences `old`, aborts its open transaction
    new.begin_transaction()
    new_txn = history.begin("same")
    for i in range(4):
        send = new_txn.send("out", i % 2)
        new.produce(
            "out", send.value, partition=send.partition, on_delivery=send.confluent_callback()
        )
    # the older producer goes on: more records, then a commit
    late = [old_txn.send("out", i % 2) for i in range(4)]
    with pytest.raises(KafkaException) as raised:
        for send in late:
            old.produce(
                "out",
                send.value,
                partition=send.partition,
                on_delivery=send.confluent_callback(lambda e: e.code() in FENCED),
            )
        old.commit_transaction(TIMEOUT)
    assert raised.value.args[0].code() in FENCED, raised.value
    assert raised.value.args[0].fatal()
    old_txn.aborted(raised.value)
    old.flush(TIMEOUT)
    with pytest.raises(KafkaException):  # fatal: no new transaction either
        old.begin_transaction()
    new.commit_transaction(TIMEOUT)
    new_txn.committed()
    new.flush(TIMEOUT)
    committed = read_topic(broker.bootstrap, "out", 2, "read_committed")
    result = check_transactions(
        history, committed, uncommitted=read_topic(broker.bootstrap, "out", 2, "read_uncommitted")
    )
    assert result.ok, result
    assert {r.value for r in committed} == {s.value for s in new_txn.sends}
    assert all(s.outcome.value != "ok" for s in late), late


def test_a_transaction_open_past_its_timeout_is_aborted_and_the_lso_moves_on(
    broker_factory: Any,
) -> None:
    broker = broker_factory(**{k.replace(".", "_"): v for k, v in SMALL.items()})
    create_topics(broker.bootstrap, out=2)
    history = TxnHistory()
    stuck = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "stuck",
            "transaction.timeout.ms": 3000,
            "message.timeout.ms": 3000,
            "log_level": 0,
        }
    )
    stuck.init_transactions(TIMEOUT)
    stuck.begin_transaction()
    stuck_txn = history.begin("stuck")
    for i in range(4):
        send = stuck_txn.send("out", i % 2)
        stuck.produce(
            "out", send.value, partition=send.partition, on_delivery=send.confluent_callback()
        )
    assert stuck.flush(TIMEOUT) == 0
    # committed after the stuck one's first records: held back by the LSO until it ends
    with TransactionalProducer(broker.bootstrap, history, "out", "live", partitions=2) as live:
        live.wait_committed(3)
        live_values = {
            s.value
            for t in history.txns
            if t.producer == "live" and t.outcome is TxnOutcome.COMMITTED
            for s in t.sends
        }

    # the coordinator aborts the stuck transaction after its timeout (3 s): the LSO
    # passes it, and the transactions committed behind it become readable
    deadline = time.monotonic() + 60
    while not live_values <= {
        r.value for r in read_topic(broker.bootstrap, "out", 2, "read_committed")
    }:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.5)
    stuck_txn.aborted("timed out")
    with pytest.raises(KafkaException) as raised:
        stuck.commit_transaction(TIMEOUT)
    # the coordinator aborted it with a bumped epoch: the producer learns it is fenced
    assert raised.value.args[0].code() in FENCED, raised.value
    result = check_transactions(
        history,
        read_topic(broker.bootstrap, "out", 2, "read_committed"),
        uncommitted=read_topic(broker.bootstrap, "out", 2, "read_uncommitted"),
    )
    assert result.ok, result


def test_fencing_across_clients_kafka_python_then_aiokafka(broker_factory: Any) -> None:
    """The same rule between two other clients: kafka-python's producer holds a
    transaction open, aiokafka's producer with the same transactional.id takes over; the
    older one's commit fails and none of its records is visible read_committed."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    broker = broker_factory(**{k.replace(".", "_"): v for k, v in SMALL.items()})
    create_topics(broker.bootstrap, out=2)
    history = TxnHistory()
    old = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id="cross", api_version=(2, 5)
    )
    try:
        old.init_transactions()
        old.begin_transaction()
        old_txn = history.begin("kafka-python")
        for i in range(4):
            send = old_txn.send("out", i % 2)
            meta = old.send("out", send.value, partition=send.partition).get(TIMEOUT)
            send.ok(meta.partition, meta.offset)

        async def take_over() -> Any:
            new = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="cross")
            await new.start()
            try:
                new_txn = history.begin("aiokafka")
                async with new.transaction():
                    for i in range(4):
                        send = new_txn.send("out", i % 2)
                        meta = await new.send_and_wait("out", send.value, partition=send.partition)
                        send.ok(meta.partition, meta.offset)
                new_txn.committed()
            finally:
                await new.stop()

        asyncio.run(take_over())
        with pytest.raises(Exception) as raised:
            old.commit_transaction()
        assert "fenced" in type(raised.value).__name__.lower() + str(raised.value).lower()
        old_txn.aborted(raised.value)
    finally:
        old.close(timeout=TIMEOUT)
    result = check_transactions(
        history,
        read_topic(broker.bootstrap, "out", 2, "read_committed"),
        uncommitted=read_topic(broker.bootstrap, "out", 2, "read_uncommitted"),
    )
    assert result.ok, result
    assert result.read_committed == 4
