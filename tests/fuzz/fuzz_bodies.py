"""Valid request bodies of any API at any version, drawn from a `random.Random`.

`valid_body(api_key, version, rng, world)` walks the generated message table for that
version and fills every field: generic values for most (small numbers, boundaries, short
strings), and values that reach the handlers' real work for fields whose name says what
they hold (topic names the broker has, partitions that exist, record batches, config
names, short timeouts). Everything is a function of the `rng`, so a seed replays a case.
"""

from __future__ import annotations

import random
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

from fuzz_batches import legacy_message_set, valid_batch
from fuzz_layout import FIELDS, NAME, NULLABLE, TAG, TAGGED, TYPE, VERSIONS, in_range

from logbus.protocol import ApiKey, schema

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# Real names, so that config requests reach the code that parses values.
CONFIG_NAMES = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "compression.type",
    "min.cleanable.dirty.ratio",
    "delete.retention.ms",
    "log.retention.ms",
    "message.max.bytes",
    "num.partitions",
    "unknown.config",
)
CONFIG_VALUES = ("", "0", "-1", "1", "compact", "delete", "gzip", "zstd", "0.5", "abc",
                 "9223372036854775807", "1048576", "producer", "LogAppendTime")

# Fields whose value the broker waits on: kept short in valid requests (a request that
# legitimately waits is not a hang).
WAIT_FIELDS = {
    (ApiKey.FETCH, "max_wait_ms"),
    (ApiKey.JOIN_GROUP, "rebalance_timeout_ms"),
    (ApiKey.JOIN_GROUP, "session_timeout_ms"),
}


# Nullable in the schema, refused as null by Kafka: Metadata v10-11 cannot look a topic up
# by id (their responses cannot carry a null name).
NOT_NULL = {(ApiKey.METADATA, 10, "name"), (ApiKey.METADATA, 11, "name")}


@dataclass
class World:
    """What exists on the broker under test: requests name these to get past lookups."""

    topics: dict[str, int] = field(default_factory=dict)  # name -> partition count
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    groups: tuple[str, ...] = ("fz-group",)
    fresh: int = 0

    def fresh_name(self, rng: random.Random, prefix: str) -> str:
        self.fresh += 1
        return f"{prefix}-{rng.randrange(1 << 30):x}-{self.fresh}"


def valid_body(api_key: int, version: int, rng: random.Random, world: World) -> dict[str, Any]:
    message = schema.request(api_key)
    gen = _Generator(api_key, version, rng, world, message.is_flexible(version))
    return gen.struct(message.fields, "")



# Values worth trying for fields of these names, wherever they appear (the hints above
# them take the fields whose values depend on the request or the world).
_STRING_CHOICES: dict[str, tuple[str, ...]] = {
    "member_id": ("", "", "m-1", "member"),
    "group_instance_id": ("", "", "m-1", "member"),
    "protocol_type": ("consumer", "", "connect"),
}
_INT_CHOICES: dict[str, tuple[int, ...]] = {
    "timeout_ms": (0, 100, 1000, -1),
    "timeout": (0, 100, 1000, -1),
    "acks": (-1, 1, 0, 2),
    "num_partitions": (-1, 1, 2, 0),
    "replication_factor": (-1, 1, 2),
    "resource_type": (2, 2, 4, 0, 1, 3, 99),
    "max_bytes": (1 << 20, 0, 100, 2**31 - 1),
    "partition_max_bytes": (1 << 20, 0, 100, 2**31 - 1),
    "min_bytes": (0, 1),
    "fetch_offset": (0, 1, -1, -2, -3, 5, 1 << 40),
    "offset": (0, 1, -1, -2, -3, 5, 1 << 40),
    "committed_offset": (0, 1, -1, -2, -3, 5, 1 << 40),
    "timestamp": (0, 1, -1, -2, -3, 5, 1 << 40),
    "replica_id": (-1, -1, 0, 1),
    "producer_id": (-1, 0, 1),
    "producer_epoch": (-1, 0, 1),
    "generation_id": (-1, 0, 1),
    "session_epoch": (-1, 0, 1),
    "isolation_level": (0, 1, 2),
    "operation": (0, 1, 2, 3, 7),
    "max_num_offsets": (1, 0, 2),
}


class _Generator:
    def __init__(self, api_key: int, version: int, rng: random.Random, world: World,
                 flexible: bool) -> None:
        self.api_key = api_key
        self.version = version
        self.rng = rng
        self.world = world
        self.flexible = flexible
        self.topic: str | None = None  # the topic the struct being filled is about

    def struct(self, fields: tuple[Any, ...], parent: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in fields:
            tagged = self.flexible and spec[TAG] is not None and in_range(spec[TAGGED],
                                                                          self.version)
            if tagged:
                if self.rng.random() < 0.5:
                    out[spec[NAME]] = self.value(spec, parent)
            elif in_range(spec[VERSIONS], self.version) and spec[TAG] is None:
                out[spec[NAME]] = self.value(spec, parent)
        return out

    def value(self, spec: tuple[Any, ...], parent: str) -> Any:
        name: str = spec[NAME]
        ftype: str = spec[TYPE]
        rng = self.rng
        nullable = in_range(spec[NULLABLE], self.version) and (self.api_key, self.version,
                                                              name) not in NOT_NULL
        if nullable and rng.random() < 0.1:
            return None
        if ftype.startswith("[]"):
            return self.array(spec, name, ftype[2:])
        if ftype == "struct":
            return self.struct(spec[FIELDS], name)
        hinted = self.hint(name, ftype, parent)
        if hinted is not _NO_HINT:
            return hinted
        return self.primitive(ftype)

    def array(self, spec: tuple[Any, ...], name: str, elem: str) -> list[Any]:
        rng = self.rng
        n = rng.choice((0, 1, 1, 1, 2, 3))
        if name in ("topics", "topic_data", "resources") and n == 0:
            n = 1
        if elem == "struct":
            out = []
            for _ in range(n):
                self.topic = None
                out.append(self.struct(spec[FIELDS], name))
            return out
        if name == "partitions" or name == "broker_ids":
            return [rng.choice((0, 0, 1, 2, -1)) for _ in range(n)]
        if name in ("groups", "groups_names"):
            return [self.group() for _ in range(n)]
        if name == "configuration_keys":
            return [rng.choice(CONFIG_NAMES) for _ in range(n)]
        return [self.primitive(elem) for _ in range(n)]

    def group(self) -> str:
        if self.api_key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP):
            # fresh groups only: a member left behind by an earlier case would make this
            # join wait for its rebalance timeout
            return self.world.fresh_name(self.rng, "fzg")
        return self.rng.choice((*self.world.groups, "", self.world.fresh_name(self.rng, "fzg")))

    def topic_name(self, parent: str) -> str:
        rng = self.rng
        known = sorted(self.world.topics)
        creating = self.api_key == ApiKey.CREATE_TOPICS
        roll = rng.random()
        if known and ((roll < 0.8 and not creating) or roll < 0.2):
            name = rng.choice(known)
        elif roll < 0.93:
            name = self.world.fresh_name(rng, "fzt")
        else:
            name = rng.choice(("", ".", "..", "a/b", "x" * 250, "__consumer_offsets", "ü"))
        self.topic = name
        return name

    def partition(self) -> int:
        count = self.world.topics.get(self.topic or "", 1)
        return self.rng.choice((*range(count), 0, -1, count))

    def hint(self, name: str, ftype: str, parent: str) -> Any:
        if ftype == "records":
            return self.records()
        if ftype == "string":
            return self._string_hint(name, parent)
        if ftype in ("int32", "int16", "int8", "int64"):
            return self._int_hint(name, ftype)
        return _NO_HINT

    def _string_hint(self, name: str, parent: str) -> Any:
        rng = self.rng
        key = self.api_key
        if name in ("topic", "topic_name") or (
            name == "name" and parent in ("topics", "topic_data", "topic_errors")
        ):
            return self.topic_name(parent)
        if name == "resource_name":
            return rng.choice((*sorted(self.world.topics), "0", "", "1"))
        if name == "group_id" or (name == "key" and key == ApiKey.FIND_COORDINATOR):
            return self.group()
        if name in ("name", "value") and parent == "configs":
            return rng.choice(CONFIG_NAMES if name == "name" else CONFIG_VALUES)
        if name == "transactional_id":
            if key not in (ApiKey.PRODUCE, ApiKey.INIT_PRODUCER_ID):
                return rng.choice(("fz-txn", "fz-txn", ""))  # not nullable there
            return None if key == ApiKey.PRODUCE or rng.random() < 0.5 else "fz-txn"
        choices = _STRING_CHOICES.get(name)
        return _NO_HINT if choices is None else rng.choice(choices)

    def _int_hint(self, name: str, ftype: str) -> Any:
        rng = self.rng
        key = self.api_key
        if (key, name) in WAIT_FIELDS:
            if name == "session_timeout_ms":
                return rng.choice((6000, 10000, 0, -1))
            return rng.choice((0, 1, 10, 100))
        if name in ("partition_index", "partition", "index") and ftype == "int32":
            return self.partition()
        if name == "count" and key == ApiKey.CREATE_PARTITIONS:
            return rng.choice((1, 2, 4, 0))
        choices = _INT_CHOICES.get(name)
        return _NO_HINT if choices is None else rng.choice(choices)

    def records(self) -> bytes | None:
        rng = self.rng
        if self.api_key != ApiKey.PRODUCE:
            return None if rng.random() < 0.5 else valid_batch(rng)
        if self.version < 3:
            return legacy_message_set(rng, magic=0 if self.version < 2 else 1)
        return valid_batch(rng)

    def primitive(self, ftype: str) -> Any:
        rng = self.rng
        if ftype in INT_RANGES:
            lo, hi = INT_RANGES[ftype]
            roll = rng.random()
            if roll < 0.6:
                return max(lo, min(hi, rng.choice((0, 1, -1, 2, 3, 10, 100))))
            if roll < 0.8:
                return rng.choice((lo, hi))
            return rng.randint(lo, hi)
        if ftype == "bool":
            return rng.random() < 0.5
        if ftype == "float64":
            return rng.choice((0.0, 1.5, -1.0, 1e300))
        if ftype == "uuid":
            known = sorted(self.world.topic_ids.values())
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), *known))
        if ftype == "string":
            n = rng.choice((0, 1, 5, 12, 40))
            return "".join(rng.choice(string.ascii_letters + "-_.") for _ in range(n))
        if ftype == "bytes":
            return rng.randbytes(rng.choice((0, 1, 8, 40)))
        raise ValueError(f"no generator for {ftype}")


_NO_HINT = object()
