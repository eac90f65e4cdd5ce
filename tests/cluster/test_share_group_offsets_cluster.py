"""A share group's offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) on three `logbus server start` processes: the start offsets of six
partitions are kept by the share coordinators of three `__share_group_state` partitions, so
the group's coordinator reads, writes and deletes most of them on other brokers
(ReadShareGroupStateSummary, WriteShareGroupState, DeleteShareGroupState). A confluent-kafka
ShareConsumer moves them, the admin client reads and moves them back, and the next consumer
reads from where they were put."""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import Producer, ShareConsumer

from logbus import Admin
from logbus.client.admin.types import AlterConfigOp, ConfigResource, ResourceType
from logbus.client.types import TopicPartition

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "jobs"
GROUP = "offsets-workers"
PARTITIONS = 6
PER_PARTITION = 5


def produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(TOPIC, b"job-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def consume_all(cluster: ProcessCluster, want: int) -> list[bytes]:
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    try:
        def enough() -> bool:
            got.extend(m.value() for m in consumer.poll(0.5) or [] if m.error() is None)
            return len(got) >= want

        cluster.wait_for(enough, 120, f"{want} records")
        consumer.poll(0.1)  # the last acknowledgements leave with this poll
    finally:
        consumer.close()
    return got


@pytest.mark.timeout(300)
def test_offsets_kept_by_other_brokers(zk_connect: str, tmp_path: Path) -> None:
    with ProcessCluster(
        zk_connect, 3, tmp_path,
        share_coordinator_state_topic_num_partitions="3",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=1)
        produce(cluster.bootstrap)
        everything = PARTITIONS * PER_PARTITION
        with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
            admin.incremental_alter_configs({
                ConfigResource(ResourceType.GROUP, GROUP): [
                    AlterConfigOp("share.auto.offset.reset", "earliest")
                ]
            })
            assert len(consume_all(cluster, everything)) == everything
            partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

            def starts() -> dict[TopicPartition, int | None]:
                found = admin.describe_share_group_offsets(GROUP)
                return {tp: None if o is None else o.start_offset for tp, o in found.items()}

            cluster.wait_for(
                lambda: starts() == dict.fromkeys(partitions, PER_PARTITION), 60,
                "every partition's start offset past its records",
            )
            admin.alter_share_group_offsets(GROUP, dict.fromkeys(partitions[:3], 2))
            assert starts() == {**dict.fromkeys(partitions, PER_PARTITION),
                                **dict.fromkeys(partitions[:3], 2)}
            again = consume_all(cluster, 3 * (PER_PARTITION - 2))
            assert len(again) == 3 * (PER_PARTITION - 2)
            cluster.wait_for(
                lambda: starts() == dict.fromkeys(partitions, PER_PARTITION), 60,
                "the records read again acknowledged",
            )
            admin.delete_share_group_offsets(GROUP, [TOPIC])
            assert starts() == {}
            assert len(consume_all(cluster, everything)) == everything
