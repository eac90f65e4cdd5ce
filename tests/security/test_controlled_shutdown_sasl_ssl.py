"""Controlled shutdown on a cluster whose brokers talk to each other only over SASL_SSL
with SCRAM-SHA-512: the stopping broker reaches the controller on the inter-broker
listener with the inter-broker security, first time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cluster_processes import (
    ProcessCluster,
    cluster_zookeeper,  # noqa: F401  (fixture)
    free_port,
    zk_connect,  # noqa: F401  (fixture)
)
from security_support import SCRAM_JAAS, Pki, tls_settings

from logbus.common.security.scram import ScramCredential
from logbus.controller.zookeeper_store import ZooKeeperStore
from logbus.server.security.credential_cache import alter_credentials

pytest_plugins = ["secure_fixtures"]

TOPIC = "secure-rolling"


@pytest.mark.parametrize("whom", ["controller", "not-controller"])
def test_controlled_shutdown_over_sasl_ssl(
    zk_connect: str,  # noqa: F811
    pki: Pki,
    tmp_path: Path,
    whom: str,
) -> None:
    store = ZooKeeperStore(zk_connect, 10_000, 10_000)
    try:
        credential = ScramCredential.from_password("admin-secret", "SCRAM-SHA-512")
        alter_credentials(store, "admin", {"SCRAM-SHA-512": credential}, [])
    finally:
        store.close()
    cluster = ProcessCluster(zk_connect, 3, tmp_path, start=False)
    for node in cluster.nodes.values():
        node.properties.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                f"SASL_SSL://127.0.0.1:{free_port()}",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                "auto.leader.rebalance.enable": "false",
                **tls_settings(pki),
            }
        )
    with cluster:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
        cluster.wait_for(
            lambda: all(len(cluster.partition_state(TOPIC, p)["isr"]) == 3 for p in range(3)),
            60,
            "every replica in sync",
        )
        controller = cluster.controller()
        assert controller is not None
        victim = controller if whom == "controller" else (controller + 1) % 3
        assert cluster.terminate(victim) == 0
        log = (tmp_path / f"broker-{victim}.log").read_text()
        assert "controlled shutdown succeeded" in log
        assert "controlled shutdown attempt" not in log
        for p in range(3):
            state = cluster.partition_state(TOPIC, p)
            assert state["leader"] != victim and victim not in state["isr"], json.dumps(state)
