"""Topic-level configs, their broker-level synonyms, and DescribeConfigs results.

Topic settings have Kafka's names, types, defaults and valid values (`LogConfig`). A topic
without an override takes the value of its broker synonym, in Kafka's precedence order
(`ServerTopicConfigSynonyms`): `retention.ms` <- log.retention.ms, log.retention.minutes,
log.retention.hours. `describe_topic` and `describe_broker` build DescribeConfigs entries
with the sources and synonyms Kafka reports (`ConfigHelper`). Pure code: no I/O.

Not defined (so rejected as unknown): the deprecated `message.format.version` and
`message.timestamp.difference.max.ms`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from logbus.common.config_def import (
    Check,
    ConfigDef,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ConfigValue,
    ListOf,
    OneOf,
    Range,
    UpdateMode,
)
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.broker_config_def import (
    BROKER_CONFIG_DEF,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    GZIP_LEVEL,
    LONG_MAX,
    LZ4_LEVEL,
    TIMESTAMP_TYPES,
    ZSTD_LEVEL,
)
from logbus.server.config.listeners import split_listener_setting

__all__ = [
    "BROKER_SYNONYM_GROUPS",
    "TOPIC_CONFIG_DEF",
    "TOPIC_CONFIG_SYNONYMS",
    "TopicSynonym",
    "describe_broker",
    "describe_topic",
    "effective_topic_config",
    "validate_topic_configs",
]

_BOOL, _STR, _INT, _LONG, _DOUBLE, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_MINUTE_MS: Final = 60 * 1000
_HOUR_MS: Final = 60 * _MINUTE_MS
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(value: ConfigValue) -> str | None:
    items = value if isinstance(value, list) else []
    if "".join(items) == "*" or all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        return None
    return "Must be '*' or a list of partitionId:brokerId pairs"


_THROTTLED: Final = Check(_throttled_replicas, "[partitionId]:[brokerId],... or *")

TOPIC_CONFIG_DEF: Final = ConfigDef()
_define = TOPIC_CONFIG_DEF.define

# fmt: off
_define("cleanup.policy", _LIST, ["delete"], ListOf(CLEANUP_POLICIES), doc=(
    "What happens to old segments: 'delete' removes them by age or size, 'compact' keeps "
    "the latest record of each key; both may be given."))
_define("compression.type", _STR, "producer", OneOf(COMPRESSION_TYPES), doc=(
    "Compression of stored batches; 'producer' keeps the producer's codec, 'uncompressed' "
    "stores batches uncompressed."))
_define("compression.gzip.level", _INT, -1, GZIP_LEVEL, doc="gzip level when recompressing.")
_define("compression.lz4.level", _INT, 9, LZ4_LEVEL, doc="lz4 level when recompressing.")
_define("compression.zstd.level", _INT, 3, ZSTD_LEVEL, doc="zstd level when recompressing.")
_define("delete.retention.ms", _LONG, 86400000, Range(0), doc=(
    "How long tombstones stay readable in a compacted topic."))
_define("file.delete.delay.ms", _LONG, 60000, Range(0), doc=(
    "Wait between marking a segment deleted and removing its files."))
_define("flush.messages", _LONG, LONG_MAX, Range(1), doc=(
    "Messages appended before the log is fsynced."))
_define("flush.ms", _LONG, LONG_MAX, Range(0), doc=(
    "Longest unflushed data may stay in the log."))
_define("follower.replication.throttled.replicas", _LIST, [], _THROTTLED, doc=(
    "Replicas whose follower-side replication is throttled, as partition:broker pairs or *."))
_define("index.interval.bytes", _INT, 4096, Range(0), doc="Bytes appended between index entries.")
_define("leader.replication.throttled.replicas", _LIST, [], _THROTTLED, doc=(
    "Replicas whose leader-side replication is throttled, as partition:broker pairs or *."))
_define("local.retention.bytes", _LONG, -2, Range(-2), doc=(
    "Tiered storage only: local size limit; -2 means retention.bytes."))
_define("local.retention.ms", _LONG, -2, Range(-2), doc=(
    "Tiered storage only: local age limit; -2 means retention.ms."))
_define("max.compaction.lag.ms", _LONG, LONG_MAX, Range(1), doc=(
    "Oldest a record may get before its segment must be compacted."))
_define("max.message.bytes", _INT, 1048588, Range(0), doc="Largest record batch accepted.")
_define("message.downconversion.enable", _BOOL, True, doc=(
    "Convert batches for fetchers that only read old message formats."))
_define("message.timestamp.after.max.ms", _LONG, LONG_MAX, Range(0), doc=(
    "How far in the future a CreateTime timestamp may be."))
_define("message.timestamp.before.max.ms", _LONG, LONG_MAX, Range(0), doc=(
    "How far in the past a CreateTime timestamp may be."))
_define("message.timestamp.type", _STR, "CreateTime", OneOf(TIMESTAMP_TYPES), doc=(
    "Whether stored timestamps are the producer's (CreateTime) or the broker's "
    "(LogAppendTime)."))
_define("min.cleanable.dirty.ratio", _DOUBLE, 0.5, Range(0, 1), doc=(
    "Dirty share of the log that makes it eligible for compaction."))
_define("min.compaction.lag.ms", _LONG, 0, Range(0), doc=(
    "Youngest a record may be and still be compacted."))
_define("min.insync.replicas", _INT, 1, Range(1), doc=(
    "In-sync replicas needed to accept an acks=all write."))
_define("preallocate", _BOOL, False, doc="Preallocate segment files at full size.")
_define("remote.storage.enable", _BOOL, False, doc=(
    "Tiered storage; logbus has none, so only false is accepted."))
_define("retention.bytes", _LONG, -1, doc=(
    "Partition size above which the oldest segments are deleted; -1 for no limit."))
_define("retention.ms", _LONG, 604800000, Range(-1), doc=(
    "Age after which segments are deleted; -1 keeps them forever."))
_define("segment.bytes", _INT, 1073741824, Range(14), doc="Size at which a new segment is rolled.")
_define("segment.index.bytes", _INT, 10485760, Range(4), doc=(
    "Size of a segment's offset and time index files."))
_define("segment.jitter.ms", _LONG, 0, Range(0), doc=(
    "Most random time subtracted from segment.ms, to spread segment rolls."))
_define("segment.ms", _LONG, 604800000, Range(1), doc=(
    "Age at which a new segment is rolled, even if not full."))
_define("unclean.leader.election.enable", _BOOL, False, doc=(
    "Allow an out-of-sync replica to become leader, risking data loss."))
# fmt: on


@dataclass(frozen=True)
class TopicSynonym:
    """A broker setting that supplies a topic setting's default, and the factor that turns
    its unit into the topic setting's (hours -> ms)."""

    name: str
    scale: int = 1


TOPIC_CONFIG_SYNONYMS: Final[dict[str, tuple[TopicSynonym, ...]]] = {
    "segment.bytes": (TopicSynonym("log.segment.bytes"),),
    "segment.ms": (TopicSynonym("log.roll.ms"), TopicSynonym("log.roll.hours", _HOUR_MS)),
    "segment.jitter.ms": (
        TopicSynonym("log.roll.jitter.ms"),
        TopicSynonym("log.roll.jitter.hours", _HOUR_MS),
    ),
    "segment.index.bytes": (TopicSynonym("log.index.size.max.bytes"),),
    "flush.messages": (TopicSynonym("log.flush.interval.messages"),),
    "flush.ms": (
        TopicSynonym("log.flush.interval.ms"),
        TopicSynonym("log.flush.scheduler.interval.ms"),
    ),
    "retention.bytes": (TopicSynonym("log.retention.bytes"),),
    "retention.ms": (
        TopicSynonym("log.retention.ms"),
        TopicSynonym("log.retention.minutes", _MINUTE_MS),
        TopicSynonym("log.retention.hours", _HOUR_MS),
    ),
    "max.message.bytes": (TopicSynonym("message.max.bytes"),),
    "index.interval.bytes": (TopicSynonym("log.index.interval.bytes"),),
    "delete.retention.ms": (TopicSynonym("log.cleaner.delete.retention.ms"),),
    "min.compaction.lag.ms": (TopicSynonym("log.cleaner.min.compaction.lag.ms"),),
    "max.compaction.lag.ms": (TopicSynonym("log.cleaner.max.compaction.lag.ms"),),
    "file.delete.delay.ms": (TopicSynonym("log.segment.delete.delay.ms"),),
    "min.cleanable.dirty.ratio": (TopicSynonym("log.cleaner.min.cleanable.ratio"),),
    "cleanup.policy": (TopicSynonym("log.cleanup.policy"),),
    "unclean.leader.election.enable": (TopicSynonym("unclean.leader.election.enable"),),
    "min.insync.replicas": (TopicSynonym("min.insync.replicas"),),
    "compression.type": (TopicSynonym("compression.type"),),
    "compression.gzip.level": (TopicSynonym("compression.gzip.level"),),
    "compression.lz4.level": (TopicSynonym("compression.lz4.level"),),
    "compression.zstd.level": (TopicSynonym("compression.zstd.level"),),
    "preallocate": (TopicSynonym("log.preallocate"),),
    "message.timestamp.type": (TopicSynonym("log.message.timestamp.type"),),
    "message.timestamp.before.max.ms": (TopicSynonym("log.message.timestamp.before.max.ms"),),
    "message.timestamp.after.max.ms": (TopicSynonym("log.message.timestamp.after.max.ms"),),
    "message.downconversion.enable": (TopicSynonym("log.message.downconversion.enable"),),
    "local.retention.ms": (TopicSynonym("log.local.retention.ms"),),
    "local.retention.bytes": (TopicSynonym("log.local.retention.bytes"),),
}
"""Topic setting -> the broker settings that supply its default, highest precedence first.
Settings not listed (remote.storage.enable, the throttled replica lists) have no broker
default."""

BROKER_SYNONYM_GROUPS: Final[tuple[tuple[str, ...], ...]] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
"""Broker settings that are one value in different units, highest precedence first."""

# Broker-derived defaults whose rules go beyond "first set synonym, scaled".
_DERIVED: Final[dict[str, Callable[[BrokerConfig], int]]] = {
    "retention.ms": lambda config: config.log_retention_ms,
    "segment.ms": lambda config: config.log_roll_ms,
    "segment.jitter.ms": lambda config: config.log_roll_jitter_ms,
    "flush.ms": lambda config: config.log_flush_interval_ms,
}

_UNKNOWN_TOPIC_CONFIG: Final = "Unknown topic config name"


def validate_topic_configs(
    configs: Mapping[str, object], broker_config: BrokerConfig | None = None
) -> dict[str, ConfigValue]:
    """Parse a topic's overrides (CreateTopics / AlterConfigs input) into typed values.

    Raises `ConfigError` naming the setting for an unknown name, an invalid or null value,
    min.compaction.lag.ms above max.compaction.lag.ms (checked against the broker's
    defaults too when `broker_config` is given), or remote storage.
    """
    values: dict[str, ConfigValue] = {}
    for name, raw in configs.items():
        values[name] = TOPIC_CONFIG_DEF.parse_one(name, raw, unknown_message=_UNKNOWN_TOPIC_CONFIG)
        if values[name] is None:
            raise ConfigError(name, "A topic config override cannot be null")
    if values.get("remote.storage.enable") is True:
        raise ConfigError(
            "remote.storage.enable",
            "Tiered storage is not available in logbus, so topics cannot use remote storage",
            configs["remote.storage.enable"],
        )
    if broker_config is not None:
        _check_compaction_lags(_effective(values, broker_config))
    else:
        _check_compaction_lags({**TOPIC_CONFIG_DEF.defaults(), **values})
    return values


def effective_topic_config(
    overrides: Mapping[str, object], broker_config: BrokerConfig
) -> dict[str, ConfigValue]:
    """Every topic setting's typed value for a topic with these overrides: the override,
    else the broker synonym's value (Kafka's precedence, units converted), else the topic
    default."""
    return _effective(validate_topic_configs(overrides, broker_config), broker_config)


def _effective(
    overrides: Mapping[str, ConfigValue], broker: BrokerConfig
) -> dict[str, ConfigValue]:
    values: dict[str, ConfigValue] = {}
    for key in TOPIC_CONFIG_DEF:
        if key.name in overrides:
            values[key.name] = overrides[key.name]
        elif key.name in _DERIVED:
            values[key.name] = _DERIVED[key.name](broker)
        elif key.name in TOPIC_CONFIG_SYNONYMS:
            values[key.name] = broker.get(TOPIC_CONFIG_SYNONYMS[key.name][0].name)
        else:
            values[key.name] = key.default_value
    return values


def _check_compaction_lags(values: Mapping[str, ConfigValue]) -> None:
    low, high = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ConfigError(
            "min.compaction.lag.ms", f"Must not exceed max.compaction.lag.ms ({high})", low
        )


# --- DescribeConfigs --------------------------------------------------------------------


def describe_topic(
    overrides: Mapping[str, object],
    broker_config: BrokerConfig,
    *,
    names: Collection[str] | None = None,
    include_synonyms: bool = True,
    include_documentation: bool = True,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for a topic, sorted by name (only `names` when given; unknown
    names are skipped, as Kafka does). The source is the first synonym's: the topic
    override (DYNAMIC_TOPIC_CONFIG), then the broker synonyms layer by layer."""
    typed_overrides = validate_topic_configs(overrides)
    values = _effective(typed_overrides, broker_config)
    layers = broker_config.layers()
    entries: list[ConfigEntry] = []
    for key in sorted(TOPIC_CONFIG_DEF, key=lambda key: key.name):
        if names is not None and key.name not in names:
            continue
        synonyms: list[ConfigSynonym] = []
        if key.name in typed_overrides:
            rendered = None if key.is_sensitive else key.render(typed_overrides[key.name])
            synonyms.append(ConfigSynonym(key.name, rendered, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_names = [synonym.name for synonym in TOPIC_CONFIG_SYNONYMS.get(key.name, ())]
        synonyms.extend(_broker_synonyms(layers, broker_names, key.is_sensitive))
        entries.append(
            ConfigEntry(
                name=key.name,
                value=None if key.is_sensitive else key.render(values[key.name]),
                read_only=False,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                is_sensitive=key.is_sensitive,
                synonyms=synonyms if include_synonyms else [],
                config_type=key.type,
                documentation=key.doc if include_documentation else "",
            )
        )
    return entries


def _listener_entries(
    broker_config: BrokerConfig,
    names: Collection[str] | None,
    cluster_default: bool,
    include_synonyms: bool,
) -> list[ConfigEntry]:
    """The listener-prefixed settings that are set (`listener.name.<l>.ssl.*`, ...), as
    Kafka describes them; sensitive ones without their values."""
    layers = broker_config.listener_layers()
    if cluster_default:
        layers = [
            (source, layer)
            for source, layer in layers
            if source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
    found = sorted({name for _, layer in layers for name in layer})
    entries = []
    for name in found:
        if names is not None and name not in names:
            continue
        prefixed = split_listener_setting(name)
        assert prefixed is not None
        key = BROKER_CONFIG_DEF[prefixed[2]]
        synonyms = [
            ConfigSynonym(name, None if key.is_sensitive else key.render(layer[name]), source)
            for source, layer in layers
            if name in layer
        ]
        entries.append(
            ConfigEntry(
                name=name,
                value=synonyms[0].value,
                read_only=key.update_mode is UpdateMode.READ_ONLY,
                source=synonyms[0].source,
                is_sensitive=key.is_sensitive,
                synonyms=synonyms if include_synonyms else [],
                config_type=key.type,
                documentation="",
            )
        )
    return entries


def describe_broker(
    broker_config: BrokerConfig,
    *,
    names: Collection[str] | None = None,
    cluster_default: bool = False,
    include_synonyms: bool = True,
    include_documentation: bool = True,
) -> list[ConfigEntry]:
    """DescribeConfigs entries for a broker, sorted by name (only `names` when given).

    With `cluster_default` (the broker resource named ""), only the dynamic cluster-wide
    defaults are described, as Kafka does. Values of sensitive settings are None.
    """
    layers = broker_config.layers()
    default_layer = dict(layers)[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    entries: list[ConfigEntry] = []
    for key in sorted(BROKER_CONFIG_DEF, key=lambda key: key.name):
        if names is not None and key.name not in names:
            continue
        if cluster_default and key.name not in default_layer:
            continue
        synonyms = _broker_synonyms(layers, _synonym_group(key.name), key.is_sensitive)
        # Higher-precedence synonyms describe other settings (log.retention.ms when
        # describing log.retention.hours); Kafka drops them.
        while synonyms and synonyms[0].name != key.name:
            synonyms.pop(0)
        if cluster_default:
            synonyms = [
                s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            value = default_layer[key.name]
        else:
            value = broker_config.get(key.name)
        entries.append(
            ConfigEntry(
                name=key.name,
                value=None if key.is_sensitive else key.render(value),
                read_only=key.update_mode is UpdateMode.READ_ONLY,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                is_sensitive=key.is_sensitive,
                synonyms=synonyms if include_synonyms else [],
                config_type=key.type,
                documentation=key.doc if include_documentation else "",
            )
        )
    entries += _listener_entries(broker_config, names, cluster_default, include_synonyms)
    return sorted(entries, key=lambda entry: entry.name)


def _synonym_group(name: str) -> tuple[str, ...]:
    return next((group for group in BROKER_SYNONYM_GROUPS if name in group), (name,))


def _broker_synonyms(
    layers: Sequence[tuple[ConfigSource, Mapping[str, ConfigValue]]],
    names: Collection[str],
    sensitive: bool,
) -> list[ConfigSynonym]:
    """Where each broker setting in `names` is set, layer by layer (dynamic per-broker,
    dynamic default, static, Kafka default), each layer in `names` order: Kafka's order."""
    synonyms: list[ConfigSynonym] = []
    for source, layer in layers:
        for name in names:
            if name in layer:
                rendered = None if sensitive else BROKER_CONFIG_DEF[name].render(layer[name])
                synonyms.append(ConfigSynonym(name, rendered, source))
    return synonyms
