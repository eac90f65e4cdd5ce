"""The consumer's settings: Kafka's ConsumerConfig names and defaults."""

from __future__ import annotations

from typing import Any

from logbus.client.config import COMMON, ConfigSchema, Setting, positive
from logbus.client.metrics import METRICS_SETTINGS

DESERIALIZERS = ("bytes", "str", "json")


def check_deserializer(value: Any) -> str | None:
    if callable(value) or value in DESERIALIZERS:
        return None
    return f"must be one of {', '.join(DESERIALIZERS)} or a callable taking bytes"


def _strategy(value: Any) -> str | None:
    from logbus.client.consumer.assignors import make_assignors

    try:
        make_assignors(value)
    except ValueError as exc:
        return str(exc)
    return None


CONSUMER_SETTINGS = (
    Setting("group.id", str, None, "the consumer group; needed for subscribe() and commits"),
    Setting("group.instance.id", str, None, "a static member's id (KIP-345)"),
    Setting("group.protocol", str, "classic",
            "classic (JoinGroup/SyncGroup) or consumer (KIP-848: the broker assigns)",
            choices=("classic", "consumer")),
    Setting("group.remote.assignor", str, None,
            "with group.protocol=consumer: the server-side assignor to ask for"),
    Setting("key.deserializer", object, "bytes", "bytes, str, json or a callable",
            validator=check_deserializer),
    Setting("value.deserializer", object, "bytes", "bytes, str, json or a callable",
            validator=check_deserializer),
    Setting("auto.offset.reset", str, "latest",
            "where to start without a committed offset, or when it is out of range",
            choices=("earliest", "latest", "none")),
    Setting("enable.auto.commit", bool, True,
            "commit positions every auto.commit.interval.ms (needs group.id)"),
    Setting("auto.commit.interval.ms", int, 5000, "how often to auto-commit", at_least=0),
    Setting("session.timeout.ms", int, 45000, "a member silent this long is dropped",
            at_least=1),
    Setting("heartbeat.interval.ms", int, 3000, "how often to heartbeat", at_least=1),
    Setting("max.poll.interval.ms", int, 300000,
            "leave the group when poll() is not called for this long", at_least=1),
    Setting("max.poll.records", int, 500, "records one poll() returns at most", at_least=1),
    Setting("fetch.min.bytes", int, 1, "bytes a fetch waits for", at_least=0),
    Setting("fetch.max.wait.ms", int, 500, "longest a fetch waits for fetch.min.bytes",
            at_least=0),
    Setting("fetch.max.bytes", int, 52428800, "bytes one fetch response holds at most",
            at_least=0),
    Setting("max.partition.fetch.bytes", int, 1048576,
            "bytes one fetch returns per partition at most", at_least=0),
    Setting("isolation.level", str, "read_uncommitted",
            "read_committed hides aborted and open transactions",
            choices=("read_uncommitted", "read_committed")),
    Setting("partition.assignment.strategy", list, ["range", "cooperative-sticky"],
            "assignors, preferred first: range, roundrobin, sticky, cooperative-sticky",
            validator=_strategy),
    Setting("check.crcs", bool, True, "verify each batch's CRC32C"),
    Setting("exclude.internal.topics", bool, True, "patterns never match internal topics"),
    Setting("allow.auto.create.topics", bool, True,
            "subscribing to a missing topic may create it (if the broker allows)"),
    Setting("client.rack", str, "", "the rack this consumer runs in"),
    Setting("default.api.timeout.ms", int, 60000,
            "time limit of calls that take no timeout", validator=positive),
)

CONSUMER_CONFIG = ConfigSchema("consumer", COMMON, CONSUMER_SETTINGS, METRICS_SETTINGS)
