"""The options of the `logbus` data source, named and checked as Spark's Kafka source does.

Spark hands a data source its options as a case-insensitive map of strings. This module
turns that map into typed values (`ReadOptions`, `WriteOptions`) on the driver, where a
mistake is reported before any task runs: an unknown option, a malformed offsets JSON or a
missing `kafka.bootstrap.servers` raises `LogbusSparkError` naming the option.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbus.client.config import SECURITY_SETTINGS, ConfigSchema
from logbus.client.security import ClientSecurity, security_from_config
from logbus.common.config_def import ConfigError
from logbus.spark.retry import RetryBudget

# Offsets as Spark's Kafka source writes them in JSON: -2 earliest, -1 latest.
EARLIEST = -2
LATEST = -1

# Options Spark itself may add to a source's or sink's map.
_SPARK_OWN = frozenset({"path", "checkpointlocation", "queryname"})

_READ_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "includeHeaders",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    # Confluent-framed Avro with a schema registry (docs/spark.md)
    "keyFormat",
    "valueFormat",
    "schema.registry.url",
    "keySubject",
    "valueSubject",
    "keySchemaVersion",
    "valueSchemaVersion",
    "mode",
)
_WRITE_OPTIONS = (
    "topic",
    "includeHeaders",
    "exactlyOnce",
    "transactionalIdPrefix",
    "exactlyOnceMarkerTopic",
    "keyFormat",
    "valueFormat",
    "schema.registry.url",
    "keySubject",
    "valueSubject",
    "keySchemaId",
    "valueSchemaId",
    "keyRecordName",
    "valueRecordName",
    "auto.register.schemas",
)
# Spark Kafka source options that tune its Kafka consumer and mean nothing here: accepted
# so that jobs port unchanged, and ignored.
_READ_IGNORED = (
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
)
# Spark Kafka source options this source does not offer yet.
_READ_UNSUPPORTED = ("maxBytesPerTrigger",)

# Consumer settings (after the `kafka.` prefix) a reader honours; group.id is accepted as
# Spark accepts it, but no consumer group is ever joined: offsets live in the checkpoint.
_READ_CLIENT_SETTINGS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "request.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.max.wait.ms",
        "isolation.level",
        "default.api.timeout.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "group.id",
        # TLS and SASL (librdkafka's and the Java client's names, as the logbus client)
        *(setting.name for setting in SECURITY_SETTINGS),
        # consumer settings with no effect on exact-range fetches without a group
        "group.instance.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.records",
        "max.poll.interval.ms",
        "partition.assignment.strategy",
        "fetch.min.bytes",
        "check.crcs",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "client.dns.lookup",
        "client.rack",
    }
)
# Consumer settings Spark's Kafka source refuses, with the option to use instead.
_READ_REFUSED = {
    "auto.offset.reset": "use the startingOffsets option instead",
    "enable.auto.commit": "offsets are tracked by the query, not committed to Kafka",
    "key.deserializer": "keys are always returned as binary; cast them in a query",
    "value.deserializer": "values are always returned as binary; cast them in a query",
    "interceptor.classes": "interceptors are not supported",
}
_WRITE_REFUSED = {
    "key.serializer": "keys are written as binary or string columns",
    "value.serializer": "values are written as binary or string columns",
    "transactional.id": "with exactlyOnce=true each task's transactional id is made from "
    "the transactionalIdPrefix option",
}


_SECURITY_NAMES = frozenset(setting.name for setting in SECURITY_SETTINGS)
_SECURITY_SCHEMA = ConfigSchema("reader", SECURITY_SETTINGS)


class LogbusSparkError(ValueError):
    """A data source option or input the `logbus` source cannot work with."""


@dataclass(frozen=True)
class ClientSettings:
    """Connection settings taken from the `kafka.`-prefixed options."""

    bootstrap_servers: str
    client_id: str = "logbus-spark"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    fetch_max_bytes: int = 50 * 1024 * 1024
    # Larger than a consumer's 1 MiB: a Spark task reads one partition, and fewer, larger
    # fetches spend less time per record on round trips.
    max_partition_fetch_bytes: int = 8 * 1024 * 1024
    fetch_max_wait_ms: int = 500
    # How long a look-up or fetch keeps retrying retriable errors (a dead broker, a leader
    # being elected), and the pauses between tries (Kafka's consumer settings).
    api_timeout_ms: int = 60_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    # 0 read_uncommitted, 1 read_committed (Kafka's isolation levels).
    isolation_level: int = 0
    # the kafka.security.protocol, kafka.ssl.* and kafka.sasl.* options, as given (an
    # SSL context cannot travel to Spark's workers: each builds its own)
    security_settings: tuple[tuple[str, str], ...] = ()

    def retry_budget(self) -> RetryBudget:
        """The retries of one look-up or fetch (see `logbus.spark.retry`)."""
        return RetryBudget(self.api_timeout_ms, self.retry_backoff_ms, self.retry_backoff_max_ms)

    def security(self) -> ClientSecurity:
        """TLS and SASL for the reader's connections."""
        return security_from_config(_SECURITY_SCHEMA.parse(dict(self.security_settings)))


@dataclass(frozen=True)
class AvroColumn:
    """A `key` or `value` column in Confluent-framed Avro: the registry subject its
    schema lives under and, for a read, the version of the reader schema; for a write,
    a schema id to use as it is, or the record name of the schema derived from the
    column's type."""

    column: str
    subject: str
    version: str = "latest"
    schema_id: int | None = None
    record_name: str | None = None


@dataclass(frozen=True)
class RecordFormats:
    """How keys and values are encoded: binary (Spark's Kafka source) unless a column is
    in `avro`. `permissive` is mode=PERMISSIVE (an undecodable record reads as null);
    `auto_register` is auto.register.schemas."""

    registry_url: str | None = None
    avro: tuple[AvroColumn, ...] = ()
    permissive: bool = False
    auto_register: bool = True


@dataclass(frozen=True)
class ReadOptions:
    """What to read: which partitions, between which offsets, and how."""

    client: ClientSettings
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    # "earliest" | "latest" | {topic: {partition: offset}} (offsets as in Kafka's JSON)
    starting: str | dict[str, dict[int, int]] = "latest"
    ending: str | dict[str, dict[int, int]] = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: dict[str, dict[int, int]] | None = None
    ending_by_timestamp: dict[str, dict[int, int]] | None = None
    by_timestamp_strategy: str = "error"
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    # a micro-batch waits for this many records, or until max_trigger_delay_ms has passed
    # since the last one (Spark's minOffsetsPerTrigger and maxTriggerDelay)
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    formats: RecordFormats = RecordFormats()
    given: frozenset[str] = field(default_factory=frozenset)

    @property
    def strategy(self) -> str:
        if self.assign is not None:
            return "assign"
        if self.subscribe_pattern is not None:
            return "subscribePattern"
        return "subscribe"


@dataclass(frozen=True)
class WriteOptions:
    """Where to write: the producer's settings and the default topic."""

    producer_config: dict[str, str]
    topic: str | None = None
    exactly_once: ExactlyOnce | None = None
    formats: RecordFormats = RecordFormats()


@dataclass(frozen=True)
class ExactlyOnce:
    """A streaming write's exactly-once settings (docs/spark.md, "Exactly-once"): each
    task's transactional id is `<prefix>-<Spark partition id>`, and the micro-batches a
    writer committed are recorded as the offset its transactions commit, in the group of
    the same name, for partition 0 of `marker_topic`."""

    transactional_id_prefix: str
    marker_topic: str


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _unknown(name: str, known: tuple[str, ...]) -> LogbusSparkError:
    close = difflib.get_close_matches(name, [k.lower() for k in known], n=1)
    hint = ""
    if close:
        hint = f"; did you mean {next(k for k in known if k.lower() == close[0])!r}?"
    return LogbusSparkError(f"unknown option {name!r} for the logbus data source{hint}")


def _split_kafka(
    options: dict[str, str], allowed: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, str]]:
    """Separate `kafka.*` settings from the source's own options; reject unknown names."""
    kafka: dict[str, str] = {}
    own: dict[str, str] = {}
    allowed_lower = {a.lower() for a in allowed}
    for name, value in options.items():
        if name.startswith("kafka."):
            kafka[name[len("kafka.") :]] = value
        elif name in allowed_lower:
            own[name] = value
        elif name not in _SPARK_OWN:
            raise _unknown(name, allowed)
    if "bootstrap.servers" not in kafka or not kafka["bootstrap.servers"].strip():
        raise LogbusSparkError(
            "Option 'kafka.bootstrap.servers' must be specified for the logbus data source"
        )
    return kafka, own


def _int(options: dict[str, str], name: str, *, minimum: int | None = None) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise LogbusSparkError(f"option {name!r} must be a whole number, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise LogbusSparkError(f"option {name!r} must be at least {minimum}, not {value}")
    return value


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise LogbusSparkError(f"option {name!r} must be true or false, not {text!r}")
    return text.strip().lower() == "true"


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogbusSparkError(f"option {name!r} is not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise LogbusSparkError(f"option {name!r} must be a JSON object, not {text!r}")
    return value


def parse_partition_numbers(name: str, text: str) -> dict[str, tuple[int, ...]]:
    """`{"topicA":[0,1],"topicB":[2]}` (the assign option)."""
    parsed = _json_object(name, text)
    out: dict[str, tuple[int, ...]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise LogbusSparkError(
                f"option {name!r}: topic {topic!r} must map to a list of partition numbers, "
                f"as in {{\"{topic}\":[0,1]}}"
            )
        out[topic] = tuple(sorted(set(parts)))
    if not out:
        raise LogbusSparkError(f"option {name!r} names no partitions")
    return out


def parse_partition_offsets(name: str, text: str) -> dict[str, dict[int, int]]:
    """`{"topicA":{"0":23,"1":-2}}`: an offset (or -2/-1, or a timestamp) per partition."""
    parsed = _json_object(name, text)
    out: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise LogbusSparkError(
                f"option {name!r}: topic {topic!r} must map to an object of "
                f"partition -> offset, as in {{\"{topic}\":{{\"0\":23}}}}"
            )
        offsets: dict[int, int] = {}
        for partition, offset in parts.items():
            if not str(partition).isdigit():
                raise LogbusSparkError(
                    f"option {name!r}: {partition!r} of topic {topic!r} is not a partition number"
                )
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise LogbusSparkError(
                    f"option {name!r}: the offset of {topic}-{partition} must be a whole "
                    f"number, not {offset!r}"
                )
            offsets[int(partition)] = offset
        out[topic] = offsets
    return out


def _offsets_option(
    options: dict[str, str], name: str, default: str
) -> str | dict[str, dict[int, int]]:
    text = options.get(name.lower())
    if text is None:
        return default
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    if not text.strip().startswith("{"):
        raise LogbusSparkError(
            f"option {name!r} must be 'earliest', 'latest' or a JSON object of offsets per "
            f"partition, not {text!r}"
        )
    return parse_partition_offsets(name, text)


def _client_settings(kafka: dict[str, str], allowed: frozenset[str]) -> ClientSettings:
    for name in kafka:
        if name in _READ_REFUSED:
            raise LogbusSparkError(
                f"Kafka option 'kafka.{name}' is not supported: {_READ_REFUSED[name]}"
            )
        if name not in allowed:
            close = difflib.get_close_matches(name, sorted(allowed), n=1)
            hint = f"; did you mean 'kafka.{close[0]}'?" if close else ""
            raise LogbusSparkError(f"unknown option 'kafka.{name}' for reading{hint}")
    isolation = kafka.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise LogbusSparkError(
            "option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
            f"not {isolation!r}"
        )
    security = tuple(sorted((k, v) for k, v in kafka.items() if k in _SECURITY_NAMES))
    try:
        security_from_config(_SECURITY_SCHEMA.parse(dict(security)))
    except ConfigError as exc:
        raise LogbusSparkError(f"the kafka.* security options: {exc}") from None

    def number(name: str, default: int) -> int:
        text = kafka.get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise LogbusSparkError(
                f"option 'kafka.{name}' must be a whole number, not {text!r}"
            ) from None
        if value < 0:
            raise LogbusSparkError(f"option 'kafka.{name}' must not be negative")
        return value

    defaults = ClientSettings(bootstrap_servers="")
    return ClientSettings(
        bootstrap_servers=kafka["bootstrap.servers"],
        security_settings=security,
        client_id=kafka.get("client.id", defaults.client_id),
        request_timeout_ms=number("request.timeout.ms", defaults.request_timeout_ms),
        connect_timeout_ms=number(
            "socket.connection.setup.timeout.ms", defaults.connect_timeout_ms
        ),
        fetch_max_bytes=number("fetch.max.bytes", defaults.fetch_max_bytes),
        max_partition_fetch_bytes=number(
            "max.partition.fetch.bytes", defaults.max_partition_fetch_bytes
        ),
        fetch_max_wait_ms=number("fetch.max.wait.ms", defaults.fetch_max_wait_ms),
        api_timeout_ms=number("default.api.timeout.ms", defaults.api_timeout_ms),
        retry_backoff_ms=number("retry.backoff.ms", defaults.retry_backoff_ms),
        retry_backoff_max_ms=number("retry.backoff.max.ms", defaults.retry_backoff_max_ms),
        isolation_level=1 if isolation == "read_committed" else 0,
    )


def parse_read_options(raw: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check and type the options of a batch (`streaming=False`) or streaming read."""
    options = _lower(raw)
    for name in _READ_UNSUPPORTED:
        if name.lower() in options:
            raise LogbusSparkError(f"option {name!r} is not supported by the logbus source yet")
    kafka, own = _split_kafka(options, _READ_OPTIONS + _READ_IGNORED)
    client = _client_settings(kafka, _READ_CLIENT_SETTINGS)
    subscribe, pattern, assign = _read_strategy(own)
    starting = _offsets_option(own, "startingOffsets", "latest" if streaming else "earliest")
    ending = _offsets_option(own, "endingOffsets", "latest")
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in own:
                raise LogbusSparkError(f"option {name!r} is for batch queries only")
    else:
        _check_batch_bounds(starting, ending)
    _check_offsets("startingOffsets", starting)
    _check_offsets("endingOffsets", ending)

    def by_timestamp(name: str) -> dict[str, dict[int, int]] | None:
        text = own.get(name.lower())
        return None if text is None else parse_partition_offsets(name, text)

    strategy = own.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise LogbusSparkError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not {strategy!r}"
        )
    return ReadOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp=_int(own, "startingTimestamp", minimum=0),
        ending_timestamp=_int(own, "endingTimestamp", minimum=0),
        starting_by_timestamp=by_timestamp("startingOffsetsByTimestamp"),
        ending_by_timestamp=by_timestamp("endingOffsetsByTimestamp"),
        by_timestamp_strategy=strategy,
        include_headers=_bool(own, "includeHeaders", False),
        min_partitions=_int(own, "minPartitions", minimum=1),
        max_records_per_partition=_int(own, "maxRecordsPerPartition", minimum=1),
        fail_on_data_loss=_bool(own, "failOnDataLoss", True),
        max_offsets_per_trigger=_int(own, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_trigger_minimum(own, streaming),
        max_trigger_delay_ms=_duration_ms(own, "maxTriggerDelay", 15 * 60 * 1000),
        formats=_record_formats(own, _single_topic(subscribe, assign), writing=False),
        given=frozenset(own),
    )


def read_formats(raw: Mapping[str, str]) -> RecordFormats:
    """The key and value formats of a read's options (for its schema, before the rest
    is checked)."""
    options = _lower(raw)
    subscribe = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
    assign = (
        parse_partition_numbers("assign", options["assign"]) if "assign" in options else None
    )
    return _record_formats(options, _single_topic(subscribe, assign), writing=False)


def _single_topic(
    subscribe: tuple[str, ...], assign: dict[str, tuple[int, ...]] | None
) -> str | None:
    topics = set(subscribe) | set(assign or ())
    return next(iter(topics)) if len(topics) == 1 else None


_COLUMN_OPTIONS = {
    False: ("Subject", "SchemaVersion"),
    True: ("Subject", "SchemaId", "RecordName"),
}


def _record_formats(own: dict[str, str], topic: str | None, *, writing: bool) -> RecordFormats:
    """keyFormat/valueFormat and the options of the registry that goes with them."""
    avro: list[AvroColumn] = []
    for column in ("key", "value"):
        fmt = own.get(f"{column}format", "binary").strip().lower()
        if fmt not in ("binary", "avro"):
            raise LogbusSparkError(
                f"option '{column}Format' must be 'binary' or 'avro', not {fmt!r}"
            )
        names = [f"{column}{suffix}" for suffix in _COLUMN_OPTIONS[writing]]
        if fmt == "binary":
            for name in names:
                if name.lower() in own:
                    raise LogbusSparkError(f"option {name!r} needs {column}Format=avro")
            continue
        avro.append(_avro_column(own, column, topic, writing))
    url = own.get("schema.registry.url", "").strip()
    if not avro:
        for name in ("schema.registry.url", "mode", "auto.register.schemas"):
            if name.lower() in own:
                raise LogbusSparkError(
                    f"option {name!r} needs keyFormat=avro or valueFormat=avro"
                )
        return RecordFormats()
    if not url:
        raise LogbusSparkError(
            f"option 'schema.registry.url' is required with {avro[0].column}Format=avro"
        )
    mode = own.get("mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise LogbusSparkError(f"option 'mode' must be FAILFAST or PERMISSIVE, not {mode!r}")
    return RecordFormats(
        registry_url=url, avro=tuple(avro), permissive=mode == "PERMISSIVE",
        auto_register=_bool(own, "auto.register.schemas", True),
    )


def _avro_column(
    own: dict[str, str], column: str, topic: str | None, writing: bool
) -> AvroColumn:
    subject = own.get(f"{column}subject", "").strip()
    if not subject:
        if topic is None:
            where = "option 'topic'" if writing else "exactly one topic"
            raise LogbusSparkError(
                f"option '{column}Subject' is required with {column}Format=avro when the "
                f"query names no single topic ({where}) to make '<topic>-{column}' from"
            )
        subject = f"{topic}-{column}"
    version = own.get(f"{column}schemaversion", "latest").strip().lower()
    if version != "latest" and not (version.isdigit() and int(version) > 0):
        raise LogbusSparkError(
            f"option '{column}SchemaVersion' must be 'latest' or a version number, "
            f"not {version!r}"
        )
    record_name = own.get(f"{column}recordname", "").strip() or None
    return AvroColumn(
        column, subject, version, _int(own, f"{column}SchemaId", minimum=0), record_name
    )


def _trigger_minimum(own: dict[str, str], streaming: bool) -> int | None:
    value = _int(own, "minOffsetsPerTrigger", minimum=1)
    if value is not None and not streaming:
        raise LogbusSparkError("option 'minOffsetsPerTrigger' is for streaming queries only")
    maximum = _int(own, "maxOffsetsPerTrigger", minimum=1)
    if value is not None and maximum is not None and value > maximum:
        raise LogbusSparkError(
            f"option 'minOffsetsPerTrigger' ({value}) must not be more than "
            f"'maxOffsetsPerTrigger' ({maximum})"
        )
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(own: dict[str, str], name: str, default: int) -> int:
    """A duration as Spark writes them (`15m`, `30s`, `500ms`; a bare number is ms)."""
    text = own.get(name.lower())
    if text is None:
        return default
    match = _DURATION.match(text)
    if match is None:
        raise LogbusSparkError(
            f"option {name!r} must be a duration such as '30s', '5m' or '500ms', not {text!r}"
        )
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]


def _read_strategy(
    own: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, dict[str, tuple[int, ...]] | None]:
    """The one of `subscribe`, `subscribePattern` and `assign` given: (topics, pattern,
    assigned partitions), the other two empty."""
    strategies = [s for s in ("assign", "subscribe", "subscribePattern") if s.lower() in own]
    if len(strategies) != 1:
        raise LogbusSparkError(
            "Exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be "
            f"specified (given: {', '.join(strategies) or 'none'})"
        )
    if "subscribe" in own:
        subscribe = tuple(t.strip() for t in own["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise LogbusSparkError("option 'subscribe' names no topic")
        return subscribe, None, None
    if "subscribepattern" in own:
        pattern = own["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise LogbusSparkError(
                f"option 'subscribePattern' is not a valid regular expression: {exc}"
            ) from None
        return (), pattern, None
    return (), None, parse_partition_numbers("assign", own["assign"])


def _partition_offsets(value: object) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of a per-partition offsets option; none for a word."""
    if not isinstance(value, dict):
        return []
    return [(topic, p, off) for topic, parts in value.items() for p, off in parts.items()]


def _check_batch_bounds(starting: object, ending: object) -> None:
    """A batch query starts before the log end and ends after its start."""
    if starting == "latest":
        raise LogbusSparkError("option 'startingOffsets' cannot be 'latest' for a batch query")
    for topic, p, off in _partition_offsets(starting):
        if off == LATEST:
            raise LogbusSparkError(
                f"option 'startingOffsets': {topic}-{p} cannot start at latest "
                "(-1) in a batch query"
            )
    if ending == "earliest":
        raise LogbusSparkError("option 'endingOffsets' cannot be 'earliest' for a batch query")
    for topic, p, off in _partition_offsets(ending):
        if off == EARLIEST:
            raise LogbusSparkError(
                f"option 'endingOffsets': {topic}-{p} cannot end at earliest (-2) "
                "in a batch query"
            )


def _check_offsets(name: str, value: object) -> None:
    for topic, p, off in _partition_offsets(value):
        if off < EARLIEST:
            raise LogbusSparkError(
                f"option {name!r}: offset {off} of {topic}-{p} is not an offset "
                "(use -2 for earliest, -1 for latest)"
            )


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    """Check the options of a batch or streaming write."""
    options = _lower(raw)
    kafka, own = _split_kafka(options, _WRITE_OPTIONS)
    for name in kafka:
        if name in _WRITE_REFUSED:
            raise LogbusSparkError(
                f"Kafka option 'kafka.{name}' is not supported: {_WRITE_REFUSED[name]}"
            )
    topic = own.get("topic")
    if topic is not None and not topic.strip():
        raise LogbusSparkError("option 'topic' is empty")
    topic = topic.strip() if topic else None
    exactly_once = None
    if _bool(own, "exactlyOnce", False):
        exactly_once = _exactly_once(own, topic)
    else:
        for name in ("transactionalIdPrefix", "exactlyOnceMarkerTopic"):
            if name.lower() in own:
                raise LogbusSparkError(f"option {name!r} needs exactlyOnce=true")
    return WriteOptions(
        producer_config=kafka, topic=topic, exactly_once=exactly_once,
        formats=_record_formats(own, topic, writing=True),
    )


def _exactly_once(own: dict[str, str], topic: str | None) -> ExactlyOnce:
    prefix = own.get("transactionalidprefix", "").strip()
    if not prefix:
        raise LogbusSparkError(
            "option 'transactionalIdPrefix' is required with exactlyOnce=true: it names "
            "the query's transactional ids (one per Spark partition) and must stay the "
            "same when the query is restarted from its checkpoint"
        )
    marker = own.get("exactlyoncemarkertopic", "").strip() or topic
    if marker is None:
        raise LogbusSparkError(
            "with exactlyOnce=true and no 'topic' option, option 'exactlyOnceMarkerTopic' "
            "must name an existing topic under which the committed micro-batches are "
            "recorded"
        )
    return ExactlyOnce(transactional_id_prefix=prefix, marker_topic=marker)
