"""Broker configuration: the typed, checked settings of one broker.

Settings are defined in `broker_config_def` (Kafka's names, types and defaults), read
from server.properties and --override by `logbus.common.properties`, and listeners are parsed by
`listeners`. Unknown names and invalid values stop start-up with a `ConfigError` naming
the setting.

The entry point is `BrokerConfig`; `load_properties` and `parse_overrides` read its input.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Generic, TypeVar, cast, overload

from logbus.common.config_def import ConfigError, ConfigSource, ConfigValue, UpdateMode
from logbus.common.properties import load_properties, parse_overrides, parse_properties
from logbus.server.config.broker_config_def import (
    BROKER_CONFIG_DEF,
    CLUSTER_ONLY,
    NO_EFFECT,
    ONLY_DEFAULT,
)
from logbus.server.config.kraft import KRaftSettings, controller_listener_names, kraft_settings
from logbus.server.config.listeners import (
    KNOWN_SECURITY_PROTOCOLS,
    SASL_MECHANISMS,
    SUPPORTED_SECURITY_PROTOCOLS,
    Listener,
    parse_listeners,
    parse_security_protocol_map,
    split_listener_setting,
)
from logbus.server.network.connection_quotas import ConnectionLimits, parse_per_ip_overrides

__all__ = [
    "BROKER_CONFIG_DEF",
    "KNOWN_SECURITY_PROTOCOLS",
    "SUPPORTED_SECURITY_PROTOCOLS",
    "BrokerConfig",
    "Listener",
    "load_properties",
    "parse_listeners",
    "parse_overrides",
    "parse_properties",
    "parse_security_protocol_map",
]

_MINUTE_MS: Final = 60 * 1000
_HOUR_MS: Final = 60 * _MINUTE_MS

T = TypeVar("T")


class _Setting(Generic[T]):
    """A typed, read-only attribute of `BrokerConfig` backed by the setting of the same
    name, dots for underscores: `num_partitions = _Setting[int]()` reads num.partitions."""

    name: str

    def __set_name__(self, owner: type[object], attribute: str) -> None:
        self.name = attribute.replace("_", ".")
        if self.name not in BROKER_CONFIG_DEF:
            raise AssertionError(f"{owner.__name__}.{attribute}: no setting {self.name}")

    @overload
    def __get__(self, instance: None, owner: type[object]) -> _Setting[T]: ...
    @overload
    def __get__(self, instance: BrokerConfig, owner: type[object]) -> T: ...
    def __get__(self, instance: BrokerConfig | None, owner: type[object]) -> _Setting[T] | T:
        if instance is None:
            return self
        return cast(T, instance.get(self.name))


_DYNAMIC_LAYERS: Final = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
)


class BrokerConfig:
    """A broker's settings, typed and checked once at construction; immutable afterwards,
    so safe to share between tasks and threads.

    Values come from layers, highest precedence first: dynamic per-broker, dynamic
    cluster-wide default, static (server.properties and overrides), Kafka's default. Only
    the static layer exists at start-up; the dynamic ones are for AlterConfigs, which
    builds a new `BrokerConfig`. Typed attributes are named after the settings
    (`cfg.num_partitions`), derived values follow Kafka's precedence rules
    (`cfg.log_retention_ms`, `cfg.log_dirs`, `cfg.advertised_listeners`), and `get(name)`
    reads any setting.
    """

    def __init__(
        self,
        static: Mapping[str, object] | None = None,
        *,
        dynamic_default: Mapping[str, object] | None = None,
        dynamic_per_broker: Mapping[str, object] | None = None,
    ) -> None:
        self._layers: dict[ConfigSource, dict[str, ConfigValue]] = {
            ConfigSource.DYNAMIC_BROKER_CONFIG: _parse_layer(
                dynamic_per_broker or {}, ConfigSource.DYNAMIC_BROKER_CONFIG
            ),
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: _parse_layer(
                dynamic_default or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ),
            ConfigSource.STATIC_BROKER_CONFIG: _parse_layer(
                static or {}, ConfigSource.STATIC_BROKER_CONFIG
            ),
            ConfigSource.DEFAULT_CONFIG: {
                name: value
                for name, value in BROKER_CONFIG_DEF.defaults().items()
                if value is not None
            },
        }
        # Listener-prefixed settings (listener.name.<l>.<setting>), highest layer first.
        self._listener_layers: list[dict[str, ConfigValue]] = []
        for source, layer in self._layers.items():
            prefixed = {
                name: layer.pop(name) for name in list(layer) if name.startswith("listener.name.")
            }
            if source is not ConfigSource.DEFAULT_CONFIG:
                self._listener_layers.append(prefixed)
        self._values: dict[str, ConfigValue] = BROKER_CONFIG_DEF.defaults()
        for source in reversed(list(self._layers)):
            self._values.update(self._layers[source])

        self.listener_security_protocol_map: dict[str, str] = parse_security_protocol_map(
            self._str("listener.security.protocol.map"), "listener.security.protocol.map"
        )
        self._map_controller_listeners()
        self.listeners: list[Listener] = self._parse_listeners("listeners")
        self.advertised_listeners: list[Listener] = (
            self.listeners
            if self.get("advertised.listeners") is None
            else self._parse_listeners("advertised.listeners")
        )
        self.log_dirs: list[str] = self._log_dirs()
        self.kraft: KRaftSettings | None = kraft_settings(
            self.get, self.is_set, self.listeners, self.log_dirs
        )
        self.inter_broker_listener_name: str = self._inter_broker_listener_name()
        self._check_retention()
        self._check_relations()
        self._check_supported()
        self.connection_limits: ConnectionLimits = self._connection_limits()
        self._check_security()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """A config from static settings, e.g. the result of `load_properties`."""
        return cls(props)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = ()) -> BrokerConfig:
        """Read server.properties (if given), apply "name=value" overrides on top."""
        props = load_properties(path) if path is not None else {}
        props.update(parse_overrides(overrides))
        return cls(props)

    # --- generic access ---

    def get(self, name: str) -> ConfigValue:
        """The effective typed value of any broker setting (None when optional and unset)."""
        if name not in BROKER_CONFIG_DEF:
            raise KeyError(name)
        value = self._values[name]
        return list(value) if isinstance(value, list) else value

    def values(self) -> dict[str, ConfigValue]:
        """Every setting's effective typed value."""
        return {name: self.get(name) for name in self._values}

    def is_set(self, name: str) -> bool:
        """Whether `name` was given explicitly (statically or dynamically)."""
        return self.source(name) is not ConfigSource.DEFAULT_CONFIG

    def source(self, name: str) -> ConfigSource:
        """The layer the effective value of `name` comes from."""
        for source, layer in self._layers.items():
            if source is not ConfigSource.DEFAULT_CONFIG and name in layer:
                return source
        return ConfigSource.DEFAULT_CONFIG

    def layers(self) -> list[tuple[ConfigSource, dict[str, ConfigValue]]]:
        """The value layers, highest precedence first; the last is Kafka's non-null
        defaults (DEFAULT_CONFIG). Used to build DescribeConfigs synonyms."""
        return [(source, dict(layer)) for source, layer in self._layers.items()]

    @property
    def originals(self) -> dict[str, ConfigValue]:
        """The static settings as given (typed)."""
        static = dict(self._layers[ConfigSource.STATIC_BROKER_CONFIG])
        static.update(self._listener_layers[-1])  # listener-prefixed static settings
        return static

    def __repr__(self) -> str:
        explicit = {name: self._values[name] for name in self._values if self.is_set(name)}
        return f"BrokerConfig({explicit!r})"

    # --- listener-prefixed settings (security) ---

    def listener_setting(self, listener: str, name: str, mechanism: str = "") -> ConfigValue:
        """A setting as one listener sees it: `listener.name.<listener>.[<mechanism>.]<name>`
        if set (dynamic layers first), else the broker-wide `name`."""
        prefix = f"listener.name.{listener.lower()}."
        keys = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
        keys.append(prefix + name)
        for layer in self._listener_layers:
            for key in keys:
                if key in layer:
                    return layer[key]
        return self.get(name)

    def listener_layers(self) -> list[tuple[ConfigSource, dict[str, ConfigValue]]]:
        """The listener-prefixed settings of each layer (dynamic per broker, dynamic
        default, static), highest precedence first, for DescribeConfigs."""
        sources = [s for s in self._layers if s is not ConfigSource.DEFAULT_CONFIG]
        return [(s, dict(layer)) for s, layer in zip(sources, self._listener_layers, strict=True)]

    def listener_settings(self, listener: str) -> dict[str, ConfigValue]:
        """Every prefixed setting of one listener (full names), for change detection."""
        prefix = f"listener.name.{listener.lower()}."
        found: dict[str, ConfigValue] = {}
        for layer in reversed(self._listener_layers):
            found.update({k: v for k, v in layer.items() if k.startswith(prefix)})
        return found

    def _check_security(self) -> None:
        """What a TLS or SASL listener needs, checked before anything starts."""
        for listener in self.listeners:
            protocol = listener.security_protocol
            if protocol in ("SSL", "SASL_SSL"):
                for store in ("keystore", "truststore"):
                    kind = cast(str, self.listener_setting(listener.name, f"ssl.{store}.type"))
                    if kind.upper() != "PEM" and self.listener_setting(
                        listener.name, f"ssl.{store}.location"
                    ):
                        raise ConfigError(
                            f"ssl.{store}.type",
                            f"logbus reads PEM {store}s only (listener {listener.name}); "
                            f"set ssl.{store}.type=PEM",
                            kind,
                        )
                has_file = self.listener_setting(listener.name, "ssl.keystore.location")
                has_inline = self.listener_setting(listener.name, "ssl.keystore.key")
                if not has_file and not has_inline:
                    raise ConfigError(
                        "ssl.keystore.location",
                        f"Listener {listener.name} uses {protocol} and needs a key and "
                        "certificate: ssl.keystore.location, or ssl.keystore.key with "
                        "ssl.keystore.certificate.chain",
                    )
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                mechanisms = cast(
                    list[str], self.listener_setting(listener.name, "sasl.enabled.mechanisms")
                )
                unknown = [m for m in mechanisms if m.upper() not in SASL_MECHANISMS]
                if unknown or not mechanisms:
                    raise ConfigError(
                        "sasl.enabled.mechanisms",
                        f"Listener {listener.name} uses {protocol}; logbus offers "
                        f"{', '.join(SASL_MECHANISMS)}, not {', '.join(unknown) or 'nothing'}",
                        ",".join(mechanisms),
                    )
        inter = self.inter_broker_listener
        if inter.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = self._str("sasl.mechanism.inter.broker.protocol").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    "sasl.mechanism.inter.broker.protocol",
                    f"The inter-broker listener {inter.name} uses {inter.security_protocol}; "
                    f"its mechanism must be one of {', '.join(SASL_MECHANISMS)}",
                    mechanism,
                )

    # --- derived values (Kafka's precedence rules) ---

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours; any negative value means -1 (keep)."""
        millis = self._derived_ms(
            ("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
            ("log.retention.hours", _HOUR_MS),
        )  # fmt: skip
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms(self) -> int:
        """log.roll.ms, else log.roll.hours."""
        return self._derived_ms(("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS))

    @property
    def log_roll_jitter_ms(self) -> int:
        """log.roll.jitter.ms, else log.roll.jitter.hours."""
        return self._derived_ms(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS))

    @property
    def log_flush_interval_ms(self) -> int:
        """log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
        return self._derived_ms(
            ("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)
        )

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """zookeeper.connection.timeout.ms, else zookeeper.session.timeout.ms."""
        return self._derived_ms(
            ("zookeeper.connection.timeout.ms", 1), ("zookeeper.session.timeout.ms", 1)
        )

    @property
    def inter_broker_listener(self) -> Listener:
        """The advertised listener other brokers connect to."""
        return next(
            listener
            for listener in self.advertised_listeners
            if listener.name == self.inter_broker_listener_name
        )

    @property
    def node_id(self) -> int:
        """KRaft's node.id, else broker.id."""
        return self.kraft.node_id if self.kraft is not None else self.broker_id

    @property
    def uses_zookeeper(self) -> bool:
        """False: cluster metadata lives in the embedded store."""
        return self.zookeeper_connect is not None

    # --- typed settings ---

    broker_id = _Setting[int]()
    broker_rack = _Setting[str | None]()
    zookeeper_connect = _Setting[str | None]()
    zookeeper_session_timeout_ms = _Setting[int]()
    zookeeper_max_in_flight_requests = _Setting[int]()
    controlled_shutdown_enable = _Setting[bool]()
    controlled_shutdown_max_retries = _Setting[int]()
    controlled_shutdown_retry_backoff_ms = _Setting[int]()
    controller_socket_timeout_ms = _Setting[int]()
    auto_leader_rebalance_enable = _Setting[bool]()
    leader_imbalance_check_interval_seconds = _Setting[int]()
    leader_imbalance_per_broker_percentage = _Setting[int]()

    num_network_threads = _Setting[int]()
    num_io_threads = _Setting[int]()
    background_threads = _Setting[int]()
    queued_max_requests = _Setting[int]()
    queued_max_request_bytes = _Setting[int]()
    socket_send_buffer_bytes = _Setting[int]()
    socket_receive_buffer_bytes = _Setting[int]()
    socket_request_max_bytes = _Setting[int]()
    socket_listen_backlog_size = _Setting[int]()
    max_connections = _Setting[int]()
    max_connections_per_ip = _Setting[int]()
    max_connections_per_ip_overrides = _Setting[str]()
    max_connection_creation_rate = _Setting[int]()
    connections_max_idle_ms = _Setting[int]()
    request_timeout_ms = _Setting[int]()
    fetch_max_bytes = _Setting[int]()
    max_incremental_fetch_session_cache_slots = _Setting[int]()
    fetch_purgatory_purge_interval_requests = _Setting[int]()
    producer_purgatory_purge_interval_requests = _Setting[int]()
    quota_window_num = _Setting[int]()
    quota_window_size_seconds = _Setting[int]()
    message_max_bytes = _Setting[int]()

    num_partitions = _Setting[int]()
    default_replication_factor = _Setting[int]()
    auto_create_topics_enable = _Setting[bool]()
    delete_topic_enable = _Setting[bool]()
    min_insync_replicas = _Setting[int]()
    unclean_leader_election_enable = _Setting[bool]()
    compression_type = _Setting[str]()

    num_recovery_threads_per_data_dir = _Setting[int]()
    log_segment_bytes = _Setting[int]()
    log_segment_delete_delay_ms = _Setting[int]()
    log_index_size_max_bytes = _Setting[int]()
    log_index_interval_bytes = _Setting[int]()
    log_preallocate = _Setting[bool]()
    log_flush_interval_messages = _Setting[int]()
    log_flush_scheduler_interval_ms = _Setting[int]()
    log_flush_offset_checkpoint_interval_ms = _Setting[int]()
    log_flush_start_offset_checkpoint_interval_ms = _Setting[int]()
    log_retention_bytes = _Setting[int]()
    log_retention_check_interval_ms = _Setting[int]()
    log_cleanup_policy = _Setting[list[str]]()
    log_message_timestamp_type = _Setting[str]()
    log_message_timestamp_before_max_ms = _Setting[int]()
    log_message_timestamp_after_max_ms = _Setting[int]()
    log_message_downconversion_enable = _Setting[bool]()

    log_cleaner_enable = _Setting[bool]()
    log_cleaner_threads = _Setting[int]()
    log_cleaner_dedupe_buffer_size = _Setting[int]()
    log_cleaner_io_buffer_size = _Setting[int]()
    log_cleaner_io_buffer_load_factor = _Setting[float]()
    log_cleaner_io_max_bytes_per_second = _Setting[float]()
    log_cleaner_backoff_ms = _Setting[int]()
    log_cleaner_min_cleanable_ratio = _Setting[float]()
    log_cleaner_delete_retention_ms = _Setting[int]()
    log_cleaner_min_compaction_lag_ms = _Setting[int]()
    log_cleaner_max_compaction_lag_ms = _Setting[int]()

    num_replica_fetchers = _Setting[int]()
    replica_lag_time_max_ms = _Setting[int]()
    replica_socket_timeout_ms = _Setting[int]()
    replica_socket_receive_buffer_bytes = _Setting[int]()
    replica_fetch_max_bytes = _Setting[int]()
    replica_fetch_response_max_bytes = _Setting[int]()
    replica_fetch_min_bytes = _Setting[int]()
    replica_fetch_wait_max_ms = _Setting[int]()
    replica_fetch_backoff_ms = _Setting[int]()
    replica_high_watermark_checkpoint_interval_ms = _Setting[int]()

    offsets_topic_num_partitions = _Setting[int]()
    offsets_topic_replication_factor = _Setting[int]()
    offsets_topic_segment_bytes = _Setting[int]()
    offsets_topic_compression_codec = _Setting[int]()
    offsets_load_buffer_size = _Setting[int]()
    offsets_retention_minutes = _Setting[int]()
    offsets_retention_check_interval_ms = _Setting[int]()
    offsets_commit_timeout_ms = _Setting[int]()
    offset_metadata_max_bytes = _Setting[int]()
    group_initial_rebalance_delay_ms = _Setting[int]()
    group_min_session_timeout_ms = _Setting[int]()
    group_max_session_timeout_ms = _Setting[int]()
    group_max_size = _Setting[int]()
    group_consumer_session_timeout_ms = _Setting[int]()
    group_consumer_heartbeat_interval_ms = _Setting[int]()
    group_consumer_max_size = _Setting[int]()
    group_consumer_assignors = _Setting[list[str]]()
    group_consumer_migration_policy = _Setting[str]()

    transaction_state_log_num_partitions = _Setting[int]()
    transaction_state_log_replication_factor = _Setting[int]()
    transaction_state_log_min_isr = _Setting[int]()
    transaction_state_log_segment_bytes = _Setting[int]()
    transaction_state_log_load_buffer_size = _Setting[int]()
    transaction_max_timeout_ms = _Setting[int]()
    transactional_id_expiration_ms = _Setting[int]()
    transaction_abort_timed_out_transaction_cleanup_interval_ms = _Setting[int]()
    transaction_remove_expired_transaction_cleanup_interval_ms = _Setting[int]()
    producer_id_expiration_ms = _Setting[int]()
    producer_id_expiration_check_interval_ms = _Setting[int]()

    authorizer_class_name = _Setting[str]()
    super_users = _Setting[str]()
    allow_everyone_if_no_acl_found = _Setting[bool]()

    # --- construction helpers ---

    def _str(self, name: str) -> str:
        return cast(str, self._values[name])

    def _derived_ms(self, *candidates: tuple[str, int]) -> int:
        """The first set candidate (in Kafka's precedence order) scaled to milliseconds."""
        for name, scale in candidates:
            value = self._values[name]
            if value is not None:
                return cast(int, value) * scale
        raise AssertionError(f"{candidates[-1][0]} has no default")

    def _parse_listeners(self, setting: str) -> list[Listener]:
        listeners = parse_listeners(
            self._str(setting),
            setting,
            self.listener_security_protocol_map,
            distinct_ports=setting == "listeners",
        )
        if not listeners:
            raise ConfigError(setting, "At least one listener is required", self._str(setting))
        for listener in listeners:
            if listener.security_protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(
                    setting,
                    f"Listener {listener.name} uses security protocol "
                    f"{listener.security_protocol}, which logbus does not support yet "
                    f"(supported: {', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))})",
                    self._str(setting),
                )
            if setting == "advertised.listeners" and listener.host == "0.0.0.0":
                raise ConfigError(
                    setting, "Cannot advertise the non-routable address 0.0.0.0", listener
                )
        if setting == "advertised.listeners":
            known = {listener.name for listener in self.listeners}
            unknown = [listener.name for listener in listeners if listener.name not in known]
            if unknown:
                raise ConfigError(
                    setting,
                    f"Listener names {', '.join(unknown)} are not defined in listeners",
                    self._str(setting),
                )
        return listeners

    def _map_controller_listeners(self) -> None:
        """In KRaft mode a controller listener missing from an unset
        listener.security.protocol.map is PLAINTEXT, as in Kafka."""
        if not self.get("process.roles") or self.is_set("listener.security.protocol.map"):
            return
        for name in controller_listener_names(
            cast("str | None", self.get("controller.listener.names"))
        ):
            self.listener_security_protocol_map.setdefault(name, "PLAINTEXT")

    def _inter_broker_listener_name(self) -> str:
        if cast(list[str], self._values["process.roles"]) == ["controller"]:
            # A controller-only node has no inter-broker listener: its peers are
            # reached on the controller listener.
            names = controller_listener_names(
                cast("str | None", self.get("controller.listener.names"))
            )
            return names[0] if names else self.listeners[0].name
        named = cast("str | None", self._values["inter.broker.listener.name"])
        if named is not None:
            if self.is_set("security.inter.broker.protocol"):
                raise ConfigError(
                    "inter.broker.listener.name",
                    "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                    "may be set",
                )
            setting, name = "inter.broker.listener.name", named.strip().upper()
        else:
            setting, name = (
                "security.inter.broker.protocol",
                self._str("security.inter.broker.protocol"),
            )
        if name not in {listener.name for listener in self.advertised_listeners}:
            raise ConfigError(
                setting,
                f"The inter-broker listener {name} must be one of the advertised listeners",
                name,
            )
        return name

    def _log_dirs(self) -> list[str]:
        setting = "log.dirs" if self._values["log.dirs"] is not None else "log.dir"
        raw = self._str(setting)
        dirs = [part for part in re.split(r"\s*,\s*", raw.strip()) if part]
        if not dirs:
            raise ConfigError(setting, "At least one log directory is required", raw)
        if len(set(dirs)) != len(dirs):
            raise ConfigError(setting, "A log directory is listed twice", raw)
        return dirs

    def _check_retention(self) -> None:
        setting = next(
            name
            for name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
            if self._values[name] is not None
        )
        if self.log_retention_ms == 0:
            raise ConfigError(
                setting, "Retention must be -1 (unlimited) or at least 1 ms", self._values[setting]
            )

    def _check_relations(self) -> None:
        """Cross-setting rules Kafka enforces at start-up."""
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError(
                "group.max.session.timeout.ms",
                "Must be at least group.min.session.timeout.ms",
                self.group_max_session_timeout_ms,
            )
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise ConfigError(
                "replica.socket.timeout.ms",
                "Must be at least replica.fetch.wait.max.ms",
                self.replica_socket_timeout_ms,
            )
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                "Must be at most replica.lag.time.max.ms",
                self.replica_fetch_wait_max_ms,
            )
        queued = self.queued_max_request_bytes
        if 0 < queued < self.socket_request_max_bytes:
            raise ConfigError(
                "queued.max.request.bytes",
                "Must be at least socket.request.max.bytes "
                f"({self.socket_request_max_bytes}), or -1 for no limit",
                queued,
            )
        threads = self.log_cleaner_threads
        if threads > 0 and self.log_cleaner_dedupe_buffer_size / threads <= 1024 * 1024:
            raise ConfigError(
                "log.cleaner.dedupe.buffer.size",
                "Must be more than 1 MiB per cleaner thread",
                self.log_cleaner_dedupe_buffer_size,
            )

    def _check_supported(self) -> None:
        """Refuse a value logbus cannot honour (ONLY_DEFAULT)."""
        for name, reason in ONLY_DEFAULT.items():
            value = self._values[name]
            if value != BROKER_CONFIG_DEF[name].default:
                raise ConfigError(name, f"Not supported: {reason}", value)

    def without_effect(self) -> list[str]:
        """The settings given explicitly that this broker does not use, to say so at
        start-up: NO_EFFECT, and on a stand-alone broker (no `zookeeper.connect`) also
        CLUSTER_ONLY."""
        names = NO_EFFECT if self.uses_zookeeper else CLUSTER_ONLY | NO_EFFECT
        return sorted(name for name in names if self.is_set(name))

    def _connection_limits(self) -> ConnectionLimits:
        """The connection settings, with the hosts of max.connections.per.ip.overrides
        resolved to addresses (as Kafka's ConnectionQuotas does)."""
        setting = "max.connections.per.ip.overrides"
        raw = self.max_connections_per_ip_overrides
        overrides = parse_per_ip_overrides(raw)
        if self.max_connections_per_ip == 0 and not overrides:
            raise ConfigError("max.connections.per.ip", f"Can be 0 only if {setting} is set", 0)
        by_address: dict[str, int] = {}
        for host, limit in overrides.items():
            for address in _addresses(host, setting, raw):
                by_address[address] = limit
        return ConnectionLimits(
            max_connections=self.max_connections,
            max_connections_per_ip=self.max_connections_per_ip,
            per_ip_overrides=by_address,
            max_creation_rate=self.max_connection_creation_rate,
        )


def _addresses(host: str, setting: str, raw: str) -> list[str]:
    """The IP addresses of `host` (itself when it is one)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as error:
        raise ConfigError(setting, f"Cannot resolve host {host!r}: {error}", raw) from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _parse_layer(props: Mapping[str, object], source: ConfigSource) -> dict[str, ConfigValue]:
    """Parse one layer's settings; unknown names and settings that cannot live in a dynamic
    layer raise `ConfigError`."""
    values: dict[str, ConfigValue] = {}
    for name, raw in props.items():
        prefixed = split_listener_setting(name)
        key = BROKER_CONFIG_DEF.get(name if prefixed is None else prefixed[2])
        if key is None:
            raise ConfigError(name, "Unknown broker configuration name")
        if source in _DYNAMIC_LAYERS and key.update_mode is UpdateMode.READ_ONLY:
            raise ConfigError(name, "Cannot be updated dynamically; it is read-only", raw)
        if (
            source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            and key.update_mode is UpdateMode.PER_BROKER
        ):
            raise ConfigError(name, "Can only be updated per broker, not cluster-wide", raw)
        values[name] = key.parse(raw)
    return values
