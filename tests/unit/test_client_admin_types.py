"""Admin client values that need no broker: AdminBatchError, config resources, settings."""

from __future__ import annotations

import pytest

from logbus.client.admin import (
    AdminBatchError,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
    TopicPartition,
)
from logbus.client.admin.config import ADMIN_CONFIG
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode


def test_batch_error_of_one_item_reads_as_that_error() -> None:
    inner = KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")
    err = AdminBatchError({"t": inner}, {})
    assert isinstance(err, KafkaError)
    assert (err.code, err.name, err.message) == (inner.code, inner.name, inner.message)
    assert str(err) == "TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    assert not err.retriable


def test_batch_error_names_each_failed_item() -> None:
    tp = TopicPartition("t", 3)
    resource = ConfigResource(ResourceType.TOPIC, "u")
    err = AdminBatchError(
        {
            tp: KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            resource: KafkaError(ErrorCode.INVALID_CONFIG, "bad"),
        },
        {TopicPartition("t", 0): 5},
    )
    assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # the first failure's
    assert str(err) == (
        "2 of 3 failed: t-3: UNKNOWN_TOPIC_OR_PARTITION; TOPIC 'u': INVALID_CONFIG: bad"
    )
    assert err.results == {TopicPartition("t", 0): 5}
    assert not err.retriable


def test_batch_error_is_retriable_only_if_every_failure_is() -> None:
    lost = KafkaConnectionError("connection to h:1 closed by the broker")
    assert AdminBatchError({"a": lost, "b": lost}, {}).retriable
    mixed = {"a": lost, "b": KafkaError(ErrorCode.INVALID_REQUEST)}
    assert not AdminBatchError(mixed, {}).retriable
    with pytest.raises(ValueError):
        AdminBatchError({}, {"a": 1})


def test_values() -> None:
    assert NewTopic("t").num_partitions == -1 and NewTopic("t").replication_factor == -1
    assert ConfigResource(ResourceType.BROKER, "0") == (ResourceType.BROKER, "0")
    assert str(ConfigResource(ResourceType.BROKER, "0")) == "BROKER '0'"
    assert ConfigSource.of(99) == ConfigSource.UNKNOWN
    assert ConfigEntry("a", "1", ConfigSource.DEFAULT_CONFIG).is_default
    assert not ConfigEntry("a", "1", ConfigSource.DYNAMIC_TOPIC_CONFIG).is_default


def test_admin_settings() -> None:
    values = ADMIN_CONFIG.parse({"default.api.timeout.ms": "1500"}, retries=3)
    assert (values["default.api.timeout.ms"], values["retries"]) == (1500, 3)
    assert values["bootstrap.servers"] == ["localhost:9092"]
    with pytest.raises(ConfigError, match="at least 1"):
        ADMIN_CONFIG.parse(default_api_timeout_ms=0)
    with pytest.raises(ConfigError, match="unknown admin config 'acks'"):
        ADMIN_CONFIG.parse({"acks": "all"})
