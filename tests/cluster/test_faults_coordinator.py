"""Fault test (issue 14, scenario g): the group coordinator is killed (kill -9) while a
group member consumes, under an acks=all idempotent load, on three `logbus server start`
processes (rf=3, __consumer_offsets rf=3), with the checker.

The member commits synchronously after every poll; the load pauses before the kill, so
the followers learn the last commit's high watermark late (replica.fetch.wait.max.ms)
and the new coordinator's high watermark is behind it. When the coordinator dies, the
leadership of the group's __consumer_offsets partition moves: the new coordinator loads
the group and its committed offsets from its log up to the log end, as Kafka does, not
only below its high watermark (read through it: unchanged), the member finds it and
goes on from where it was, committing again. What it polled over the whole test, checked
against the producers' history: nothing acknowledged missing, nothing twice, no poll going
backwards; its final committed offsets are the ends of the partitions.

(`test_controller_replication.py::test_group_coordinator_moves_with_leadership` checks the
same move with confluent-kafka and no load: a new member resumes at the committed offset.)
"""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from checker import Consumed, History, Outcome, check
from cluster_processes import ProcessCluster
from fault_checks import wait_isr
from load import ProducerLoad

import logbus
from logbus.coordinator.group.offsets_topic import offsets_partition_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "work"
PARTITIONS = 2
GROUP = "workers"


class Member:
    """One group member polling and committing synchronously after every poll; a commit
    that fails (the coordinator is gone) is tried again after the next poll."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = logbus.Consumer(
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            request_timeout_ms=5000,
        )
        self.consumer.subscribe([TOPIC])
        self.records: list[Consumed] = []
        self.commits = 0
        self.failed_commits = 0

    def step(self) -> None:
        self.records.extend(Consumed.of(r) for r in self.consumer.poll(0.2))
        try:
            self.consumer.commit()
        except logbus.KafkaError:
            self.failed_commits += 1
        else:
            self.commits += 1

    def until(self, cluster: ProcessCluster, done: object, what: str) -> None:
        def stepped() -> bool:
            self.step()
            return bool(done() if callable(done) else done)

        cluster.wait_for(stepped, 120, what)


def committed(cluster: ProcessCluster) -> dict[int, int]:
    with logbus.Admin(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000) as admin:
        found = admin.list_consumer_group_offsets(GROUP)
    return {tp.partition: offset for tp, offset in found.items() if tp.topic == TOPIC}


@pytest.mark.timeout(300)
def test_group_keeps_its_offsets_and_resumes_after_the_coordinators_kill(
    zk_connect: str, tmp_path: Path
) -> None:
    # A follower learns the leader's high watermark from the answer to its next fetch,
    # which (with nothing new to copy) comes replica.fetch.wait.max.ms later: 10 s here,
    # so the new coordinator's high watermark is behind the last commit when it loads.
    with ProcessCluster(
        zk_connect, 3, tmp_path, min_insync_replicas="2", replica_fetch_wait_max_ms="10000"
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        history = History()
        load_config = {"acks": "all", "enable_idempotence": True, "request_timeout_ms": 5000}
        member = Member(cluster.bootstrap)
        try:
            with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
                load.wait_acknowledged(100)
            member.until(
                cluster,
                lambda: len(member.records) == load.acknowledged() and member.commits,
                "the first records consumed and committed",
            )
            before = committed(cluster)
            assert sum(before.values()) == len(member.records)
            group_partition = offsets_partition_for(
                GROUP, len(cluster.metadata("__consumer_offsets").partitions)
            )
            coordinator = cluster.leader_of("__consumer_offsets", group_partition)
            assert len(cluster.isr_of("__consumer_offsets", group_partition)) == 3
            cluster.kill(coordinator)
            cluster.wait_for(
                lambda: (
                    cluster.leader_of("__consumer_offsets", group_partition)
                    not in (-1, coordinator)
                ),
                60,
                "a new coordinator",
            )
            # the new coordinator has the group's offsets as they were
            assert committed(cluster) == before
            with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
                commits = member.commits
                member.until(
                    cluster,
                    lambda: (
                        member.commits > commits + 3 and len(member.records) > len(before) + 100
                    ),
                    "the member to resume and commit again",
                )
                load.wait_acknowledged(history.count(Outcome.OK) + 100)
            assert not load.errors, load.errors
            with logbus.Consumer(bootstrap_servers=cluster.bootstrap) as probe:
                tps = [logbus.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
                ends = {tp.partition: end for tp, end in probe.end_offsets(tps).items()}
            member.until(cluster, lambda: committed(cluster) == ends, "everything committed")
        finally:
            member.consumer.close()
        result = check(history, member.records)
        assert result.ok, str(result)
        assert result.read == sum(ends.values())
