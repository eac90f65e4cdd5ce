"""Controller election and failover with three `logbus server start` processes and a real
ZooKeeper: one controller, a new one with a bumped epoch after kill -9, new partition
leaders from the ISR, unclean election both ways, and a zombie controller (SIGSTOP past
its session) that comes back and resigns."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from zk_cluster import SESSION_TIMEOUT_MS, ZkCluster, cluster_factory, wait_for

from logbus.controller.config_store import BROKER, DEFAULT_ENTITY, change_entity_config

__all__ = ["cluster_factory"]

FAILOVER_TIMEOUT = SESSION_TIMEOUT_MS / 1000 + 20  # the session must expire first


def create(cluster: ZkCluster, name: str, partitions: int, rf: int, **configs: str) -> None:
    admin = cluster.admin()  # kept referenced until answered
    futures = admin.create_topics(
        [NewTopic(name, partitions, rf, config=configs)], request_timeout=20
    )
    futures[name].result(30)


def leaders_everywhere(cluster: ZkCluster, topic: str, partitions: int) -> dict[int, int]:
    """The leaders every live broker reports, once they all report the same ones."""

    def agreed() -> dict[int, int] | None:
        seen = []
        for broker in cluster.brokers.values():
            if broker.proc is None or broker.proc.poll() is not None:
                continue
            meta = broker.metadata(topic).topics.get(topic)
            if meta is None or meta.error is not None or len(meta.partitions) != partitions:
                return None
            seen.append({p: meta.partitions[p].leader for p in meta.partitions})
        return seen[0] if all(s == seen[0] for s in seen) else None

    return wait_for(agreed, 30, f"every broker to know the leaders of {topic}")


def test_one_controller_then_a_new_one_after_kill(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3)
    controller, epoch = cluster.wait_controller()
    assert controller in (1, 2, 3) and epoch >= 1
    cluster.brokers[controller].kill()
    new_controller, new_epoch = wait_for(
        lambda: (c := cluster.controller())[0] not in (-1, controller) and c,
        FAILOVER_TIMEOUT,
        "a new controller",
    )
    assert new_epoch == epoch + 1
    assert cluster.wait_controller() == (new_controller, new_epoch)
    # the survivors' metadata no longer lists the dead broker
    for broker_id in {1, 2, 3} - {controller}:
        wait_for(
            lambda b=broker_id: (
                set(cluster.brokers[b].metadata().brokers) == {1, 2, 3} - {controller}
            ),
            30,
            "the dead broker to leave the metadata",
        )


def test_killed_leader_replaced_from_the_isr(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(3)
    cluster.wait_controller()
    create(cluster, "orders", 3, 3)
    leaders = leaders_everywhere(cluster, "orders", 3)
    before = cluster.state("orders", 0)
    assert sorted(before["isr"]) == [1, 2, 3] and before["leader"] == leaders[0]
    victim = leaders[0]
    cluster.brokers[victim].kill()
    after = wait_for(
        lambda: (s := cluster.state("orders", 0))["leader"] not in (victim, -1) and s,
        FAILOVER_TIMEOUT,
        "a new leader of orders-0",
    )
    assert after["leader"] in before["isr"]
    assert victim not in after["isr"]
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    # every partition has a live leader, and the survivors agree on it
    moved = leaders_everywhere(cluster, "orders", 3)
    assert victim not in moved.values() and -1 not in moved.values()


@pytest.mark.parametrize("scope", ["topic", "cluster-wide"])
def test_unclean_leader_election_both_ways(
    cluster_factory: Callable[..., ZkCluster], scope: str
) -> None:
    cluster = cluster_factory(3)
    controller, _ = cluster.wait_controller()
    a, b = sorted({1, 2, 3} - {controller})
    admin = cluster.admin()
    futures = admin.create_topics(
        [NewTopic("ledger", 1, replica_assignment=[[a, b]])], request_timeout=20
    )
    futures["ledger"].result(30)
    wait_for(lambda: cluster.state("ledger", 0)["leader"] == a, 30, "a to lead ledger-0")
    # b dies: it leaves the ISR; then a dies: nobody in the ISR is alive
    cluster.brokers[b].kill()
    wait_for(lambda: cluster.state("ledger", 0)["isr"] == [a], FAILOVER_TIMEOUT, "ISR [a]")
    cluster.brokers[a].kill()
    offline = wait_for(
        lambda: (s := cluster.state("ledger", 0))["leader"] == -1 and s,
        FAILOVER_TIMEOUT,
        "ledger-0 offline",
    )
    assert offline["isr"] == [a]
    # b comes back (out of sync): with unclean election disabled it may not lead
    wait_for(lambda: b not in cluster.registered(), FAILOVER_TIMEOUT, "b's session to expire")
    cluster.brokers[b].start()
    cluster.wait_registered({controller, b})
    time.sleep(1)  # give a wrong election every chance to happen
    assert cluster.state("ledger", 0)["leader"] == -1
    meta = cluster.brokers[controller].metadata("ledger").topics["ledger"].partitions[0]
    assert meta.leader == -1
    # enabling it, dynamically (on the topic through any broker, or cluster-wide), elects b
    entry = ConfigEntry(
        "unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET
    )
    if scope == "topic":
        resource = ConfigResource("topic", "ledger", incremental_configs=[entry])
        admin = cluster.admin()
        admin.incremental_alter_configs([resource])[resource].result(30)
    else:
        # the brokers' dynamic default, written as `kafka-configs.sh --zookeeper` did
        change_entity_config(
            cluster.store, BROKER, DEFAULT_ENTITY, {"unclean.leader.election.enable": "true"}
        )
    elected = wait_for(
        lambda: (s := cluster.state("ledger", 0))["leader"] == b and s, 30, "b to lead"
    )
    assert elected["isr"] == [b]
    assert elected["leader_epoch"] > offline["leader_epoch"]


def test_zombie_controller_resigns(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(3)
    zombie, epoch = cluster.wait_controller()
    create(cluster, "events", 2, 3)
    leaders_everywhere(cluster, "events", 2)
    cluster.brokers[zombie].signal(signal.SIGSTOP)
    new_controller, new_epoch = wait_for(
        lambda: (c := cluster.controller())[0] not in (-1, zombie) and c,
        FAILOVER_TIMEOUT,
        "a new controller while the old one is paused",
    )
    assert new_epoch == epoch + 1
    cluster.brokers[zombie].signal(signal.SIGCONT)
    # the zombie notices its session expired, registers again and stays a follower
    wait_for(lambda: zombie in cluster.registered(), FAILOVER_TIMEOUT, "zombie registered")
    assert cluster.wait_controller() == (new_controller, new_epoch)
    log = cluster.brokers[zombie].output()
    assert "resigns as controller" in log
    # the cluster still works: a topic created now gets leaders on every broker
    create(cluster, "after", 3, 3)
    assert -1 not in leaders_everywhere(cluster, "after", 3).values()
    for p in range(2):
        assert cluster.state("events", p)["controller_epoch"] <= new_epoch


def test_zombie_leader_comes_back_as_a_follower(
    cluster_factory: Callable[..., ZkCluster],
) -> None:
    cluster = cluster_factory(3)
    controller, _ = cluster.wait_controller()
    a, b = sorted({1, 2, 3} - {controller})
    admin = cluster.admin()
    admin.create_topics([NewTopic("led", 1, replica_assignment=[[a, b, controller]])])[
        "led"
    ].result(30)
    before = wait_for(
        lambda: (s := cluster.state("led", 0))["leader"] == a and len(s["isr"]) == 3 and s,
        30,
        "a to lead with the full ISR",
    )
    cluster.brokers[a].signal(signal.SIGSTOP)
    moved = wait_for(
        lambda: (s := cluster.state("led", 0))["leader"] not in (a, -1) and s,
        FAILOVER_TIMEOUT,
        "a new leader while a is paused",
    )
    assert a not in moved["isr"] and moved["leader_epoch"] > before["leader_epoch"]
    cluster.brokers[a].signal(signal.SIGCONT)
    wait_for(lambda: a in cluster.registered(), FAILOVER_TIMEOUT, "a registered again")
    # a is a follower now, and tells clients so: every broker names the new leader
    assert leaders_everywhere(cluster, "led", 1)[0] == moved["leader"]
    assert cluster.state("led", 0)["leader"] == moved["leader"]
