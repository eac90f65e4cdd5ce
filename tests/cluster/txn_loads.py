"""Transactional load for the fault tests, with confluent-kafka (librdkafka): a
consume-transform-produce loop and a plain transactional producer, each in a thread,
recording every transaction in a `TxnHistory`; and fresh readers (read_committed and
read_uncommitted through confluent-kafka, read_committed through kcat).

    with ConsumeTransformProduce(bootstrap, history, "in", "out", "ctp-0", "g") as ctp:
        ctp.wait_committed(5)
        ...fault...
        ctp.wait_committed(10)
    result = check_transactions(history, read_topic(bootstrap, "out", 3, "read_committed"),
                                group_offsets=group_offsets(bootstrap, "g", "in", 1))

A transaction's outcome is what the producer saw: `commit_transaction` returned
(committed); an abortable error then `abort_transaction` returned (aborted); a retriable
commit error is retried; anything else is unknown (the producer is then replaced: a new
one with the same transactional.id fences the old and aborts what it left open). Every
`abort_every`-th transaction is aborted on purpose, and a consume-transform-produce loop
then rewinds to the group's committed offsets, as an application would.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import traceback
import uuid
from typing import Any

from checker import Consumed
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from txn_checker import Txn, TxnHistory, TxnOutcome

TIMEOUT = 60.0


def _error(exc: BaseException) -> KafkaError | None:
    arg = exc.args[0] if exc.args else None
    return arg if isinstance(arg, KafkaError) else None


def finish(producer: Producer, txn: Txn, abort: bool = False) -> bool:
    """Commit (or abort) `txn` and record its outcome; False when the producer is unusable
    (a fatal error, or the outcome could not be learnt): the caller replaces it."""
    deadline = time.monotonic() + TIMEOUT
    while not abort:
        try:
            producer.commit_transaction(TIMEOUT)
            txn.committed()
            return True
        except KafkaException as exc:
            error = _error(exc)
            if error is not None and error.retriable() and time.monotonic() < deadline:
                continue  # librdkafka: a retriable commit may be called again
            if error is not None and error.txn_requires_abort():
                break  # not committed: abort it
            txn.unknown(exc)
            return False
    try:
        producer.abort_transaction(TIMEOUT)
        txn.aborted()
        return True
    except KafkaException as exc:
        txn.unknown(exc)
        return False


class Replaced(Exception):
    """Raised at the hold point when the test asked for new clients (`release(replace=True)`)."""


class TxnThread:
    """A thread running transactions until `stop()`; failures kept in `errors`. Each
    *session* runs with its own clients; a new session (new clients, the same
    transactional.id, which fences the old producer and aborts what it left open) starts
    after a fatal or unknown outcome, or when the test asks for it."""

    def __init__(self, history: TxnHistory, name: str) -> None:
        self.history = history
        self.name = name
        self.errors: list[BaseException] = []
        self.sessions = 0
        self._stopping = threading.Event()
        self._hold = threading.Event()
        self._holding = threading.Event()
        self._release = threading.Event()
        self._replace = False
        self._thread = threading.Thread(target=self._run, name=name)

    def start(self) -> Any:
        self._thread.start()
        return self

    def stop(self, timeout: float = 180.0) -> None:
        self._stopping.set()
        self.release()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not finish"
        assert not self.errors, f"{self.name} failed: {self.errors[0]!r}"

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hold(self, timeout: float = 120.0) -> None:
        """Until the thread waits in the middle of a transaction: its records written
        (flushed) and, for a consume-transform-produce loop, its offsets sent. It stays
        there until `release()`: a fault then hits a transaction known to be open, with no
        librdkafka call in flight."""
        self._hold.set()
        deadline = time.monotonic() + timeout
        while not self._holding.wait(0.1):
            assert not self.errors, f"{self.name} failed: {self.errors[0]!r}"
            assert time.monotonic() < deadline, f"{self.name} never reached its hold point"

    def release(self, *, replace: bool = False) -> None:
        """Go on with the held transaction; with `replace`, drop it and the clients and
        start a new session (the new producer aborts the held transaction: it is recorded
        aborted). librdkafka 2.16's clients do not always recover from a broker killed and
        restarted under them (send_offsets_to_transaction hanging past its timeout on a
        stale group coordinator, librdkafka #5456 / #5511), so the single-broker tests
        restart the application as a real one would."""
        self._replace = replace
        self._hold.clear()
        self._release.set()

    def _hold_point(self, producer: Producer) -> None:
        if not self._hold.is_set():
            return
        producer.flush(TIMEOUT)
        self._holding.set()
        self._release.wait()
        self._release.clear()
        self._holding.clear()
        if self._replace:
            self._replace = False
            raise Replaced

    def committed(self) -> int:
        return sum(
            1
            for t in self.history.txns
            if t.producer == self.name and t.outcome is TxnOutcome.COMMITTED
        )

    def wait_committed(self, count: int, timeout: float = 120.0) -> None:
        """Until this thread has `count` committed transactions in all."""
        deadline = time.monotonic() + timeout
        while self.committed() < count:
            assert not self.errors, f"{self.name} failed: {self.errors[0]!r}"
            assert time.monotonic() < deadline, (
                f"{self.name}: {self.committed()} of {count} committed after {timeout:g}s; "
                f"its thread is at:\n{self.where()}"
            )
            time.sleep(0.05)

    def where(self) -> str:
        """The thread's current stack (what it waits for)."""
        frame = sys._current_frames().get(self._thread.ident or -1)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self.sessions += 1
                self.session()
        except BaseException as exc:
            self.errors.append(exc)

    def session(self) -> None:
        """Run transactions with new clients until `stop()` or until they are unusable."""
        raise NotImplementedError

    def new_producer(self, bootstrap: str, **config: Any) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": self.name,
                "log_level": 0,
                **config,
            }
        )
        producer.init_transactions(TIMEOUT)
        return producer

    def run_one(self, producer: Producer, txn: Txn, number: int, body: Any) -> bool:
        """`body()` (produce, send offsets), the hold point, then commit, or abort every
        `abort_every`-th; the outcome recorded. False when the session must end."""
        try:
            body()
            self._hold_point(producer)
            producer.flush(TIMEOUT)  # an abort racing AddPartitionsToTxn is fatal in librdkafka
            return finish(producer, txn, abort=number % self.abort_every == 0)
        except Replaced:
            txn.aborted("replaced: the new producer aborts it")
            return False
        except KafkaException as exc:
            error = _error(exc)
            if error is not None and not error.fatal():
                return finish(producer, txn, abort=True)
            txn.unknown(exc)
            return False

    abort_every = 4


class TransactionalProducer(TxnThread):
    """Transactions of `size` records spread over `partitions` partitions of `topic`."""

    def __init__(
        self,
        bootstrap: str,
        history: TxnHistory,
        topic: str,
        transactional_id: str,
        *,
        partitions: int,
        size: int = 10,
        abort_every: int = 4,
        **config: Any,
    ) -> None:
        super().__init__(history, transactional_id)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.size, self.abort_every, self.config = size, abort_every, config

    def session(self) -> None:
        producer = self.new_producer(self.bootstrap, **self.config)
        number = 0
        while not self._stopping.is_set():
            number += 1
            txn = self.history.begin(self.name)

            def body(txn: Txn = txn) -> None:
                producer.begin_transaction()
                for i in range(self.size):
                    send = txn.send(self.topic, i % self.partitions)
                    producer.produce(
                        self.topic,
                        send.value,
                        partition=send.partition,
                        on_delivery=send.confluent_callback(),
                    )

            if not self.run_one(producer, txn, number, body):
                break
        producer.flush(TIMEOUT)


class ConsumeTransformProduce(TxnThread):
    """Reads `source` (assigned, every partition) in batches, writes one output record per
    input to `sink` (the input's partition modulo `sink_partitions`) and sends the
    consumed offsets to the transaction for `group`; after an abort it rewinds to the
    group's committed offsets, as an application would."""

    def __init__(
        self,
        bootstrap: str,
        history: TxnHistory,
        source: str,
        sink: str,
        transactional_id: str,
        group: str,
        *,
        source_partitions: int,
        sink_partitions: int,
        batch: int = 20,
        abort_every: int = 5,
        **config: Any,
    ) -> None:
        super().__init__(history, transactional_id)
        self.bootstrap, self.source, self.sink, self.group = bootstrap, source, sink, group
        self.source_partitions, self.sink_partitions = source_partitions, sink_partitions
        self.batch, self.abort_every, self.config = batch, abort_every, config

    def session(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        try:
            self._loop(consumer)
        finally:
            consumer.close()

    def _rewind(self, consumer: Consumer) -> dict[int, int]:
        """Assign every source partition at the group's committed offsets."""
        tps = [CTP(self.source, p) for p in range(self.source_partitions)]
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                committed = consumer.committed(tps, 10)
                break
            except KafkaException:  # the coordinator is moving or restarting
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        positions = {tp.partition: max(tp.offset, 0) for tp in committed}
        consumer.assign([CTP(self.source, p, o) for p, o in positions.items()])
        return positions

    def _loop(self, consumer: Consumer) -> None:
        producer = self.new_producer(self.bootstrap, **self.config)
        positions = self._rewind(consumer)
        number = 0
        while not self._stopping.is_set():
            messages = [m for m in consumer.consume(self.batch, 0.5) if not m.error()]
            if not messages:
                continue
            number += 1
            txn = self.history.begin(self.name)
            ends: dict[int, int] = {}

            def body(
                txn: Txn = txn,
                messages: list[Any] = messages,
                ends: dict[int, int] = ends,
                positions: dict[int, int] = positions,
            ) -> None:
                producer.begin_transaction()
                for message in messages:
                    send = txn.send(self.sink, message.partition() % self.sink_partitions)
                    producer.produce(
                        self.sink,
                        send.value,
                        key=message.value(),
                        partition=send.partition,
                        on_delivery=send.confluent_callback(),
                    )
                    ends[message.partition()] = message.offset() + 1
                for partition, end in ends.items():
                    txn.consumed((self.source, partition), positions[partition], end)
                txn.send_offsets(self.group, {(self.source, p): e for p, e in ends.items()})
                producer.send_offsets_to_transaction(
                    [CTP(self.source, p, e) for p, e in ends.items()],
                    consumer.consumer_group_metadata(),
                    TIMEOUT,
                )

            if not self.run_one(producer, txn, number, body):
                break
            if txn.outcome is TxnOutcome.COMMITTED:
                positions.update(ends)
            else:
                positions = self._rewind(consumer)
        producer.flush(TIMEOUT)


# --- readers ---------------------------------------------------------------------------------


def read_topic(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = TIMEOUT
) -> list[Consumed]:
    """Every record a fresh confluent-kafka consumer with `isolation` reads from the
    beginning of each partition up to its end (partition EOF: the last stable offset for
    read_committed, the high watermark otherwise), in poll order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    records: list[Consumed] = []
    try:
        consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end of {partitions - len(at_end)}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                if error.retriable() or not error.fatal():
                    continue
                raise AssertionError(f"consumer error: {error}")
            at_end.discard(message.partition())
            records.append(Consumed.of(message))
    finally:
        consumer.close()
    return records


def kcat_read_committed(bootstrap: str, topic: str, partitions: int) -> list[Consumed]:
    """What kcat (librdkafka's CLI) reads with isolation.level=read_committed."""
    out: list[Consumed] = []
    for partition in range(partitions):
        done = subprocess.run(
            [
                "kcat",
                "-C",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-p",
                str(partition),
                "-o",
                "beginning",
                "-e",
                "-q",
                "-X",
                "isolation.level=read_committed",
                "-f",
                "%o %s\\n",
            ],
            capture_output=True,
            timeout=TIMEOUT,
            check=True,
        )
        for line in done.stdout.splitlines():
            offset, value = line.split(b" ", 1)
            out.append(Consumed(topic, partition, int(offset), value))
    return out


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[Any, int]:
    """The group's committed offsets (stable: librdkafka fetches with require_stable and
    retries UNSTABLE_OFFSET_COMMIT), -1 where none."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        tps = consumer.committed([CTP(topic, p) for p in range(partitions)], TIMEOUT)
        return {(topic, tp.partition): tp.offset for tp in tps}
    finally:
        consumer.close()


def produce_input(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """`count` plain records (values b"in-<i>") spread over the partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(count):
        producer.produce(topic, b"in-%d" % i, partition=i % partitions)
    assert producer.flush(TIMEOUT) == 0
