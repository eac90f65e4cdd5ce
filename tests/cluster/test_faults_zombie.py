"""Fault test (issue 14, scenario f): a zombie controller that is also a zombie leader, on
three `logbus server start` processes, rf=3, min.insync.replicas=2, with the checker.

The broker that is both the controller and the partition's leader is paused (SIGSTOP)
past zookeeper.session.timeout.ms while an acks=all idempotent load runs and a producer
that knows only it keeps sending to it. The cluster moves on (a new controller with a
bumped epoch, a new leader); on SIGCONT the zombie acknowledges nothing it received as a
deposed leader, requests stamped with its old controller epoch are refused
(STALE_CONTROLLER_EPOCH), and it rejoins as a follower with an identical log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import cluster_processes
import pytest
from checker import History, Outcome
from cluster_processes import ProcessCluster
from fault_checks import read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad

import logbus
from logbus.client.connection import Connection
from logbus.client.requests.controller import ControlHeader, ControlResult, update_metadata
from logbus.protocol import ErrorCode

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "zombie"


def stale_update_metadata(port: int, controller_id: int, epoch: int) -> ControlResult:
    """An (empty) UpdateMetadata stamped with `epoch`, sent to the broker on `port`."""

    async def send() -> ControlResult:
        conn = await Connection.connect("127.0.0.1", port)
        try:
            return await update_metadata(conn, ControlHeader(controller_id, epoch), [], [])
        finally:
            await conn.close()

    return asyncio.run(send())


@pytest.mark.timeout(300)
def test_zombie_controller_and_leader_acknowledge_nothing_and_rejoin_as_follower(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        zombie = cluster.wait_for(lambda: (c := cluster.controller()) is not None and (c,), 60)[0]
        others = sorted({0, 1, 2} - {zombie})
        with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics([logbus.NewTopic(TOPIC, replica_assignment={0: [zombie, *others]})])
        cluster.wait_for(lambda: cluster.leader_of(TOPIC, 0) == zombie, 60, "the zombie leading")
        wait_isr(cluster, TOPIC, 1)
        old_epoch = cluster.controller_epoch()
        history = History()
        # a request to the paused leader is given up after request.timeout.ms: short, so
        # that the load moves to the new leader soon
        load_config = {"acks": "all", "enable_idempotence": True, "request_timeout_ms": 5000}
        with (
            ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load,
            logbus.Producer(
                bootstrap_servers=cluster.bootstrap_of(zombie),
                acks="all",
                enable_idempotence=False,
                retries=0,
                request_timeout_ms=60000,
                delivery_timeout_ms=120000,
            ) as to_zombie,
        ):
            load.wait_acknowledged(100)
            warm = history.send("to-zombie", TOPIC, partition=0)
            warm.record_future(to_zombie.send(TOPIC, warm.value, partition=0))
            to_zombie.flush()
            assert warm.outcome is Outcome.OK, warm
            cluster.pause(zombie)
            # sent to the paused leader: they wait in its socket until it runs again
            late = [history.send("to-zombie", TOPIC, partition=0) for _ in range(5)]
            for send in late:
                send.record_future(to_zombie.send(TOPIC, send.value, partition=0))
            cluster.wait_for(
                lambda: cluster.controller() not in (None, zombie), 60, "a new controller"
            )
            assert cluster.controller_epoch() > old_epoch
            cluster.wait_for(
                lambda: cluster.partition_state(TOPIC, 0)["leader"] in others, 60, "a new leader"
            )
            load.wait_acknowledged(load.acknowledged() + 100)
            cluster.resume(zombie)
            to_zombie.flush()
            # the deposed leader acknowledged none of what it received while deposed
            assert [s.outcome for s in late] == [Outcome.UNKNOWN] * len(late), late
            # it lost the controllership and rejoins as a follower
            cluster.wait_for(lambda: cluster.registered(zombie), 60, "the zombie registered")
            wait_isr(cluster, TOPIC, 1)
            assert cluster.leader_of(TOPIC, 0) in others
            assert cluster.controller() != zombie
            load.wait_acknowledged(load.acknowledged() + 100)
        assert not load.errors, load.errors
        # requests of the old controller epoch are refused, the zombie's own included
        for broker in range(3):
            result = stale_update_metadata(cluster.nodes[broker].port, zombie, old_epoch)
            assert result.error == ErrorCode.STALE_CONTROLLER_EPOCH, (broker, result)
        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)
        wait_identical_logs(cluster, TOPIC, 0)
        assert "resigns as controller" in cluster.nodes[zombie].log_tail(100_000)
