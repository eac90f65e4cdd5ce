"""A 3-broker cluster whose brokers talk to each other over SASL_SSL with SCRAM-SHA-512
(replica fetchers, the controller channel, AlterPartition, all on the inter-broker
listener): the brokers' own credential is created in ZooKeeper before they start, as
`kafka-configs --zookeeper` does; a client authenticated with SCRAM produces with
acks=all to a topic replicated three times and reads it back."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from cluster_processes import (
    ProcessCluster,
    cluster_zookeeper,  # noqa: F401  (fixture)
    free_port,
    zk_connect,  # noqa: F401  (fixture)
)
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from security_support import SCRAM_JAAS, Pki, tls_settings

from logbus.common.security.scram import ScramCredential
from logbus.controller.zookeeper_store import ZooKeeperStore
from logbus.server.security.credential_cache import alter_credentials

pytest_plugins = ["secure_fixtures"]

TIMEOUT = 60


def test_three_brokers_on_sasl_ssl_end_to_end(zk_connect: str, pki: Pki, tmp_path: Path) -> None:  # noqa: F811
    store = ZooKeeperStore(zk_connect, 10_000, 10_000)
    try:
        admin_credential = ScramCredential.from_password("admin-secret", "SCRAM-SHA-512")
        alter_credentials(store, "admin", {"SCRAM-SHA-512": admin_credential}, [])
    finally:
        store.close()
    cluster = ProcessCluster(zk_connect, 3, tmp_path, start=False)
    secure_ports: dict[int, int] = {}
    for broker_id, node in cluster.nodes.items():
        secure_ports[broker_id] = port = free_port()
        node.properties.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_SSL://127.0.0.1:{port}",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                "min.insync.replicas": "2",
                **tls_settings(pki),
            }
        )
    with cluster:
        cluster.start()
        plain = AdminClient({"bootstrap.servers": cluster.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        for future in plain.alter_user_scram_credentials([upsert]).values():
            future.result(TIMEOUT)
        secure = {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in secure_ports.values()),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca.cert_file),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        topic = f"secure-{uuid.uuid4().hex[:6]}"
        secure_admin = AdminClient(secure)
        secure_admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(TIMEOUT)
        cluster.wait_for(
            lambda: all(len(cluster.isr_of(topic, p)) == 3 for p in (0, 1)),
            TIMEOUT,
            "every replica in sync over SASL_SSL",
        )
        producer = Producer({**secure, "acks": "all", "enable.idempotence": True})
        for i in range(100):
            producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
        assert producer.flush(TIMEOUT) == 0
        consumer = Consumer({**secure, "group.id": "g", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            seen: set[bytes] = set()
            deadline = time.monotonic() + TIMEOUT
            while len(seen) < 100 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.add(message.value())
        finally:
            consumer.close()
        assert seen == {f"v{i}".encode() for i in range(100)}
        # the followers replicated every record: each replica's log end is the same
        assert all(len(cluster.isr_of(topic, p)) == 3 for p in (0, 1))
