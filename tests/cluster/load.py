"""Load for the fault tests: producer threads that record every send in a `History`
while faults happen, and a fresh consumer that reads a topic to its end afterwards.

    with ProducerLoad(cluster.bootstrap, history, "orders", producers=2) as load:
        load.wait_acknowledged(200)
        cluster.kill(cluster.leader_of("orders", 0))
        load.wait_acknowledged(400)
    records = read_all(cluster.bootstrap, "orders")
    assert check(history, records).ok
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from checker import Consumed, History, Outcome

import logbus

Client = Literal["logbus", "confluent"]


class ProducerLoad:
    """`producers` threads, each with its own producer (logbus or confluent-kafka), each
    sending unique values recorded in `history` until `stop()`. `config` is passed to
    every producer (logbus names with underscores, e.g. `acks="all"`; for confluent,
    librdkafka names). `interval` spaces each thread's sends (0: as fast as acks allow,
    at most `max_pending` unacknowledged per thread)."""

    def __init__(
        self,
        bootstrap: str,
        history: History,
        topic: str,
        *,
        producers: int = 2,
        client: Client = "logbus",
        interval: float = 0.002,
        max_pending: int = 50,
        keys: int = 16,
        definite: Callable[[Any], bool] = lambda _: False,
        **config: Any,
    ) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.topic = topic
        self.client = client
        self.interval = interval
        self.max_pending = max_pending
        self.keys = keys
        self.definite = definite
        self.config = config
        self.errors: list[BaseException] = []
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(f"{client}{i}",), name=f"load-{i}")
            for i in range(producers)
        ]

    def start(self) -> ProducerLoad:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Stop sending, wait for every outstanding send's outcome (flush), join."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout)
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, f"producer threads did not finish: {alive}"

    def __enter__(self) -> ProducerLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def acknowledged(self) -> int:
        return self.history.count(Outcome.OK)

    def wait_acknowledged(self, count: int, timeout: float = 120.0) -> None:
        """Until at least `count` sends of the history are acknowledged."""
        deadline = time.monotonic() + timeout
        while self.acknowledged() < count:
            if self.errors:
                raise AssertionError(f"a producer thread failed: {self.errors[0]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.acknowledged()} of {count} acknowledged after {timeout:g}s"
                )
            time.sleep(0.05)

    def _pending(self, mine: list[Any]) -> int:
        mine[:] = [s for s in mine if s.outcome is Outcome.PENDING]
        return len(mine)

    def _run(self, name: str) -> None:
        try:
            if self.client == "logbus":
                self._run_logbus(name)
            else:
                self._run_confluent(name)
        except BaseException as exc:  # reported by wait_acknowledged and the test
            self.errors.append(exc)

    def _next(self, name: str, index: int) -> Any:
        key = f"k{index % self.keys}".encode()
        return self.history.send(name, self.topic, key=key)

    def _run_logbus(self, name: str) -> None:
        mine: list[Any] = []
        with logbus.Producer(bootstrap_servers=self.bootstrap, **self.config) as producer:
            index = 0
            while not self._stopping.is_set():
                if self._pending(mine) >= self.max_pending:
                    time.sleep(0.005)
                    continue
                send = self._next(name, index)
                index += 1
                mine.append(send)
                try:
                    future = producer.send(self.topic, send.value, key=send.key)
                except Exception as exc:  # refused before it was queued: never sent
                    send.failed(exc)
                    continue
                send.record_future(future, self.definite)
                if self.interval:
                    time.sleep(self.interval)
            producer.flush()

    def _run_confluent(self, name: str) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, **self.config})
        mine: list[Any] = []
        index = 0
        while not self._stopping.is_set():
            producer.poll(0)
            if self._pending(mine) >= self.max_pending:
                producer.poll(0.005)
                continue
            send = self._next(name, index)
            index += 1
            mine.append(send)
            producer.produce(
                self.topic,
                send.value,
                key=send.key,
                on_delivery=send.confluent_callback(self.definite),
            )
            if self.interval:
                time.sleep(self.interval)
        producer.flush(120)


def read_all(bootstrap: str, topic: str, timeout: float = 120.0) -> list[Consumed]:
    """Every record of the topic, in poll order, read by a fresh logbus consumer from the
    beginning up to the end offsets (high watermarks) taken when it starts."""
    records: list[Consumed] = []
    with logbus.Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        partitions = [logbus.TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                behind = {tp: (consumer.position(tp), end) for tp, end in ends.items()}
                raise AssertionError(f"did not read to the end within {timeout:g}s: {behind}")
            records.extend(Consumed.of(r) for r in consumer.poll(0.5))
    return records
