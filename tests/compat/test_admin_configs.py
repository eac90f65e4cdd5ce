"""Config management and DeleteRecords through the admin clients of confluent-kafka
(librdkafka) and kafka-python: alter, incremental alter, describe (sources and synonyms),
delete records, and the errors each client surfaces for bad input."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition

from kafka_wire import EARLIEST, WireClient
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch

TIMEOUT = 15


@pytest.fixture
def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp_admin(broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def create(admin: AdminClient, name: str, partitions: int = 1, **config: str) -> None:
    topic = NewTopic(
        name, partitions, 1, config={k.replace("_", "."): v for k, v in config.items()}
    )
    admin.create_topics([topic], request_timeout=TIMEOUT)[name].result(TIMEOUT)


def fill(broker: Any, topic: str, count: int, partition: int = 0) -> None:
    with WireClient(broker.bootstrap) as client:
        for i in range(count):
            batch = build_batch([NewRecord(None, b"%d" % i, (), int(time.time() * 1000))])
            assert client.produce(topic, partition, batch)["error_code"] == ErrorCode.NONE


def earliest(broker: Any, topic: str, partition: int = 0) -> int:
    with WireClient(broker.bootstrap) as client:
        error, offset, _ = client.list_offset(topic, partition, EARLIEST)
    assert error == ErrorCode.NONE
    return offset


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    return dict(
        admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)
    )


def failure(future: Any) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT)
    error = info.value.args[0]
    return error.code(), error.str()


def live_config(broker: Any, topic: str) -> Any:
    return broker.broker.replica_manager.partition(topic, 0).log.config


# --- confluent-kafka ----------------------------------------------------------------------


def test_confluent_incremental_alter_configs(admin: AdminClient, broker: Any) -> None:
    create(admin, "ck-inc", retention_ms="60000")
    resource = ConfigResource(
        "topic",
        "ck-inc",
        incremental_configs=[
            ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)
    entries = describe(admin, ConfigResource("topic", "ck-inc"))
    assert entries["segment.bytes"].value == "100000"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert live_config(broker, "ck-inc").segment_bytes == 100000

    bad = ConfigResource(
        "topic",
        "ck-inc",
        incremental_configs=[
            ConfigEntry("retention.ms", "never", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    code, message = failure(admin.incremental_alter_configs([bad], request_timeout=TIMEOUT)[bad])
    assert code == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in message


def test_confluent_alter_configs_replaces_the_set(admin: AdminClient, broker: Any) -> None:
    create(admin, "ck-alter", retention_ms="60000", segment_ms="3600000")
    resource = ConfigResource("topic", "ck-alter", set_config={"max.message.bytes": "20000"})
    with pytest.warns(DeprecationWarning):  # confluent-kafka prefers the incremental API
        futures = admin.alter_configs([resource], request_timeout=TIMEOUT)
    futures[resource].result(TIMEOUT)
    entries = describe(admin, ConfigResource("topic", "ck-alter"))
    own = {
        k: e.value
        for k, e in entries.items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    assert own == {"max.message.bytes": "20000"}
    assert live_config(broker, "ck-alter").max_message_bytes == 20000

    missing = ConfigResource("topic", "no-such-topic", set_config={"retention.ms": "1"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([missing], request_timeout=TIMEOUT)
    code, _ = failure(futures[missing])
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_confluent_broker_configs(admin: AdminClient, broker: Any) -> None:
    create(admin, "ck-broker")
    resource = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)
    assert live_config(broker, "ck-broker").retention_ms == 7200000
    entries = describe(admin, ConfigResource("broker", "0"))
    retention = entries["log.retention.ms"]
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert retention.value == "7200000"
    topic_retention = describe(admin, ConfigResource("topic", "ck-broker"))["retention.ms"]
    assert topic_retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert list(topic_retention.synonyms) == ["log.retention.ms", "log.retention.hours"]

    read_only = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    code, message = failure(
        admin.incremental_alter_configs([read_only], request_timeout=TIMEOUT)[read_only]
    )
    assert code == ErrorCode.INVALID_REQUEST
    assert "log.dirs" in message


def test_confluent_delete_records(admin: AdminClient, broker: Any) -> None:
    create(admin, "ck-delete", 2)
    fill(broker, "ck-delete", 5)
    futures = admin.delete_records(
        [TopicPartition("ck-delete", 0, 3)], request_timeout=TIMEOUT, operation_timeout=TIMEOUT
    )
    [(tp, future)] = futures.items()
    assert (tp.topic, tp.partition) == ("ck-delete", 0)
    deleted = future.result(TIMEOUT)
    assert deleted.low_watermark == 3
    assert earliest(broker, "ck-delete") == 3
    [future] = admin.delete_records(
        [TopicPartition("ck-delete", 0, 99)], request_timeout=TIMEOUT, operation_timeout=TIMEOUT
    ).values()
    code, _ = failure(future)
    assert code == ErrorCode.OFFSET_OUT_OF_RANGE


# --- kafka-python -------------------------------------------------------------------------


def test_kafka_python_alter_and_describe(
    kp_admin: KafkaAdminClient, admin: AdminClient, broker: Any
) -> None:
    create(admin, "kp-cfg")
    kp_admin.alter_configs(
        [KpConfigResource(KpConfigResourceType.TOPIC, "kp-cfg", configs={"retention.ms": "90000"})]
    )
    assert live_config(broker, "kp-cfg").retention_ms == 90000
    described = kp_admin.describe_configs(
        [KpConfigResource(KpConfigResourceType.TOPIC, "kp-cfg")], include_synonyms=True
    )
    assert described["topic"]["kp-cfg"]["retention.ms"]["value"] == "90000"
    assert described["topic"]["kp-cfg"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # With the legacy AlterConfigs, kafka-python first reads the topic's other overrides
    # and sends them along, since the request replaces the whole set.
    kp_admin.alter_configs(
        [KpConfigResource(KpConfigResourceType.TOPIC, "kp-cfg", configs={"segment.ms": "3600000"})],
        incremental=False,
    )
    config = live_config(broker, "kp-cfg")
    assert (config.segment_ms, config.retention_ms) == (3600000, 90000)


def test_kafka_python_delete_records(
    kp_admin: KafkaAdminClient, admin: AdminClient, broker: Any
) -> None:
    create(admin, "kp-delete")
    fill(broker, "kp-delete", 6)
    result = kp_admin.delete_records({KpTopicPartition("kp-delete", 0): 4})
    [(tp, info)] = result.items()
    assert tp == KpTopicPartition("kp-delete", 0)
    assert info["low_watermark"] == 4
    assert earliest(broker, "kp-delete") == 4
