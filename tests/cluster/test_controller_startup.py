"""Cluster mode start-up against a real ZooKeeper: registration in Kafka's JSON, and the
starts that must fail with a clear message (ZooKeeper unreachable, broker id taken,
log dirs of another cluster)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from zk_cluster import START_TIMEOUT, ClusterBroker, ZkCluster, cluster_factory, free_port

__all__ = ["cluster_factory"]


def test_registration_znode_and_broker_epoch(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(1, "broker.rack=rack-a")
    broker = cluster.brokers[1]
    data, _ = cluster.store.get("/brokers/ids/1")
    value = json.loads(data)
    assert value["version"] == 5
    assert value["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"]
    assert value["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (value["host"], value["port"], value["rack"]) == ("127.0.0.1", broker.port, "rack-a")
    stat = cluster.store.stat("/brokers/ids/1")
    assert stat.ephemeral_owner != 0
    # the broker epoch is the node's czxid: a restart registers with a larger one
    broker.stop()
    assert not cluster.store.exists("/brokers/ids/1")  # a clean stop deregisters at once
    broker.start()
    cluster.wait_registered({1})
    assert cluster.store.stat("/brokers/ids/1").czxid > stat.czxid
    cluster_id = json.loads(cluster.store.get("/cluster/id")[0])["id"]
    meta = (broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta and "broker.id=1" in meta


def test_unreachable_zookeeper_fails_the_start(tmp_path: Path) -> None:
    broker = ClusterBroker(1, tmp_path / "data", f"127.0.0.1:{free_port()}/x")
    broker.extra = ["zookeeper.connection.timeout.ms=1500"]
    broker.launch()
    # it gives up after its connection timeout (a broker waiting for ZooKeeper forever
    # would not exit: exit_code() fails when the bound, there only to catch that, passes)
    assert broker.exit_code(START_TIMEOUT) != 0
    assert "cannot connect to ZooKeeper at 127.0.0.1:" in broker.output()
    assert "Traceback" not in broker.output()


def test_broker_id_already_registered(cluster_factory: Callable[..., ZkCluster]) -> None:
    cluster = cluster_factory(1)
    twin = ClusterBroker(1, cluster.root / "twin", cluster.zk_connect)
    twin.launch()
    assert twin.exit_code() != 0
    assert "broker id 1 is already registered" in twin.output()
    assert "Traceback" not in twin.output()
    # the first broker is untouched
    assert cluster.brokers[1].metadata().brokers.keys() == {1}


def test_inconsistent_cluster_id_refused(
    cluster_factory: Callable[..., ZkCluster], zookeeper: object
) -> None:
    cluster = cluster_factory(1)
    broker = cluster.brokers[1]
    broker.stop()
    # the same log dir joins another cluster (another chroot: another /cluster/id)
    other = ClusterBroker(1, broker.data_dir, cluster.zk_connect + "-other")
    other.launch()
    assert other.exit_code() != 0
    out = other.output()
    assert "doesn't match stored clusterId" in out and "wrong cluster" in out
    assert "Traceback" not in out
