"""Broker configuration: Kafka's broker settings, server.properties, --override.

Names, types, defaults and valid values follow Kafka's broker configs (3.x, ZooKeeper
mode). Where logbus defaults differ, so that one broker starts with no configuration at
all, the definition says so: `broker.id` (0), `listeners`
(PLAINTEXT://localhost:9092), `log.dir` (./data), and the replication factors and min ISR
of the internal topics (1). Unknown names and invalid values stop start-up with a
`ConfigError` naming the setting.

The entry point is `BrokerConfig`; `load_properties` and `parse_overrides` read its input.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, TypeVar, cast, overload

from logbus.server.config_def import (
    Check,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Importance,
    ListOf,
    OneOf,
    Range,
    UpdateMode,
)

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

_BOOL, _STR, _INT, _SHORT, _LONG, _DOUBLE, _LIST, _PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
_HIGH, _MEDIUM, _LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
_RO, _PER_BROKER, _CLUSTER = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE

INT_MAX: Final = 2**31 - 1
LONG_MAX: Final = 2**63 - 1
_MINUTE_MS: Final = 60 * 1000
_HOUR_MS: Final = 60 * _MINUTE_MS

KNOWN_SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS: Final = frozenset({"PLAINTEXT"})
"""The security protocols logbus listeners can serve today."""

COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES: Final = ("compact", "delete")
TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")


def _at_least(low: float) -> Range:
    return Range(min=low)


def _level(low: int, high: int, default: int) -> Check:
    def test(value: ConfigValue) -> str | None:
        if isinstance(value, int) and (value == default or low <= value <= high):
            return None
        return f"Value must be between {low} and {high}, or {default} for the codec's default"

    return Check(test, f"[{low},...,{high}] or {default}")


GZIP_LEVEL: Final = _level(1, 9, -1)
LZ4_LEVEL: Final = Range(1, 17)
ZSTD_LEVEL: Final = Range(-131072, 22)

BROKER_CONFIG_DEF: Final = ConfigDef()
_define = BROKER_CONFIG_DEF.define

# fmt: off

# --- identity, listeners, metadata store ---
_define("broker.id", _INT, 0, _at_least(0), _HIGH,
        "This broker's id, unique in the cluster. Kafka's default is -1 (generate one); "
        "logbus defaults to 0 so a single broker needs no configuration.")
_define("broker.rack", _STR, None, None, _MEDIUM,
        "Rack of this broker, used to spread replicas across racks.")
_define("listeners", _STR, "PLAINTEXT://localhost:9092", None, _HIGH,
        "Comma-separated NAME://host:port addresses to accept connections on; an empty host "
        "means every interface, port 0 an ephemeral port. logbus defaults to "
        "PLAINTEXT://localhost:9092.", _PER_BROKER)
_define("advertised.listeners", _STR, None, None, _HIGH,
        "Addresses given to clients and other brokers, if different from listeners.",
        _PER_BROKER)
_define("listener.security.protocol.map", _STR,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None,
        _LOW, "Security protocol of each listener name, as NAME:PROTOCOL pairs.", _PER_BROKER)
_define("inter.broker.listener.name", _STR, None, None, _MEDIUM,
        "Listener other brokers connect to; defaults to the one named after "
        "security.inter.broker.protocol.")
_define("security.inter.broker.protocol", _STR, "PLAINTEXT", OneOf(KNOWN_SECURITY_PROTOCOLS),
        _MEDIUM, "Security protocol between brokers (when inter.broker.listener.name is unset).")
_define("zookeeper.connect", _STR, None, None, _HIGH,
        "ZooKeeper connection string host:port[,host:port][/chroot]. Unset: logbus keeps "
        "cluster metadata in an embedded store in the first log directory.")
_define("zookeeper.session.timeout.ms", _INT, 18000, None, _HIGH, "ZooKeeper session timeout.")
_define("zookeeper.connection.timeout.ms", _INT, None, None, _HIGH,
        "How long to wait to connect to ZooKeeper; defaults to the session timeout.")
_define("zookeeper.max.in.flight.requests", _INT, 10, _at_least(1), _HIGH,
        "Unacknowledged ZooKeeper requests allowed before the client blocks.")
_define("controlled.shutdown.enable", _BOOL, True, None, _MEDIUM,
        "Move leadership away from this broker before it shuts down.")
_define("controlled.shutdown.max.retries", _INT, 3, None, _MEDIUM,
        "Attempts at a controlled shutdown before shutting down anyway.")
_define("controlled.shutdown.retry.backoff.ms", _LONG, 5000, None, _MEDIUM,
        "Pause between controlled shutdown attempts.")
_define("controller.socket.timeout.ms", _INT, 30000, None, _MEDIUM,
        "Socket timeout of controller-to-broker requests.")
_define("auto.leader.rebalance.enable", _BOOL, True, None, _HIGH,
        "Periodically move leadership back to each partition's preferred replica.")
_define("leader.imbalance.check.interval.seconds", _LONG, 300, _at_least(1), _HIGH,
        "How often the controller checks for leader imbalance.")
_define("leader.imbalance.per.broker.percentage", _INT, 10, None, _HIGH,
        "Share of non-preferred leaders on a broker that triggers a rebalance.")

# --- network and request handling ---
_define("num.network.threads", _INT, 3, _at_least(1), _HIGH,
        "Threads receiving requests and sending responses.", _CLUSTER)
_define("num.io.threads", _INT, 8, _at_least(1), _HIGH,
        "Threads processing requests (may include disk I/O).", _CLUSTER)
_define("background.threads", _INT, 10, _at_least(1), _HIGH,
        "Threads for background work such as segment deletion.", _CLUSTER)
_define("queued.max.requests", _INT, 500, _at_least(1), _HIGH,
        "Requests allowed to queue before network threads stop reading.")
_define("queued.max.request.bytes", _LONG, -1, None, _MEDIUM,
        "Bytes of queued requests allowed before reading stops; -1 means no limit.")
_define("socket.send.buffer.bytes", _INT, 102400, None, _HIGH,
        "SO_SNDBUF of server sockets; -1 uses the OS default.")
_define("socket.receive.buffer.bytes", _INT, 102400, None, _HIGH,
        "SO_RCVBUF of server sockets; -1 uses the OS default.")
_define("socket.request.max.bytes", _INT, 104857600, _at_least(1), _HIGH,
        "Largest request frame accepted.")
_define("socket.listen.backlog.size", _INT, 50, _at_least(1), _MEDIUM,
        "Pending connections the listen socket queues.")
_define("max.connections", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "Connections the broker accepts in total.", _CLUSTER)
_define("max.connections.per.ip", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "Connections accepted from one IP address.", _CLUSTER)
_define("max.connections.per.ip.overrides", _STR, "", None, _MEDIUM,
        "Per-IP or per-host exceptions, as host:count pairs.", _CLUSTER)
_define("max.connection.creation.rate", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "New connections per second the broker accepts.", _CLUSTER)
_define("connections.max.idle.ms", _LONG, 600000, None, _MEDIUM,
        "Idle connections are closed after this long.")
_define("request.timeout.ms", _INT, 30000, _at_least(0), _MEDIUM,
        "Longest a client request waits for a response from another broker.")
_define("fetch.max.bytes", _INT, 57671680, _at_least(1024), _MEDIUM,
        "Most bytes one Fetch response carries.")
_define("max.incremental.fetch.session.cache.slots", _INT, 1000, _at_least(0), _MEDIUM,
        "Incremental fetch sessions (KIP-227) the broker keeps.")
_define("fetch.purgatory.purge.interval.requests", _INT, 1000, None, _MEDIUM,
        "Completed requests between purges of the fetch purgatory.")
_define("producer.purgatory.purge.interval.requests", _INT, 1000, None, _MEDIUM,
        "Completed requests between purges of the produce purgatory.")
_define("quota.window.num", _INT, 11, _at_least(1), _LOW,
        "Samples kept for client quotas.")
_define("quota.window.size.seconds", _INT, 1, _at_least(1), _LOW,
        "Length of one client quota sample.")
_define("message.max.bytes", _INT, 1048588, _at_least(0), _HIGH,
        "Largest record batch accepted (default for topic max.message.bytes).", _CLUSTER)

# --- topic creation ---
_define("num.partitions", _INT, 1, _at_least(1), _MEDIUM,
        "Partitions of a topic created without a partition count.")
_define("default.replication.factor", _INT, 1, None, _MEDIUM,
        "Replication factor of a topic created without one.")
_define("auto.create.topics.enable", _BOOL, True, None, _HIGH,
        "Create a topic when a client asks for metadata of one that does not exist.")
_define("delete.topic.enable", _BOOL, True, None, _HIGH, "Allow topics to be deleted.")
_define("min.insync.replicas", _INT, 1, _at_least(1), _HIGH,
        "In-sync replicas needed to accept an acks=all write.", _CLUSTER)
_define("unclean.leader.election.enable", _BOOL, False, None, _HIGH,
        "Allow an out-of-sync replica to become leader, risking data loss.", _CLUSTER)
_define("compression.type", _STR, "producer", OneOf(COMPRESSION_TYPES), _HIGH,
        "Compression of stored batches; 'producer' keeps what the producer sent.", _CLUSTER)
_define("compression.gzip.level", _INT, -1, GZIP_LEVEL, _MEDIUM,
        "gzip level when compression.type is gzip.", _CLUSTER)
_define("compression.lz4.level", _INT, 9, LZ4_LEVEL, _MEDIUM,
        "lz4 level when compression.type is lz4.", _CLUSTER)
_define("compression.zstd.level", _INT, 3, ZSTD_LEVEL, _MEDIUM,
        "zstd level when compression.type is zstd.", _CLUSTER)

# --- logs ---
_define("log.dirs", _STR, None, None, _HIGH,
        "Comma-separated directories holding partition data; overrides log.dir.")
_define("log.dir", _STR, "./data", None, _HIGH,
        "Data directory used when log.dirs is unset. logbus defaults to ./data.")
_define("num.recovery.threads.per.data.dir", _INT, 1, _at_least(1), _HIGH,
        "Threads per data directory recovering logs at start-up and flushing at shutdown.",
        _CLUSTER)
_define("log.segment.bytes", _INT, 1073741824, _at_least(14), _HIGH,
        "Size at which a new segment is rolled.", _CLUSTER)
_define("log.roll.ms", _LONG, None, None, _HIGH,
        "Age at which a new segment is rolled; overrides log.roll.hours.", _CLUSTER)
_define("log.roll.hours", _INT, 168, _at_least(1), _HIGH,
        "Age in hours at which a new segment is rolled.", _CLUSTER)
_define("log.roll.jitter.ms", _LONG, None, None, _HIGH,
        "Most random time subtracted from the roll age; overrides log.roll.jitter.hours.",
        _CLUSTER)
_define("log.roll.jitter.hours", _INT, 0, _at_least(0), _HIGH,
        "Most random time in hours subtracted from the roll age.", _CLUSTER)
_define("log.segment.delete.delay.ms", _LONG, 60000, _at_least(0), _HIGH,
        "Wait between marking a segment deleted and removing its files.", _CLUSTER)
_define("log.index.size.max.bytes", _INT, 10485760, _at_least(4), _MEDIUM,
        "Largest offset or time index file.", _CLUSTER)
_define("log.index.interval.bytes", _INT, 4096, _at_least(0), _MEDIUM,
        "Bytes appended between index entries.", _CLUSTER)
_define("log.preallocate", _BOOL, False, None, _MEDIUM,
        "Preallocate segment files at full size.", _CLUSTER)
_define("log.flush.interval.messages", _LONG, LONG_MAX, _at_least(1), _HIGH,
        "Messages appended to a partition before it is fsynced.", _CLUSTER)
_define("log.flush.interval.ms", _LONG, None, None, _HIGH,
        "Longest unflushed data may stay in a partition; defaults to "
        "log.flush.scheduler.interval.ms.", _CLUSTER)
_define("log.flush.scheduler.interval.ms", _LONG, LONG_MAX, None, _HIGH,
        "How often the flusher checks whether a log needs an fsync.")
_define("log.flush.offset.checkpoint.interval.ms", _INT, 60000, _at_least(0), _HIGH,
        "How often the recovery-point checkpoint is written.")
_define("log.flush.start.offset.checkpoint.interval.ms", _INT, 60000, _at_least(0), _HIGH,
        "How often the log-start-offset checkpoint is written.")
_define("log.retention.ms", _LONG, None, None, _HIGH,
        "Age after which segments are deleted; -1 keeps them forever. Takes precedence over "
        "log.retention.minutes and log.retention.hours.", _CLUSTER)
_define("log.retention.minutes", _INT, None, None, _HIGH,
        "Retention age in minutes; takes precedence over log.retention.hours.", _CLUSTER)
_define("log.retention.hours", _INT, 168, None, _HIGH, "Retention age in hours.", _CLUSTER)
_define("log.retention.bytes", _LONG, -1, None, _HIGH,
        "Partition size above which the oldest segments are deleted; -1 for no limit.",
        _CLUSTER)
_define("log.retention.check.interval.ms", _LONG, 300000, _at_least(1), _MEDIUM,
        "How often logs are checked for segments to delete.")
_define("log.local.retention.ms", _LONG, -2, _at_least(-2), _MEDIUM,
        "Tiered storage only: local retention age; -2 means log.retention.ms.", _CLUSTER)
_define("log.local.retention.bytes", _LONG, -2, _at_least(-2), _MEDIUM,
        "Tiered storage only: local retention size; -2 means log.retention.bytes.", _CLUSTER)
_define("log.cleanup.policy", _LIST, ["delete"], ListOf(CLEANUP_POLICIES), _MEDIUM,
        "What happens to old segments: delete, compact, or both.", _CLUSTER)
_define("log.message.timestamp.type", _STR, "CreateTime", OneOf(TIMESTAMP_TYPES), _MEDIUM,
        "Whether stored timestamps are the producer's (CreateTime) or the broker's "
        "(LogAppendTime).", _CLUSTER)
_define("log.message.timestamp.before.max.ms", _LONG, LONG_MAX, _at_least(0), _MEDIUM,
        "How far in the past a CreateTime timestamp may be.", _CLUSTER)
_define("log.message.timestamp.after.max.ms", _LONG, LONG_MAX, _at_least(0), _MEDIUM,
        "How far in the future a CreateTime timestamp may be.", _CLUSTER)
_define("log.message.downconversion.enable", _BOOL, True, None, _LOW,
        "Convert batches for fetchers that only read old message formats.", _CLUSTER)

# --- log cleaner ---
_define("log.cleaner.enable", _BOOL, True, None, _MEDIUM,
        "Run the log cleaner, needed by compacted topics such as __consumer_offsets.")
_define("log.cleaner.threads", _INT, 1, _at_least(0), _MEDIUM,
        "Log cleaner threads.", _CLUSTER)
_define("log.cleaner.dedupe.buffer.size", _LONG, 134217728, None, _MEDIUM,
        "Memory for deduplication across all cleaner threads.", _CLUSTER)
_define("log.cleaner.io.buffer.size", _INT, 524288, _at_least(0), _MEDIUM,
        "I/O buffer memory across all cleaner threads.", _CLUSTER)
_define("log.cleaner.io.buffer.load.factor", _DOUBLE, 0.9, None, _MEDIUM,
        "Fill ratio of the deduplication buffer.", _CLUSTER)
_define("log.cleaner.io.max.bytes.per.second", _DOUBLE, sys.float_info.max, None, _MEDIUM,
        "Cleaner read plus write rate limit.", _CLUSTER)
_define("log.cleaner.backoff.ms", _LONG, 15000, _at_least(0), _MEDIUM,
        "Sleep when there is nothing to clean.", _CLUSTER)
_define("log.cleaner.min.cleanable.ratio", _DOUBLE, 0.5, Range(0, 1), _MEDIUM,
        "Dirty share of a log that makes it eligible for cleaning.", _CLUSTER)
_define("log.cleaner.delete.retention.ms", _LONG, 86400000, _at_least(0), _MEDIUM,
        "How long tombstones stay in compacted topics.", _CLUSTER)
_define("log.cleaner.min.compaction.lag.ms", _LONG, 0, _at_least(0), _MEDIUM,
        "Youngest a message may be and still be compacted.", _CLUSTER)
_define("log.cleaner.max.compaction.lag.ms", _LONG, LONG_MAX, _at_least(1), _MEDIUM,
        "Oldest a message may get before it must be compacted.", _CLUSTER)

# --- replication ---
_define("num.replica.fetchers", _INT, 1, None, _HIGH,
        "Fetcher threads per source broker.", _CLUSTER)
_define("replica.lag.time.max.ms", _LONG, 30000, None, _HIGH,
        "A follower that has not caught up for this long leaves the ISR.")
_define("replica.socket.timeout.ms", _INT, 30000, None, _HIGH,
        "Socket timeout of replica fetch requests.")
_define("replica.socket.receive.buffer.bytes", _INT, 65536, None, _HIGH,
        "SO_RCVBUF of replica fetcher sockets.")
_define("replica.fetch.max.bytes", _INT, 1048576, _at_least(0), _MEDIUM,
        "Bytes fetched per partition by a follower (not a hard limit).")
_define("replica.fetch.response.max.bytes", _INT, 10485760, _at_least(0), _MEDIUM,
        "Bytes a whole follower fetch response may carry (not a hard limit).")
_define("replica.fetch.min.bytes", _INT, 1, None, _HIGH,
        "Least bytes a follower fetch waits for.")
_define("replica.fetch.wait.max.ms", _INT, 500, None, _HIGH,
        "Longest a follower fetch waits for replica.fetch.min.bytes.")
_define("replica.fetch.backoff.ms", _INT, 1000, _at_least(0), _MEDIUM,
        "Sleep after a fetch error.")
_define("replica.high.watermark.checkpoint.interval.ms", _LONG, 5000, None, _HIGH,
        "How often high watermarks are checkpointed.")

# --- group coordinator and __consumer_offsets ---
_define("offsets.topic.num.partitions", _INT, 50, _at_least(1), _HIGH,
        "Partitions of __consumer_offsets (never change it after deployment).")
_define("offsets.topic.replication.factor", _SHORT, 1, _at_least(1), _HIGH,
        "Replication factor of __consumer_offsets. Kafka's default is 3; logbus defaults to 1 "
        "so a single broker works without configuration.")
_define("offsets.topic.segment.bytes", _INT, 104857600, _at_least(1), _HIGH,
        "Segment size of __consumer_offsets.")
_define("offsets.topic.compression.codec", _INT, 0, None, _HIGH,
        "Compression codec id for offset commits written to __consumer_offsets.")
_define("offsets.load.buffer.size", _INT, 5242880, _at_least(1), _HIGH,
        "Read size when loading offsets into the cache.")
_define("offsets.retention.minutes", _INT, 10080, _at_least(1), _HIGH,
        "How long committed offsets of an empty group are kept.")
_define("offsets.retention.check.interval.ms", _LONG, 600000, _at_least(1), _HIGH,
        "How often expired offsets are removed.")
_define("offsets.commit.timeout.ms", _INT, 5000, _at_least(1), _HIGH,
        "Longest an offset commit waits for its write to be replicated.")
_define("offset.metadata.max.bytes", _INT, 4096, None, _HIGH,
        "Largest metadata string stored with a committed offset.")
_define("group.initial.rebalance.delay.ms", _INT, 3000, None, _MEDIUM,
        "Wait for more members before the first rebalance of a new group.")
_define("group.min.session.timeout.ms", _INT, 6000, None, _MEDIUM,
        "Shortest session timeout a group member may ask for.")
_define("group.max.session.timeout.ms", _INT, 1800000, None, _MEDIUM,
        "Longest session timeout a group member may ask for.")
_define("group.max.size", _INT, INT_MAX, _at_least(1), _MEDIUM, "Most members in one group.")

# --- transaction coordinator, producer ids and __transaction_state ---
_define("transaction.state.log.num.partitions", _INT, 50, _at_least(1), _HIGH,
        "Partitions of __transaction_state (never change it after deployment).")
_define("transaction.state.log.replication.factor", _SHORT, 1, _at_least(1), _HIGH,
        "Replication factor of __transaction_state. Kafka's default is 3; logbus defaults to 1.")
_define("transaction.state.log.min.isr", _INT, 1, _at_least(1), _HIGH,
        "min.insync.replicas of __transaction_state. Kafka's default is 2; logbus defaults to 1.")
_define("transaction.state.log.segment.bytes", _INT, 104857600, _at_least(1), _HIGH,
        "Segment size of __transaction_state.")
_define("transaction.state.log.load.buffer.size", _INT, 5242880, _at_least(1), _HIGH,
        "Read size when loading transaction state.")
_define("transaction.max.timeout.ms", _INT, 900000, _at_least(1), _HIGH,
        "Longest transaction timeout a producer may ask for.")
_define("transactional.id.expiration.ms", _INT, 604800000, _at_least(1), _HIGH,
        "A transactional id unused for this long is forgotten.")
_define("transaction.abort.timed.out.transaction.cleanup.interval.ms", _INT, 10000,
        _at_least(1), _LOW, "How often timed-out transactions are aborted.")
_define("transaction.remove.expired.transaction.cleanup.interval.ms", _INT, 3600000,
        _at_least(1), _LOW, "How often expired transactional ids are removed.")
_define("producer.id.expiration.ms", _INT, 86400000, _at_least(1), _LOW,
        "A producer id idle for this long is forgotten by partition leaders.", _CLUSTER)
_define("producer.id.expiration.check.interval.ms", _INT, 600000, _at_least(1), _LOW,
        "How often expired producer ids are removed.")
# fmt: on


# --- listeners --------------------------------------------------------------------------


@dataclass(frozen=True)
class Listener:
    """One endpoint: `name` (upper case), `host` ("" = every interface), `port` (0 =
    ephemeral) and the security protocol its name maps to."""

    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


# Kafka's endpoint syntax: NAME://host:port, IPv6 hosts in brackets.
_ENDPOINT = re.compile(r"([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:([0-9]+)")


def parse_security_protocol_map(value: str, setting: str) -> dict[str, str]:
    """Parse "NAME:PROTOCOL,..." into {NAME: PROTOCOL}, names and protocols upper-cased."""
    mapping: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        parts = [part.strip() for part in entry.split(":")]
        if len(parts) != 2 or not parts[0]:
            raise ConfigError(setting, f"Expected NAME:PROTOCOL, found {entry!r}", value)
        name, protocol = parts[0].upper(), parts[1].upper()
        if protocol not in KNOWN_SECURITY_PROTOCOLS:
            raise ConfigError(
                setting,
                f"Unknown security protocol {parts[1]!r} for listener {name}; expected one of "
                + ", ".join(KNOWN_SECURITY_PROTOCOLS),
                value,
            )
        mapping[name] = protocol
    return mapping


def parse_listeners(
    value: str,
    setting: str,
    protocol_map: Mapping[str, str],
    *,
    distinct_ports: bool = True,
) -> list[Listener]:
    """Parse a listeners value ("NAME://host:port,...") with Kafka's rules: each name has a
    security protocol in `protocol_map`, names are unique and, with `distinct_ports`, so are
    ports other than 0."""
    listeners: list[Listener] = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = _ENDPOINT.fullmatch(item)
        if match is None:
            raise ConfigError(setting, f"Cannot parse {item!r} as NAME://host:port", value)
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if port > 65535:
            raise ConfigError(setting, f"Port {port} of listener {name} is out of range", value)
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                setting,
                f"No security protocol defined for listener {name} "
                "in listener.security.protocol.map",
                value,
            )
        if any(existing.name == name for existing in listeners):
            raise ConfigError(setting, f"Listener name {name} is used twice", value)
        if distinct_ports and port != 0 and any(existing.port == port for existing in listeners):
            raise ConfigError(setting, f"Port {port} is used by two listeners", value)
        listeners.append(Listener(name, host, port, protocol))
    return listeners


# --- server.properties ------------------------------------------------------------------

_WHITESPACE: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java .properties text (`java.util.Properties.load`): `#`/`!` comment lines,
    `key=value`, `key: value` or `key value`, a trailing odd backslash continuing the line
    (the next line's leading whitespace dropped), escapes `\\t \\n \\r \\f \\uXXXX` and
    `\\<char>` for any other char. Later duplicates win."""
    props: dict[str, str] = {}
    pending: list[str] = []
    start_line = 0
    for number, natural in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        line = natural.lstrip(_WHITESPACE)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start_line = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        key, value = _split_entry("".join(pending), f"{source}:{start_line}")
        props[key] = value
        pending = []
    if pending:  # a continuation backslash on the last line
        key, value = _split_entry("".join(pending), f"{source}:{start_line}")
        props[key] = value
    return props


def _split_entry(line: str, where: str) -> tuple[str, str]:
    index = 0
    while index < len(line) and line[index] not in "=:" and line[index] not in _WHITESPACE:
        index += 2 if line[index] == "\\" else 1
    index = min(index, len(line))
    key = line[:index]
    rest = line[index:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key, where), _unescape(rest, where)


def _unescape(text: str, where: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1 : index + 2]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(where, "Malformed \\uXXXX escape", text)
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a server.properties file (UTF-8, which covers Kafka's ISO-8859-1 ASCII files)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(str(file), f"Cannot read the properties file: {error}") from error
    return parse_properties(text, str(file))


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse command-line overrides ("name=value"); the value may itself contain '='."""
    props: dict[str, str] = {}
    for item in items:
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            raise ConfigError(name.strip() or item, "Expected an override of the form name=value")
        props[name.strip()] = value
    return props


# --- BrokerConfig -----------------------------------------------------------------------

T = TypeVar("T")


class _Setting(Generic[T]):
    """A typed, read-only attribute of `BrokerConfig` backed by one setting."""

    def __init__(self, name: str) -> None:
        self.name = name

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
        self._values: dict[str, ConfigValue] = BROKER_CONFIG_DEF.defaults()
        for source in reversed(list(self._layers)):
            self._values.update(self._layers[source])

        self.listener_security_protocol_map: dict[str, str] = parse_security_protocol_map(
            self._str("listener.security.protocol.map"), "listener.security.protocol.map"
        )
        self.listeners: list[Listener] = self._parse_listeners("listeners")
        self.advertised_listeners: list[Listener] = (
            self.listeners
            if self.get("advertised.listeners") is None
            else self._parse_listeners("advertised.listeners")
        )
        self.inter_broker_listener_name: str = self._inter_broker_listener_name()
        self.log_dirs: list[str] = self._log_dirs()
        self._check_retention()
        self._check_relations()

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
        return dict(self._layers[ConfigSource.STATIC_BROKER_CONFIG])

    def __repr__(self) -> str:
        explicit = {name: self._values[name] for name in self._values if self.is_set(name)}
        return f"BrokerConfig({explicit!r})"

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
    def uses_zookeeper(self) -> bool:
        """False: cluster metadata lives in the embedded store."""
        return self.zookeeper_connect is not None

    # --- typed settings ---

    broker_id = _Setting[int]("broker.id")
    broker_rack = _Setting[str | None]("broker.rack")
    zookeeper_connect = _Setting[str | None]("zookeeper.connect")
    zookeeper_session_timeout_ms = _Setting[int]("zookeeper.session.timeout.ms")
    zookeeper_max_in_flight_requests = _Setting[int]("zookeeper.max.in.flight.requests")
    controlled_shutdown_enable = _Setting[bool]("controlled.shutdown.enable")
    controlled_shutdown_max_retries = _Setting[int]("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms = _Setting[int]("controlled.shutdown.retry.backoff.ms")
    controller_socket_timeout_ms = _Setting[int]("controller.socket.timeout.ms")
    auto_leader_rebalance_enable = _Setting[bool]("auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds = _Setting[int](
        "leader.imbalance.check.interval.seconds"
    )
    leader_imbalance_per_broker_percentage = _Setting[int]("leader.imbalance.per.broker.percentage")

    num_network_threads = _Setting[int]("num.network.threads")
    num_io_threads = _Setting[int]("num.io.threads")
    background_threads = _Setting[int]("background.threads")
    queued_max_requests = _Setting[int]("queued.max.requests")
    queued_max_request_bytes = _Setting[int]("queued.max.request.bytes")
    socket_send_buffer_bytes = _Setting[int]("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Setting[int]("socket.receive.buffer.bytes")
    socket_request_max_bytes = _Setting[int]("socket.request.max.bytes")
    socket_listen_backlog_size = _Setting[int]("socket.listen.backlog.size")
    max_connections = _Setting[int]("max.connections")
    max_connections_per_ip = _Setting[int]("max.connections.per.ip")
    max_connections_per_ip_overrides = _Setting[str]("max.connections.per.ip.overrides")
    max_connection_creation_rate = _Setting[int]("max.connection.creation.rate")
    connections_max_idle_ms = _Setting[int]("connections.max.idle.ms")
    request_timeout_ms = _Setting[int]("request.timeout.ms")
    fetch_max_bytes = _Setting[int]("fetch.max.bytes")
    max_incremental_fetch_session_cache_slots = _Setting[int](
        "max.incremental.fetch.session.cache.slots"
    )
    fetch_purgatory_purge_interval_requests = _Setting[int](
        "fetch.purgatory.purge.interval.requests"
    )
    producer_purgatory_purge_interval_requests = _Setting[int](
        "producer.purgatory.purge.interval.requests"
    )
    quota_window_num = _Setting[int]("quota.window.num")
    quota_window_size_seconds = _Setting[int]("quota.window.size.seconds")
    message_max_bytes = _Setting[int]("message.max.bytes")

    num_partitions = _Setting[int]("num.partitions")
    default_replication_factor = _Setting[int]("default.replication.factor")
    auto_create_topics_enable = _Setting[bool]("auto.create.topics.enable")
    delete_topic_enable = _Setting[bool]("delete.topic.enable")
    min_insync_replicas = _Setting[int]("min.insync.replicas")
    unclean_leader_election_enable = _Setting[bool]("unclean.leader.election.enable")
    compression_type = _Setting[str]("compression.type")

    num_recovery_threads_per_data_dir = _Setting[int]("num.recovery.threads.per.data.dir")
    log_segment_bytes = _Setting[int]("log.segment.bytes")
    log_segment_delete_delay_ms = _Setting[int]("log.segment.delete.delay.ms")
    log_index_size_max_bytes = _Setting[int]("log.index.size.max.bytes")
    log_index_interval_bytes = _Setting[int]("log.index.interval.bytes")
    log_preallocate = _Setting[bool]("log.preallocate")
    log_flush_interval_messages = _Setting[int]("log.flush.interval.messages")
    log_flush_scheduler_interval_ms = _Setting[int]("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms = _Setting[int](
        "log.flush.offset.checkpoint.interval.ms"
    )
    log_flush_start_offset_checkpoint_interval_ms = _Setting[int](
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    log_retention_bytes = _Setting[int]("log.retention.bytes")
    log_retention_check_interval_ms = _Setting[int]("log.retention.check.interval.ms")
    log_cleanup_policy = _Setting[list[str]]("log.cleanup.policy")
    log_message_timestamp_type = _Setting[str]("log.message.timestamp.type")
    log_message_timestamp_before_max_ms = _Setting[int]("log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms = _Setting[int]("log.message.timestamp.after.max.ms")
    log_message_downconversion_enable = _Setting[bool]("log.message.downconversion.enable")

    log_cleaner_enable = _Setting[bool]("log.cleaner.enable")
    log_cleaner_threads = _Setting[int]("log.cleaner.threads")
    log_cleaner_dedupe_buffer_size = _Setting[int]("log.cleaner.dedupe.buffer.size")
    log_cleaner_io_buffer_size = _Setting[int]("log.cleaner.io.buffer.size")
    log_cleaner_io_buffer_load_factor = _Setting[float]("log.cleaner.io.buffer.load.factor")
    log_cleaner_io_max_bytes_per_second = _Setting[float]("log.cleaner.io.max.bytes.per.second")
    log_cleaner_backoff_ms = _Setting[int]("log.cleaner.backoff.ms")
    log_cleaner_min_cleanable_ratio = _Setting[float]("log.cleaner.min.cleanable.ratio")
    log_cleaner_delete_retention_ms = _Setting[int]("log.cleaner.delete.retention.ms")
    log_cleaner_min_compaction_lag_ms = _Setting[int]("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms = _Setting[int]("log.cleaner.max.compaction.lag.ms")

    num_replica_fetchers = _Setting[int]("num.replica.fetchers")
    replica_lag_time_max_ms = _Setting[int]("replica.lag.time.max.ms")
    replica_socket_timeout_ms = _Setting[int]("replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes = _Setting[int]("replica.socket.receive.buffer.bytes")
    replica_fetch_max_bytes = _Setting[int]("replica.fetch.max.bytes")
    replica_fetch_response_max_bytes = _Setting[int]("replica.fetch.response.max.bytes")
    replica_fetch_min_bytes = _Setting[int]("replica.fetch.min.bytes")
    replica_fetch_wait_max_ms = _Setting[int]("replica.fetch.wait.max.ms")
    replica_fetch_backoff_ms = _Setting[int]("replica.fetch.backoff.ms")
    replica_high_watermark_checkpoint_interval_ms = _Setting[int](
        "replica.high.watermark.checkpoint.interval.ms"
    )

    offsets_topic_num_partitions = _Setting[int]("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Setting[int]("offsets.topic.replication.factor")
    offsets_topic_segment_bytes = _Setting[int]("offsets.topic.segment.bytes")
    offsets_topic_compression_codec = _Setting[int]("offsets.topic.compression.codec")
    offsets_load_buffer_size = _Setting[int]("offsets.load.buffer.size")
    offsets_retention_minutes = _Setting[int]("offsets.retention.minutes")
    offsets_retention_check_interval_ms = _Setting[int]("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms = _Setting[int]("offsets.commit.timeout.ms")
    offset_metadata_max_bytes = _Setting[int]("offset.metadata.max.bytes")
    group_initial_rebalance_delay_ms = _Setting[int]("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms = _Setting[int]("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Setting[int]("group.max.session.timeout.ms")
    group_max_size = _Setting[int]("group.max.size")

    transaction_state_log_num_partitions = _Setting[int]("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor = _Setting[int](
        "transaction.state.log.replication.factor"
    )
    transaction_state_log_min_isr = _Setting[int]("transaction.state.log.min.isr")
    transaction_state_log_segment_bytes = _Setting[int]("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size = _Setting[int]("transaction.state.log.load.buffer.size")
    transaction_max_timeout_ms = _Setting[int]("transaction.max.timeout.ms")
    transactional_id_expiration_ms = _Setting[int]("transactional.id.expiration.ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms = _Setting[int](
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms = _Setting[int](
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    producer_id_expiration_ms = _Setting[int]("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms = _Setting[int](
        "producer.id.expiration.check.interval.ms"
    )

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

    def _inter_broker_listener_name(self) -> str:
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
        threads = self.log_cleaner_threads
        if threads > 0 and self.log_cleaner_dedupe_buffer_size / threads <= 1024 * 1024:
            raise ConfigError(
                "log.cleaner.dedupe.buffer.size",
                "Must be more than 1 MiB per cleaner thread",
                self.log_cleaner_dedupe_buffer_size,
            )


def _parse_layer(props: Mapping[str, object], source: ConfigSource) -> dict[str, ConfigValue]:
    """Parse one layer's settings; unknown names and settings that cannot live in a dynamic
    layer raise `ConfigError`."""
    values: dict[str, ConfigValue] = {}
    for name, raw in props.items():
        key = BROKER_CONFIG_DEF.get(name)
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
