"""The broker's settings: `BROKER_CONFIG_DEF`, one definition per Kafka broker config.

Names, types, defaults and valid values follow Kafka's broker configs (3.x, ZooKeeper
mode). Where logbus defaults differ, so that one broker starts with no configuration at
all, the definition says so: `broker.id` (0), `listeners`
(PLAINTEXT://localhost:9092), `log.dir` (./data), and the replication factors and min ISR
of the internal topics (1). Topic configs reuse the value sets and limits defined here.
"""

from __future__ import annotations

import sys
from typing import Final

from logbus.common.config_def import (
    Check,
    ConfigDef,
    ConfigType,
    ConfigValue,
    Importance,
    ListOf,
    OneOf,
    Range,
    UpdateMode,
)
from logbus.server.config.listeners import KNOWN_SECURITY_PROTOCOLS
from logbus.server.metrics.address import metrics_listener_error
from logbus.server.network.connection_quotas import parse_per_ip_overrides

__all__ = [
    "BROKER_CONFIG_DEF",
    "CLEANUP_POLICIES",
    "CLUSTER_ONLY",
    "COMPRESSION_TYPES",
    "GZIP_LEVEL",
    "INT_MAX",
    "LONG_MAX",
    "LZ4_LEVEL",
    "NO_EFFECT",
    "ONLY_DEFAULT",
    "TIMESTAMP_TYPES",
    "ZSTD_LEVEL",
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


def _check_per_ip_overrides(value: ConfigValue) -> str | None:
    try:
        parse_per_ip_overrides(str(value))
    except ValueError as error:
        return str(error)
    return None


PER_IP_OVERRIDES: Final = Check(_check_per_ip_overrides, "host:count pairs, comma-separated")
METRICS_LISTENER: Final = Check(metrics_listener_error, "http://host:port")

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
        "PLAINTEXT://localhost:9092. Kafka can change it per broker at run time; logbus "
        "needs a restart.")
_define("advertised.listeners", _STR, None, None, _HIGH,
        "Addresses given to clients and other brokers, if different from listeners "
        "(read-only in logbus).")
_define("listener.security.protocol.map", _STR,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None,
        _LOW, "Security protocol of each listener name, as NAME:PROTOCOL pairs (read-only in "
        "logbus).")
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
# --- KRaft mode (KIP-500, KIP-595, KIP-631): a node that sets process.roles ---
_define("process.roles", _LIST, [], ListOf(("broker", "controller")), _HIGH,
        "The roles of this node in KRaft mode: broker, controller, or both. Empty: "
        "ZooKeeper mode (or a stand-alone broker).")
_define("node.id", _INT, -1, None, _HIGH,
        "This node's id in KRaft mode, shared by its broker and controller roles; "
        "required when process.roles is set.")
_define("controller.quorum.voters", _LIST, [], None, _HIGH,
        "The static quorum of controllers: id@host:port entries, comma-separated.")
_define("controller.listener.names", _STR, None, None, _HIGH,
        "Comma-separated names of the listeners the controllers use; the first is the "
        "one brokers and other controllers connect to.")
_define("metadata.log.dir", _STR, None, None, _HIGH,
        "Directory of the __cluster_metadata log; defaults to the first log directory.")
_define("controller.quorum.election.timeout.ms", _INT, 1000, _at_least(1), _HIGH,
        "How long a voter waits without hearing from a leader before it starts an "
        "election; each wait is randomized between this and twice this.")
_define("controller.quorum.election.backoff.max.ms", _INT, 1000, _at_least(0), _HIGH,
        "Longest random pause before a candidate whose election failed tries again.")
_define("controller.quorum.fetch.timeout.ms", _INT, 2000, _at_least(1), _HIGH,
        "How long a follower goes without a successful fetch from the leader before it "
        "starts an election; a leader that hears from no majority of voters for this "
        "long (times 1.5) resigns.")
_define("controller.quorum.request.timeout.ms", _INT, 2000, _at_least(1), _MEDIUM,
        "How long a voter waits for the answer to one Raft request.")
_define("metadata.max.idle.interval.ms", _INT, 500, _at_least(0), _LOW,
        "How often the active controller appends a NoOpRecord to the metadata log when "
        "nothing else is written (KIP-835), so followers see the high watermark move; 0 "
        "turns it off.")
_define("broker.heartbeat.interval.ms", _INT, 2000, _at_least(1), _MEDIUM,
        "Time between a broker's heartbeats to the active controller.")
_define("broker.session.timeout.ms", _INT, 9000, _at_least(1), _MEDIUM,
        "How long the active controller waits without a heartbeat before it fences a "
        "broker.")
_define("metadata.log.max.record.bytes.between.snapshots", _LONG, 20 * 1024 * 1024,
        _at_least(1), _HIGH,
        "Bytes appended to the metadata log after the latest snapshot before a new "
        "snapshot is written.")
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
        "Bytes of requests read but not yet answered, across the broker, beyond which no "
        "more requests are read until some are answered; -1 (or any value up to 0) means "
        "no limit.")
_define("socket.send.buffer.bytes", _INT, 102400, None, _HIGH,
        "SO_SNDBUF of server sockets; -1 uses the OS default.")
_define("socket.receive.buffer.bytes", _INT, 102400, None, _HIGH,
        "SO_RCVBUF of server sockets; -1 uses the OS default.")
_define("socket.request.max.bytes", _INT, 104857600, _at_least(1), _HIGH,
        "Largest request frame accepted.")
_define("socket.listen.backlog.size", _INT, 50, _at_least(1), _MEDIUM,
        "Pending connections the listen socket queues.")
_define("max.connections", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "Connections the broker holds in total; new ones beyond it are closed at once.",
        _CLUSTER)
_define("max.connections.per.ip", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "Connections the broker holds from one IP address; new ones beyond it are closed "
        "at once. 0 only with max.connections.per.ip.overrides.", _CLUSTER)
_define("max.connections.per.ip.overrides", _STR, "", PER_IP_OVERRIDES, _MEDIUM,
        "Per-IP or per-host exceptions to max.connections.per.ip, as host:count pairs "
        "(e.g. hostName:100,127.0.0.1:200).", _CLUSTER)
_define("max.connection.creation.rate", _INT, INT_MAX, _at_least(0), _MEDIUM,
        "New connections per second the broker accepts; faster ones wait to be accepted.",
        _CLUSTER)
_define("connections.max.idle.ms", _LONG, 600000, None, _MEDIUM,
        "Connections idle (no request under way, no bytes received) for longer are closed; "
        "a negative value never closes them.")
_define("metrics.listener", _STR, None, METRICS_LISTENER, _LOW,
        "logbus: where the broker serves Prometheus metrics, as http://host:port (e.g. "
        "http://127.0.0.1:9404; port 0 picks a free one); unset, no endpoint and no metrics "
        "are recorded. See docs/metrics.md.")
_define("request.log.file", _STR, None, None, _LOW,
        "logbus: write the request log (the kafka.request.logger logger at DEBUG, one line "
        "per completed request) to this file, or to kafka-request.log in this directory, "
        "or, with true, in the first log dir; rotated at 100 MiB. See docs/metrics.md.")
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

# --- security: TLS and SASL (each may also be set for one listener as
# listener.name.<listener>.<setting>; SASL's JAAS config as
# listener.name.<listener>.<mechanism>.sasl.jaas.config) ---
_define("ssl.protocol", _STR, "TLSv1.3", None, _MEDIUM,
        "TLS protocol of the contexts made (the newest enabled one is used).", _PER_BROKER)
_define("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"],
        ListOf(("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1")), _MEDIUM,
        "TLS protocol versions accepted.", _PER_BROKER)
_define("ssl.cipher.suites", _LIST, [], None, _LOW,
        "TLS 1.2 cipher suites allowed, by OpenSSL or IANA name; empty: OpenSSL's defaults.",
        _PER_BROKER)
_define("ssl.keystore.type", _STR, "JKS", None, _MEDIUM,
        "Keystore format; logbus reads PEM only.", _PER_BROKER)
_define("ssl.keystore.location", _STR, None, None, _HIGH,
        "PEM file holding the private key and its certificate chain.", _PER_BROKER)
_define("ssl.keystore.password", _PASSWORD, None, None, _HIGH,
        "Password of the keystore (for PEM: of the private key, if ssl.key.password is "
        "unset).", _PER_BROKER)
_define("ssl.key.password", _PASSWORD, None, None, _HIGH,
        "Password of an encrypted private key.", _PER_BROKER)
_define("ssl.keystore.key", _PASSWORD, None, None, _HIGH,
        "The private key in PEM, inline (with ssl.keystore.certificate.chain).", _PER_BROKER)
_define("ssl.keystore.certificate.chain", _PASSWORD, None, None, _HIGH,
        "The certificate chain in PEM, inline (with ssl.keystore.key).", _PER_BROKER)
_define("ssl.truststore.type", _STR, "JKS", None, _MEDIUM,
        "Truststore format; logbus reads PEM only.", _PER_BROKER)
_define("ssl.truststore.location", _STR, None, None, _HIGH,
        "PEM file of the CA certificates trusted for client certificates.", _PER_BROKER)
_define("ssl.truststore.password", _PASSWORD, None, None, _HIGH,
        "Password of the truststore (unused for PEM).", _PER_BROKER)
_define("ssl.truststore.certificates", _PASSWORD, None, None, _HIGH,
        "Trusted CA certificates in PEM, inline.", _PER_BROKER)
_define("ssl.client.auth", _STR, "none", OneOf(("none", "requested", "required")), _MEDIUM,
        "Whether clients must (required), may (requested) or need not present a "
        "certificate.", _PER_BROKER)
_define("ssl.endpoint.identification.algorithm", _STR, "https", None, _LOW,
        "https: a broker connecting to another checks its host name against the "
        "certificate; empty: not checked.", _PER_BROKER)
_define("ssl.principal.mapping.rules", _STR, "DEFAULT", None, _LOW,
        "Rules mapping a client certificate's distinguished name to a user name "
        "(RULE:pattern/replacement/[LU], DEFAULT).")
_define("sasl.enabled.mechanisms", _LIST, ["GSSAPI"], None, _MEDIUM,
        "SASL mechanisms offered; logbus has PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.",
        _PER_BROKER)
_define("sasl.mechanism.inter.broker.protocol", _STR, "GSSAPI", None, _MEDIUM,
        "SASL mechanism brokers use between themselves.", _PER_BROKER)
_define("sasl.jaas.config", _PASSWORD, None, None, _MEDIUM,
        "JAAS login module configuration (PLAIN users, the broker's own credentials).",
        _PER_BROKER)
_define("sasl.server.max.receive.size", _INT, 524288, _at_least(1), _LOW,
        "Largest frame accepted before a client has authenticated.")
_define("connection.failed.authentication.delay.ms", _INT, 100, _at_least(0), _LOW,
        "How long a connection whose authentication failed stays open (answered, unread) "
        "before it is closed: slows down password guessing.")
_define("connections.max.reauth.ms", _LONG, 0, _at_least(0), _MEDIUM,
        "Longest a SASL session lasts before the client must authenticate again (KIP-368); "
        "0: forever.")

# --- topic creation ---
_define("num.partitions", _INT, 1, _at_least(1), _MEDIUM,
        "Partitions of a topic created without a partition count.")
_define("default.replication.factor", _INT, 1, None, _MEDIUM,
        "Replication factor of a topic created without one.")
_define("auto.create.topics.enable", _BOOL, True, None, _HIGH,
        "Create a topic when a client asks for metadata of one that does not exist.")
_define("delete.topic.enable", _BOOL, True, None, _HIGH, "Allow topics to be deleted.")
# --- partition limits (issue 13; the name is KIP-578's) ---
_define("max.broker.partitions", _INT, 20000, _at_least(1), _MEDIUM,
        "Most partition replicas one broker may host: a CreateTopics or CreatePartitions "
        "that would exceed it gets POLICY_VIOLATION (each hosted partition keeps its active "
        "segment's log file open).")
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
_define("leader.replication.throttled.rate", _LONG, LONG_MAX, _at_least(1), _MEDIUM,
        "Bytes/s this broker sends to followers of the partitions its topics' "
        "leader.replication.throttled.replicas name (a reassignment's copy).", _PER_BROKER)
_define("follower.replication.throttled.rate", _LONG, LONG_MAX, _at_least(1), _MEDIUM,
        "Bytes/s this broker fetches as follower of the partitions its topics' "
        "follower.replication.throttled.replicas name (a reassignment's copy).", _PER_BROKER)
_define("replica.alter.log.dirs.io.max.bytes.per.second", _LONG, LONG_MAX, _at_least(1),
        _MEDIUM, "Bytes/s this broker copies when it moves replicas between its log dirs "
        "(AlterReplicaLogDirs' future logs).", _PER_BROKER)
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
_define("group.consumer.session.timeout.ms", _INT, 45000, _at_least(1), _MEDIUM,
        "How long a consumer-protocol (KIP-848) member may go without a heartbeat.")
_define("group.consumer.heartbeat.interval.ms", _INT, 5000, _at_least(1), _MEDIUM,
        "How often consumer-protocol members heartbeat (told to them in each answer).")
_define("group.consumer.max.size", _INT, INT_MAX, _at_least(1), _MEDIUM,
        "Most members in one consumer-protocol group.")
_define("group.consumer.assignors", _LIST, ["uniform", "range"],
        ListOf(("uniform", "range")), _MEDIUM,
        "Server-side assignors of consumer-protocol groups; the first is the default.")
_define("group.consumer.migration.policy", _STR, "bidirectional",
        OneOf(("disabled", "downgrade", "upgrade", "bidirectional")), _MEDIUM,
        "Whether a classic group may become a consumer-protocol group (upgrade) and back "
        "(downgrade) while it has members.")

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

# --- share groups (KIP-932: coordinator/share/, server/share/) ---
_define("group.share.record.lock.duration.ms", _INT, 30000, _at_least(1000), _MEDIUM,
        "How long a share consumer holds the records it acquired before they are released.")
_define("group.share.delivery.count.limit", _INT, 5, _at_least(2), _MEDIUM,
        "Deliveries of a record to share consumers before it is archived.")
_define("group.share.partition.max.record.locks", _INT, 2000, _at_least(100), _MEDIUM,
        "Most records in flight (acquired, or released for redelivery) per share partition.")
_define("group.share.heartbeat.interval.ms", _INT, 5000, _at_least(1), _MEDIUM,
        "The heartbeat interval given to share-group members.")
_define("group.share.session.timeout.ms", _INT, 45000, _at_least(1), _MEDIUM,
        "A share-group member whose heartbeats stop for this long is removed.")
_define("group.share.max.size", _INT, 200, _at_least(1), _MEDIUM,
        "Most members in one share group.")
_define("share.coordinator.state.topic.num.partitions", _INT, 50, _at_least(1), _HIGH,
        "Partitions of __share_group_state (never change it after deployment).")
_define("share.coordinator.state.topic.replication.factor", _SHORT, 1, _at_least(1), _HIGH,
        "Replication factor of __share_group_state. Kafka's default is 3; logbus defaults to 1.")
_define("share.coordinator.state.topic.min.isr", _SHORT, 1, _at_least(1), _HIGH,
        "min.insync.replicas of __share_group_state. Kafka's default is 2; logbus defaults to 1.")
_define("share.coordinator.state.topic.segment.bytes", _INT, 104857600, _at_least(1), _HIGH,
        "Segment size of __share_group_state.")

# --- authorization (server/security/authorizer.py) ---
_define("authorizer.class.name", _STR, "",
        OneOf(("", "kafka.security.authorizer.AclAuthorizer",
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer")), _LOW,
        "The authorizer: Kafka's AclAuthorizer or StandardAuthorizer class name enables "
        "ACLs; empty means no authorization.")
_define("super.users", _STR, "", None, _LOW,
        "Principals (User:alice;User:bob) allowed every operation whatever the ACLs say.")
_define("allow.everyone.if.no.acl.found", _BOOL, False, None, _LOW,
        "Allow a request on a resource that no ACL names (otherwise refused).")

# --- settings a stand-alone logbus broker accepts without using them ---
# Every other setting is used; tests/unit/test_broker_settings.py holds the code to that,
# and docs/configuration.md lists these sets with the reason for each.

CLUSTER_ONLY: Final = frozenset({
    # a broker's controlled shutdown and the controller's preferred-leader rebalance
    "controlled.shutdown.enable", "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms", "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage",
    # connections between brokers
    "security.inter.broker.protocol", "request.timeout.ms",
    # followers: the replica fetcher and the ISR
    "num.replica.fetchers", "replica.lag.time.max.ms", "replica.socket.timeout.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes", "replica.fetch.min.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms",
    # reassignment throttles: only a follower's traffic is throttled
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
})
"""Used only when brokers form a replicated cluster: one broker is every partition's only
replica and its own controller."""

NO_EFFECT: Final = frozenset({
    # tuning of machinery logbus does not have: one event loop instead of thread pools
    # and a request queue, a purgatory that drops operations as they complete, no fetch
    # sessions (every fetch is a full one, as with 0 session slots)
    "num.network.threads", "num.io.threads", "background.threads",
    "num.recovery.threads.per.data.dir", "queued.max.requests",
    "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests",
    "max.incremental.fetch.session.cache.slots",
    "offsets.load.buffer.size", "log.preallocate",
    # the ZooKeeper client (kazoo) pipelines its requests without this limit
    "zookeeper.max.in.flight.requests",
    # tiered storage, which logbus does not have
    "log.local.retention.ms", "log.local.retention.bytes",
    # the followers' sockets keep the operating system's receive buffer
    "replica.socket.receive.buffer.bytes",
})
"""Accepted so that Kafka's server.properties files work, with no effect: Kafka's own
behaviour with these set would differ from logbus's only in speed."""

ONLY_DEFAULT: Final = {
    "offsets.topic.compression.codec": "logbus writes offset commits uncompressed",
    "log.message.downconversion.enable": "logbus always down-converts batches for fetchers "
    "that only read old message formats",
}
"""Settings logbus supports only at their default value: any other value stops start-up
(and is refused by AlterConfigs) with the reason given here."""
# fmt: on
