"""The "everything" form of each admin API, as Kafka reads it, at every version the
broker serves: DescribeConfigs with null or empty configuration keys (every setting),
DescribeAcls with ANY filters (every binding), ListGroups with no states or types (every
group), DescribeClientQuotas with no components (every entity unless strict),
DescribeProducers with no partitions (the topic, no partitions: not "all"), and
ListTransactions with no filters (every transaction). Raw requests pin the null and empty
forms; confluent-kafka's and kafka-python's admin clients send theirs where they have the
call. DescribeUserScramCredentials' form is tested in tests/compat."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from acl_helpers import AUTHORIZER
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import ResourceType as KpResourceType

from kafka_wire import WireClient
from logbus.protocol import ApiKey, ErrorCode

TIMEOUT = 30
TOPIC = "all-forms"
GROUP = "all-forms-group"
TXN_ID = "all-forms-txn"


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    """A broker with an authorizer (ANONYMOUS a super user) holding one of everything:
    a topic, two ACL bindings, an empty group, two quota entities, a transaction."""
    running = broker_factory(authorizer_class_name=AUTHORIZER, super_users="User:ANONYMOUS")
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic(TOPIC, partitions=2) == (ErrorCode.NONE, None)
        quotas = {
            "entries": [
                quota_entry([("user", "alice")], 1024.0),
                quota_entry([("user", "bob"), ("client-id", "app")], 2048.0),
            ],
            "validate_only": False,
        }
        answer = wire.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, quotas)
        assert [e["error_code"] for e in answer["entries"]] == [ErrorCode.NONE] * 2
    bindings = [
        AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:bob", "*",
                   AclOperation.READ, AclPermissionType.DENY),
    ]  # fmt: skip
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    offsets = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 0, 0)])
    for future in admin.alter_consumer_group_offsets([offsets]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": running.bootstrap, "transactional.id": TXN_ID})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(TOPIC, b"in a transaction", partition=0)
    producer.commit_transaction(TIMEOUT)
    producer.flush(TIMEOUT)
    return running


@pytest.fixture
def wire(broker: Any) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap) as client:
        yield client


@pytest.fixture
def kp_admin(broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def quota_entry(entity: list[tuple[str, str]], producer_byte_rate: float) -> dict[str, Any]:
    return {
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
        "ops": [{"key": "producer_byte_rate", "value": producer_byte_rate, "remove": False}],
    }


def served(wire: WireClient, api_key: ApiKey) -> range:
    response = wire.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "wire", "client_software_version": "1"}
    )
    (entry,) = (k for k in response["api_keys"] if k["api_key"] == api_key)
    return range(entry["min_version"], entry["max_version"] + 1)


def test_describe_configs_null_and_empty_keys_mean_every_setting(
    wire: WireClient, broker: Any, kp_admin: KafkaAdminClient
) -> None:
    def names(version: int, kind: int, name: str, keys: list[str] | None) -> list[str]:
        resource = {"resource_type": kind, "resource_name": name, "configuration_keys": keys}
        body = {"resources": [resource], "include_synonyms": False,
                "include_documentation": False}  # fmt: skip
        (result,) = wire.request(ApiKey.DESCRIBE_CONFIGS, version, body)["results"]
        assert result["error_code"] == ErrorCode.NONE, result
        return sorted(c["name"] for c in result["configs"])

    for version in served(wire, ApiKey.DESCRIBE_CONFIGS):
        for kind, name, key in ((2, TOPIC, "cleanup.policy"), (4, "0", "num.partitions")):
            every = names(version, kind, name, None)
            assert key in every and len(every) > 10, version
            assert names(version, kind, name, []) == every, version
            assert names(version, kind, name, [key]) == [key], version
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    described = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert sorted(described) == names(4, 2, TOPIC, [])
    kp_resource = KpConfigResource(KpConfigResourceType.TOPIC, TOPIC)  # configs None: null
    kp_described = kp_admin.describe_configs([kp_resource], config_filter="all")
    assert sorted(kp_described["topic"][TOPIC]) == names(4, 2, TOPIC, [])


def test_describe_acls_any_filters_mean_every_binding(
    wire: WireClient, broker: Any, kp_admin: KafkaAdminClient
) -> None:
    every = [("GROUP", GROUP, "User:bob"), ("TOPIC", TOPIC, "User:alice")]
    for version in served(wire, ApiKey.DESCRIBE_ACLS):
        body = {
            "resource_type_filter": 1,  # ANY
            "resource_name_filter": None,
            "pattern_type_filter": 1,  # ANY (v1+; v0 reads literal bindings only)
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,  # ANY
            "permission_type": 1,  # ANY
        }
        answer = wire.request(ApiKey.DESCRIBE_ACLS, version, body)
        assert answer["error_code"] == ErrorCode.NONE, answer
        found = sorted(
            (ResourceType(r["resource_type"]).name, r["resource_name"], a["principal"])
            for r in answer["resources"]
            for a in r["acls"]
        )
        assert found == every, version
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    match_all = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    bindings = admin.describe_acls(match_all).result(TIMEOUT)
    assert sorted((b.restype.name, b.name, b.principal) for b in bindings) == every
    kp_filter = ACLFilter(
        None, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
    )  # fmt: skip
    acls, error = kp_admin.describe_acls(kp_filter)
    assert error.errno == 0
    assert sorted(
        (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name, a.principal)
        for a in acls
    ) == every


def test_list_groups_no_states_or_types_mean_every_group(
    wire: WireClient, broker: Any, kp_admin: KafkaAdminClient
) -> None:
    for version in served(wire, ApiKey.LIST_GROUPS):
        body: dict[str, Any] = {"states_filter": [], "types_filter": []}
        answer = wire.request(ApiKey.LIST_GROUPS, version, body)
        assert answer["error_code"] == ErrorCode.NONE, answer
        assert [g["group_id"] for g in answer["groups"]] == [GROUP], version
        if version >= 4:
            body["states_filter"] = ["Stable"]
            assert wire.request(ApiKey.LIST_GROUPS, version, body)["groups"] == [], version
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [g.group_id for g in listed.valid] == [GROUP]
    assert [g["group_id"] for g in kp_admin.list_groups()] == [GROUP]


def test_describe_client_quotas_without_components_means_every_entity(
    wire: WireClient,
) -> None:
    for version in served(wire, ApiKey.DESCRIBE_CLIENT_QUOTAS):
        body = {"components": [], "strict": False}
        answer = wire.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)
        assert answer["error_code"] == ErrorCode.NONE, answer
        entities = sorted(
            [(e["entity_type"], e["entity_name"]) for e in entry["entity"]]
            for entry in answer["entries"]
        )
        assert entities == [
            [("user", "alice")],
            [("user", "bob"), ("client-id", "app")],
        ], version
        # strict: entities with no components besides the filter's, so none at all
        body["strict"] = True
        answer = wire.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)
        assert answer["error_code"] == ErrorCode.NONE and answer["entries"] == [], version


def test_describe_producers_without_partitions_describes_no_partition(wire: WireClient) -> None:
    """Kafka answers each partition asked for; a topic with none gets an empty list."""
    for version in served(wire, ApiKey.DESCRIBE_PRODUCERS):
        body = {"topics": [{"name": TOPIC, "partition_indexes": []}]}
        answer = wire.request(ApiKey.DESCRIBE_PRODUCERS, version, body)
        assert [(t["name"], t["partitions"]) for t in answer["topics"]] == [(TOPIC, [])]
        answer = wire.request(ApiKey.DESCRIBE_PRODUCERS, version, {"topics": []})
        assert answer["topics"] == []
        body = {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        (topic,) = wire.request(ApiKey.DESCRIBE_PRODUCERS, version, body)["topics"]
        (partition,) = topic["partitions"]
        assert partition["error_code"] == ErrorCode.NONE and partition["active_producers"]


def test_list_transactions_without_filters_means_every_transaction(
    wire: WireClient, kp_admin: KafkaAdminClient
) -> None:
    for version in served(wire, ApiKey.LIST_TRANSACTIONS):
        body: dict[str, Any] = {"state_filters": [], "producer_id_filters": []}
        if version >= 1:
            body["duration_filter"] = -1
        answer = wire.request(ApiKey.LIST_TRANSACTIONS, version, body)
        assert answer["error_code"] == ErrorCode.NONE, answer
        assert [t["transactional_id"] for t in answer["transaction_states"]] == [TXN_ID]
        assert answer["unknown_state_filters"] == []
        # only unknown states: nothing matches (an unknown filter is no filter only
        # when it is the whole filter's absence)
        body["state_filters"] = ["NoSuchState"]
        answer = wire.request(ApiKey.LIST_TRANSACTIONS, version, body)
        assert answer["transaction_states"] == []
        assert answer["unknown_state_filters"] == ["NoSuchState"]
    (listed,) = kp_admin.list_transactions().values()  # per broker
    assert [t.transactional_id for t in listed] == [TXN_ID]
