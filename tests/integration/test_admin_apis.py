"""Topic administration, configs, cluster description and producer ids against a real
broker: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, DescribeCluster and
InitProducerId, through confluent-kafka's and kafka-python's admin clients, and through
logbus's own connection where a test needs one exact protocol version."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient

from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode

TIMEOUT = 15
ZERO_UUID = uuid.UUID(int=0)


# --- helpers ----------------------------------------------------------------------------


@pytest.fixture
def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp_admin(broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def raw(broker: Any, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """Send one request at exactly `version` and return the decoded response."""

    async def send() -> dict[str, Any]:
        async with await Connection.connect("127.0.0.1", broker.port) as conn:
            return await conn.request(api_key, body, version)

    return asyncio.run(send())


def create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> None:
    for future in admin.create_topics(
        list(topics), validate_only=validate_only, request_timeout=TIMEOUT
    ).values():
        future.result(timeout=TIMEOUT)


def failure(future: Any) -> tuple[int, str]:
    """The (error code, message) a client future failed with."""
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT)
    error = info.value.args[0]
    return error.code(), error.str()


def partition_counts(admin: AdminClient) -> dict[str, int]:
    topics = admin.list_topics(timeout=TIMEOUT).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


def new_topic_body(
    name: str,
    partitions: int = -1,
    replicas: int = -1,
    configs: dict[str, str | None] | None = None,
    assignments: list[list[int]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replicas,
        "assignments": [
            {"partition_index": i, "broker_ids": r} for i, r in enumerate(assignments or [])
        ],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def create_raw(
    broker: Any, version: int, *topics: dict[str, Any], validate_only: bool = False
) -> list[dict[str, Any]]:
    response = raw(
        broker,
        ApiKey.CREATE_TOPICS,
        version,
        {"topics": list(topics), "timeout_ms": 10000, "validate_only": validate_only},
    )
    return list(response["topics"])


# --- CreateTopics -----------------------------------------------------------------------


def test_create_topics_with_counts_configs_and_assignments(admin: AdminClient, broker: Any) -> None:
    create(
        admin,
        NewTopic("orders", 3, 1, config={"cleanup.policy": "compact", "retention.ms": "3600000"}),
        NewTopic("placed", 2, replica_assignment=[[0], [0]]),
        NewTopic("defaults"),
    )
    counts = partition_counts(admin)
    assert counts["orders"] == 3
    assert counts["placed"] == 2
    assert counts["defaults"] == 1  # num.partitions
    stored = broker.broker.metadata_cache.topics["orders"].configs
    assert stored == {"cleanup.policy": "compact", "retention.ms": "3600000"}


def test_create_topics_validate_only_creates_nothing(admin: AdminClient) -> None:
    create(admin, NewTopic("dry-run", 4, 1, config={"retention.ms": "1000"}), validate_only=True)
    assert "dry-run" not in partition_counts(admin)
    futures = admin.create_topics(
        [NewTopic("dry-run", 1, 1, config={"retention.ms": "x"})],
        validate_only=True,
        request_timeout=TIMEOUT,
    )
    code, message = failure(futures["dry-run"])
    assert code == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in message


def test_create_topics_errors(admin: AdminClient) -> None:
    create(admin, NewTopic("taken", 1, 1))
    futures = admin.create_topics(
        [
            NewTopic("bad name!", 1, 1),
            NewTopic("taken", 1, 1),
            NewTopic("too-many-replicas", 1, 3),
            NewTopic("bad-value", 1, 1, config={"retention.ms": "forever"}),
            NewTopic("bad-name-of-config", 1, 1, config={"no.such.setting": "1"}),
            NewTopic("bad-policy", 1, 1, config={"cleanup.policy": "shred"}),
            NewTopic("unknown-broker", 1, replica_assignment=[[7]]),
            NewTopic("gap", 2, replica_assignment=[[0], [0, 0]]),
        ],
        request_timeout=TIMEOUT,
    )
    assert failure(futures["bad name!"])[0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    code, message = failure(futures["taken"])
    assert (code, message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'taken' already exists.")
    code, message = failure(futures["too-many-replicas"])
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 1" in message
    for name, setting in [
        ("bad-value", "retention.ms"),
        ("bad-name-of-config", "no.such.setting"),
        ("bad-policy", "cleanup.policy"),
    ]:
        code, message = failure(futures[name])
        assert code == ErrorCode.INVALID_CONFIG, name
        assert setting in message, name
    assert failure(futures["unknown-broker"])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert failure(futures["gap"])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert not (set(futures) - {"taken"}) & set(partition_counts(admin))


def test_create_topics_rejects_a_name_given_twice(broker: Any) -> None:
    results = create_raw(
        broker, 7, new_topic_body("twice", 1), new_topic_body("twice", 2), new_topic_body("once", 1)
    )
    assert [(r["name"], r["error_code"]) for r in results] == [
        ("twice", ErrorCode.INVALID_REQUEST),
        ("twice", ErrorCode.INVALID_REQUEST),
        ("once", ErrorCode.NONE),
    ]
    assert results[0]["error_message"] == "Found multiple entries for this topic."
    assert "twice" not in broker.broker.metadata_cache.topics


def test_create_topics_rejects_bad_counts_and_null_configs(broker: Any) -> None:
    results = create_raw(
        broker,
        5,
        new_topic_body("zero", 0, 1),
        new_topic_body("no-replicas", 1, 0),
        new_topic_body("both", 2, 1, assignments=[[0]]),
        new_topic_body("null-config", 1, 1, configs={"retention.ms": None}),
    )
    codes = {r["name"]: (r["error_code"], r["error_message"]) for r in results}
    assert codes["zero"][0] == ErrorCode.INVALID_PARTITIONS
    assert codes["no-replicas"][0] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert codes["both"][0] == ErrorCode.INVALID_REQUEST
    assert codes["null-config"] == (
        ErrorCode.INVALID_CONFIG,
        "Null value not supported for topic configs: retention.ms",
    )


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_response_of_each_version(broker: Any, version: int) -> None:
    name = f"v{version}"
    ok, failed = create_raw(
        broker,
        version,
        new_topic_body(name, 2, -1, configs={"retention.ms": "60000"}),
        new_topic_body("bad", 1, 1, configs={"retention.ms": "soon"}),
    )
    assert ok["error_code"] == ErrorCode.NONE
    assert failed["error_code"] == ErrorCode.INVALID_CONFIG
    created = broker.broker.metadata_cache.topics[name]
    if version >= 5:
        assert (ok["num_partitions"], ok["replication_factor"]) == (2, 1)
        configs = {c["name"]: c for c in ok["configs"]}
        assert configs["retention.ms"]["value"] == "60000"
        assert configs["retention.ms"]["config_source"] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert configs["segment.bytes"]["config_source"] == ConfigSource.DEFAULT_CONFIG.value
        assert not configs["segment.bytes"]["read_only"]
        assert (failed["num_partitions"], failed["replication_factor"]) == (-1, -1)
        assert failed["configs"] == []
    else:  # not in these versions: the decoder fills in the defaults
        assert (ok["num_partitions"], ok["replication_factor"]) == (-1, -1)
    assert ok["topic_id"] == (created.topic_id if version >= 7 else ZERO_UUID)


def test_create_topics_validate_only_reports_what_would_be_created(broker: Any) -> None:
    [result] = create_raw(broker, 7, new_topic_body("preview", 5), validate_only=True)
    assert result["error_code"] == ErrorCode.NONE
    assert (result["num_partitions"], result["replication_factor"]) == (5, 1)
    assert result["topic_id"] == ZERO_UUID
    assert result["configs"]
    assert "preview" not in broker.broker.metadata_cache.topics


# --- DeleteTopics -----------------------------------------------------------------------


def test_delete_topics(admin: AdminClient) -> None:
    create(admin, NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1))
    futures = admin.delete_topics(["doomed", "never-existed"], request_timeout=TIMEOUT)
    futures["doomed"].result(timeout=TIMEOUT)
    assert failure(futures["never-existed"])[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    counts = partition_counts(admin)
    assert "doomed" not in counts
    assert "kept" in counts
    create(admin, NewTopic("doomed", 1, 1))  # the name is free again


def test_delete_topics_when_deletion_is_disabled(broker_factory: Any) -> None:
    broker = broker_factory(delete_topic_enable="false")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, NewTopic("permanent", 1, 1))
    futures = admin.delete_topics(["permanent"], request_timeout=TIMEOUT)
    assert failure(futures["permanent"])[0] == ErrorCode.TOPIC_DELETION_DISABLED
    # Before v3 the error code did not exist: Kafka answers INVALID_REQUEST.
    response = raw(
        broker, ApiKey.DELETE_TOPICS, 2, {"topic_names": ["permanent"], "timeout_ms": 1000}
    )
    assert response["responses"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    assert "permanent" in partition_counts(admin)


def test_delete_topics_by_id(kp_admin: KafkaAdminClient, broker: Any) -> None:
    kp_admin.create_topics({"by-id": {"num_partitions": 1}, "by-name": {"num_partitions": 1}})
    topic_id = broker.broker.metadata_cache.topics["by-id"].topic_id
    kp_admin.delete_topics([topic_id])
    assert "by-id" not in broker.broker.metadata_cache.topics
    response = raw(
        broker,
        ApiKey.DELETE_TOPICS,
        6,
        {
            "timeout_ms": 1000,
            "topics": [
                {"name": None, "topic_id": topic_id},
                {"name": None, "topic_id": ZERO_UUID},
                {"name": "by-name", "topic_id": uuid.uuid4()},
                {"name": "dup", "topic_id": ZERO_UUID},
                {"name": "dup", "topic_id": ZERO_UUID},
            ],
        },
    )
    results = [(r["name"], r["error_code"], r["error_message"]) for r in response["responses"]]
    assert results == [
        (None, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        (None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("by-name", ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert "by-name" in broker.broker.metadata_cache.topics
    kp_admin.create_topics({"both-ways": {"num_partitions": 1}})
    topic_id = broker.broker.metadata_cache.topics["both-ways"].topic_id
    response = raw(
        broker,
        ApiKey.DELETE_TOPICS,
        6,
        {
            "timeout_ms": 1000,
            "topics": [
                {"name": None, "topic_id": topic_id},
                {"name": "both-ways", "topic_id": ZERO_UUID},
            ],
        },
    )
    results = [(r["name"], r["topic_id"], r["error_code"]) for r in response["responses"]]
    assert results == [
        ("both-ways", topic_id, ErrorCode.NONE),
        ("both-ways", topic_id, ErrorCode.INVALID_REQUEST),
    ]
    assert "both-ways" not in broker.broker.metadata_cache.topics


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_each_version(admin: AdminClient, broker: Any, version: int) -> None:
    create(admin, NewTopic("gone", 1, 1))
    topic_id = broker.broker.metadata_cache.topics["gone"].topic_id
    if version >= 6:
        body = {
            "topics": [
                {"name": "gone", "topic_id": ZERO_UUID},
                {"name": "absent", "topic_id": ZERO_UUID},
            ],
            "timeout_ms": 1000,
        }
    else:
        body = {"topic_names": ["gone", "absent"], "timeout_ms": 1000}
    gone, absent = raw(broker, ApiKey.DELETE_TOPICS, version, body)["responses"]
    assert (gone["name"], gone["error_code"]) == ("gone", ErrorCode.NONE)
    assert absent["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert gone["topic_id"] == (topic_id if version >= 6 else ZERO_UUID)
    assert (absent["error_message"] is not None) == (version >= 5)
    assert "gone" not in partition_counts(admin)


# --- CreatePartitions -------------------------------------------------------------------


def test_create_partitions(admin: AdminClient) -> None:
    create(admin, NewTopic("growing", 1, 1))
    futures = admin.create_partitions(
        [NewPartitions("growing", 3)], validate_only=True, request_timeout=TIMEOUT
    )
    futures["growing"].result(timeout=TIMEOUT)
    assert partition_counts(admin)["growing"] == 1
    futures = admin.create_partitions([NewPartitions("growing", 3)], request_timeout=TIMEOUT)
    futures["growing"].result(timeout=TIMEOUT)
    assert partition_counts(admin)["growing"] == 3
    futures = admin.create_partitions(
        [NewPartitions("growing", 5, [[0], [0]])], request_timeout=TIMEOUT
    )
    futures["growing"].result(timeout=TIMEOUT)
    assert partition_counts(admin)["growing"] == 5


def test_create_partitions_errors(admin: AdminClient, broker: Any) -> None:
    create(admin, NewTopic("fixed", 2, 1))
    futures = admin.create_partitions(
        [
            NewPartitions("fixed", 1),
            NewPartitions("missing", 4),
        ],
        request_timeout=TIMEOUT,
    )
    code, message = failure(futures["fixed"])
    assert (code, message) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic currently has 2 partitions, which is higher than the requested 1.",
    )
    assert failure(futures["missing"])[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    futures = admin.create_partitions([NewPartitions("fixed", 4, [[0]])], request_timeout=TIMEOUT)
    assert failure(futures["fixed"])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    futures = admin.create_partitions([NewPartitions("fixed", 3, [[9]])], request_timeout=TIMEOUT)
    assert failure(futures["fixed"])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    response = raw(
        broker,
        ApiKey.CREATE_PARTITIONS,
        3,
        {
            "topics": [
                {"name": "fixed", "count": 4, "assignments": None},
                {"name": "fixed", "count": 5, "assignments": None},
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    assert response["results"] == [
        {
            "name": "fixed",
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": "Duplicate topic in request.",
        }
    ]
    assert partition_counts(admin)["fixed"] == 2


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_each_version(admin: AdminClient, broker: Any, version: int) -> None:
    create(admin, NewTopic("more", 1, 1))
    response = raw(
        broker,
        ApiKey.CREATE_PARTITIONS,
        version,
        {
            "topics": [
                {"name": "more", "count": 2, "assignments": [{"broker_ids": [0]}]},
                {"name": "more-missing", "count": 2, "assignments": None},
            ],
            "timeout_ms": 1000,
            "validate_only": False,
        },
    )
    more, missing = response["results"]
    assert (more["error_code"], more["error_message"]) == (ErrorCode.NONE, None)
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition_counts(admin)["more"] == 2


# --- DescribeConfigs --------------------------------------------------------------------


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    futures = admin.describe_configs([resource], request_timeout=TIMEOUT)
    return dict(futures[resource].result(timeout=TIMEOUT))


def test_describe_topic_configs_with_sources_and_synonyms(admin: AdminClient) -> None:
    create(
        admin,
        NewTopic(
            "described", 1, 1, config={"retention.ms": "120000", "cleanup.policy": "compact,delete"}
        ),
    )
    entries = describe(admin, ConfigResource(ResourceType.TOPIC, "described"))
    retention = entries["retention.ms"]
    assert retention.value == "120000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only
    assert not retention.is_default
    assert list(retention.synonyms) == ["retention.ms", "log.retention.hours"]
    assert retention.synonyms["log.retention.hours"].value == "168"
    assert entries["cleanup.policy"].value == "compact,delete"
    segment = entries["segment.bytes"]
    assert segment.value == "1073741824"
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert segment.is_default
    assert list(segment.synonyms) == ["log.segment.bytes"]
    assert "min.insync.replicas" in entries


def test_describe_broker_configs(admin: AdminClient, broker: Any) -> None:
    entries = describe(admin, ConfigResource(ResourceType.BROKER, "0"))
    log_dirs = entries["log.dirs"]
    assert log_dirs.value == str(broker.data_dir)
    assert log_dirs.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert log_dirs.is_read_only
    checkpoint = entries["log.flush.offset.checkpoint.interval.ms"]
    assert (checkpoint.value, checkpoint.source) == (
        "1000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    assert entries["log.retention.hours"].value == "168"
    assert list(entries["log.retention.hours"].synonyms) == ["log.retention.hours"]


def test_describe_configs_errors_and_filters(broker: Any) -> None:
    def resource(kind: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
        return {"resource_type": kind, "resource_name": name, "configuration_keys": keys}

    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                resource(2, "not-there"),
                resource(2, "bad/name"),
                resource(4, "7"),
                resource(4, "zero"),
                resource(4, "0", ["num.partitions", "no.such.setting"]),
                resource(4, ""),
                resource(8, "0", ["root"]),
                resource(8, ""),
                resource(32, "group"),
            ],
            "include_synonyms": True,
            "include_documentation": True,
        },
    )
    results = response["results"]
    codes = [r["error_code"] for r in results]
    assert codes == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert (
        results[2]["error_message"]
        == "Unexpected broker id, expected 0 or empty string, but received 7"
    )
    [num_partitions] = results[4]["configs"]
    assert num_partitions["name"] == "num.partitions"
    assert num_partitions["config_type"] == 3  # INT
    assert num_partitions["documentation"]
    assert num_partitions["synonyms"] == [
        {"name": "num.partitions", "value": "1", "source": ConfigSource.DEFAULT_CONFIG.value}
    ]
    assert results[5]["configs"] == []  # no dynamic cluster-wide defaults are set
    [root] = results[6]["configs"]
    assert root["name"] == "root"
    assert root["config_source"] == 6  # DYNAMIC_BROKER_LOGGER_CONFIG
    assert results[8]["error_message"] == "Unsupported resource type: GROUP"


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_each_version(admin: AdminClient, broker: Any, version: int) -> None:
    create(admin, NewTopic("versioned", 1, 1, config={"retention.ms": "1000"}))
    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "versioned",
                    "configuration_keys": ["retention.ms"],
                }
            ],
            "include_synonyms": True,
            "include_documentation": True,
        },
    )
    [result] = response["results"]
    [entry] = result["configs"]
    assert entry["value"] == "1000"
    assert entry["config_source"] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert [s["name"] for s in entry["synonyms"]] == ["retention.ms", "log.retention.hours"]
    if version >= 3:
        assert entry["config_type"] == 5  # LONG
        assert entry["documentation"]
    else:  # not in these versions: the decoder fills in the default
        assert entry["config_type"] == 0
    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "versioned",
                    "configuration_keys": ["retention.ms"],
                }
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    [entry] = response["results"][0]["configs"]
    assert entry["synonyms"] == []
    if version >= 3:
        assert entry["documentation"] is None


def test_kafka_python_describe_configs(kp_admin: KafkaAdminClient) -> None:
    kp_admin.create_topics(
        {"kp-configs": {"num_partitions": 1, "configs": {"max.message.bytes": "2048"}}}
    )
    result = kp_admin.describe_configs(
        [
            KpConfigResource(KpConfigResourceType.TOPIC, "kp-configs"),
            KpConfigResource(KpConfigResourceType.BROKER, "0"),
        ],
        include_synonyms=True,
        config_filter="all",
    )
    topic = result["topic"]["kp-configs"]
    assert topic["max.message.bytes"]["value"] == "2048"
    assert topic["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [s["name"] for s in topic["max.message.bytes"]["synonyms"]] == [
        "max.message.bytes",
        "message.max.bytes",
    ]
    assert topic["compression.type"]["config_source"] == "DEFAULT_CONFIG"
    broker_configs = result["broker"]["0"]
    assert broker_configs["broker.id"]["value"] == "0"
    assert broker_configs["broker.id"]["config_source"] == "STATIC_BROKER_CONFIG"
    modified = kp_admin.describe_configs(
        [KpConfigResource(KpConfigResourceType.TOPIC, "kp-configs")]
    )
    assert set(modified["topic"]["kp-configs"]) == {"max.message.bytes"}


# --- DescribeCluster --------------------------------------------------------------------

CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}


def test_describe_cluster(admin: AdminClient, broker: Any) -> None:
    result = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert result.cluster_id == broker.broker.controller.cluster_id
    assert result.controller.id == 0
    [node] = result.nodes
    assert (node.id, node.host, node.port) == (0, "127.0.0.1", broker.port)
    assert result.authorized_operations is None


def test_describe_cluster_authorized_operations(admin: AdminClient) -> None:
    result = admin.describe_cluster(
        include_authorized_operations=True, request_timeout=TIMEOUT
    ).result(timeout=TIMEOUT)
    assert set(result.authorized_operations) == CLUSTER_OPERATIONS


def test_kafka_python_describe_cluster(kp_admin: KafkaAdminClient, broker: Any) -> None:
    cluster = kp_admin.describe_cluster()
    assert cluster["cluster_id"] == broker.broker.controller.cluster_id
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(0, broker.port)]


def test_describe_cluster_endpoint_types(broker: Any) -> None:
    for version, endpoint_type, expected in [
        (1, 1, ErrorCode.NONE),
        (1, 2, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
        (1, 5, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
        (0, 1, ErrorCode.NONE),
    ]:
        response = raw(
            broker,
            ApiKey.DESCRIBE_CLUSTER,
            version,
            {"include_cluster_authorized_operations": False, "endpoint_type": endpoint_type},
        )
        assert response["error_code"] == expected, (version, endpoint_type)
        if expected == ErrorCode.NONE:
            assert response["cluster_authorized_operations"] == -2147483648
            assert [b["broker_id"] for b in response["brokers"]] == [0]
    response = raw(broker, ApiKey.DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})
    assert response["error_message"] == (
        "The request was sent to an endpoint of type BROKER, "
        "but we wanted an endpoint of type CONTROLLER"
    )


def test_describe_cluster_with_a_rack(broker_factory: Any) -> None:
    broker = broker_factory(broker_rack="rack-a")
    response = raw(
        broker,
        ApiKey.DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": True, "endpoint_type": 1},
    )
    assert [b["rack"] for b in response["brokers"]] == ["rack-a"]
    assert response["cluster_authorized_operations"] == sum(
        1 << op.value for op in CLUSTER_OPERATIONS
    )


# --- InitProducerId ---------------------------------------------------------------------


def init_producer_id(
    broker: Any,
    version: int,
    producer_id: int = -1,
    epoch: int = -1,
    transactional_id: str | None = None,
    timeout_ms: int = 60000,
) -> dict[str, Any]:
    return raw(
        broker,
        ApiKey.INIT_PRODUCER_ID,
        version,
        {
            "transactional_id": transactional_id,
            "transaction_timeout_ms": timeout_ms,
            "producer_id": producer_id,
            "producer_epoch": epoch,
        },
    )


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_each_version(broker: Any, version: int) -> None:
    first = init_producer_id(broker, version)
    second = init_producer_id(broker, version)
    assert (first["error_code"], first["producer_epoch"]) == (ErrorCode.NONE, 0)
    assert second["producer_id"] > first["producer_id"] >= 0


def test_init_producer_id_epoch_bump(broker: Any) -> None:
    """KIP-360: a known producer gets its next epoch; a retried bump the same answer."""
    start = init_producer_id(broker, 5)
    pid = start["producer_id"]
    bumped = init_producer_id(broker, 5, pid, 0)
    assert (bumped["producer_id"], bumped["producer_epoch"]) == (pid, 1)
    retried = init_producer_id(broker, 5, pid, 0)
    assert (retried["producer_id"], retried["producer_epoch"]) == (pid, 1)
    again = init_producer_id(broker, 3, pid, 1)
    assert (again["producer_id"], again["producer_epoch"]) == (pid, 2)
    stranger = init_producer_id(broker, 5, 10**12, 4)
    assert stranger["producer_id"] not in (pid, 10**12)
    assert stranger["producer_epoch"] == 0
    half = init_producer_id(broker, 5, pid, -1)
    assert (half["error_code"], half["producer_id"]) == (ErrorCode.INVALID_REQUEST, -1)


def test_init_producer_id_transactional(broker: Any) -> None:
    assert (
        init_producer_id(broker, 4, transactional_id="")["error_code"] == ErrorCode.INVALID_REQUEST
    )
    assert (
        init_producer_id(broker, 4, transactional_id="tx", timeout_ms=0)["error_code"]
        == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    assert (
        init_producer_id(broker, 4, transactional_id="tx", timeout_ms=10**9)["error_code"]
        == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    # __transaction_state does not exist before a FindCoordinator creates it: this broker
    # coordinates no transactional id yet (tests/integration/test_transaction_coordinator.py)
    response = init_producer_id(broker, 4, transactional_id="tx")
    assert response["error_code"] == ErrorCode.NOT_COORDINATOR
    assert (response["producer_id"], response["producer_epoch"]) == (-1, -1)


def test_idempotent_producer_gets_a_producer_id(admin: AdminClient, broker: Any) -> None:
    create(admin, NewTopic("idempotent", 1, 1))
    delivered: list[Any] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    producer.produce("idempotent", b"value", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert delivered == [None]


# --- kafka-python ---------------------------------------------------------------------


def test_kafka_python_topic_lifecycle(kp_admin: KafkaAdminClient, broker: Any) -> None:
    kp_admin.create_topics(
        {"kp": {"num_partitions": 2, "configs": {"retention.ms": "5000"}}}, validate_only=True
    )
    assert "kp" not in kp_admin.list_topics()
    kp_admin.create_topics(
        {
            "kp": {"num_partitions": 2, "configs": {"retention.ms": "5000"}},
            "kp-assigned": {"assignments": {0: [0], 1: [0], 2: [0]}},
        }
    )
    assert {"kp", "kp-assigned"} <= set(kp_admin.list_topics())
    topics = {t["name"]: t for t in kp_admin.describe_topics(["kp", "kp-assigned"])}
    assert len(topics["kp"]["partitions"]) == 2
    assert len(topics["kp-assigned"]["partitions"]) == 3
    kp_admin.create_partitions({"kp": 4})
    assert len(kp_admin.describe_topics(["kp"])[0]["partitions"]) == 4
    with pytest.raises(Exception, match="TopicAlreadyExists"):
        kp_admin.create_topics({"kp": {"num_partitions": 1}})
    kp_admin.delete_topics(["kp", "kp-assigned"])
    assert not {"kp", "kp-assigned"} & set(kp_admin.list_topics())
    assert "kp" not in broker.broker.metadata_cache.topics
