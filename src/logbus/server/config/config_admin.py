"""Checking and computing a resource's new dynamic configs (AlterConfigs and
IncrementalAlterConfigs, KIP-133 and KIP-339; dynamic broker configs, KIP-226).

Pure code: values in, values out. `ConfigUpdateError` carries the Kafka error code a
client gets; the API layer writes the result to the metadata store.

Error codes, as Kafka answers them:
- an unknown name or an invalid value: INVALID_CONFIG, the message naming the setting;
- APPEND or SUBTRACT on a setting that is not a list: INVALID_CONFIG;
- a broker setting Kafka cannot change without a restart (broker.id, log.dirs, ...):
  INVALID_REQUEST "Cannot update these configs dynamically: Set(...)";
- a per-broker setting (listeners, ...) sent as a cluster-wide default: INVALID_REQUEST;
- a null value, a setting named twice, an unknown operation: INVALID_REQUEST.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logbus.common.config_def import (
    ConfigDef,
    ConfigError,
    ConfigType,
    UpdateMode,
    render_value,
)
from logbus.protocol import ErrorCode
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.broker_config_def import BROKER_CONFIG_DEF
from logbus.server.config.listeners import split_listener_setting
from logbus.server.config.topic_config import validate_topic_configs
from logbus.server.network.listener_security import check_listener_tls

__all__ = [
    "AlterOp",
    "ConfigUpdateError",
    "OpType",
    "apply_ops",
    "check_broker_update",
    "check_topic_update",
]


class OpType(enum.IntEnum):
    """IncrementalAlterConfigs' `config_operation` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterOp:
    name: str
    op: int
    value: str | None


class ConfigUpdateError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _invalid_request(message: str) -> ConfigUpdateError:
    return ConfigUpdateError(ErrorCode.INVALID_REQUEST, message)


def check_request_entries(names: Sequence[str], nulls: Iterable[str]) -> None:
    """Kafka's checks before any value is looked at: each name once, no null values."""
    counts = Counter(names)
    duplicates = sorted(name for name, count in counts.items() if count > 1)
    if duplicates:
        raise _invalid_request(f"Error due to duplicate config keys : {','.join(duplicates)}")
    null_names = list(nulls)
    if null_names:
        raise _invalid_request(f"Null value not supported for : {','.join(null_names)}")


def apply_ops(
    current: Mapping[str, str], ops: Sequence[AlterOp], config_def: ConfigDef
) -> dict[str, str]:
    """The configs after applying incremental operations to `current` (the resource's
    dynamic configs). APPEND adds the items not present yet; SUBTRACT removes items; both
    start from the default when the setting is not set."""
    check_request_entries(
        [op.name for op in ops],
        [
            f"{_op_name(op.op)}:{op.name}"
            for op in ops
            if op.value is None and op.op != OpType.DELETE
        ],
    )
    result = dict(current)
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None
            result[op.name] = op.value
        elif op.op == OpType.DELETE:
            result.pop(op.name, None)
        elif op.op in (OpType.APPEND, OpType.SUBTRACT):
            assert op.value is not None
            key = config_def.get(op.name)
            if key is None:
                raise ConfigUpdateError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
            verb = "append" if op.op == OpType.APPEND else "subtract"
            if key.type is not ConfigType.LIST:
                raise ConfigUpdateError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {op.name}",
                )
            old = result.get(op.name)
            if old is None:
                old = render_value(ConfigType.LIST, key.default_value) or ""
            items = [item for item in (part.strip() for part in old.split(",")) if item]
            given = [item for item in (part.strip() for part in op.value.split(",")) if item]
            if op.op == OpType.APPEND:
                items += [item for item in dict.fromkeys(given) if item not in items]
            else:
                items = [item for item in items if item not in given]
            result[op.name] = ",".join(items)
        else:
            raise _invalid_request(f"Unknown operations type {op.op}")
    return result


def _op_name(op: int) -> str:
    try:
        return OpType(op).name
    except ValueError:
        return str(op)


def check_topic_update(configs: Mapping[str, str], broker_config: BrokerConfig) -> None:
    """Validate a topic's complete new set of overrides."""
    try:
        validate_topic_configs(configs, broker_config)
    except ConfigError as exc:
        raise ConfigUpdateError(ErrorCode.INVALID_CONFIG, str(exc)) from exc


def check_broker_update(
    configs: Mapping[str, str],
    *,
    per_broker: bool,
    static: Mapping[str, object],
    dynamic_default: Mapping[str, str],
    dynamic_per_broker: Mapping[str, str],
) -> BrokerConfig:
    """Validate the complete new set of dynamic configs of this broker (`per_broker`) or
    of the cluster-wide default, and return the broker config they would give."""
    keys = {name: BROKER_CONFIG_DEF.get(_base_setting(name)) for name in configs}
    unknown = sorted(name for name, key in keys.items() if key is None)
    if unknown:
        raise ConfigUpdateError(
            ErrorCode.INVALID_CONFIG,
            f"Unknown broker config name{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
        )
    read_only = sorted(
        name for name, key in keys.items() if key and key.update_mode is UpdateMode.READ_ONLY
    )
    if read_only:
        raise _invalid_request(
            f"Cannot update these configs dynamically: Set({', '.join(read_only)})"
        )
    if not per_broker:
        only_per_broker = sorted(
            name
            for name, key in keys.items()
            if key and (key.update_mode is UpdateMode.PER_BROKER or name != key.name)
        )
        if only_per_broker:
            raise _invalid_request(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({', '.join(only_per_broker)})"
            )
    try:
        config = BrokerConfig(
            static,
            dynamic_default=dynamic_default if per_broker else configs,
            dynamic_per_broker=configs if per_broker else dynamic_per_broker,
        )
        if any(_base_setting(name).startswith("ssl.") for name in configs):
            check_listener_tls(config)  # the new keystores and truststores load
        return config
    except ConfigError as exc:
        raise ConfigUpdateError(ErrorCode.INVALID_CONFIG, str(exc)) from exc


def _base_setting(name: str) -> str:
    """The setting a listener-prefixed name overrides (itself for any other name)."""
    prefixed = split_listener_setting(name)
    return name if prefixed is None else prefixed[2]
