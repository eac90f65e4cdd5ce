"""What the fault tests of tests/cluster share: waiting for a whole ISR, reading a topic
back and running the checker on it, comparing whole replica logs.

    history = History()
    with ProducerLoad(cluster.bootstrap, history, TOPIC, acks="all") as load:
        ...faults...
    result = read_and_check(cluster, history, TOPIC, partitions=1)
    assert result.ok, result
"""

from __future__ import annotations

from typing import Any

from checker import CheckResult, History, LogBatch, check, replica_batches
from cluster_processes import ProcessCluster
from load import read_all

import logbus


def wait_isr(cluster: ProcessCluster, topic: str, partitions: int, size: int = 3) -> None:
    """Until every partition's ISR has `size` members: as ZooKeeper has it and as every
    live broker's metadata says (a follower just resumed from SIGSTOP answers Metadata
    with the ISR it had before the pause until the controller's update reaches it)."""

    def whole(p: int) -> bool:
        if len(cluster.partition_state(topic, p)["isr"]) != size:
            return False
        return all(len(cluster.isr_of(topic, p, via=b)) == size for b in cluster.live_ids())

    cluster.wait_for(
        lambda: all(whole(p) for p in range(partitions)),
        120,
        f"an ISR of {size} for every partition of {topic}",
    )


def wait_identical_logs(cluster: ProcessCluster, topic: str, partition: int) -> list[LogBatch]:
    """Until every replica of the partition holds the same batches (offsets, leader epochs,
    CRCs) as read from their segment files; those batches. Call once the load stopped."""
    replicas = cluster.metadata(topic).partitions[partition].replicas

    def same() -> list[LogBatch] | None:
        logs = [replica_batches(cluster.data_dir(b), topic, partition) for b in replicas]
        return logs[0] if logs[0] and all(log == logs[0] for log in logs) else None

    return cluster.wait_for(same, 60, f"identical logs on every replica of {topic}-{partition}")


def read_and_check(
    cluster: ProcessCluster, history: History, topic: str, partitions: int
) -> CheckResult:
    """A fresh consumer reads the topic to its end; the checker compares that with the
    history and the ISR members' batches below the high watermark."""
    records = read_all(cluster.bootstrap, topic)
    return check(history, records, cluster.replica_logs(topic, range(partitions)))


def refused_before_append(error: Any) -> bool:
    """A produce error that says the broker refused the batch before appending it (the
    `definite` predicate of the checker: such a send is `failed`, not `unknown`)."""
    code = getattr(error, "code", None)
    if callable(code):  # confluent-kafka's KafkaError
        code = code()
    return code == 19  # NOT_ENOUGH_REPLICAS (not ..._AFTER_APPEND, 20: that one is written)


def produce_one(bootstrap: str, topic: str, send: Any, **config: Any) -> None:
    """Send one recorded value with a fresh logbus producer (retries off) and record its
    outcome; NOT_ENOUGH_REPLICAS counts as a definite failure."""
    with logbus.Producer(
        bootstrap_servers=bootstrap, retries=0, enable_idempotence=False, **config
    ) as producer:
        future = producer.send(topic, send.value, key=send.key, partition=send.partition)
        send.record_future(future, refused_before_append)
        producer.flush()
