"""Broker and topic configuration: parsing, defaults, precedence, errors, describe."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import logbus
from logbus.client.producer.config import PRODUCER_CONFIG
from logbus.common.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ListOf,
    OneOf,
    Password,
    Range,
    UpdateMode,
    parse_value,
    render_value,
)
from logbus.server.config.broker_config import (
    BROKER_CONFIG_DEF,
    BrokerConfig,
    Listener,
    load_properties,
    parse_listeners,
    parse_overrides,
    parse_properties,
    parse_security_protocol_map,
)
from logbus.server.config.topic_config import (
    TOPIC_CONFIG_DEF,
    TOPIC_CONFIG_SYNONYMS,
    describe_broker,
    describe_topic,
    effective_topic_config,
    validate_topic_configs,
)

HOUR_MS = 3_600_000
LONG_MAX = 2**63 - 1


@contextmanager
def naming(setting: str) -> Iterator[None]:
    """Expect a ConfigError about `setting`."""
    with pytest.raises(ConfigError) as caught:
        yield
    assert caught.value.name == setting
    assert setting in str(caught.value)


# --- the framework ---


@pytest.mark.parametrize(
    ("config_type", "raw", "expected"),
    [
        (ConfigType.BOOLEAN, "true", True),
        (ConfigType.BOOLEAN, " FALSE ", False),
        (ConfigType.BOOLEAN, "True", True),
        (ConfigType.INT, " 42 ", 42),
        (ConfigType.INT, "-7", -7),
        (ConfigType.INT, "+7", 7),
        (ConfigType.SHORT, "32767", 32767),
        (ConfigType.LONG, "9223372036854775807", LONG_MAX),
        (ConfigType.DOUBLE, "0.5", 0.5),
        (ConfigType.DOUBLE, "1e3", 1000.0),
        (ConfigType.DOUBLE, "2d", 2.0),
        (ConfigType.STRING, "  padded  ", "padded"),
        (ConfigType.LIST, "a, b ,c", ["a", "b", "c"]),
        (ConfigType.LIST, "  ", []),
        (ConfigType.LIST, "a,,b", ["a", "", "b"]),
        (ConfigType.CLASS, "org.example.Policy", "org.example.Policy"),
        (ConfigType.INT, 5, 5),
        (ConfigType.BOOLEAN, False, False),
        (ConfigType.LIST, ["x", " y"], ["x", "y"]),
    ],
)
def test_parse_value_follows_kafka_rules(
    config_type: ConfigType, raw: object, expected: object
) -> None:
    assert parse_value("some.setting", config_type, raw) == expected


@pytest.mark.parametrize(
    ("config_type", "raw", "message"),
    [
        (ConfigType.INT, "abc", "Not a number of type INT"),
        (ConfigType.INT, "1.5", "Not a number of type INT"),
        (ConfigType.INT, "1_000", "Not a number of type INT"),
        (ConfigType.INT, "2147483648", "Not a number of type INT"),
        (ConfigType.SHORT, "40000", "Not a number of type SHORT"),
        (ConfigType.LONG, "9223372036854775808", "Not a number of type LONG"),
        (ConfigType.DOUBLE, "half", "Not a number of type DOUBLE"),
        (ConfigType.BOOLEAN, "yes", "Expected value to be either true or false"),
        (ConfigType.BOOLEAN, 1, "Expected a value of type true or false"),
        (ConfigType.INT, True, "Expected a value of type INT"),
    ],
)
def test_parse_value_errors_name_the_setting(
    config_type: ConfigType, raw: object, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_value("num.partitions", config_type, raw)
    assert caught.value.name == "num.partitions"
    assert caught.value.message == message
    assert "num.partitions" in str(caught.value)


def test_config_error_reads_like_kafka() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig({"num.partitions": "abc"})
    assert str(caught.value) == (
        "Invalid value abc for configuration num.partitions: Not a number of type INT"
    )
    assert isinstance(caught.value, ValueError)


def test_password_is_hidden_everywhere() -> None:
    value = parse_value("secret", ConfigType.PASSWORD, "hunter2")
    assert value == Password("hunter2")
    assert "hunter2" not in repr(value) and "hunter2" not in str(value)
    assert render_value(ConfigType.PASSWORD, value) == "[hidden]"
    with pytest.raises(ConfigError) as caught:
        parse_value("secret", ConfigType.PASSWORD, 12)
    assert "12" not in str(caught.value)


@pytest.mark.parametrize(
    ("config_type", "value", "rendered"),
    [
        (ConfigType.BOOLEAN, True, "true"),
        (ConfigType.LIST, ["compact", "delete"], "compact,delete"),
        (ConfigType.DOUBLE, 0.5, "0.5"),
        (ConfigType.DOUBLE, 1.0, "1.0"),
        (ConfigType.DOUBLE, 1.7976931348623157e308, "1.7976931348623157E308"),
        (ConfigType.DOUBLE, 1e-4, "1.0E-4"),
        (ConfigType.LONG, LONG_MAX, "9223372036854775807"),
        (ConfigType.STRING, None, None),
    ],
)
def test_render_value_like_kafka(config_type: ConfigType, value: object, rendered: str) -> None:
    assert render_value(config_type, value) == rendered  # type: ignore[arg-type]


def test_validators_and_required_settings() -> None:
    definition = (
        ConfigDef()
        .define("size", ConfigType.INT, 10, Range(1, 100))
        .define("mode", ConfigType.STRING, "a", OneOf(("a", "b")))
        .define("policy", ConfigType.LIST, ["x"], ListOf(("x", "y")))
        .define("host", ConfigType.STRING, NO_DEFAULT)
        .define("optional", ConfigType.LONG, None)
    )
    assert definition.parse({"host": "h"}) == {
        "size": 10, "mode": "a", "policy": ["x"], "host": "h", "optional": None,
    }  # fmt: skip
    cases = [
        ({"host": "h", "size": "0"}, "size", "Value must be at least 1"),
        ({"host": "h", "size": "101"}, "size", "Value must be no more than 100"),
        ({"host": "h", "mode": "c"}, "mode", "String must be one of: a, b"),
        ({"host": "h", "policy": "x,z"}, "policy", "String must be one of: x, y"),
        ({}, "host", "Missing required configuration, it has no default"),
        ({"host": "h", "nope": "1"}, "nope", "Unknown configuration name"),
    ]
    for props, name, message in cases:
        with pytest.raises(ConfigError) as caught:
            definition.parse(props)
        assert (caught.value.name, caught.value.message) == (name, message)
    with pytest.raises(ConfigError):  # a default must pass its own validator
        ConfigDef().define("bad", ConfigType.INT, 0, Range(1))
    assert str(Range(1)) == "[1,...]" and str(Range(0, 1)) == "[0,...,1]"


# --- broker config ---


def test_broker_defaults() -> None:
    config = BrokerConfig()
    assert config.broker_id == 0
    assert config.listeners == [Listener("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert config.advertised_listeners == config.listeners
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.log_dirs == ["./data"]
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.log_segment_bytes == 1073741824
    assert config.log_retention_ms == 168 * HOUR_MS
    assert config.log_roll_ms == 168 * HOUR_MS
    assert config.log_roll_jitter_ms == 0
    assert config.log_flush_interval_ms == LONG_MAX
    assert config.log_cleanup_policy == ["delete"]
    assert config.compression_type == "producer"
    assert config.offsets_topic_num_partitions == 50
    assert config.group_min_session_timeout_ms == 6000
    assert config.zookeeper_connect is None and not config.uses_zookeeper
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.get("log.cleaner.min.cleanable.ratio") == 0.5
    assert config.get("log.retention.ms") is None


def test_every_typed_attribute_names_a_defined_setting() -> None:
    config = BrokerConfig()
    for attribute, descriptor in vars(BrokerConfig).items():
        name = getattr(descriptor, "name", None)
        if isinstance(name, str) and not attribute.startswith("_"):
            assert name in BROKER_CONFIG_DEF
            assert attribute == name.replace(".", "_")
            getattr(config, attribute)


def test_typed_values_from_strings() -> None:
    config = BrokerConfig.from_properties(
        {
            "broker.id": "3",
            "num.partitions": " 12 ",
            "auto.create.topics.enable": "FALSE",
            "log.cleanup.policy": "compact , delete",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "zookeeper.connect": "zk1:2181,zk2:2181/logbus",
        }
    )
    assert config.broker_id == 3
    assert config.num_partitions == 12
    assert config.auto_create_topics_enable is False
    assert config.log_cleanup_policy == ["compact", "delete"]
    assert config.log_cleaner_min_cleanable_ratio == 0.25
    assert config.uses_zookeeper
    assert config.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("num.io.threads") is ConfigSource.DEFAULT_CONFIG
    config.log_cleanup_policy.append("mutated")
    assert config.log_cleanup_policy == ["compact", "delete"]


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"log.retention.hours": "24"}, 24 * HOUR_MS),
        ({"log.retention.minutes": "30", "log.retention.hours": "24"}, 30 * 60_000),
        ({"log.retention.ms": "1234", "log.retention.minutes": "30"}, 1234),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-5"}, -1),
    ],
)
def test_retention_precedence(props: dict[str, str], expected: int) -> None:
    assert BrokerConfig(props).log_retention_ms == expected


def test_zero_retention_is_rejected_naming_the_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig({"log.retention.minutes": "0"})
    assert caught.value.name == "log.retention.minutes"


def test_other_derived_values() -> None:
    config = BrokerConfig(
        {
            "log.roll.hours": "2",
            "log.roll.jitter.hours": "1",
            "log.flush.scheduler.interval.ms": "3000",
            "zookeeper.session.timeout.ms": "9000",
        }
    )
    assert config.log_roll_ms == 2 * HOUR_MS
    assert config.log_roll_jitter_ms == HOUR_MS
    assert config.log_flush_interval_ms == 3000
    assert config.zookeeper_connection_timeout_ms == 9000
    config = BrokerConfig(
        {
            "log.roll.ms": "500",
            "log.roll.hours": "2",
            "log.roll.jitter.ms": "7",
            "log.flush.interval.ms": "100",
            "zookeeper.connection.timeout.ms": "1000",
        }
    )
    assert config.log_roll_ms == 500
    assert config.log_roll_jitter_ms == 7
    assert config.log_flush_interval_ms == 100
    assert config.zookeeper_connection_timeout_ms == 1000


def test_log_dirs_win_over_log_dir() -> None:
    assert BrokerConfig({"log.dir": "/a"}).log_dirs == ["/a"]
    assert BrokerConfig({"log.dir": "/a", "log.dirs": "/b, /c"}).log_dirs == ["/b", "/c"]
    with naming("log.dirs"):
        BrokerConfig({"log.dirs": " , "})
    with naming("log.dirs"):
        BrokerConfig({"log.dirs": "/b,/b"})


def test_unknown_setting_stops_start_up_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({"num.partition": "3"})
    assert caught.value.name == "num.partition"
    assert "num.partition" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("num.partitions", "0"),
        ("broker.id", "-1"),
        ("message.max.bytes", "big"),
        ("compression.type", "brotli"),
        ("log.cleanup.policy", "archive"),
        ("log.message.timestamp.type", "createtime"),
        ("log.segment.bytes", "13"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("offsets.topic.replication.factor", "70000"),
        ("delete.topic.enable", "maybe"),
    ],
)
def test_invalid_values_name_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig({name: value})
    assert caught.value.name == name
    assert str(caught.value).startswith(f"Invalid value {value} for configuration {name}: ")


def test_cross_setting_rules() -> None:
    with naming("group.max.session.timeout.ms"):
        BrokerConfig({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"})
    with naming("replica.socket.timeout.ms"):
        BrokerConfig({"replica.socket.timeout.ms": "100"})
    with naming("log.cleaner.dedupe.buffer.size"):
        BrokerConfig({"log.cleaner.dedupe.buffer.size": "1048576"})


def test_dynamic_layers_take_precedence_and_respect_update_modes() -> None:
    config = BrokerConfig(
        {"num.io.threads": "4", "message.max.bytes": "100"},
        dynamic_default={"num.io.threads": "6"},
        dynamic_per_broker={"num.io.threads": "12"},
    )
    assert config.num_io_threads == 12
    assert config.source("num.io.threads") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert config.message_max_bytes == 100
    with naming("num.partitions"):
        BrokerConfig(dynamic_per_broker={"num.partitions": "3"})
    with naming("listeners"):
        BrokerConfig(dynamic_default={"listeners": "PLAINTEXT://:9093"})
    # Kafka changes listeners per broker at run time; logbus cannot rebind live, so they
    # are read-only here and AlterConfigs refuses them.
    assert BROKER_CONFIG_DEF["listeners"].update_mode is UpdateMode.READ_ONLY


# --- listeners ---

DEFAULT_MAP = parse_security_protocol_map(
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "map"
)


def test_parse_listeners() -> None:
    listeners = parse_listeners(
        "PLAINTEXT://:9092, ssl://host.example:9093,SASL_SSL://[::1]:0", "listeners", DEFAULT_MAP
    )
    assert listeners == [
        Listener("PLAINTEXT", "", 9092, "PLAINTEXT"),
        Listener("SSL", "host.example", 9093, "SSL"),
        Listener("SASL_SSL", "::1", 0, "SASL_SSL"),
    ]
    assert str(listeners[2]) == "SASL_SSL://[::1]:0"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("PLAINTEXT://localhost:70000", "out of range"),
        ("PLAINTEXT://localhost:port", "Cannot parse"),
        ("PLAINTEXT:/localhost:9092", "Cannot parse"),
        ("localhost:9092", "Cannot parse"),
        ("CLIENT://localhost:9092", "No security protocol defined for listener CLIENT"),
        ("PLAINTEXT://a:9092,PLAINTEXT://b:9093", "used twice"),
        ("PLAINTEXT://a:9092,SSL://b:9092", "used by two listeners"),
    ],
)
def test_bad_listeners(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_listeners(value, "listeners", DEFAULT_MAP)
    assert caught.value.name == "listeners"
    assert problem in caught.value.message


def test_listener_config_rules() -> None:
    config = BrokerConfig(
        {
            "listeners": "CLIENT://0.0.0.0:9092,REPLICATION://:9093",
            "advertised.listeners": "CLIENT://broker1:9092,REPLICATION://broker1:9093",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT, REPLICATION:plaintext",
            "inter.broker.listener.name": "replication",
        }
    )
    assert config.inter_broker_listener == Listener("REPLICATION", "broker1", 9093, "PLAINTEXT")
    assert [listener.host for listener in config.listeners] == ["0.0.0.0", ""]
    prefixed = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
            "ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.location": "/keys/broker.pem",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "x required;",
        }
    )
    assert prefixed.listener_setting("SASL_SSL", "ssl.keystore.location") == "/keys/broker.pem"
    assert prefixed.listener_setting("PLAINTEXT", "ssl.keystore.location") is None
    jaas = prefixed.listener_setting("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-512")
    assert str(jaas) == "[hidden]" and jaas.value == "x required;"  # type: ignore[union-attr]
    bad = [
        ({"listeners": "PLAINTEXT://:9092,SSL://:9093"}, "ssl.keystore.location",
         "needs a key and certificate"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9093", "ssl.keystore.location": "/k.pem"},
         "ssl.keystore.type", "PEM"),
        ({"listeners": "SASL_PLAINTEXT://:9092",
          "security.inter.broker.protocol": "SASL_PLAINTEXT"},
         "sasl.enabled.mechanisms", "not GSSAPI"),
        ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
          "security.inter.broker.protocol": "SASL_PLAINTEXT"},
         "sasl.mechanism.inter.broker.protocol", "must be one of"),
        ({"listener.name.plaintext.log.retention.ms": "5"},
         "listener.name.plaintext.log.retention.ms", "Unknown"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
         "Unknown security protocol"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners",
         "non-routable"),
        ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners", "not defined"),
        ({"listeners": ""}, "listeners", "At least one listener"),
        ({"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"},
         "security.inter.broker.protocol", "must be one of the advertised listeners"),
        ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
         "inter.broker.listener.name", "Only one of"),
    ]  # fmt: skip
    for props, name, problem in bad:
        with pytest.raises(ConfigError) as caught:
            BrokerConfig(props)
        assert caught.value.name == name
        assert problem in caught.value.message


def test_advertised_listener_names_must_be_listeners() -> None:
    with pytest.raises(ConfigError, match="not defined in listeners"):
        BrokerConfig(
            {
                "listeners": "PLAINTEXT://:9092",
                "advertised.listeners": "PLAINTEXT://h:9092,OTHER://h:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            }
        )


# --- properties files and overrides ---


def test_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "broker.id=1\n"
        "  num.partitions : 3\n"
        "log.dirs /var/a,\\\n"
        "         /var/b\n"
        "key\\ with\\ spaces = spaced\n"
        "escapes=tab\\there\\nnew\\u0041\\=\\:\\\\\n"
        "empty=\n"
        "bare\n"
        "equals==x\n"
        "trailing = kept  \n"
        "# continued comment \\\n"
        "after.comment=yes\n"
        "\\#not.a.comment=1\r\n"
        "windows=crlf\r"
        "old.mac=cr\n"
        "broker.id=2\n"
        "last=line\\"
    )
    assert parse_properties(text) == {
        "broker.id": "2",
        "num.partitions": "3",
        "log.dirs": "/var/a,/var/b",
        "key with spaces": "spaced",
        "escapes": "tab\there\nnewA=:\\",
        "empty": "",
        "bare": "",
        "equals": "=x",
        "trailing": "kept  ",
        "after.comment": "yes",
        "#not.a.comment": "1",
        "windows": "crlf",
        "old.mac": "cr",
        "last": "line",
    }


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match=r"server.properties:2"):
        parse_properties("a=1\nb=\\u12x4\n", "server.properties")


def test_load_a_kafka_server_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=0\n"
        "listeners=PLAINTEXT://:9092\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        f"log.dirs={tmp_path}/kafka-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
        "zookeeper.connect=localhost:2181\n"
        "zookeeper.connection.timeout.ms=18000\n"
        "group.initial.rebalance.delay.ms=0\n",
        encoding="utf-8",
    )
    config = BrokerConfig.load(path, ["num.partitions=4", "log.dirs=/x=y"])
    assert config.num_partitions == 4
    assert config.log_dirs == ["/x=y"]
    assert config.group_initial_rebalance_delay_ms == 0
    assert load_properties(path)["zookeeper.connect"] == "localhost:2181"
    with pytest.raises(ConfigError) as caught:
        load_properties(tmp_path / "missing.properties")
    assert caught.value.name == str(tmp_path / "missing.properties")


def test_parse_overrides() -> None:
    assert parse_overrides(["a=1", " b =x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ConfigError) as caught:
        parse_overrides(["num.partitions"])
    assert caught.value.name == "num.partitions"
    with pytest.raises(ConfigError):
        parse_overrides(["=3"])


# --- topic config ---


def test_every_topic_synonym_is_a_broker_setting() -> None:
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        assert topic_name in TOPIC_CONFIG_DEF
        for synonym in synonyms:
            assert synonym.name in BROKER_CONFIG_DEF


def test_validate_topic_configs() -> None:
    assert validate_topic_configs(
        {"cleanup.policy": "compact, delete", "retention.ms": "-1", "preallocate": "TRUE"}
    ) == {"cleanup.policy": ["compact", "delete"], "retention.ms": -1, "preallocate": True}
    bad = [
        ({"retention.msec": "1"}, "retention.msec", "Unknown topic config name"),
        ({"retention.ms": None}, "retention.ms", "cannot be null"),
        ({"segment.bytes": "13"}, "segment.bytes", "Value must be at least 14"),
        ({"retention.ms": "-2"}, "retention.ms", "Value must be at least -1"),
        ({"cleanup.policy": "archive"}, "cleanup.policy", "String must be one of"),
        ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio", "no more than 1"),
        ({"max.message.bytes": "1MB"}, "max.message.bytes", "Not a number of type INT"),
        ({"remote.storage.enable": "true"}, "remote.storage.enable", "Tiered storage"),
        ({"leader.replication.throttled.replicas": "0:1,x"},
         "leader.replication.throttled.replicas", "partitionId:brokerId"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms",
         "max.compaction.lag.ms"),
    ]  # fmt: skip
    for configs, name, problem in bad:
        with pytest.raises(ConfigError) as caught:
            validate_topic_configs(configs)
        assert caught.value.name == name
        assert problem in str(caught.value)
    assert validate_topic_configs({"follower.replication.throttled.replicas": "*"}) == {
        "follower.replication.throttled.replicas": ["*"]
    }
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"})
    with naming("min.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "1000"}, broker)


def test_effective_topic_config_uses_broker_synonyms() -> None:
    broker = BrokerConfig(
        {
            "log.retention.minutes": "90",
            "log.roll.hours": "1",
            "log.segment.bytes": "1048576",
            "message.max.bytes": "2000",
            "log.cleanup.policy": "compact",
            "log.flush.interval.messages": "10",
            "compression.type": "zstd",
        }
    )
    values = effective_topic_config({"segment.bytes": "4096"}, broker)
    assert values["segment.bytes"] == 4096
    assert values["retention.ms"] == 90 * 60_000
    assert values["segment.ms"] == HOUR_MS
    assert values["max.message.bytes"] == 2000
    assert values["cleanup.policy"] == ["compact"]
    assert values["flush.messages"] == 10
    assert values["flush.ms"] == LONG_MAX
    assert values["compression.type"] == "zstd"
    assert values["remote.storage.enable"] is False
    assert values["min.cleanable.dirty.ratio"] == 0.5
    assert set(values) == set(TOPIC_CONFIG_DEF.names())
    defaults = effective_topic_config({}, BrokerConfig())
    assert defaults["retention.ms"] == 168 * HOUR_MS
    assert defaults["segment.bytes"] == 1073741824


# --- DescribeConfigs ---


def test_describe_topic_sources_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.hours": "24"})
    entries = {entry.name: entry for entry in describe_topic({"cleanup.policy": "compact"}, broker)}
    assert list(entries) == sorted(entries)
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert policy.synonyms == [
        ConfigSynonym("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    assert not policy.is_default and not policy.read_only
    assert policy.config_type is ConfigType.LIST and int(policy.config_type) == 7
    retention = entries["retention.ms"]
    assert retention.value == str(24 * HOUR_MS)
    assert retention.source is ConfigSource.STATIC_BROKER_CONFIG
    assert retention.synonyms == [
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = entries["segment.bytes"]
    assert segment.is_default and segment.source == 5
    assert segment.synonyms == [("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)]
    remote = entries["remote.storage.enable"]
    assert (remote.value, remote.synonyms, remote.is_default) == ("false", [], True)
    assert entries["message.downconversion.enable"].value == "true"
    assert entries["min.cleanable.dirty.ratio"].config_type is ConfigType.DOUBLE
    assert entries["segment.bytes"].documentation


def test_describe_topic_options() -> None:
    entries = describe_topic(
        {},
        BrokerConfig(),
        names={"retention.ms", "no.such.config"},
        include_synonyms=False,
        include_documentation=False,
    )
    assert [(e.name, e.synonyms, e.documentation) for e in entries] == [("retention.ms", [], "")]


def test_describe_broker() -> None:
    broker = BrokerConfig(
        {"log.retention.ms": "5000", "num.partitions": "3"},
        dynamic_default={"log.retention.hours": "48"},
    )
    entries = {entry.name: entry for entry in describe_broker(broker)}
    assert set(entries) == set(BROKER_CONFIG_DEF.names())
    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.source, partitions.read_only) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
        True,
    )
    assert partitions.synonyms == [
        ("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    ]
    retention_ms = entries["log.retention.ms"]
    assert retention_ms.value == "5000" and not retention_ms.read_only
    # Layer by layer, then Kafka drops the synonyms ahead of the described setting.
    assert retention_ms.synonyms == [
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert broker.log_retention_ms == 5000
    hours = entries["log.retention.hours"]
    assert (hours.value, hours.source) == ("48", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert hours.synonyms == [
        ("log.retention.hours", "48", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    minutes = entries["log.retention.minutes"]
    assert (minutes.value, minutes.source, minutes.synonyms) == (
        None,
        ConfigSource.DEFAULT_CONFIG,
        [],
    )
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.cleanup.policy"].value == "delete"
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    cluster = describe_broker(broker, cluster_default=True)
    assert [(e.name, e.value, e.source) for e in cluster] == [
        ("log.retention.hours", "48", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


def test_describe_hides_sensitive_values() -> None:
    definition = ConfigDef().define("ssl.key.password", ConfigType.PASSWORD, None)
    key = definition["ssl.key.password"]
    assert key.is_sensitive
    assert key.parse("secret") == Password("secret")


def test_one_config_error_for_the_broker_and_the_client() -> None:
    """The broker's settings word it as Kafka's ConfigException; the client's keep their
    own text. Both are the one `logbus.ConfigError`, which survives pickling (Spark ships
    exceptions between processes)."""
    kafka = ConfigError("num.partitions", "Not a number of type INT", "abc")
    assert str(kafka) == (
        "Invalid value abc for configuration num.partitions: Not a number of type INT"
    )
    assert (kafka.name, kafka.message) == ("num.partitions", "Not a number of type INT")
    assert str(ConfigError("log.dirs", "Missing")) == "Invalid configuration log.dirs: Missing"
    with pytest.raises(logbus.ConfigError, match=r"^unknown producer config 'lingr\.ms'"):
        PRODUCER_CONFIG.parse({"lingr.ms": 5})
    told = ConfigError("unknown producer config 'lingr.ms'")
    assert (str(told), told.name) == ("unknown producer config 'lingr.ms'", "")
    for error in (kafka, told):
        assert str(pickle.loads(pickle.dumps(error))) == str(error)
    assert logbus.ConfigError is ConfigError
