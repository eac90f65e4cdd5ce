"""KRaft mode's settings (KIP-500, KIP-595, KIP-631), checked as Kafka's `KafkaConfig`
checks them: a node that sets `process.roles` runs without ZooKeeper, with a `node.id`,
a static quorum of controllers and a controller listener.

The entry point is `kraft_settings`, called by `BrokerConfig`; it returns None in
ZooKeeper mode and on a stand-alone broker, which stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from logbus.common.config_def import ConfigError, ConfigValue
from logbus.raft.quorum_config import QUORUM_VOTERS, VoterAddress, parse_voters
from logbus.server.config.listeners import Listener

__all__ = ["KRaftSettings", "controller_listener_names", "kraft_settings"]

PROCESS_ROLES = "process.roles"
CONTROLLER_LISTENER_NAMES = "controller.listener.names"


@dataclass(frozen=True)
class KRaftSettings:
    """A KRaft node's identity, quorum and timers. Immutable."""

    process_roles: frozenset[str]
    node_id: int
    voters: dict[int, VoterAddress]
    controller_listener_names: tuple[str, ...]
    metadata_log_dir: str
    election_timeout_ms: int
    election_backoff_max_ms: int
    fetch_timeout_ms: int
    request_timeout_ms: int
    broker_heartbeat_interval_ms: int
    broker_session_timeout_ms: int
    max_bytes_between_snapshots: int

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles


def controller_listener_names(raw: str | None) -> tuple[str, ...]:
    """`controller.listener.names` as upper-case names."""
    return tuple(name.strip().upper() for name in (raw or "").split(",") if name.strip())


def kraft_settings(
    get: Callable[[str], ConfigValue],
    is_set: Callable[[str], bool],
    listeners: Sequence[Listener],
    log_dirs: Sequence[str],
) -> KRaftSettings | None:
    """The KRaft settings, or None when `process.roles` is empty (ZooKeeper mode);
    raises ConfigError with Kafka's wording when they do not hold together."""
    roles = cast(list[str], get(PROCESS_ROLES))
    if not roles:
        _refuse_kraft_settings_without_roles(is_set)
        return None
    if len(set(roles)) != len(roles):
        raise ConfigError(
            PROCESS_ROLES, f"Duplicate role names found in `{PROCESS_ROLES}`", ",".join(roles)
        )
    if get("zookeeper.connect") is not None:
        raise ConfigError(
            "zookeeper.connect",
            f"Cannot be set together with {PROCESS_ROLES}: a node runs in ZooKeeper mode "
            "or in KRaft mode, not both",
            get("zookeeper.connect"),
        )
    node_id = _node_id(get, is_set)
    voters = parse_voters(cast(list[str], get(QUORUM_VOTERS)))
    names = controller_listener_names(cast("str | None", get(CONTROLLER_LISTENER_NAMES)))
    _check_quorum(frozenset(roles), node_id, voters, names, listeners)
    metadata_log_dir = cast("str | None", get("metadata.log.dir")) or log_dirs[0]

    def millis(name: str) -> int:
        return cast(int, get(name))

    return KRaftSettings(
        process_roles=frozenset(roles),
        node_id=node_id,
        voters=voters,
        controller_listener_names=names,
        metadata_log_dir=metadata_log_dir,
        election_timeout_ms=millis("controller.quorum.election.timeout.ms"),
        election_backoff_max_ms=millis("controller.quorum.election.backoff.max.ms"),
        fetch_timeout_ms=millis("controller.quorum.fetch.timeout.ms"),
        request_timeout_ms=millis("controller.quorum.request.timeout.ms"),
        broker_heartbeat_interval_ms=millis("broker.heartbeat.interval.ms"),
        broker_session_timeout_ms=millis("broker.session.timeout.ms"),
        max_bytes_between_snapshots=millis("metadata.log.max.record.bytes.between.snapshots"),
    )


def _refuse_kraft_settings_without_roles(is_set: Callable[[str], bool]) -> None:
    for name in ("node.id", QUORUM_VOTERS, CONTROLLER_LISTENER_NAMES):
        if is_set(name):
            raise ConfigError(name, f"Is a KRaft setting; set {PROCESS_ROLES} to run in KRaft mode")


def _node_id(get: Callable[[str], ConfigValue], is_set: Callable[[str], bool]) -> int:
    node_id = cast(int, get("node.id"))
    if node_id < 0:
        raise ConfigError(
            f"Missing configuration `node.id` which is required when `{PROCESS_ROLES}` is "
            "defined (i.e. when running in KRaft mode)."
        )
    if is_set("broker.id") and get("broker.id") != node_id:
        raise ConfigError("You must set `node.id` to the same value as `broker.id`.")
    return node_id


def _check_quorum(
    roles: frozenset[str],
    node_id: int,
    voters: dict[int, VoterAddress],
    names: tuple[str, ...],
    listeners: Sequence[Listener],
) -> None:
    voter_ids = "{" + ",".join(str(v) for v in sorted(voters)) + "}"
    if not voters:
        raise ConfigError(
            f"If using {PROCESS_ROLES}, {QUORUM_VOTERS} must contain the set of bootstrap "
            "controllers"
        )
    if "controller" in roles and node_id not in voters:
        raise ConfigError(
            f"If {PROCESS_ROLES} contains the 'controller' role, the node id {node_id} must "
            f"be included in the set of voters {QUORUM_VOTERS}={voter_ids}"
        )
    if roles == {"broker"} and node_id in voters:
        raise ConfigError(
            f"If {PROCESS_ROLES} contains just the 'broker' role, the node id {node_id} must "
            f"not be included in the set of voters {QUORUM_VOTERS}={voter_ids}"
        )
    if not names:
        raise ConfigError(
            f"{CONTROLLER_LISTENER_NAMES} must contain at least one value when running KRaft"
        )
    listener_names = {listener.name for listener in listeners}
    if "controller" in roles and names[0] not in listener_names:
        raise ConfigError(
            f"{CONTROLLER_LISTENER_NAMES} must contain at least one value appearing in the "
            "'listeners' configuration when running the KRaft controller role"
        )
    if "broker" not in roles:
        others = sorted(listener_names - set(names))
        if others:
            raise ConfigError(
                "listeners",
                f"The listeners config must only contain KRaft controller listeners from "
                f"{CONTROLLER_LISTENER_NAMES} when {PROCESS_ROLES}=controller "
                f"(found {', '.join(others)})",
            )
    elif set(names) & listener_names and roles == {"broker"}:
        raise ConfigError(
            "listeners",
            f"The listeners config must not contain KRaft controller listeners from "
            f"{CONTROLLER_LISTENER_NAMES} when {PROCESS_ROLES} contains the broker role "
            "only",
        )
