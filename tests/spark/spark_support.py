"""The Spark tests' helpers: topics made and filled with confluent-kafka, a `logbus`
reader, records read back (confluent-kafka, read_committed or not), and the exactly-once
job (eos_job.py) run as a process of its own. The SparkSession is conftest.py's `spark`
fixture."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cluster_processes import ProcessCluster
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
    )
    futures[name].result(30)


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int | None = None,
    keys: list[bytes | None] | None = None,
    headers: list[Any] | None = None,
    timestamps: list[int] | None = None,
    **config: Any,
) -> None:
    """Write records with confluent-kafka and wait until every one is acknowledged."""
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5}
        | {k.replace("_", "."): v for k, v in config.items()}
    )
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i, value in enumerate(values):
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if keys is not None:
            extra["key"] = keys[i]
        if headers is not None:
            extra["headers"] = headers[i]
        if timestamps is not None:
            extra["timestamp"] = timestamps[i]
        producer.produce(topic, value, on_delivery=report, **extra)
    assert producer.flush(30) == 0
    assert not errors, errors


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    """`spark.read.format("logbus")` with the bootstrap servers and `options` set."""
    builder = spark.read.format("logbus").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of `topic` read with confluent-kafka, waiting until `expected` arrived."""
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Any] = []
        deadline = time.monotonic() + 60
        while len(records) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append(msg)
        assert len(records) == expected
        # Nothing more than expected arrives either.
        assert consumer.poll(1.0) is None
        return records
    finally:
        consumer.close()


JOB = Path(__file__).with_name("eos_job.py")


def read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 of `topic` up to its end, read with `isolation`."""
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
        raise AssertionError(f"{topic} not read to its end in 60 s")
    finally:
        consumer.close()


class Job:
    """eos_job.py in a process group of its own (its JVM and Python workers with it)."""

    def __init__(self, bootstrap: str, tmp: Path, *extra: str) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        self.log = (tmp / f"job-{time.monotonic_ns()}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), "--bootstrap", bootstrap, "--source", "in",
             "--out", "out", "--checkpoint", str(tmp / "checkpoint"), "--prefix", "copy",
             *extra],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait(self, timeout: float = 300) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        try:
            self.kill()
        except ProcessLookupError:
            self.proc.wait(30)
        self.log.close()


def output(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp.glob("job-*.log"))


def transactional_cluster(zk_connect: str, tmp_path: Path) -> ProcessCluster:
    """Three broker processes on ZooKeeper for the Spark cluster tests: min.insync 2, the
    transaction and offsets topics small and replicated three times, groups formed at
    once. Use it in a `with` block."""
    return ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        min_insync_replicas="2",
        transaction_state_log_num_partitions="3",
        transaction_state_log_replication_factor="3",
        transaction_state_log_min_isr="2",
        offsets_topic_num_partitions="3",
        group_initial_rebalance_delay_ms="0",
    )
