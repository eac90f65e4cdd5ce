"""ACLs end to end: the ACL APIs (and the logbus Admin's calls for them), Deny over Allow,
prefixed patterns, super users, allow.everyone.if.no.acl.found, hidden topics and groups,
refused bad input, ACLs surviving a restart and reaching every broker of a cluster, and
real clients refused without ACLs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from acl_helpers import (
    ADMIN,
    ALICE,
    SECURED,
    acl,
    acl_filter,
    assign_principals,
    call,
    create_topic,
    grant,
    secured,
)
from kafka import KafkaProducer  # type: ignore[import-untyped]
from kafka.errors import TopicAuthorizationFailedError  # type: ignore[import-untyped]
from wire import batch

import logbus
from logbus.client.admin import AclBinding, AclBindingFilter, AdminBatchError
from logbus.common.config_def import ConfigError
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation as Op
from logbus.protocol.acl_types import AclPermissionType, PatternType
from logbus.protocol.acl_types import ResourceType as R
from logbus.server.config.broker_config import BrokerConfig

DENY = AclPermissionType.DENY
E = ErrorCode


def produce(bootstrap: str, principal: str, topic: str) -> int:
    body = {
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch(b"v")}]}],
    }
    r = call(bootstrap, principal, ApiKey.PRODUCE, body)
    code: int = r["responses"][0]["partition_responses"][0]["error_code"]
    return code


def creation(binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding
    return {
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "resource_pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }


def all_acls(bootstrap: str) -> list[tuple[str, str, int]]:
    r = call(bootstrap, ADMIN, ApiKey.DESCRIBE_ACLS, acl_filter())
    assert r["error_code"] == 0, r
    return sorted(
        (x["resource_name"], a["principal"], a["operation"])
        for x in r["resources"]
        for a in x["acls"]
    )


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_deny_overrides_allow_and_prefixed_acls(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    for topic in ("orders-eu", "orders-us", "other"):
        create_topic(bootstrap, topic)
    grant(bootstrap, acl(R.TOPIC, "orders-", Op.WRITE, pattern=PatternType.PREFIXED))
    assert produce(bootstrap, ALICE, "orders-eu") == E.NONE
    assert produce(bootstrap, ALICE, "orders-us") == E.NONE
    assert produce(bootstrap, ALICE, "other") == E.TOPIC_AUTHORIZATION_FAILED
    grant(bootstrap, acl(R.TOPIC, "orders-us", Op.ALL, permission=DENY))
    assert produce(bootstrap, ALICE, "orders-us") == E.TOPIC_AUTHORIZATION_FAILED
    assert produce(bootstrap, ALICE, "orders-eu") == E.NONE
    # a super user passes whatever the ACLs say; an anonymous client is refused
    assert produce(bootstrap, ADMIN, "orders-us") == E.NONE
    assert produce(bootstrap, "anonymous", "orders-eu") == E.TOPIC_AUTHORIZATION_FAILED


def test_hosts_in_acls(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "t")
    grant(bootstrap, acl(R.TOPIC, "t", Op.WRITE, host="10.9.9.9"))
    assert produce(bootstrap, ALICE, "t") == E.TOPIC_AUTHORIZATION_FAILED
    grant(bootstrap, acl(R.TOPIC, "t", Op.WRITE, host="127.0.0.1"))
    assert produce(bootstrap, ALICE, "t") == E.NONE


def test_allow_everyone_if_no_acl_found(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory, allow_everyone_if_no_acl_found="true").bootstrap
    create_topic(bootstrap, "open")
    create_topic(bootstrap, "closed")
    grant(bootstrap, acl(R.TOPIC, "closed", Op.READ, principal="User:bob"))
    assert produce(bootstrap, ALICE, "open") == E.NONE
    assert produce(bootstrap, ALICE, "closed") == E.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics_the_principal_may_not_describe(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    for topic in ("seen", "hidden"):
        create_topic(bootstrap, topic)
    grant(bootstrap, acl(R.TOPIC, "seen", Op.READ))  # Read implies Describe

    def listed(principal: str) -> set[str]:
        r = call(bootstrap, principal, ApiKey.METADATA, {"topics": None})
        return {t["name"] for t in r["topics"]}

    assert listed(ALICE) == {"seen"}
    assert {"seen", "hidden"} <= listed(ADMIN)
    # auto-creation needs Create: refused without it, nothing created
    body = {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True}
    grant(bootstrap, acl(R.TOPIC, "auto", Op.DESCRIBE))
    r = call(bootstrap, ALICE, ApiKey.METADATA, body)
    assert r["topics"][0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    assert "auto" not in listed(ADMIN)
    grant(bootstrap, acl(R.TOPIC, "auto", Op.CREATE))
    eventually(
        lambda: call(bootstrap, ALICE, ApiKey.METADATA, body)["topics"][0]["error_code"] == 0
    )


def test_authorized_operations_follow_the_acls(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "t")
    grant(bootstrap, acl(R.TOPIC, "t", Op.READ), acl(R.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    body = {
        "topics": [{"name": "t"}],
        "include_topic_authorized_operations": True,
        "include_cluster_authorized_operations": True,
    }
    r = call(bootstrap, ALICE, ApiKey.METADATA, body, version=10)
    assert r["topics"][0]["topic_authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert r["cluster_authorized_operations"] == 1 << Op.DESCRIBE
    cluster = call(
        bootstrap,
        "User:bob",
        ApiKey.DESCRIBE_CLUSTER,
        {"include_cluster_authorized_operations": True},
    )
    assert cluster["error_code"] == 0 and cluster["cluster_authorized_operations"] == 0
    grant(bootstrap, acl(R.GROUP, "g", Op.DESCRIBE))
    query = {"groups": ["g"], "include_authorized_operations": True}
    groups = call(bootstrap, ALICE, ApiKey.DESCRIBE_GROUPS, query, 3)["groups"]
    assert groups[0]["authorized_operations"] == 1 << Op.DESCRIBE


def test_list_groups_shows_only_described_groups(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "t")
    for group in ("mine", "theirs"):
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}
                    ],
                }
            ],
        }

        def committed(body: dict[str, Any] = body, group: str = group) -> bool:
            call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
            r = call(bootstrap, ADMIN, ApiKey.OFFSET_COMMIT, body, version=8)
            return bool(r["topics"][0]["partitions"][0]["error_code"] == 0)

        eventually(committed)
    grant(bootstrap, acl(R.GROUP, "mine", Op.DESCRIBE))
    groups = call(bootstrap, ALICE, ApiKey.LIST_GROUPS, {})["groups"]
    assert [g["group_id"] for g in groups] == ["mine"]
    everyone = call(bootstrap, ADMIN, ApiKey.LIST_GROUPS, {})["groups"]
    assert {g["group_id"] for g in everyone} == {"mine", "theirs"}


def test_list_transactions_filters(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    body = {
        "transactional_id": "tx",
        "transaction_timeout_ms": 10_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }

    def initialized() -> bool:
        call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": "tx", "key_type": 1}, 3)
        return bool(call(bootstrap, ADMIN, ApiKey.INIT_PRODUCER_ID, body)["error_code"] == 0)

    eventually(initialized)
    listing = {"state_filters": [], "producer_id_filters": []}
    assert call(bootstrap, ALICE, ApiKey.LIST_TRANSACTIONS, listing)["transaction_states"] == []
    grant(bootstrap, acl(R.TRANSACTIONAL_ID, "tx", Op.DESCRIBE))
    states = call(bootstrap, ALICE, ApiKey.LIST_TRANSACTIONS, listing)["transaction_states"]
    assert [s["transactional_id"] for s in states] == ["tx"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("principal", "alice"),  # no "Type:" part
        ("resource_pattern_type", PatternType.MATCH),
        ("resource_pattern_type", PatternType.ANY),
        ("resource_type", R.ANY),
        ("resource_type", 99),
        ("operation", Op.ANY),
        ("permission_type", AclPermissionType.ANY),
        ("resource_name", ""),
    ],
)
def test_invalid_acls_are_refused_and_nothing_is_stored(
    broker_factory: Any, field: str, value: Any
) -> None:
    bootstrap = secured(broker_factory).bootstrap
    good = creation(acl(R.TOPIC, "t", Op.READ))
    bad = {**good, field: value}
    r = call(bootstrap, ADMIN, ApiKey.CREATE_ACLS, {"creations": [bad]})
    assert r["results"][0]["error_code"] == E.INVALID_REQUEST, r
    assert all_acls(bootstrap) == []


def test_cluster_acls_must_name_kafka_cluster(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    bad = creation(acl(R.CLUSTER, "my-cluster", Op.ALTER))
    r = call(bootstrap, ADMIN, ApiKey.CREATE_ACLS, {"creations": [bad]})
    assert r["results"][0]["error_code"] == E.INVALID_REQUEST
    assert all_acls(bootstrap) == []


def test_bad_filters_are_invalid_requests(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    body = acl_filter(resource_type_filter=0)
    assert call(bootstrap, ADMIN, ApiKey.DESCRIBE_ACLS, body)["error_code"] == E.INVALID_REQUEST
    r = call(bootstrap, ADMIN, ApiKey.DELETE_ACLS, {"filters": [{**body}]})
    assert r["filter_results"][0]["error_code"] == E.INVALID_REQUEST


def test_without_an_authorizer_the_acl_apis_are_security_disabled(broker: Any) -> None:
    bootstrap = broker.bootstrap
    r = call(
        bootstrap, ALICE, ApiKey.CREATE_ACLS, {"creations": [creation(acl(R.TOPIC, "t", Op.READ))]}
    )
    assert r["results"][0]["error_code"] == E.SECURITY_DISABLED
    body = acl_filter()
    assert call(bootstrap, ALICE, ApiKey.DESCRIBE_ACLS, body)["error_code"] == (E.SECURITY_DISABLED)
    r = call(bootstrap, ALICE, ApiKey.DELETE_ACLS, {"filters": [body]})
    assert r["filter_results"][0]["error_code"] == E.SECURITY_DISABLED
    # and everything is allowed, as before
    create_topic(bootstrap, "t")
    assert produce(bootstrap, ALICE, "t") == E.NONE


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acl_apis_at_every_version(broker_factory: Any, version: int) -> None:
    bootstrap = secured(broker_factory).bootstrap
    binding = creation(acl(R.TOPIC, "t", Op.READ))
    r = call(bootstrap, ADMIN, ApiKey.CREATE_ACLS, {"creations": [binding]}, version)
    assert r["results"][0]["error_code"] == 0
    body = acl_filter(
        resource_type_filter=R.TOPIC,
        resource_name_filter="t",
        pattern_type_filter=PatternType.LITERAL,
        principal_filter=ALICE,
    )
    described = call(bootstrap, ADMIN, ApiKey.DESCRIBE_ACLS, body, version)
    assert [(x["resource_name"], len(x["acls"])) for x in described["resources"]] == [("t", 1)]
    deleted = call(bootstrap, ADMIN, ApiKey.DELETE_ACLS, {"filters": [body]}, version)
    [result] = deleted["filter_results"]
    assert [(m["resource_name"], m["operation"]) for m in result["matching_acls"]] == [
        ("t", Op.READ)
    ]
    assert all_acls(bootstrap) == []


def test_acls_survive_a_restart(broker_factory: Any) -> None:
    running = secured(broker_factory)
    create_topic(running.bootstrap, "t")
    grant(running.bootstrap, acl(R.TOPIC, "t", Op.WRITE))
    running.restart()
    assign_principals(running)
    assert all_acls(running.bootstrap) == [("t", ALICE, Op.WRITE)]
    assert produce(running.bootstrap, ALICE, "t") == E.NONE
    assert produce(running.bootstrap, "User:bob", "t") == E.TOPIC_AUTHORIZATION_FAILED


def test_acls_reach_every_broker_of_a_cluster(broker_factory: Any, zk_connect: str) -> None:
    """Written through one broker into ZooKeeper's /kafka-acl, announced under
    /kafka-acl-changes, applied by the other."""
    brokers = [
        secured(broker_factory, broker_id=str(i), zookeeper_connect=zk_connect) for i in range(3)
    ]
    first, second, third = (b.bootstrap for b in brokers)
    body = {"topics": [{"name": "shared"}], "allow_auto_topic_creation": False}

    def describable(bootstrap: str) -> bool:
        r = call(bootstrap, ALICE, ApiKey.METADATA, body)
        return bool(r["topics"][0]["error_code"] != E.TOPIC_AUTHORIZATION_FAILED)

    assert not any(describable(b) for b in (first, second, third))
    grant(first, acl(R.TOPIC, "shared", Op.DESCRIBE))
    eventually(lambda: describable(second) and describable(third))
    r = call(second, ADMIN, ApiKey.DELETE_ACLS, {"filters": [acl_filter()]})
    assert len(r["filter_results"][0]["matching_acls"]) == 1
    eventually(lambda: not describable(first) and not describable(third))


def test_admin_client_manages_acls(broker_factory: Any) -> None:
    running = secured(broker_factory)
    binding = acl(R.TOPIC, "orders-", Op.READ, pattern=PatternType.PREFIXED)
    with logbus.Admin({"bootstrap.servers": running.bootstrap, "client.id": ADMIN}) as admin:
        admin.create_acls([binding, acl(R.GROUP, "g", Op.READ)])
        assert set(admin.describe_acls()) == {binding, acl(R.GROUP, "g", Op.READ)}
        match = AclBindingFilter(R.TOPIC, "orders-eu", PatternType.MATCH)
        assert admin.describe_acls(match) == [binding]
        with pytest.raises(AdminBatchError):
            admin.create_acls([acl(R.TOPIC, "x", Op.READ, principal="nobody")])
        deleted = admin.delete_acls([AclBindingFilter(R.GROUP)])
        assert list(deleted.values()) == [[acl(R.GROUP, "g", Op.READ)]]
        assert admin.describe_acls() == [binding]
    with logbus.Admin({"bootstrap.servers": running.bootstrap, "client.id": ALICE}) as alice:
        with pytest.raises(logbus.KafkaError) as refused:
            alice.describe_acls()
        assert refused.value.code == E.CLUSTER_AUTHORIZATION_FAILED


def test_kafka_python_producer_is_refused_without_write(broker_factory: Any) -> None:
    running = secured(broker_factory)
    create_topic(running.bootstrap, "kp")
    grant(running.bootstrap, acl(R.TOPIC, "kp", Op.DESCRIBE))
    producer = KafkaProducer(bootstrap_servers=running.bootstrap, client_id=ALICE, retries=0)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("kp", b"refused").get(timeout=20)
        grant(running.bootstrap, acl(R.TOPIC, "kp", Op.WRITE))
        assert producer.send("kp", b"allowed").get(timeout=20).offset == 0
    finally:
        producer.close(timeout=5)


def test_secured_settings_are_kafkas(broker_factory: Any) -> None:
    # Kafka's KRaft class name is accepted as is; an unknown one stops start-up
    running = secured(
        broker_factory,
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    )
    assert running.broker is not None and running.broker.authorizer is not None
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        BrokerConfig.from_properties({"authorizer.class.name": "com.example.Mine"})
    assert SECURED["super_users"] == ADMIN


def test_confluent_consumer_group_needs_group_and_topic_read(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    running = secured(broker_factory)
    create_topic(running.bootstrap, "cg")
    producer = Producer({"bootstrap.servers": running.bootstrap, "client.id": ADMIN})
    producer.produce("cg", b"hello")
    assert producer.flush(20) == 0
    grant(running.bootstrap, acl(R.TOPIC, "cg", Op.READ))  # the group is missing
    errors: list[int] = []
    consumer = Consumer({
        "bootstrap.servers": running.bootstrap, "client.id": ALICE, "group.id": "cgg",
        "auto.offset.reset": "earliest", "error_cb": lambda e: errors.append(e.code()),
    })  # fmt: skip
    try:
        consumer.subscribe(["cg"])
        deadline = time.monotonic() + 20
        refused = None
        while refused is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                refused = message.error().code()
            elif errors:
                refused = errors[0]
        assert refused == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    grant(running.bootstrap, acl(R.GROUP, "cgg", Op.READ))
    consumer = Consumer({
        "bootstrap.servers": running.bootstrap, "client.id": ALICE, "group.id": "cgg",
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.subscribe(["cg"])
        deadline = time.monotonic() + 30
        value = None
        while value is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                value = message.value()
        assert value == b"hello"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_confluent_admin_client_manages_acls(broker_factory: Any) -> None:
    from confluent_kafka.admin import AclBinding as CkBinding
    from confluent_kafka.admin import AclBindingFilter as CkFilter
    from confluent_kafka.admin import AclOperation as CkOp
    from confluent_kafka.admin import AclPermissionType as CkPermission
    from confluent_kafka.admin import AdminClient, ResourcePatternType, ResourceType

    running = secured(broker_factory)
    admin = AdminClient({"bootstrap.servers": running.bootstrap, "client.id": ADMIN})
    binding = CkBinding(ResourceType.TOPIC, "ck-", ResourcePatternType.PREFIXED, ALICE, "*",
                        CkOp.WRITE, CkPermission.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding]).values():
        future.result(timeout=20)
    assert all_acls(running.bootstrap) == [("ck-", ALICE, Op.WRITE)]
    any_filter = CkFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                          CkOp.ANY, CkPermission.ANY)  # fmt: skip
    described = admin.describe_acls(any_filter).result(timeout=20)
    assert [(b.name, b.principal, b.operation) for b in described] == [("ck-", ALICE, CkOp.WRITE)]
    create_topic(running.bootstrap, "ck-orders")
    assert produce(running.bootstrap, ALICE, "ck-orders") == E.NONE
    [deleted] = admin.delete_acls([any_filter]).values()
    assert len(deleted.result(timeout=20)) == 1
    assert all_acls(running.bootstrap) == []
    assert produce(running.bootstrap, ALICE, "ck-orders") == E.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_admin_client_manages_acls(broker_factory: Any) -> None:
    from kafka.admin import (  # type: ignore[import-untyped]
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    running = secured(broker_factory)
    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, client_id=ADMIN)
    try:
        acl_ = ACL(
            ALICE,
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.GROUP, "kp-group", ACLResourcePatternType.LITERAL),
        )
        result = admin.create_acls([acl_])
        assert result["failed"] == [], result
        found, _error = admin.describe_acls(
            ACLFilter(
                ALICE,
                "*",
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                ResourcePatternFilter(ResourceType.GROUP, None, ACLResourcePatternType.ANY),
            )
        )
        assert [a.resource_pattern.resource_name for a in found] == ["kp-group"]
    finally:
        admin.close()


def test_a_secured_cluster_replicates_when_brokers_are_super_users(
    broker_factory: Any, zk_connect: str
) -> None:
    """Brokers reach each other on a PLAINTEXT listener as User:ANONYMOUS: as in Kafka,
    that principal must be a super user (or hold ClusterAction) for LeaderAndIsr,
    UpdateMetadata, follower fetches and AlterPartition to pass."""
    brokers = [
        secured(broker_factory, broker_id=str(i), zookeeper_connect=zk_connect,
                super_users=f"{ADMIN};User:ANONYMOUS")
        for i in range(3)
    ]  # fmt: skip
    bootstrap = brokers[0].bootstrap
    body = {
        "topics": [{"name": "replicated", "num_partitions": 1, "replication_factor": 3}],
        "timeout_ms": 20_000,
    }
    assert call(bootstrap, ADMIN, ApiKey.CREATE_TOPICS, body)["topics"][0]["error_code"] == 0
    grant(bootstrap, acl(R.TOPIC, "replicated", Op.WRITE))

    def leader() -> str | None:
        r = call(bootstrap, ADMIN, ApiKey.METADATA, {"topics": [{"name": "replicated"}]})
        [partition] = r["topics"][0]["partitions"] or [None]
        if partition is None or len(partition["isr_nodes"]) < 3:
            return None
        node = {b["node_id"]: b for b in r["brokers"]}[partition["leader_id"]]
        return f"{node['host']}:{node['port']}"

    eventually(lambda: leader() is not None, timeout=30)
    leader_address = leader()
    assert leader_address is not None
    eventually(lambda: produce(leader_address, ALICE, "replicated") == E.NONE, timeout=30)
    assert produce(leader_address, "User:bob", "replicated") == E.TOPIC_AUTHORIZATION_FAILED


def test_create_topics_shows_configs_only_to_who_may_describe_them(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    grant(bootstrap, acl(R.CLUSTER, "kafka-cluster", Op.CREATE))

    def create(name: str) -> dict[str, Any]:
        body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                "timeout_ms": 10_000}  # fmt: skip
        result: dict[str, Any] = call(bootstrap, ALICE, ApiKey.CREATE_TOPICS, body, 7)["topics"][0]
        return result

    hidden = create("no-configs")
    assert hidden["error_code"] == 0 and hidden["configs"] == []
    assert hidden["topic_config_error_code"] == E.TOPIC_AUTHORIZATION_FAILED
    grant(bootstrap, acl(R.TOPIC, "with-configs", Op.DESCRIBE_CONFIGS))
    shown = create("with-configs")
    assert shown["topic_config_error_code"] == 0 and shown["configs"]
