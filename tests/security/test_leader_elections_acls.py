"""With the ACL authorizer: ElectLeaders needs Alter on the cluster and ControlledShutdown
ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka's."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from security_support import ADMIN_JAAS, plain

from logbus.cli.common import security_of
from logbus.client.connection import Connection
from logbus.client.requests.leader_elections import controlled_shutdown
from logbus.protocol import ErrorCode

pytest_plugins = ["secure_fixtures"]

TIMEOUT = 30


def elect(config: dict[str, Any], topic: str) -> int:
    admin = AdminClient({**config, "log_level": 0})
    try:
        results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
        error = results.result(TIMEOUT)[TopicPartition(topic, 0)]
    except KafkaException as exc:
        return int(exc.args[0].code())
    return KafkaError.NO_ERROR if error is None else int(error.code())


async def shutdown_code(config: dict[str, Any]) -> ErrorCode:
    host, port = config["bootstrap.servers"].rsplit(":", 1)
    security = security_of({k: v for k, v in config.items() if k != "bootstrap.servers"})
    conn = await Connection.connect(host, int(port), security=security)
    try:
        return (await controlled_shutdown(conn, 0, -1)).error
    finally:
        await conn.close()


def cli(config: dict[str, Any], topic: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`logbus leader-election` as `config`'s user, its settings in --command-config."""
    properties = tmp_path / "client.properties"
    properties.write_text(
        "".join(f"{k}={v}\n" for k, v in config.items() if k != "bootstrap.servers")
    )
    return subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "leader-election",
         "--bootstrap-server", config["bootstrap.servers"], "--command-config", str(properties),
         "--election-type", "PREFERRED", "--topic", topic, "--partition", "0"],
        capture_output=True, text=True, encoding="utf-8", timeout=60, check=False,
    )  # fmt: skip


def test_elections_need_alter_and_controlled_shutdown_cluster_action(
    secure_broker: Any, tmp_path: Path
) -> None:
    running = secure_broker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        }
    )
    admin_config = plain(running, "admin", "admin-secret")
    admin = AdminClient(admin_config)
    topic = f"elect-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    alice = plain(running, "alice", "alice-secret")
    assert elect(alice, topic) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    refused = cli(alice, topic, tmp_path)
    # The request-level error fails the whole call, as Kafka's admin does.
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    code = asyncio.run(asyncio.wait_for(shutdown_code(alice), TIMEOUT))
    assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                       "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    admin.create_acls([grant])[grant].result(TIMEOUT)

    def allowed() -> bool:
        return elect(alice, topic) == KafkaError.ELECTION_NOT_NEEDED

    deadline = TIMEOUT
    while not allowed():
        deadline -= 0.2
        assert deadline > 0, "the grant never took effect"
        time.sleep(0.2)
    allowed_cli = cli(alice, topic, tmp_path)
    assert allowed_cli.returncode == 0, allowed_cli.stderr
    assert allowed_cli.stdout.splitlines() == [
        f"Valid replica already elected for partitions {topic}-0"
    ]
    # Alter is not ClusterAction.
    code = asyncio.run(asyncio.wait_for(shutdown_code(alice), TIMEOUT))
    assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
