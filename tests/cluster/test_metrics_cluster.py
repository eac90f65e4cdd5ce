"""The replication metrics of a real cluster (three `logbus server start` processes on a
real ZooKeeper) move with a fault: a follower paused with SIGSTOP makes its leader report
an under-replicated partition and an ISR shrink; resumed, an expand and none
under-replicated; the leader killed, a clean leader election counted by the controller."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import cluster_processes
from cluster_processes import ProcessCluster, free_port
from fault_checks import wait_isr
from prometheus_client.parser import text_string_to_metric_families

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "metered"


def scrape(port: int) -> dict[str, float]:
    """The samples without labels, by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def test_paused_follower_moves_under_replicated_and_isr_metrics(
    zk_connect: str, tmp_path: Path
) -> None:
    ports = {b: free_port() for b in range(3)}
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        per_broker={b: {"metrics.listener": f"http://127.0.0.1:{p}"} for b, p in ports.items()},
        replica_lag_time_max_ms="1000",
        # the paused follower keeps its ZooKeeper session: the leader, not the controller,
        # takes it out of the ISR
        zookeeper_session_timeout_ms="20000",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        leader = cluster.leader_of(TOPIC, 0)
        controller = cluster.controller()
        follower = next(b for b in range(3) if b not in (leader, controller))
        port = ports[leader]
        before = scrape(port)
        assert before["kafka_server_replicamanager_underreplicatedpartitions"] == 0
        assert before["kafka_server_replicamanager_leadercount"] >= 1
        active = sum(
            scrape(p)["kafka_controller_kafkacontroller_activecontrollercount"]
            for p in ports.values()
        )
        assert active == 1
        cluster.pause(follower)
        try:
            # A record the paused follower cannot fetch: a follower at the leader's log end
            # stays in sync however long it is silent (as in Kafka), so without one the
            # leader would leave the ISR alone until the follower's session expired.
            with logbus.Producer(
                bootstrap_servers=cluster.bootstrap_of(leader), acks=1, retries=0
            ) as producer:
                producer.send(TOPIC, b"behind", partition=0)
                producer.flush()
            shrunk = cluster.wait_for(
                lambda: (m := scrape(port))["kafka_server_replicamanager_underreplicatedpartitions"]
                >= 1 and m,
                60,
                "the leader to report the partition under-replicated",
            )
            assert (
                shrunk["kafka_server_replicamanager_isrshrinks_total"]
                > before["kafka_server_replicamanager_isrshrinks_total"]
            )
        finally:
            cluster.resume(follower)
        cluster.wait_for(
            lambda: (m := scrape(port))["kafka_server_replicamanager_underreplicatedpartitions"]
            == 0 and m["kafka_server_replicamanager_isrexpands_total"]
            > before["kafka_server_replicamanager_isrexpands_total"],
            120,
            "the follower back in the ISR and an expand counted",
        )
        assert scrape(port)["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0

        # the leader killed: the (possibly new) controller elects another, a clean election
        cluster.kill(leader)
        live = [b for b in range(3) if b != leader]

        def elected() -> dict[str, float] | None:
            totals: dict[str, float] = {}
            for b in live:
                for name, v in scrape(ports[b]).items():
                    totals[name] = totals.get(name, 0) + v
            count = totals["kafka_controller_controllerstats_leaderelectionrateandtimems_count"]
            return totals if count >= 1 and totals[
                "kafka_controller_kafkacontroller_activecontrollercount"] == 1 else None

        totals = cluster.wait_for(elected, 120, "a leader election counted")
        assert totals["kafka_controller_controllerstats_uncleanleaderelections_total"] == 0
        assert cluster.leader_of(TOPIC, 0, via=live[0]) in live
