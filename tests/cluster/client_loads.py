"""Every client's producer and group consumer as background threads for the client
failover tests (tests/cluster/test_clients_failover.py).

`ClientProducerLoad` is `load.ProducerLoad` with two more clients, kafka-python and
aiokafka (config in each client's own keyword names). `GroupConsumer` runs one client's
consumer in a consumer group (its own group API: logbus, confluent-kafka, kafka-python,
aiokafka), commits after every poll that returned records, and keeps what it read and
what it committed:

    with GroupConsumer("aiokafka", cluster.bootstrap, "work", "g1") as consumer:
        consumer.wait_consumed(100)
    assert consumer.offsets_read(0) >= set(range(end))
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from checker import Consumed
from load import ProducerLoad

import logbus

ClientName = Literal["logbus", "confluent", "kafka-python", "aiokafka"]
CLIENTS: tuple[ClientName, ...] = ("logbus", "confluent", "kafka-python", "aiokafka")


def close_kafka_pythons_refused_sockets() -> None:
    """kafka-python 3.0 leaves the socket of a refused connection to the garbage
    collector (its `KafkaNetSocket.sock_connect` raises without closing it), and the
    ResourceWarning fails the test (`filterwarnings = error`) though no logbus code is at
    fault: close it there. Idempotent."""
    from kafka.net import inet

    original = inet.KafkaNetSocket.sock_connect
    if getattr(original, "closes_on_failure", False):
        return

    async def sock_connect(self: Any, net: Any, sock: Any, sockaddr: Any, **kw: Any) -> Any:
        try:
            return await original(self, net, sock, sockaddr, **kw)
        except BaseException:
            sock.close()
            raise

    sock_connect.closes_on_failure = True  # type: ignore[attr-defined]
    inet.KafkaNetSocket.sock_connect = sock_connect  # type: ignore[method-assign]


class ClientProducerLoad(ProducerLoad):
    """`ProducerLoad` for any of `CLIENTS` (`client=`); one thread per producer."""

    def _run(self, name: str) -> None:
        if self.client not in ("kafka-python", "aiokafka"):
            super()._run(name)
            return
        try:
            if self.client == "kafka-python":
                self._run_kafka_python(name)
            else:
                asyncio.run(self._run_aiokafka(name))
        except BaseException as exc:  # reported by wait_acknowledged and the test
            self.errors.append(exc)

    def _run_kafka_python(self, name: str) -> None:
        from kafka import KafkaProducer

        close_kafka_pythons_refused_sockets()
        producer = KafkaProducer(bootstrap_servers=self.bootstrap.split(","), **self.config)
        try:
            mine: list[Any] = []
            index = 0
            while not self._stopping.is_set():
                if self._pending(mine) >= self.max_pending:
                    time.sleep(0.005)
                    continue
                send = self._next(name, index)
                index += 1
                mine.append(send)
                future = producer.send(self.topic, send.value, key=send.key)
                future.add_callback(lambda meta, s=send: s.ok(meta.partition, meta.offset))
                future.add_errback(lambda exc, s=send: s.unknown(exc))
                if self.interval:
                    time.sleep(self.interval)
            producer.flush(120)
        finally:
            producer.close(30)

    async def _run_aiokafka(self, name: str) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap.split(","), **self.config)
        await producer.start()
        try:
            mine: list[Any] = []
            index = 0
            while not self._stopping.is_set():
                if self._pending(mine) >= self.max_pending:
                    await asyncio.sleep(0.005)
                    continue
                send = self._next(name, index)
                index += 1
                mine.append(send)
                future = await producer.send(self.topic, send.value, key=send.key)
                future.add_done_callback(lambda f, s=send: _aiokafka_outcome(s, f))
                await asyncio.sleep(self.interval)
            await producer.flush()
        finally:
            await producer.stop()


def _aiokafka_outcome(send: Any, future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        send.unknown("cancelled")
    elif future.exception() is not None:
        send.unknown(future.exception())
    else:
        meta = future.result()
        send.ok(meta.partition, meta.offset)


class GroupConsumer:
    """One client's consumer in group `group_id`, subscribed to `topic`, in a thread:
    polls, and after every poll that returned records commits (synchronously) the
    offsets after them. `consumed` holds every record read, in poll order; `committed`
    the offsets of the last successful commit per partition; `errors` the errors the
    client reported along the way (expected while brokers die, kept for messages)."""

    def __init__(
        self,
        client: ClientName,
        bootstrap: str,
        topic: str,
        group_id: str,
        *,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 20000,
    ) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.topic = topic
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        # max.poll.interval.ms, the rebalance timeout: how long a rebalance may wait for
        # a member that does not rejoin (Kafka's default is 5 minutes)
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.consumed: list[Consumed] = []
        self.committed: dict[int, int] = {}
        self.errors: list[str] = []
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"consumer-{client}")

    # -- control --------------------------------------------------------------------------

    def __enter__(self) -> GroupConsumer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: float = 60.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the {self.client} consumer did not stop"

    def count(self) -> int:
        with self._lock:
            return len(self.consumed)

    def offsets_read(self, partition: int) -> set[int]:
        with self._lock:
            return {r.offset for r in self.consumed if r.partition == partition}

    def check_alive(self) -> None:
        if self.failure is not None:
            raise AssertionError(f"the {self.client} consumer failed: {self.failure!r}")

    def wait_consumed(self, count: int, timeout: float = 120.0) -> None:
        """Until at least `count` records were read."""
        deadline = time.monotonic() + timeout
        while self.count() < count:
            self.check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the {self.client} consumer read {self.count()} of {count} records "
                    f"in {timeout:g}s; errors: {self.errors[-5:]}"
                )
            time.sleep(0.1)

    def caught_up(self, ends: dict[int, int]) -> bool:
        """Whether it read and committed every partition up to `ends` (partition -> end)."""
        self.check_alive()
        with self._lock:
            return all(self.committed.get(p, -1) >= end for p, end in ends.items())

    # -- the thread -----------------------------------------------------------------------

    def _took(self, records: list[Consumed]) -> dict[int, int]:
        with self._lock:
            self.consumed.extend(records)
        after: dict[int, int] = {}
        for r in records:
            after[r.partition] = max(after.get(r.partition, 0), r.offset + 1)
        return after

    def _committed(self, offsets: dict[int, int]) -> None:
        with self._lock:
            self.committed.update(offsets)

    def _error(self, error: object) -> None:
        self.errors.append(f"{type(error).__name__}: {error}")

    def _run(self) -> None:
        runners: dict[str, Callable[[], Any]] = {
            "logbus": self._run_logbus,
            "confluent": self._run_confluent,
            "kafka-python": self._run_kafka_python,
            "aiokafka": lambda: asyncio.run(self._run_aiokafka()),
        }
        try:
            runners[self.client]()
        except BaseException as exc:  # reported by check_alive
            self.failure = exc

    def _run_logbus(self) -> None:
        with logbus.Consumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group_id,
            auto_offset_reset="latest",
            enable_auto_commit=False,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=self.rebalance_timeout_ms,
        ) as consumer:
            consumer.subscribe([self.topic])
            while not self._stopping.is_set():
                try:
                    records = [Consumed.of(r) for r in consumer.poll(0.5)]
                except logbus.KafkaError as exc:
                    self._error(exc)
                    continue
                if not records:
                    continue
                after = self._took(records)
                tps = {logbus.TopicPartition(self.topic, p): o for p, o in after.items()}
                try:
                    consumer.commit(tps)
                except logbus.KafkaError as exc:
                    self._error(exc)
                    continue
                self._committed(after)

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group_id,
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": self.rebalance_timeout_ms,
                "log_level": 0,
            }
        )
        try:
            consumer.subscribe([self.topic])
            while not self._stopping.is_set():
                messages = consumer.consume(100, 0.5)
                records = []
                for m in messages:
                    if m.error():
                        self._error(m.error())
                    else:
                        records.append(Consumed.of(m))
                if not records:
                    continue
                after = self._took(records)
                tps = [TopicPartition(self.topic, p, o) for p, o in after.items()]
                try:
                    result = consumer.commit(offsets=tps, asynchronous=False)
                except KafkaException as exc:
                    self._error(exc)
                    continue
                if all(tp.error is None for tp in result or []):
                    self._committed(after)
                else:
                    self._error([tp.error for tp in result if tp.error is not None])
        finally:
            consumer.close()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        close_kafka_pythons_refused_sockets()
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","),
            group_id=self.group_id,
            auto_offset_reset="latest",
            enable_auto_commit=False,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=self.rebalance_timeout_ms,
        )
        try:
            consumer.subscribe([self.topic])
            while not self._stopping.is_set():
                try:
                    polled = consumer.poll(500)
                except KafkaError as exc:
                    self._error(exc)
                    continue
                records = [Consumed.of(r) for batch in polled.values() for r in batch]
                if not records:
                    continue
                after = self._took(records)
                offsets = {
                    TopicPartition(self.topic, p): OffsetAndMetadata(o, None, -1)
                    for p, o in after.items()
                }
                try:
                    consumer.commit(offsets)
                except KafkaError as exc:
                    self._error(exc)
                    continue
                self._committed(after)
        finally:
            consumer.close()

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.errors import KafkaError

        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap.split(","),
            group_id=self.group_id,
            auto_offset_reset="latest",
            enable_auto_commit=False,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=self.rebalance_timeout_ms,
        )
        await consumer.start()
        try:
            while not self._stopping.is_set():
                try:
                    polled = await consumer.getmany(timeout_ms=500)
                except KafkaError as exc:
                    self._error(exc)
                    continue
                records = [Consumed.of(r) for batch in polled.values() for r in batch]
                if not records:
                    continue
                after = self._took(records)
                try:
                    await consumer.commit(
                        {TopicPartition(self.topic, p): o for p, o in after.items()}
                    )
                except KafkaError as exc:
                    self._error(exc)
                    continue
                self._committed(after)
        finally:
            await consumer.stop()
