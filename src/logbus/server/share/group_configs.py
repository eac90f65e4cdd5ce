"""Group configs (KIP-848/KIP-932's GROUP config resource, type 32): settings of one group,
altered with IncrementalAlterConfigs and read with DescribeConfigs. logbus keeps them in the
metadata store at `/config/groups/<group id>` (`{"version": 1, "config": {...}}`), as the
entity configs of topics are kept, so every broker reads the same values.

Known settings: `share.auto.offset.reset` (`latest`, the default, or `earliest`): where a
share group starts reading a partition it has no state for; `share.record.lock.duration.ms`
(the broker's `group.share.record.lock.duration.ms` when unset).
"""

from __future__ import annotations

from collections.abc import Mapping

from logbus.controller.metadata_store import MetadataStore, NoNode

GROUP_RESOURCE = 32
GROUP_CONFIG_PATH = "/config/groups"

AUTO_OFFSET_RESET = "share.auto.offset.reset"
DEFAULTS: Mapping[str, str] = {AUTO_OFFSET_RESET: "latest"}
CHOICES: Mapping[str, tuple[str, ...]] = {AUTO_OFFSET_RESET: ("latest", "earliest")}


class GroupConfigError(ValueError):
    """A setting that does not exist or a value it does not take."""


def read_group_configs(store: MetadataStore, group_id: str) -> dict[str, str]:
    """The group's settings that were set (none for an unknown group)."""
    try:
        node = store.get_json(f"{GROUP_CONFIG_PATH}/{group_id}")
    except NoNode:
        return {}
    if not isinstance(node, dict) or not isinstance(node.get("config"), dict):
        return {}
    return {str(k): str(v) for k, v in node["config"].items()}


def check_group_config(name: str, value: str | None) -> None:
    if name not in DEFAULTS:
        raise GroupConfigError(f"unknown group config {name}")
    if value is not None and value not in CHOICES.get(name, (value,)):
        raise GroupConfigError(f"invalid value {value!r} for {name}: one of {CHOICES[name]}")


def write_group_configs(store: MetadataStore, group_id: str, configs: Mapping[str, str]) -> None:
    path = f"{GROUP_CONFIG_PATH}/{group_id}"
    value = {"version": 1, "config": dict(configs)}
    try:
        store.set_json(path, value)
    except NoNode:
        if not store.exists(GROUP_CONFIG_PATH):
            try:
                store.create_json(GROUP_CONFIG_PATH, None)
            except Exception:  # created meanwhile by another broker
                if not store.exists(GROUP_CONFIG_PATH):
                    raise
        store.create_json(path, value)


def alter_group_configs(
    store: MetadataStore, group_id: str, ops: list[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    """IncrementalAlterConfigs on a GROUP resource: SET (0) and DELETE (1) of known
    settings, all checked before any is written. Raises GroupConfigError."""
    if not group_id:
        raise GroupConfigError("the group id must not be empty")
    configs = read_group_configs(store, group_id)
    for name, op, value in ops:
        if op not in (0, 1):
            raise GroupConfigError(f"operation {op} is not allowed for the GROUP resource")
        check_group_config(name, value if op == 0 else None)
        if op == 0:
            if value is None:
                raise GroupConfigError(f"no value for {name}")
            configs[name] = value
        else:
            configs.pop(name, None)
    if not validate_only:
        write_group_configs(store, group_id, configs)
