"""One combined KRaft node (`process.roles=broker,controller`, the only voter) in the test
process: the admin requests a broker forwards to the active controller take effect in the
broker through its metadata image (topics created, grown, reconfigured and deleted;
client quotas, SCRAM credentials and dynamic broker configs the broker then enforces),
producer ids come from the controller, and a restarted node serves what it had."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acl_helpers import ADMIN, ALICE, SECURED, acl, acl_filter, assign_principals, call, grant

import logbus
from brokers import RunningBroker
from kafka_wire import split_bootstrap, wait_for
from logbus.client.admin.quota_types import ClientQuotaEntity
from logbus.client.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation, AclPermissionType, PatternType
from logbus.protocol.acl_types import ResourceType as AclResourceType
from logbus.server.kraft.kraft_broker import KRaftBroker
from logbus.storage.formatter import format_directories, random_uuid
from ports import free_port

WAIT = 30.0


def start_node(tmp_path: Path, **extra: str) -> RunningBroker:
    """A combined node 0, the only voter, on freshly formatted storage, started."""
    controller_port = free_port()
    data = tmp_path / "node-0"
    format_directories([str(data)], str(data), cluster_id=random_uuid(), node_id=0)
    running = RunningBroker(
        data,
        {
            "process.roles": "broker,controller",
            "node.id": "0",
            "controller.quorum.voters": f"0@127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_port}",
            "offsets.topic.replication.factor": "1",
            "broker.heartbeat.interval.ms": "200",
            "controller.quorum.election.timeout.ms": "300",
            **extra,
        },
        node=KRaftBroker,
    )
    return running.start()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[RunningBroker]:
    running = start_node(tmp_path)
    yield running
    running.stop()


def kraft_broker(node: RunningBroker) -> KRaftBroker:
    assert isinstance(node.broker, KRaftBroker)
    return node.broker


def until(predicate: Callable[[], Any], what: str) -> None:
    wait_for(predicate, WAIT, what=what)


def test_forwarded_topic_changes_reach_the_broker_through_its_image(node: RunningBroker) -> None:
    broker = kraft_broker(node)
    with logbus.Admin(bootstrap_servers=node.bootstrap) as admin:
        cluster = admin.describe_cluster()
        assert [n.node_id for n in cluster.nodes] == [0]
        assert cluster.controller is not None and cluster.controller.node_id == 0
        admin.create_topics([logbus.NewTopic("orders", 2, 1)])
        until(lambda: broker.replica_manager.partition("orders", 1) is not None, "orders led")
        admin.create_partitions({"orders": 3})
        until(lambda: broker.replica_manager.partition("orders", 2) is not None, "a third")
        assert len(admin.describe_topics(["orders"])["orders"].partitions) == 3
        resource = ConfigResource(ResourceType.TOPIC, "orders")
        admin.incremental_alter_configs(
            {resource: [AlterConfigOp("retention.ms", "60000", AlterConfigOpType.SET)]}
        )

        def retention() -> int:
            part = broker.replica_manager.partition("orders", 0)
            return part.log.config.retention_ms if part is not None else -1

        until(lambda: retention() == 60000, "the topic config applied to its logs")
        described = admin.describe_configs([resource])[resource]["retention.ms"]
        assert (described.value, described.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        admin.delete_topics(["orders"])
        until(lambda: broker.replica_manager.partition("orders", 0) is None, "orders stopped")
        assert "orders" not in admin.list_topics()
        with pytest.raises(logbus.KafkaError):  # the controller's answer: one broker for rf 3
            admin.create_topics([logbus.NewTopic("bad", 1, 3)])


def test_api_versions_leave_out_zookeeper_mode_apis(node: RunningBroker) -> None:
    async def versions() -> dict[int, tuple[int, int]]:
        host, port = split_bootstrap(node.bootstrap)
        conn = await Connection.connect(host, port)
        try:
            return dict(conn.api_versions)
        finally:
            await conn.close()

    advertised = asyncio.run(versions())
    for gone in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA,
                 ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION):  # fmt: skip
        assert gone not in advertised
    assert advertised[ApiKey.CREATE_TOPICS][1] == 7  # as far as the controller serves
    assert ApiKey.FETCH in advertised and ApiKey.INIT_PRODUCER_ID in advertised


def test_idempotent_records_and_a_restart(node: RunningBroker) -> None:
    with logbus.Producer(bootstrap_servers=node.bootstrap, enable_idempotence=True) as producer:
        for i in range(50):
            producer.send("events", b"%d" % i)  # auto-created through the controller
        producer.flush()
    node.restart()
    with logbus.Consumer(
        bootstrap_servers=node.bootstrap, auto_offset_reset="earliest", group_id="readers"
    ) as consumer:
        consumer.subscribe(["events"])
        values: list[bytes] = []
        until(lambda: values.extend(r.value for r in consumer.poll(0.5)) or len(values) >= 50,
              "every record read back after the restart")  # fmt: skip
    assert sorted(values, key=int) == [b"%d" % i for i in range(50)]


def test_quotas_credentials_and_broker_configs_follow_the_image(node: RunningBroker) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = kraft_broker(node)
    with logbus.Admin(bootstrap_servers=node.bootstrap) as admin:
        admin.alter_client_quotas(
            {ClientQuotaEntity.of({"user": "alice"}): {"producer_byte_rate": 1024.0}}
        )
        until(lambda: broker.quotas.enabled, "alice's quota in the broker")
        assert list(broker.quotas.configs.values()) == [{"producer_byte_rate": 1024.0}]
        assert admin.describe_client_quotas() == {
            ClientQuotaEntity.of({"user": "alice"}): {"producer_byte_rate": 1024.0}
        }
        admin.incremental_alter_configs(
            {
                ConfigResource(ResourceType.BROKER, ""): [
                    AlterConfigOp("log.retention.ms", "123456", AlterConfigOpType.SET)
                ]
            }
        )
        until(lambda: broker.config.get("log.retention.ms") == 123456, "the broker default")
        default = ConfigResource(ResourceType.BROKER, "")
        described = admin.describe_configs([default])[default]["log.retention.ms"]
        assert described.value == "123456"
    confluent = AdminClient({"bootstrap.servers": node.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret"
    )
    for future in confluent.alter_user_scram_credentials([upsert]).values():
        future.result(WAIT)
    until(lambda: broker.credentials.get("bob", "SCRAM-SHA-256") is not None, "bob's login")
    described = confluent.describe_user_scram_credentials(["bob"])["bob"].result(WAIT)
    assert [info.iterations for info in described.scram_credential_infos] == [4096]


def new_topic(name: str) -> dict[str, Any]:
    return {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": []}  # fmt: skip


def test_acls_from_the_image_authorize_what_the_broker_forwards(tmp_path: Path) -> None:
    running = start_node(tmp_path, **{k.replace("_", "."): v for k, v in SECURED.items()})
    try:
        assign_principals(running)
        bootstrap = running.bootstrap
        broker = kraft_broker(running)
        prefix = acl(AclResourceType.TOPIC, "a-", AclOperation.CREATE, pattern=PatternType.PREFIXED)
        grant(bootstrap, prefix)  # forwarded by the super user
        until(lambda: broker.authorizer is not None and broker.authorizer.bindings(),
              "the ACL in the broker's image")  # fmt: skip
        described = call(bootstrap, ADMIN, ApiKey.DESCRIBE_ACLS, acl_filter())
        assert [r["resource_name"] for r in described["resources"]] == ["a-"]
        body = {"topics": [new_topic("a-1"), new_topic("b-1")], "timeout_ms": 10_000,
                "validate_only": False}  # fmt: skip
        answer = call(bootstrap, ALICE, ApiKey.CREATE_TOPICS, body)
        codes = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert codes == {"a-1": ErrorCode.NONE, "b-1": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        until(lambda: broker.replica_manager.partition("a-1", 0) is not None, "a-1 created")
        assert "b-1" not in broker.metadata_cache.topics
        creation = {"resource_type": AclResourceType.TOPIC, "resource_name": "x",
                    "resource_pattern_type": PatternType.LITERAL, "principal": ALICE,
                    "host": "*", "operation": AclOperation.ALL,
                    "permission_type": AclPermissionType.ALLOW}  # fmt: skip
        refused = call(bootstrap, ALICE, ApiKey.CREATE_ACLS, {"creations": [creation]})
        assert refused["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert len(broker.authorizer.bindings()) == 1  # type: ignore[union-attr]
        # alice may create a-1 but not grow, reconfigure or delete it, nor broker configs
        grown = call(bootstrap, ALICE, ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": "a-1", "count": 2, "assignments": None}],
            "timeout_ms": 10_000, "validate_only": False,
        })  # fmt: skip
        assert grown["results"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        configs = call(bootstrap, ALICE, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
            "resources": [
                {"resource_type": 2, "resource_name": "a-1", "configs": []},
                {"resource_type": 4, "resource_name": "", "configs": []},
            ],
            "validate_only": False,
        })  # fmt: skip
        assert sorted(r["error_code"] for r in configs["responses"]) == sorted(
            [ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        )
        deleted = call(bootstrap, ALICE, ApiKey.DELETE_TOPICS,
                       {"topic_names": ["a-1"], "timeout_ms": 10_000}, 5)  # fmt: skip
        assert deleted["responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        # the super user's delete passes
        deleted = call(bootstrap, ADMIN, ApiKey.DELETE_TOPICS,
                       {"topic_names": ["a-1"], "timeout_ms": 10_000}, 5)  # fmt: skip
        assert deleted["responses"][0]["error_code"] == ErrorCode.NONE
        until(lambda: broker.replica_manager.partition("a-1", 0) is None, "a-1 deleted")
    finally:
        running.stop()
