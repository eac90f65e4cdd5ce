"""AlterConfigs v0-2 and IncrementalAlterConfigs v0-1 on the wire against a real broker:
topic and broker resources, every operation, validate_only, every bad input with its
error code and message, how DescribeConfigs then reports sources and synonyms, and that
new values reach the live logs at once and survive a restart."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from wire import batch

from kafka_wire import WireClient, wait_for
from logbus.controller.metadata_store import EmbeddedStore
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.batch import split_batches
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def incremental(
    client: WireClient,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    *,
    version: int = 1,
    validate_only: bool = False,
) -> list[dict[str, Any]]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [
                    {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                ],
            }
            for kind, name, configs in resources
        ],
        "validate_only": validate_only,
    }
    return list(client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)["responses"])


def alter(
    client: WireClient,
    resources: list[tuple[int, str, dict[str, str | None]]],
    *,
    version: int = 2,
    validate_only: bool = False,
) -> list[dict[str, Any]]:
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": n, "value": v} for n, v in configs.items()],
            }
            for kind, name, configs in resources
        ],
        "validate_only": validate_only,
    }
    return list(client.request(ApiKey.ALTER_CONFIGS, version, body)["responses"])


def describe(client: WireClient, kind: int, name: str) -> dict[str, dict[str, Any]]:
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [result] = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert result["error_code"] == ErrorCode.NONE, result["error_message"]
    return {entry["name"]: entry for entry in result["configs"]}


def overrides(client: WireClient, topic: str) -> dict[str, str]:
    return {
        name: entry["value"]
        for name, entry in describe(client, TOPIC, topic).items()
        if entry["config_source"] == DYNAMIC_TOPIC
    }


def synonyms(entry: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def ok(results: list[dict[str, Any]]) -> None:
    for result in results:
        assert result["error_code"] == ErrorCode.NONE, result["error_message"]


def live_config(broker: Any, topic: str, partition: int = 0) -> Any:
    part = broker.broker.replica_manager.partition(topic, partition)
    return part.log.config


@pytest.fixture
def client(broker: Any) -> Any:
    with WireClient(broker.bootstrap) as c:
        yield c


# --- ApiVersions -----------------------------------------------------------------------


def test_api_versions_declare_the_new_apis(client: WireClient) -> None:
    response = client.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    versions = {a["api_key"]: (a["min_version"], a["max_version"]) for a in response["api_keys"]}
    assert versions[ApiKey.ALTER_CONFIGS] == (0, 2)
    assert versions[ApiKey.INCREMENTAL_ALTER_CONFIGS] == (0, 1)
    assert versions[ApiKey.DELETE_RECORDS] == (0, 2)


# --- topic resources --------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_operations_on_a_topic(broker: Any, client: WireClient, version: int) -> None:
    assert client.create_topic("orders", 1)[0] == ErrorCode.NONE
    ok(
        incremental(
            client,
            [
                (
                    TOPIC,
                    "orders",
                    [("retention.ms", SET, "3600000"), ("cleanup.policy", APPEND, "compact")],
                )
            ],
            version=version,
        )
    )
    assert overrides(client, "orders") == {
        "retention.ms": "3600000",
        "cleanup.policy": "delete,compact",
    }
    config = live_config(broker, "orders")
    assert (config.retention_ms, config.cleanup_policy) == (3600000, "delete,compact")

    # APPEND skips items already there; SUBTRACT removes items; DELETE drops the override.
    ok(
        incremental(
            client,
            [
                (
                    TOPIC,
                    "orders",
                    [
                        ("cleanup.policy", SUBTRACT, "delete"),
                        ("retention.ms", DELETE, None),
                        ("follower.replication.throttled.replicas", APPEND, "0:0,0:0"),
                    ],
                )
            ],
            version=version,
        )
    )
    assert overrides(client, "orders") == {
        "cleanup.policy": "compact",
        "follower.replication.throttled.replicas": "0:0",
    }
    config = live_config(broker, "orders")
    assert (config.retention_ms, config.cleanup_policy) == (604800000, "compact")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_whole_set(
    broker: Any, client: WireClient, version: int
) -> None:
    assert (
        client.create_topic("events", 1, {"retention.ms": "1000", "segment.bytes": "100000"})[0]
        == 0
    )
    ok(alter(client, [(TOPIC, "events", {"max.message.bytes": "5000"})], version=version))
    assert overrides(client, "events") == {"max.message.bytes": "5000"}
    config = live_config(broker, "events")
    assert (config.max_message_bytes, config.retention_ms, config.segment_bytes) == (
        5000,
        604800000,
        1073741824,
    )
    ok(alter(client, [(TOPIC, "events", {})], version=version))
    assert overrides(client, "events") == {}


def test_validate_only_changes_nothing(broker: Any, client: WireClient) -> None:
    assert client.create_topic("dry", 1)[0] == ErrorCode.NONE
    ok(incremental(client, [(TOPIC, "dry", [("retention.ms", SET, "5")])], validate_only=True))
    ok(alter(client, [(TOPIC, "dry", {"retention.ms": "5"})], validate_only=True))
    ok(incremental(client, [(BROKER, "", [("log.retention.ms", SET, "5")])], validate_only=True))
    assert overrides(client, "dry") == {}
    assert live_config(broker, "dry").retention_ms == 604800000
    assert describe(client, BROKER, "") == {}
    # A bad value is still reported.
    [result] = incremental(
        client, [(TOPIC, "dry", [("retention.ms", SET, "x")])], validate_only=True
    )
    assert result["error_code"] == ErrorCode.INVALID_CONFIG


def test_new_settings_reach_live_logs(broker: Any, client: WireClient) -> None:
    """segment.bytes and max.message.bytes act on the next append, without a restart."""
    assert client.create_topic("live", 1)[0] == ErrorCode.NONE
    value = b"x" * 300
    assert client.produce("live", 0, batch(value))["error_code"] == ErrorCode.NONE
    ok(
        incremental(
            client,
            [(TOPIC, "live", [("segment.bytes", SET, "1000"), ("max.message.bytes", SET, "500")])],
        )
    )
    for _ in range(6):
        assert client.produce("live", 0, batch(value))["error_code"] == ErrorCode.NONE
    log = broker.broker.replica_manager.partition("live", 0).log
    assert len(log.segments) >= 3
    too_big = client.produce("live", 0, batch(b"y" * 600))
    assert too_big["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    assert [r.value for r in client.read_all("live", 0)] == [value] * 7


def test_stored_as_kafka_does_with_change_notifications(broker: Any, client: WireClient) -> None:
    assert client.create_topic("stored", 1)[0] == ErrorCode.NONE
    ok(incremental(client, [(TOPIC, "stored", [("retention.ms", SET, "1000")])]))
    ok(incremental(client, [(BROKER, "", [("log.retention.bytes", SET, "1000000")])]))
    ok(incremental(client, [(BROKER, "0", [("message.max.bytes", SET, "2000000")])]))
    store = broker.broker.store
    assert store.get_json("/config/topics/stored") == {
        "version": 1,
        "config": {"retention.ms": "1000"},
    }
    assert store.get_json("/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.bytes": "1000000"},
    }
    assert store.get_json("/config/brokers/0")["config"] == {"message.max.bytes": "2000000"}
    changes = [
        json.loads(store.get(f"/config/changes/{c}")[0]) for c in store.children("/config/changes")
    ]
    assert [c["entity_path"] for c in changes][-3:] == [
        "topics/stored",
        "brokers/<default>",
        "brokers/0",
    ]
    assert all(c["version"] == 2 for c in changes)


def test_topic_configs_survive_a_restart(broker: Any) -> None:
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("kept", 1)[0] == ErrorCode.NONE
        ok(incremental(client, [(TOPIC, "kept", [("retention.bytes", SET, "123456")])]))
        ok(incremental(client, [(BROKER, "", [("log.segment.bytes", SET, "2000000")])]))
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        assert overrides(client, "kept") == {"retention.bytes": "123456"}
        config = live_config(broker, "kept")
        assert (config.retention_bytes, config.segment_bytes) == (123456, 2000000)
        assert describe(client, TOPIC, "kept")["segment.bytes"]["config_source"] == DYNAMIC_DEFAULT


# --- broker resources and precedence ----------------------------------------------------


def test_broker_configs_precedence_and_sources(broker_factory: Any) -> None:
    """Per-broker dynamic over cluster default dynamic over static over Kafka's default,
    for the log.retention.* family; topics without an override follow at once."""
    broker = broker_factory(log_retention_hours="100")
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("plain", 1)[0] == ErrorCode.NONE
        assert client.create_topic("own", 1, {"retention.ms": "77"})[0] == ErrorCode.NONE
        assert live_config(broker, "plain").retention_ms == 100 * 3600_000

        ok(incremental(client, [(BROKER, "", [("log.retention.minutes", SET, "30")])]))
        assert live_config(broker, "plain").retention_ms == 30 * 60_000
        ok(incremental(client, [(BROKER, "0", [("log.retention.ms", SET, "5000")])]))
        assert live_config(broker, "plain").retention_ms == 5000
        assert live_config(broker, "own").retention_ms == 77

        retention = describe(client, TOPIC, "plain")["retention.ms"]
        assert retention["value"] == "5000"
        assert retention["config_source"] == DYNAMIC_BROKER
        assert synonyms(retention) == [
            ("log.retention.ms", "5000", DYNAMIC_BROKER),
            ("log.retention.minutes", "30", DYNAMIC_DEFAULT),
            ("log.retention.hours", "100", STATIC),
            ("log.retention.hours", "168", DEFAULT),
        ]
        own = describe(client, TOPIC, "own")["retention.ms"]
        assert own["config_source"] == DYNAMIC_TOPIC
        assert synonyms(own)[0] == ("retention.ms", "77", DYNAMIC_TOPIC)

        broker_entries = describe(client, BROKER, "0")
        assert broker_entries["log.retention.ms"]["config_source"] == DYNAMIC_BROKER
        assert broker_entries["log.retention.minutes"]["config_source"] == DYNAMIC_DEFAULT
        assert not broker_entries["log.retention.ms"]["read_only"]
        assert broker_entries["broker.id"]["read_only"]
        assert set(describe(client, BROKER, "")) == {"log.retention.minutes"}

        ok(incremental(client, [(BROKER, "0", [("log.retention.ms", DELETE, None)])]))
        assert live_config(broker, "plain").retention_ms == 30 * 60_000
        ok(alter(client, [(BROKER, "", {})]))
        assert live_config(broker, "plain").retention_ms == 100 * 3600_000
        assert describe(client, TOPIC, "plain")["retention.ms"]["config_source"] == STATIC


def test_dynamic_broker_defaults_reach_every_setting(broker: Any, client: WireClient) -> None:
    assert client.create_topic("t", 1)[0] == ErrorCode.NONE
    ok(
        incremental(
            client,
            [
                (
                    BROKER,
                    "",
                    [
                        ("message.max.bytes", SET, "4096"),
                        ("log.segment.bytes", SET, "65536"),
                        ("min.insync.replicas", SET, "1"),
                        ("log.cleanup.policy", SET, "compact"),
                        ("log.flush.interval.messages", SET, "10"),
                        ("log.message.timestamp.type", SET, "LogAppendTime"),
                        ("log.segment.delete.delay.ms", SET, "100"),
                    ],
                )
            ],
        )
    )
    config = live_config(broker, "t")
    assert config.max_message_bytes == 4096
    assert config.segment_bytes == 65536
    assert config.cleanup_policy == "compact"
    assert config.flush_messages == 10
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.file_delete_delay_ms == 100
    # New topics get the new defaults too.
    assert client.create_topic("t2", 1)[0] == ErrorCode.NONE
    assert live_config(broker, "t2").segment_bytes == 65536
    assert broker.broker.config.message_max_bytes == 4096


def test_append_and_subtract_on_broker_lists(broker: Any, client: WireClient) -> None:
    ok(incremental(client, [(BROKER, "", [("log.cleanup.policy", APPEND, "compact")])]))
    assert describe(client, BROKER, "")["log.cleanup.policy"]["value"] == "delete,compact"
    ok(incremental(client, [(BROKER, "", [("log.cleanup.policy", SUBTRACT, "delete")])]))
    assert describe(client, BROKER, "")["log.cleanup.policy"]["value"] == "compact"


def test_broker_logger_levels(broker: Any, client: WireClient) -> None:
    ok(
        incremental(
            client, [(BROKER_LOGGER, "0", [("logbus.server.api.alter_configs", SET, "DEBUG")])]
        )
    )
    body = {
        "resources": [
            {
                "resource_type": BROKER_LOGGER,
                "resource_name": "0",
                "configuration_keys": ["logbus.server.api.alter_configs"],
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    [result] = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert [c["value"] for c in result["configs"]] == ["DEBUG"]
    ok(
        incremental(
            client, [(BROKER_LOGGER, "0", [("logbus.server.api.alter_configs", DELETE, None)])]
        )
    )


# --- bad input ---------------------------------------------------------------------------

BAD_INCREMENTAL = [
    (
        (TOPIC, "missing", [("retention.ms", SET, "1")]),
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The topic 'missing' does not exist.",
    ),
    (
        (TOPIC, "bad/name", [("retention.ms", SET, "1")]),
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "bad/name",
    ),
    ((TOPIC, "t", [("retention.mss", SET, "1")]), ErrorCode.INVALID_CONFIG, "retention.mss"),
    (
        (TOPIC, "t", [("retention.ms", SET, "soon")]),
        ErrorCode.INVALID_CONFIG,
        "Invalid value soon for configuration retention.ms",
    ),
    ((TOPIC, "t", [("retention.ms", SET, "-2")]), ErrorCode.INVALID_CONFIG, "retention.ms"),
    ((TOPIC, "t", [("segment.bytes", SET, "10")]), ErrorCode.INVALID_CONFIG, "segment.bytes"),
    ((TOPIC, "t", [("cleanup.policy", SET, "shred")]), ErrorCode.INVALID_CONFIG, "cleanup.policy"),
    (
        (TOPIC, "t", [("cleanup.policy", APPEND, "shred")]),
        ErrorCode.INVALID_CONFIG,
        "cleanup.policy",
    ),
    (
        (TOPIC, "t", [("message.timestamp.type", SET, "Later")]),
        ErrorCode.INVALID_CONFIG,
        "message.timestamp.type",
    ),
    (
        (TOPIC, "t", [("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")]),
        ErrorCode.INVALID_CONFIG,
        "min.compaction.lag.ms",
    ),
    (
        (TOPIC, "t", [("remote.storage.enable", SET, "true")]),
        ErrorCode.INVALID_CONFIG,
        "remote.storage.enable",
    ),
    (
        (TOPIC, "t", [("retention.ms", APPEND, "1")]),
        ErrorCode.INVALID_CONFIG,
        "Config value append is not allowed for config key: retention.ms",
    ),
    (
        (TOPIC, "t", [("retention.ms", SUBTRACT, "1")]),
        ErrorCode.INVALID_CONFIG,
        "Config value subtract is not allowed for config key: retention.ms",
    ),
    ((TOPIC, "t", [("nope", APPEND, "1")]), ErrorCode.INVALID_CONFIG, "Unknown config name: nope"),
    (
        (TOPIC, "t", [("retention.ms", 7, "1")]),
        ErrorCode.INVALID_REQUEST,
        "Unknown operations type 7",
    ),
    (
        (TOPIC, "t", [("retention.ms", SET, None)]),
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for : SET:retention.ms",
    ),
    (
        (TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]),
        ErrorCode.INVALID_REQUEST,
        "Error due to duplicate config keys : retention.ms",
    ),
    (
        (BROKER, "0", [("broker.id", SET, "3")]),
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(broker.id)",
    ),
    (
        (BROKER, "", [("log.dirs", SET, "/tmp/x"), ("listeners", SET, "PLAINTEXT://:1")]),
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(listeners, log.dirs)",
    ),
    (
        (BROKER, "7", [("log.retention.ms", SET, "1")]),
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 0, but received 7",
    ),
    (
        (BROKER, "zero", [("log.retention.ms", SET, "1")]),
        ErrorCode.INVALID_REQUEST,
        "Broker id must be an integer, but it is: zero",
    ),
    (
        (BROKER, "0", [("log.retention.mss", SET, "1")]),
        ErrorCode.INVALID_CONFIG,
        "log.retention.mss",
    ),
    (
        (BROKER, "0", [("log.segment.bytes", SET, "big")]),
        ErrorCode.INVALID_CONFIG,
        "Invalid value big for configuration log.segment.bytes",
    ),
    ((BROKER, "", [("log.retention.ms", SET, "0")]), ErrorCode.INVALID_CONFIG, "log.retention.ms"),
    (
        (BROKER, "", [("message.max.bytes", APPEND, "1")]),
        ErrorCode.INVALID_CONFIG,
        "message.max.bytes",
    ),
    (
        (BROKER_LOGGER, "0", [("no.such.logger", SET, "INFO")]),
        ErrorCode.INVALID_CONFIG,
        "Logger no.such.logger does not exist!",
    ),
    ((BROKER_LOGGER, "0", [("root", SET, "LOUD")]), ErrorCode.INVALID_CONFIG, "LOUD"),
    ((BROKER_LOGGER, "0", [("root", DELETE, None)]), ErrorCode.INVALID_REQUEST, "root"),
    (
        (BROKER_LOGGER, "0", [("root", APPEND, "INFO")]),
        ErrorCode.INVALID_REQUEST,
        "APPEND operation is not allowed",
    ),
    (
        (BROKER_LOGGER, "", [("root", SET, "INFO")]),
        ErrorCode.INVALID_REQUEST,
        "Broker id must not be empty",
    ),
    # GROUP configs (KIP-932's share.auto.offset.reset): unknown names and values refused
    ((32, "g", [("x", SET, "1")]), ErrorCode.INVALID_CONFIG, "unknown group config x"),
    (
        (32, "g", [("share.auto.offset.reset", SET, "sometimes")]),
        ErrorCode.INVALID_CONFIG,
        "invalid value",
    ),
    ((99, "x", [("x", SET, "1")]), ErrorCode.INVALID_REQUEST, "resource type is UNKNOWN"),
]


@pytest.mark.parametrize(("resource", "error", "message"), BAD_INCREMENTAL)
def test_incremental_bad_input(
    broker: Any, client: WireClient, resource: Any, error: ErrorCode, message: str
) -> None:
    assert client.create_topic("t", 1)[0] == ErrorCode.NONE
    [result] = incremental(client, [resource])
    assert result["error_code"] == error, result["error_message"]
    assert message in result["error_message"]
    assert (result["resource_type"], result["resource_name"]) == resource[:2]
    # Nothing was written and the broker keeps serving.
    assert overrides(client, "t") == {}
    assert describe(client, BROKER, "") == {}


BAD_ALTER = [
    ((TOPIC, "missing", {"retention.ms": "1"}), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "missing"),
    (
        (TOPIC, "t", {"retention.ms": None}),
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for : retention.ms",
    ),
    ((TOPIC, "t", {"no.such": "1"}), ErrorCode.INVALID_CONFIG, "no.such"),
    ((TOPIC, "t", {"flush.ms": "-1"}), ErrorCode.INVALID_CONFIG, "flush.ms"),
    ((BROKER, "0", {"log.dirs": "/x"}), ErrorCode.INVALID_REQUEST, "Set(log.dirs)"),
    (
        (BROKER_LOGGER, "0", {"root": "INFO"}),
        ErrorCode.INVALID_REQUEST,
        "resource type is BROKER_LOGGER",
    ),
]


@pytest.mark.parametrize(("resource", "error", "message"), BAD_ALTER)
def test_alter_bad_input(
    broker: Any, client: WireClient, resource: Any, error: ErrorCode, message: str
) -> None:
    assert client.create_topic("t", 1, {"retention.ms": "1000"})[0] == ErrorCode.NONE
    [result] = alter(client, [resource])
    assert result["error_code"] == error, result["error_message"]
    assert message in result["error_message"]
    assert overrides(client, "t") == {"retention.ms": "1000"}


def test_duplicate_resources_fail_and_others_succeed(broker: Any, client: WireClient) -> None:
    assert client.create_topic("a", 1)[0] == ErrorCode.NONE
    assert client.create_topic("b", 1)[0] == ErrorCode.NONE
    results = incremental(
        client,
        [
            (TOPIC, "a", [("retention.ms", SET, "1000")]),
            (TOPIC, "b", [("retention.ms", SET, "2000")]),
            (TOPIC, "a", [("retention.ms", SET, "3000")]),
        ],
    )
    assert [r["error_code"] for r in results] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
    ]
    assert results[0]["error_message"] == "Each resource must appear at most once."
    assert overrides(client, "a") == {}
    assert overrides(client, "b") == {"retention.ms": "2000"}


def test_a_stored_config_this_version_rejects_does_not_stop_the_broker(broker: Any) -> None:
    """A dynamic broker layer that no longer validates is ignored with a log line."""
    broker.stop()
    store = EmbeddedStore(broker.data_dir)
    store.create_json("/config/brokers/<default>", {"version": 1, "config": {"nope": "1"}})
    store.close()
    broker.start()
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("after", 1)[0] == ErrorCode.NONE
        wait_for(lambda: client.metadata(["after"])["topics"][0]["error_code"] == 0)


# --- storage settings take effect on the next append -------------------------------------


def stored_codecs(client: WireClient, topic: str) -> list[int]:
    data = client.fetch(topic, 0, 0)["records"]
    return [header.compression for _, header in split_batches(data)]


def test_compression_type_rewrites_batches(broker: Any, client: WireClient) -> None:
    assert client.create_topic("packed", 1)[0] == ErrorCode.NONE
    plain = build_batch([NewRecord(b"k", b"v" * 100)] * 3)
    zstd = build_batch([NewRecord(b"k", b"w" * 100)] * 3, compression=CompressionType.ZSTD)
    assert client.produce("packed", 0, plain)["error_code"] == ErrorCode.NONE
    ok(incremental(client, [(TOPIC, "packed", [("compression.type", SET, "gzip")])]))
    assert client.produce("packed", 0, plain)["error_code"] == ErrorCode.NONE
    assert client.produce("packed", 0, zstd)["error_code"] == ErrorCode.NONE
    ok(incremental(client, [(TOPIC, "packed", [("compression.type", SET, "uncompressed")])]))
    assert client.produce("packed", 0, zstd)["error_code"] == ErrorCode.NONE
    assert stored_codecs(client, "packed") == [0, 1, 1, 0]
    values = [r.value for r in client.read_all("packed", 0)]
    assert values == [b"v" * 100] * 6 + [b"w" * 100] * 6
    assert [r.offset for r in client.read_all("packed", 0)] == list(range(12))


def test_timestamp_bounds(broker: Any, client: WireClient) -> None:
    assert client.create_topic("clock", 1)[0] == ErrorCode.NONE
    ok(
        incremental(
            client,
            [
                (
                    TOPIC,
                    "clock",
                    [
                        ("message.timestamp.before.max.ms", SET, "3600000"),
                        ("message.timestamp.after.max.ms", SET, "60000"),
                    ],
                )
            ],
        )
    )
    now = int(time.time() * 1000)
    past = client.produce("clock", 0, build_batch([NewRecord(None, b"old", (), now - 7200_000)]))
    assert past["error_code"] == ErrorCode.INVALID_TIMESTAMP
    future = client.produce("clock", 0, build_batch([NewRecord(None, b"new", (), now + 600_000)]))
    assert future["error_code"] == ErrorCode.INVALID_TIMESTAMP
    fine = client.produce("clock", 0, build_batch([NewRecord(None, b"now", (), now)]))
    assert (fine["error_code"], fine["base_offset"]) == (ErrorCode.NONE, 0)
    # LogAppendTime topics take the broker's clock instead, so any timestamp is accepted.
    ok(incremental(client, [(TOPIC, "clock", [("message.timestamp.type", SET, "LogAppendTime")])]))
    late = client.produce("clock", 0, build_batch([NewRecord(None, b"old", (), now - 7200_000)]))
    assert late["error_code"] == ErrorCode.NONE


def test_every_storage_setting_reaches_the_log_config(broker: Any, client: WireClient) -> None:
    assert client.create_topic("all", 1)[0] == ErrorCode.NONE
    settings = {
        "segment.jitter.ms": "500",
        "segment.index.bytes": "4096",
        "index.interval.bytes": "128",
        "flush.ms": "1000",
        "delete.retention.ms": "1000",
        "min.compaction.lag.ms": "10",
        "max.compaction.lag.ms": "100000",
        "min.cleanable.dirty.ratio": "0.25",
        "preallocate": "true",
        "unclean.leader.election.enable": "true",
        "message.downconversion.enable": "false",
        "compression.zstd.level": "7",
        "min.insync.replicas": "1",
    }
    ok(incremental(client, [(TOPIC, "all", [(k, SET, v) for k, v in settings.items()])]))
    config = live_config(broker, "all")
    assert (config.segment_jitter_ms, config.segment_index_bytes) == (500, 4096)
    assert (config.index_interval_bytes, config.flush_ms) == (128, 1000)
    assert (config.delete_retention_ms, config.min_compaction_lag_ms) == (1000, 10)
    assert (config.max_compaction_lag_ms, config.min_cleanable_ratio) == (100000, 0.25)
    assert (config.preallocate, config.unclean_leader_election_enable) == (True, True)
    assert (config.message_downconversion_enable, config.compression_zstd_level) == (False, 7)
    # A new segment takes its jitter from the new settings.
    log = broker.broker.replica_manager.partition("all", 0).log
    segment = broker.loop.run(_roll(log))
    assert 0 <= segment.roll_jitter_ms < 500


async def _roll(log: Any) -> Any:
    assert log.append_as_leader(build_batch([NewRecord(None, b"x")]), 0).first_offset == 0
    return log.roll()


def test_dynamic_cleaner_settings_reconfigure_the_log_cleaner(
    broker: Any, client: WireClient
) -> None:
    cleaner = broker.broker.log_manager.cleaner
    assert cleaner.config.max_io_bytes_per_second != 12345.0
    [result] = incremental(
        client, [(BROKER, "", [("log.cleaner.io.max.bytes.per.second", SET, "12345")])]
    )
    assert result["error_code"] == ErrorCode.NONE
    wait_for(lambda: cleaner.config.max_io_bytes_per_second == 12345.0)
    [result] = incremental(client, [(BROKER, "0", [("log.cleaner.backoff.ms", SET, "250")])])
    assert result["error_code"] == ErrorCode.NONE
    wait_for(lambda: cleaner.config.backoff_ms == 250)
