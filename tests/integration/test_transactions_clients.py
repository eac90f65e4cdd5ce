"""Transactions end to end with third-party clients against one broker: confluent-kafka's
transactional producer in a consume-transform-produce loop (offsets committed with the
transaction, read_committed consumers), two producers with one transactional id,
OffsetFetch require_stable while a transactional commit is pending (KIP-447), and the
transactional producers of kafka-python and aiokafka."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode

TIMEOUT = 20
SMALL = {
    "transaction_state_log_num_partitions": "3",
    "offsets_topic_num_partitions": "3",
    "group_initial_rebalance_delay_ms": "0",
}


@pytest.fixture
def txn_broker(broker_factory: Any) -> Any:
    running = broker_factory(**SMALL)
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    for future in admin.create_topics([NewTopic("in", 1, 1), NewTopic("out", 2, 1)]).values():
        future.result(TIMEOUT)
    return running


def read_committed(bootstrap: str, topic: str, expected: int, group: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        idle_until = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                if len(got) >= expected:
                    idle_until = idle_until or time.monotonic() + 1.0
                    if time.monotonic() > idle_until:
                        break
                continue
            got.append(message.value())
        return got
    finally:
        consumer.close()


def offset_fetch(bootstrap: str, group: str, require_stable: bool) -> tuple[int, int]:
    host, port = bootstrap.rsplit(":", 1)

    async def send() -> dict[str, Any]:
        async with await Connection.connect(host, int(port)) as conn:
            return await conn.request(
                ApiKey.OFFSET_FETCH,
                {
                    "group_id": group,
                    "topics": [{"name": "in", "partition_indexes": [0]}],
                    "require_stable": require_stable,
                },
                7,
            )

    response = asyncio.run(send())
    (partition,) = response["topics"][0]["partitions"]
    return partition["error_code"], partition["committed_offset"]


def wait_stable(bootstrap: str, group: str, offset: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while (got := offset_fetch(bootstrap, group, True))[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT:
        assert time.monotonic() < deadline, "the offset stayed unstable"
        time.sleep(0.02)
    assert got == (ErrorCode.NONE, offset)


def test_consume_transform_produce_exactly_once(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        source.produce("in", str(i).encode())
    assert source.flush(TIMEOUT) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ctp",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-1"})
    try:
        producer.init_transactions(TIMEOUT)
        consumer.subscribe(["in"])
        batches = 0
        deadline = time.monotonic() + TIMEOUT
        while batches < 3 and time.monotonic() < deadline:
            messages = consumer.consume(10, 1.0)
            messages = [m for m in messages if not m.error()]
            if not messages:
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce("out", m.value().upper() + b"!", partition=int(m.value()) % 2)
            offsets = [CTP("in", 0, messages[-1].offset() + 1)]
            producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), TIMEOUT
            )
            if batches == 1:  # the second batch is aborted and redone from its offsets
                producer.abort_transaction(TIMEOUT)
                consumer.seek(CTP("in", 0, messages[0].offset()))
                committed = consumer.committed([CTP("in", 0)], TIMEOUT)[0].offset
                assert committed == messages[0].offset()
                batches += 1
                continue
            producer.commit_transaction(TIMEOUT)
            batches += 1
            assert consumer.committed([CTP("in", 0)], TIMEOUT)[0].offset == offsets[0].offset
    finally:
        consumer.close()
    producer.flush(TIMEOUT)
    out = read_committed(bootstrap, "out", 20, "reader")
    committed_in = sorted(int(v[:-1]) for v in out)
    assert len(out) == len(set(out))  # no duplicates: the aborted batch is not visible
    assert committed_in == list(range(len(committed_in)))  # a prefix, in order, exactly once
    wait_stable(bootstrap, "ctp", len(committed_in))


def test_pending_transactional_offsets_are_unstable(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stable"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "stable-1"})
    try:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [CTP("in", 0, 7)], consumer.consumer_group_metadata(), TIMEOUT
        )
        # written but not committed: invisible, and unstable for require_stable
        assert offset_fetch(bootstrap, "stable", False) == (ErrorCode.NONE, -1)
        assert offset_fetch(bootstrap, "stable", True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        producer.commit_transaction(TIMEOUT)
        # EndTxn answers once PrepareCommit is written; the markers follow (Kafka's way):
        # the offset is unstable until the marker reached the offsets partition
        wait_stable(bootstrap, "stable", 7)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [CTP("in", 0, 9)], consumer.consumer_group_metadata(), TIMEOUT
        )
        producer.abort_transaction(TIMEOUT)
        wait_stable(bootstrap, "stable", 7)
    finally:
        consumer.close()
        producer.flush(TIMEOUT)


def test_the_older_producer_is_fenced(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    old = Producer({"bootstrap.servers": bootstrap, "transactional.id": "zombie"})
    old.init_transactions(TIMEOUT)
    old.begin_transaction()
    old.produce("out", b"zombie", partition=0)
    assert old.flush(TIMEOUT) == 0
    new = Producer({"bootstrap.servers": bootstrap, "transactional.id": "zombie"})
    new.init_transactions(TIMEOUT)  # aborts the zombie's open transaction
    new.begin_transaction()
    new.produce("out", b"new", partition=0)
    new.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as raised:
        old.produce("out", b"late", partition=0)
        old.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal()
    assert read_committed(bootstrap, "out", 1, "fence-reader") == [b"new"]


def test_kafka_python_transactions(txn_broker: Any) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=txn_broker.bootstrap, transactional_id="kp-1", api_version=(2, 5)
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("out", b"kept", partition=1)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("out", b"dropped", partition=1)
        producer.abort_transaction()
    finally:
        producer.close(timeout=TIMEOUT)
    assert read_committed(txn_broker.bootstrap, "out", 1, "kp-reader") == [b"kept"]


def test_aiokafka_transactions(txn_broker: Any) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=txn_broker.bootstrap, transactional_id="aio-1"
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("out", b"aio-kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("out", b"aio-dropped", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_committed(txn_broker.bootstrap, "out", 1, "aio-reader") == [b"aio-kept"]


def list_offset(bootstrap: str, topic: str, partition: int, isolation: int) -> int:
    host, port = bootstrap.rsplit(":", 1)

    async def send() -> dict[str, Any]:
        async with await Connection.connect(host, int(port)) as conn:
            return await conn.request(
                ApiKey.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": isolation,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": partition, "timestamp": -1}],
                        }
                    ],
                },
                5,
            )

    response = asyncio.run(send())
    return int(response["topics"][0]["partitions"][0]["offset"])


def test_an_open_transaction_past_its_timeout_is_aborted(broker_factory: Any) -> None:
    running = broker_factory(
        **SMALL, transaction_abort_timed_out_transaction_cleanup_interval_ms="100"
    )
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    admin.create_topics([NewTopic("out", 1, 1)])["out"].result(TIMEOUT)
    producer = Producer(
        {
            "bootstrap.servers": running.bootstrap,
            "transactional.id": "forgotten",
            "transaction.timeout.ms": 1000,
        }
    )
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("out", b"never", partition=0)
    assert producer.flush(TIMEOUT) == 0
    assert list_offset(running.bootstrap, "out", 0, 1) == 0  # the LSO holds at the open one
    deadline = time.monotonic() + TIMEOUT
    while list_offset(running.bootstrap, "out", 0, 1) != 2:  # record + ABORT marker
        assert time.monotonic() < deadline, "the LSO did not move on"
        time.sleep(0.05)
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT)  # fenced by the coordinator's abort
    assert read_committed(running.bootstrap, "out", 0, "timeout-reader") == []


def test_the_coordinator_killed_mid_transaction(broker_process: Any) -> None:
    proc = broker_process(
        "--override",
        "transaction.state.log.num.partitions=3",
        "--override",
        "offsets.topic.num.partitions=3",
        "--override",
        "group.initial.rebalance.delay.ms=0",
    )
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("out", 1, 1)])["out"].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": "survivor"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("out", b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0
    proc.kill()  # kill -9: the coordinator and the partition leader at once
    proc.start()
    producer.commit_transaction(TIMEOUT)  # the reloaded coordinator finishes it
    got = read_committed(proc.bootstrap, "out", 5, "survivor-reader")
    assert got == [b"v%d" % i for i in range(5)]
    producer.flush(TIMEOUT)
    proc.terminate()
