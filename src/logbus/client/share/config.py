"""The share consumer's settings: Kafka's ShareConsumerConfig names and defaults. Session
timeout and heartbeat interval are the group's (the broker's
`group.share.session.timeout.ms` and `group.share.heartbeat.interval.ms`), not the
consumer's."""

from __future__ import annotations

from logbus.client.config import COMMON, ConfigSchema, Setting, positive
from logbus.client.consumer.config import check_deserializer

IMPLICIT = "implicit"
EXPLICIT = "explicit"

SHARE_CONSUMER_SETTINGS = (
    Setting("group.id", str, None, "the share group (required)"),
    Setting("share.acknowledgement.mode", str, IMPLICIT,
            "implicit: each poll accepts the records of the previous one; explicit: the "
            "application acknowledges every record", choices=(IMPLICIT, EXPLICIT)),
    Setting("key.deserializer", object, "bytes", "bytes, str, json or a callable",
            validator=check_deserializer),
    Setting("value.deserializer", object, "bytes", "bytes, str, json or a callable",
            validator=check_deserializer),
    Setting("max.poll.records", int, 500, "records one ShareFetch acquires at most",
            at_least=1),
    Setting("fetch.max.wait.ms", int, 500,
            "longest a ShareFetch waits for records to acquire", at_least=0),
    Setting("fetch.max.bytes", int, 52428800, "bytes one ShareFetch response holds at most",
            at_least=1),
    Setting("check.crcs", bool, True, "verify each batch's CRC32C"),
    Setting("default.api.timeout.ms", int, 60000,
            "time limit of calls that take no timeout", validator=positive),
)  # fmt: skip

SHARE_CONSUMER_CONFIG = ConfigSchema("share consumer", COMMON, SHARE_CONSUMER_SETTINGS)
