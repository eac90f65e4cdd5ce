"""The consumer protocol's payloads inside JoinGroup, SyncGroup and DescribeGroups
(Kafka's `ConsumerProtocol`): a member's subscription and its assignment, each an int16
version, then the body."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from logbus.protocol import schema
from logbus.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from logbus.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from logbus.types import TopicPartition

P = TypeVar("P", ConsumerProtocolSubscription, ConsumerProtocolAssignment)
PROTOCOL_TYPE = "consumer"
_SUBSCRIPTION_VERSION = 2
_ASSIGNMENT_VERSION = 1
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's ConsumerProtocolSubscription: the topics it wants, its assignor's user
    data, the partitions it owns now (v1+) and the generation it owned them in (v2+)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


def encode_subscription(
    topics: Sequence[str],
    *,
    user_data: bytes | None = None,
    owned_partitions: Sequence[TopicPartition] = (),
    generation_id: int = -1,
) -> bytes:
    """A subscription as JoinGroup carries it (version 2: owned partitions and generation,
    which readers of older versions skip as trailing bytes)."""
    message = schema.message("ConsumerProtocolSubscription")
    owned: dict[str, list[int]] = {}
    for topic, partition in owned_partitions:
        owned.setdefault(topic, []).append(partition)
    body: ConsumerProtocolSubscription = {
        "topics": sorted(topics),
        "user_data": user_data,
        "owned_partitions": [
            {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(owned.items())
        ],
        "generation_id": generation_id,
        "rack_id": None,
    }
    return _VERSION.pack(_SUBSCRIPTION_VERSION) + message.encode(body, _SUBSCRIPTION_VERSION)


def decode_subscription(data: bytes | None) -> Subscription:
    """Any version of a subscription (an empty one for no data)."""
    body = _decode(data, ConsumerProtocolSubscription)
    if body is None:
        return Subscription([])
    user_data = body.get("user_data")
    return Subscription(
        topics=list(body["topics"]),
        user_data=bytes(user_data) if user_data is not None else None,
        owned_partitions=[
            TopicPartition(owned["topic"], partition)
            for owned in body.get("owned_partitions") or ()
            for partition in owned["partitions"]
        ],
        generation_id=body.get("generation_id", -1),
        rack_id=body.get("rack_id"),
    )


def encode_assignment(assignment: Mapping[str, Sequence[int]]) -> bytes:
    message = schema.message("ConsumerProtocolAssignment")
    body: ConsumerProtocolAssignment = {
        "assigned_partitions": [
            {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items())
        ],
        "user_data": None,
    }
    return _VERSION.pack(_ASSIGNMENT_VERSION) + message.encode(body, _ASSIGNMENT_VERSION)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    body = _decode(data, ConsumerProtocolAssignment)
    if body is None:
        return {}
    return {a["topic"]: sorted(a["partitions"]) for a in body["assigned_partitions"]}


def _decode(data: bytes | None, payload: type[P]) -> P | None:
    """The payload decoded by the schema its TypedDict is named after (a cast: mypy cannot
    see that the generated class and table agree), None for no data."""
    if not data:
        return None
    message = schema.message(payload.__name__)
    (version,) = _VERSION.unpack_from(data)
    # Newer versions only add fields at the end: read them as the newest version we know.
    version = min(version, message.valid_versions[1])
    return cast(P, message.decode(bytes(data[_VERSION.size :]), version))
