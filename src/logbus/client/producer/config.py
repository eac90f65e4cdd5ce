"""The producer's settings: Kafka's ProducerConfig names and defaults, but for one.

`batch.size` defaults to 1,000,000 bytes (librdkafka's default) where Kafka's Java client
has 16384. A batch costs the Java client microseconds; here each batch and each Produce
request costs Python code (sealing, the request, its response, settling the batch), so
16 KiB batches spent most of the producer's time per batch and capped it at a fifth of
what the same records reach in ~1 MB batches. A batch only grows as records arrive within
`linger.ms`, so a slow producer still sends small batches as soon as they linger that
long; `buffer.memory` (Kafka's 32 MiB) still bounds what is held. docs/client.md lists
the defaults that differ from Kafka's and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbus.client.config import COMMON, ConfigSchema, Setting
from logbus.client.metrics import METRICS_SETTINGS
from logbus.common.config_def import ConfigError
from logbus.records.compression import CompressionType

# acks as users write it -> as the Produce request carries it.
ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}
MAX_IN_FLIGHT_WITH_IDEMPOTENCE = 5
BATCH_SIZE = 1_000_000

PRODUCER_SETTINGS = (
    Setting("acks", object, "all", "acknowledgements to wait for: all (-1), 1 or 0",
            choices=tuple(ACKS)),
    # Kafka: 16384; librdkafka: 1000000 (see the module docstring)
    Setting("batch.size", int, BATCH_SIZE, "largest batch of records per partition, in bytes",
            at_least=0),
    Setting("linger.ms", int, 5, "how long a batch waits for more records", at_least=0),
    Setting("buffer.memory", int, 32 * 1024 * 1024,
            "bytes of records the producer may hold unsent", at_least=1),
    Setting("max.block.ms", int, 60000,
            "how long send() waits for buffer space or metadata", at_least=0),
    Setting("compression.type", str, "none", "codec for record batches",
            choices=("none", "gzip", "snappy", "lz4", "zstd")),
    Setting("compression.gzip.level", int, -1, "gzip level (-1: the codec's default)",
            at_least=-1),
    Setting("compression.zstd.level", int, 3, "zstd level"),
    Setting("retries", int, 2147483647, "how often a failed batch is resent", at_least=0),
    Setting("delivery.timeout.ms", int, 120000,
            "upper bound on the time from send() to success or failure", at_least=1),
    Setting("max.in.flight.requests.per.connection", int, 5,
            "unanswered Produce requests per broker", at_least=1),
    Setting("enable.idempotence", bool, True,
            "producer id and sequences, so retries never duplicate or reorder records"),
    Setting("max.request.size", int, 1048576, "largest record (and request) to send",
            at_least=1),
    Setting("partitioner.ignore.keys", bool, False,
            "spread keyed records like keyless ones (sticky) instead of hashing keys"),
    Setting("key.serializer", object, "bytes", "bytes, str, json or a function"),
    Setting("value.serializer", object, "bytes", "bytes, str, json or a function"),
    Setting("transactional.id", object, None,
            "makes the producer transactional (init_transactions, begin/commit/abort)"),
    Setting("transaction.timeout.ms", int, 60000,
            "how long the coordinator lets a transaction stay open before aborting it",
            at_least=1),
)

PRODUCER_CONFIG = ConfigSchema("producer", COMMON, PRODUCER_SETTINGS, METRICS_SETTINGS)


def parse_producer_config(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """Check a producer configuration and settle how its settings combine.

    As in Kafka's producer, idempotence (on by default) needs acks=all, retries and at
    most 5 requests in flight: when the user turned it on explicitly, a conflicting
    setting is a ConfigError; when it is on by default, the conflict turns it off. A
    `transactional.id` forces idempotence on (and so makes conflicts errors).
    """
    values = PRODUCER_CONFIG.parse(config, **overrides)
    values["acks"] = ACKS[values["acks"]]
    explicit = "enable.idempotence" in (config or {}) or "enable_idempotence" in overrides
    txn_id = values["transactional.id"]
    if txn_id is not None:
        if not isinstance(txn_id, str) or not txn_id:
            raise ConfigError(f"transactional.id must be a non-empty string, not {txn_id!r}")
        if explicit and not values["enable.idempotence"]:
            raise ConfigError(
                "Cannot set a transactional.id without also enabling idempotence"
            )
        values["enable.idempotence"] = True
        explicit = True  # a conflicting setting is an error, as Kafka's producer says
    if values["enable.idempotence"]:
        conflicts = []
        if values["acks"] != -1:
            conflicts.append("acks must be all")
        if values["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_WITH_IDEMPOTENCE:
            conflicts.append(
                "max.in.flight.requests.per.connection must be at most "
                f"{MAX_IN_FLIGHT_WITH_IDEMPOTENCE}"
            )
        if values["retries"] == 0:
            conflicts.append("retries must be above 0")
        if conflicts:
            if explicit:
                raise ConfigError("enable.idempotence=true: " + "; ".join(conflicts))
            values["enable.idempotence"] = False
    if values["delivery.timeout.ms"] < values["linger.ms"] + values["request.timeout.ms"]:
        raise ConfigError(
            f"delivery.timeout.ms={values['delivery.timeout.ms']} must be at least "
            "linger.ms + request.timeout.ms"
        )
    return values


def compression_of(values: Mapping[str, Any]) -> tuple[CompressionType, int | None]:
    """The codec and level a parsed producer configuration asks for (None: the codec's
    default level; compression.gzip.level -1 means that too)."""
    codec = CompressionType.from_name(values["compression.type"])
    if codec == CompressionType.GZIP and values["compression.gzip.level"] >= 0:
        return codec, values["compression.gzip.level"]
    if codec == CompressionType.ZSTD:
        return codec, values["compression.zstd.level"]
    return codec, None
