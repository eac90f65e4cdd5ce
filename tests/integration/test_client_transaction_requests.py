"""When the logbus transactional producer sends its transaction requests, on a real
broker: a partition joins the transaction (AddPartitionsToTxn) as soon as records for it
are about to be buffered, the request leaving before they are encoded (keyed records'
partitions, all known at once, share one request); and EndTxn
leaves as soon as the last batch is acknowledged, before the RecordMetadata list of a
`send_many` is built (it is done by the time `commit_transaction` returns, as a plain
`flush()` leaves every `send_many` future done)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import logbus
import logbus.client.producer.transaction_manager as transaction_manager
from logbus.aio import Producer as AioProducer

TIMEOUT = 30.0


def _make_topic(bootstrap: str, name: str, partitions: int) -> str:
    with logbus.Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(name, partitions, 1)])
    return name


def _recorded(
    monkeypatch: pytest.MonkeyPatch, name: str, calls: list[Any], what: Callable[..., Any]
) -> None:
    """Record `what(*args)` each time transaction_manager's `name` request is made."""
    real: Callable[..., Awaitable[Any]] = getattr(transaction_manager, name)

    async def recording(*args: Any) -> Any:
        calls.append(what(*args))
        return await real(*args)

    monkeypatch.setattr(transaction_manager, name, recording)


def _buffered(producer: AioProducer, tps: Any) -> list[int]:
    """How many records the producer holds for each of `tps` (unsent or in flight)."""
    batches = producer.accumulator.batches
    return [sum(batch.count for batch in batches.get(tp, ())) for tp in tps]


def _recorded_partition_adds(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[AioProducer], list[tuple[list[int], list[int]]]]:
    """Each AddPartitionsToTxn's partitions and how many records the producer (put into
    the first list once made) held for them when the request left."""
    holder: list[AioProducer] = []
    added: list[tuple[list[int], list[int]]] = []
    _recorded(
        monkeypatch,
        "add_partitions_to_txn",
        added,
        lambda _conn, _txn_id, _producer, tps: (
            sorted(tp.partition for tp in tps),
            _buffered(holder[0], tps),
        ),
    )
    return holder, added


def test_a_partition_joins_before_its_first_records_are_encoded(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _make_topic(broker.bootstrap, "txn-requests-add", 2)
    holder, added = _recorded_partition_adds(monkeypatch)

    async def main() -> list[int]:
        async with AioProducer(
            {
                "bootstrap.servers": broker.bootstrap,
                "transactional.id": "t-requests-add",
                "batch.size": 16384,
            }
        ) as producer:
            holder.append(producer)
            await producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            # 20 x 1000 B of keyless values: one partition's batch fills up (16 KiB), the
            # rest go to the other partition
            sent = await producer.send_many(topic=topic, values=[bytes(1000)] * 20)
            await producer.commit_transaction(TIMEOUT)
            return sorted({m.partition for m in await sent})

    assert asyncio.run(main()) == [0, 1]
    # each partition joined once; the first left before any record was encoded (the
    # second, queued while the first request was in flight, follows its answer)
    assert sorted(p for partitions, _counts in added for p in partitions) == [0, 1]
    assert added[0][1] == [0]


def test_keyed_partitions_join_in_one_request_before_any_record_is_encoded(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _make_topic(broker.bootstrap, "txn-requests-add-keyed", 3)
    holder, added = _recorded_partition_adds(monkeypatch)

    async def main() -> set[int]:
        async with AioProducer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-requests-keyed"}
        ) as producer:
            holder.append(producer)
            await producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            keys = [f"key-{i}".encode() for i in range(60)]
            sent = await producer.send_many(topic=topic, values=[b"v"] * 60, keys=keys)
            await producer.commit_transaction(TIMEOUT)
            return {m.partition for m in await sent}

    partitions = asyncio.run(main())
    assert added == [(sorted(partitions), [0] * len(partitions))]


def test_a_partition_added_sends_its_batch_while_the_next_request_is_in_flight(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0 joins in one AddPartitionsToTxn, partition 1 (buffered meanwhile) in
    the next, which is held until partition 0's record is acknowledged (or 10 s): the
    sender must ship partition 0's batch as soon as the first answer comes."""
    topic = _make_topic(broker.bootstrap, "txn-requests-wake", 2)
    real = transaction_manager.add_partitions_to_txn
    acknowledged = asyncio.Event()
    order: list[str] = []
    requests = 0

    async def second_held(*args: Any) -> Any:
        nonlocal requests
        requests += 1
        if requests == 2:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(acknowledged.wait(), 10)
        answer = await real(*args)
        order.append(f"AddPartitionsToTxn {requests} answered")
        return answer

    monkeypatch.setattr(transaction_manager, "add_partitions_to_txn", second_held)

    def on_acknowledged(_future: object) -> None:
        order.append("partition 0 acknowledged")
        acknowledged.set()

    async def main() -> None:
        async with AioProducer(
            {
                "bootstrap.servers": broker.bootstrap,
                "transactional.id": "t-requests-wake",
                "linger.ms": 0,
            }
        ) as producer:
            await producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            first = await producer.send(topic, b"a", partition=0)
            first.add_done_callback(on_acknowledged)
            await producer.send(topic, b"b", partition=1)
            await producer.commit_transaction(TIMEOUT)

    asyncio.run(main())
    assert order[:3] == [
        "AddPartitionsToTxn 1 answered",
        "partition 0 acknowledged",
        "AddPartitionsToTxn 2 answered",
    ]


def test_end_txn_leaves_before_the_record_metadata_is_built(
    broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _make_topic(broker.bootstrap, "txn-requests-end", 1)
    sent: list[asyncio.Future[Any]] = []
    records_done_at_end_txn: list[bool] = []
    _recorded(monkeypatch, "end_txn", records_done_at_end_txn, lambda *_args: sent[-1].done())

    async def main() -> None:
        async with AioProducer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "t-requests-end"}
        ) as producer:
            await producer.init_transactions(TIMEOUT)
            for _ in range(3):
                producer.begin_transaction()
                sent.append(await producer.send_many(topic=topic, values=[b"v"] * 1000))
                await producer.commit_transaction(TIMEOUT)
                assert sent[-1].done()  # built while EndTxn was in flight
                assert len(await sent[-1]) == 1000

    asyncio.run(main())
    # each EndTxn was sent while its records' RecordMetadata list was still to be built
    assert records_done_at_end_txn == [False] * 3


def test_after_a_plain_flush_every_send_many_future_is_done(broker: Any) -> None:
    topic = _make_topic(broker.bootstrap, "txn-requests-flush", 2)

    async def main() -> None:
        async with AioProducer({"bootstrap.servers": broker.bootstrap}) as producer:
            for _ in range(3):
                sent = [
                    await producer.send_many(topic=topic, values=[b"v"] * 500) for _ in range(2)
                ]
                await producer.flush()
                assert all(future.done() for future in sent)
                assert [len(future.result()) for future in sent] == [500, 500]

    asyncio.run(main())
