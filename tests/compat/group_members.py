"""Consumer-group members of each third-party client, run in threads or subprocesses, and
the checks the group tests share."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka_wire import wait_for

GROUP_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
SESSION_TIMEOUT_MS = 6000


def new_group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


def produce_values(
    bootstrap: str, topic: str, values: list[bytes], partitions: int,
    per_batch: int | None = None,
) -> None:
    """Spread `values` round-robin over the partitions (confluent-kafka producer), at
    most `per_batch` records a batch when given."""
    from confluent_kafka import Producer

    config: dict[str, object] = {"bootstrap.servers": bootstrap}
    if per_batch is not None:
        config["batch.num.messages"] = per_batch
    producer = Producer(config)
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(20) == 0


class Member(threading.Thread):
    """Polls one consumer in its own thread until stopped, keeping what it received.

    `poll()` returns the values of a batch of records; `close()` leaves the group.
    """

    def __init__(self, poll: Callable[[], list[bytes]], close: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._poll = poll
        self._close = close
        self.values: list[bytes] = []
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while not self._stop_requested.is_set():
                got = self._poll()
                with self._lock:
                    self.values.extend(got)
        except BaseException as exc:  # reported by the test thread
            self.error = exc
        finally:
            self._close()

    def received(self) -> list[bytes]:
        with self._lock:
            return list(self.values)

    def stop(self) -> None:
        self._stop_requested.set()
        self.join(30)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error


def wait_all_received(members: list[Member], expected: list[bytes], timeout: float = 40) -> None:
    def done() -> bool:
        for m in members:
            if m.error is not None:
                raise m.error
        got = [v for m in members for v in m.received()]
        return set(got) >= set(expected)

    wait_for(done, timeout)


KILLABLE_MEMBER = """
import sys
from confluent_kafka import Consumer
bootstrap, topic, group, session = sys.argv[1:5]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
              "session.timeout.ms": int(session), "auto.offset.reset": "earliest",
              "enable.auto.commit": False})
c.subscribe([topic], on_assign=lambda _c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.2)
"""


def start_killable_member(bootstrap: str, topic: str, group: str) -> subprocess.Popen[str]:
    """A confluent-kafka member in a subprocess, to be killed without leaving the group.
    Returns once it has been assigned partitions."""
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_MEMBER, bootstrap, topic, group, str(SESSION_TIMEOUT_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("assigned") and int(line.split()[1]) > 0:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("the subprocess member got no partitions")


def kill_member(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: the member leaves no LeaveGroup behind."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return [tp.offset for tp in got]
    finally:
        consumer.close()


def kafka_python_subscribe(consumer: Any, topic: str) -> None:
    """Subscribe a kafka-python consumer once it knows the topic's partitions.

    kafka-python 3.0's group leader assigns from the metadata it holds when its join
    completes and rejoins only if that metadata changes later: a join that completes
    before its first metadata response for the topic assigns nothing for good (seen
    under load). A long-running consumer knows its topics; so does this one."""
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer.subscribe([topic])
