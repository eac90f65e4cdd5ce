"""Fault test (issue 14, scenario e): unclean leader election both ways, on three
`logbus server start` processes, rf=3, min.insync.replicas=1, with the checker.

Both followers die; the leader alone (the whole ISR) acknowledges acks=all writes; then it
dies too. Only an out-of-ISR replica comes back: with unclean.leader.election.enable=false
the partition stays offline (leader none); enabled dynamically on the topic (AlterConfigs
through a broker), that replica is elected. Lost are exactly the writes only the dead
leader had (the loss the setting accepts); the old replicas return, truncate to the new
leader's log and rejoin; the checker is otherwise clean.
"""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from checker import History, Outcome
from cluster_processes import ProcessCluster
from fault_checks import produce_one, read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "unclean"
UNCLEAN = "unclean.leader.election.enable"


@pytest.mark.timeout(300)
def test_unclean_election_off_keeps_the_partition_offline_on_elects_and_loses_only_that(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        history = History()
        load_config = {"acks": "all", "enable_idempotence": True}
        with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
            load.wait_acknowledged(100)  # on all three replicas
        leader = cluster.leader_of(TOPIC, 0)
        out_of_sync, other = sorted({0, 1, 2} - {leader})
        cluster.kill(out_of_sync)
        cluster.kill(other)
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["isr"] == [leader],
            60,
            "the ISR to shrink to the leader",
        )
        # acks=all with the ISR down to the leader: acknowledged by it alone
        only_leader = [history.send("only-leader", TOPIC, durable=False) for _ in range(5)]
        for send in only_leader:
            produce_one(cluster.bootstrap, TOPIC, send, acks="all")
            assert send.outcome is Outcome.OK, send
        cluster.kill(leader)  # the last broker: no controller is left to notice

        # only the out-of-sync replica comes back and becomes the controller: the leader
        # is gone, and with unclean election off the out-of-sync replica may not lead
        cluster.start_broker(out_of_sync)
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["leader"] == -1, 60, "the partition offline"
        )
        cluster.wait_for(
            lambda: out_of_sync in cluster.broker_ids(via=out_of_sync),
            60,
            "the controller to announce the returned broker",
        )
        # a barrier: the controller handles events in order, so once a topic created now
        # exists, its handling of the broker's return (and any election) is over
        cluster.create_topic("barrier", partitions=1, replication_factor=1)
        state = cluster.partition_state(TOPIC, 0)
        assert (state["leader"], state["isr"]) == (-1, [leader])
        assert cluster.leader_of(TOPIC, 0) == -1
        offline_epoch = state["leader_epoch"]

        # enabled on the topic, dynamically: the out-of-sync replica is elected
        with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
            resource = logbus.ConfigResource(logbus.ResourceType.TOPIC, TOPIC)
            admin.incremental_alter_configs({resource: [logbus.AlterConfigOp(UNCLEAN, "true")]})
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["leader"] == out_of_sync,
            60,
            "the out-of-sync replica elected",
        )
        state = cluster.partition_state(TOPIC, 0)
        assert state["isr"] == [out_of_sync] and state["leader_epoch"] > offline_epoch

        # the others return, truncate to the new leader's log and rejoin the ISR
        with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
            load.wait_acknowledged(history.count(Outcome.OK) + 100)
            cluster.start_broker(leader)
            cluster.start_broker(other)
            wait_isr(cluster, TOPIC, 1)
            load.wait_acknowledged(history.count(Outcome.OK) + 100)
        assert not load.errors, load.errors
        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)
        assert sorted(lost.send.value for lost in result.lost_allowed) == sorted(
            s.value for s in only_leader
        )
        wait_identical_logs(cluster, TOPIC, 0)
