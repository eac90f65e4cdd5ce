"""The group coordinator across a leader change of its `__consumer_offsets` partition,
with three real brokers replicating in this process: the new leader loads the whole log
it holds, records above its (lagging) high watermark included, as Kafka's loader does;
they are committed as soon as its followers fetch them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replication_cluster import InProcessCluster

import logbus
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC

GROUP = "loaders"
TP = logbus.TopicPartition("work", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(
        tmp_path,
        offsets_topic_num_partitions="1",
        offsets_commit_timeout_ms="1000",
        replica_lag_time_max_ms="60000",  # a paused follower stays in the ISR
    )
    running.start()
    try:
        yield running
    finally:
        running.close()


def leo(cluster: InProcessCluster, broker_id: int) -> int:
    """The log end offset (on the loop: `wait_for` conditions run there)."""
    return cluster.partition(broker_id, OFFSETS_TOPIC, 0).log.log_end_offset


def test_a_new_leader_loads_the_commits_above_its_high_watermark(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic("work", {0: [0, 1, 2]})
    cluster.create_topic(OFFSETS_TOPIC, {0: [0, 1, 2]}, {"cleanup.policy": "compact"})
    with logbus.Admin(bootstrap_servers=cluster.bootstrap, default_api_timeout_ms=3000) as admin:
        admin.alter_consumer_group_offsets(GROUP, {TP: 5})
        # broker 2 stops fetching: broker 1 copies the next commit, the high watermark
        # (broker 2 is still in the ISR) does not pass it, the commit times out unanswered
        cluster.pause_fetching(2)
        with pytest.raises(logbus.KafkaError):
            admin.alter_consumer_group_offsets(GROUP, {TP: 7}, timeout_ms=1500)
        cluster.wait_for(lambda: leo(cluster, 1) == leo(cluster, 0), "broker 1 to copy it")
        assert cluster.call(
            lambda: cluster.partition(1, OFFSETS_TOPIC, 0).high_watermark < leo(cluster, 1)
        )
        # broker 1 leads now: it loads its whole log, and once broker 0 has fetched, the
        # commit is below the high watermark: the group's offset is 7, never 5 again
        cluster.elect(OFFSETS_TOPIC, 0, leader=1, isr=(1, 0))
        cluster.wait_for(
            lambda: cluster.partition(1, OFFSETS_TOPIC, 0).high_watermark == leo(cluster, 1),
            "the new leader's high watermark to reach its log end",
        )
        assert admin.list_consumer_group_offsets(GROUP, [TP]) == {TP: 7}
