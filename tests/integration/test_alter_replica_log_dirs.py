"""AlterReplicaLogDirs against a broker with two log dirs, sent by kafka-python's
`KafkaAdminClient.alter_replica_log_dirs` (and logbus's admin for bad input): a replica
moves from one dir to the other while confluent-kafka produces to it (acks=all,
idempotent) and a consumer reads it; the future replica shows in DescribeLogDirs
(`is_future_key`) while it catches up; afterwards every acknowledged record is read back
once and in order (the cluster suite's checker), and the old directory is gone. Bad
input: a path that is not a log dir, a partition the broker does not hold."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from checker import Consumed, History, check
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTP
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
from load import ProducerLoad

import logbus
from kafka_wire import wait_for
from logbus.client.admin import AdminBatchError
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

TOPIC_BYTES = 6_000_000
COPY_RATE = 3_000_000  # bytes/s: the copy takes about two seconds, long enough to watch


def two_dir_broker(
    broker_factory: Any, tmp_path: Path, **config: Any
) -> tuple[Any, Path, Path]:
    first, second = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = broker_factory(log_dirs=f"{first},{second}", **config)
    return broker, first.resolve(), second.resolve()


def replicas_by_dir(bootstrap: str, topic: str) -> dict[str, dict[int, bool]]:
    """Log dir -> {partition: is_future} of the topic's replicas, from DescribeLogDirs."""
    with logbus.Admin({"bootstrap.servers": bootstrap}) as admin:
        described = admin.describe_log_dirs()
    found: dict[str, dict[int, bool]] = {}
    for dirs in described.values():
        for path, info in dirs.items():
            for tp, replica in info.replicas.items():
                if tp.topic == topic:
                    found.setdefault(path, {})[tp.partition] = replica.is_future
    return found


class Reader:
    """A confluent-kafka consumer reading the topic from the start in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.records: list[Consumed] = []
        self._stop = threading.Event()
        self._consumer = ConfluentConsumer(
            {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
        )
        self._consumer.assign([ConfluentTP(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, name="reader")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(500, timeout=0.2):
                if message.error() is None:
                    self.records.append(Consumed.of(message))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def test_a_replica_moves_between_dirs_under_load(broker_factory: Any, tmp_path: Path) -> None:
    # the copy's throttle, Kafka's broker config (also dynamic)
    broker, first, second = two_dir_broker(
        broker_factory, tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=COPY_RATE
    )
    topic = f"move-{uuid.uuid4().hex[:8]}"
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, num_partitions=2)])
    source = next(d for d in (first, second) if (d / f"{topic}-0").is_dir())
    target = second if source == first else first
    history = History()
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        # Filler written outside the history, so the copy has something to chew on.
        for _ in range(TOPIC_BYTES // 10_000):
            producer.send(topic, b"f" * 10_000, partition=0)
        producer.flush(30)
    mover = broker.broker.replica_manager.log_dir_mover
    assert mover.throttle_bytes_per_second == COPY_RATE  # the config reached the copy
    reader = Reader(broker.bootstrap, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with ProducerLoad(
            broker.bootstrap, history, topic, producers=2, client="confluent",
            interval=0.002, **{"acks": "all", "enable.idempotence": True},
        ) as load:
            load.wait_acknowledged(200)
            answer = admin.alter_replica_log_dirs(
                {TopicPartitionReplica(topic, 0, 0): str(target)}
            )
            assert answer == {TopicPartitionReplica(topic, 0, 0): NoError}
            wait_for(
                lambda: replicas_by_dir(broker.bootstrap, topic).get(str(target), {}).get(0),
                30, what="the future replica in DescribeLogDirs",
            )
            load.wait_acknowledged(load.acknowledged() + 300)
            wait_for(lambda: mover.moved == 1, 60, what="the replica to move")
            load.wait_acknowledged(load.acknowledged() + 300)
    finally:
        reader.stop()
        admin.close()
    after = replicas_by_dir(broker.bootstrap, topic)
    assert after[str(target)][0] is False
    assert 0 not in after.get(str(source), {})
    assert (target / f"{topic}-0").is_dir()
    assert not (source / f"{topic}-0").exists()
    polled = [r for r in reader.records if r.value != b"f" * 10_000]
    checked = check(history, polled)
    assert checked.ok, str(checked)
    # Read again from the moved log: the same records, the filler first.
    with logbus.Consumer({"bootstrap.servers": broker.bootstrap}) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = consumer.end_offsets([tp])[tp]
        again: list[Consumed] = []
        while consumer.position(tp) < end:
            again.extend(Consumed.of(r) for r in consumer.poll(1.0))
    assert [r.offset for r in again] == list(range(end))
    mine = [r for r in polled if r.partition == 0]
    assert [r.value for r in again if r.value != b"f" * 10_000] == [r.value for r in mine]


def test_alter_replica_log_dirs_bad_input(broker_factory: Any, tmp_path: Path) -> None:
    # the copy's throttle, Kafka's broker config (also dynamic)
    broker, first, second = two_dir_broker(
        broker_factory, tmp_path, replica_alter_log_dirs_io_max_bytes_per_second=COPY_RATE
    )
    topic = f"move-{uuid.uuid4().hex[:8]}"
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, num_partitions=1)])
    source = next(d for d in (first, second) if (d / f"{topic}-0").is_dir())
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.alter_replica_log_dirs({
            TopicPartitionReplica(topic, 0, 0): str(tmp_path / "not-a-log-dir"),
        })
        assert answer == {TopicPartitionReplica(topic, 0, 0): LogDirNotFoundError}
        answer = admin.alter_replica_log_dirs({
            TopicPartitionReplica(topic, 5, 0): str(first),
        })
        assert answer == {TopicPartitionReplica(topic, 5, 0): ReplicaNotAvailableError}
        # Already there: nothing to do.
        answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): str(source)})
        assert answer == {TopicPartitionReplica(topic, 0, 0): NoError}
    finally:
        admin.close()
    with (
        logbus.Admin({"bootstrap.servers": broker.bootstrap}) as ours,
        pytest.raises(AdminBatchError) as raised,
    ):
        ours.alter_replica_log_dirs({(topic, 0, 0): str(tmp_path / "elsewhere")})
    assert raised.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    assert set(raised.value.errors) == {(topic, 0, 0)}
    assert (source / f"{topic}-0").is_dir()
    assert not any(p.name.endswith("-future") for d in (first, second) for p in d.iterdir())
