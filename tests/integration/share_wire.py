"""Share-group requests over the raw wire (KIP-932, version 1), for the integration
tests: heartbeats, share fetches and acknowledgements, and a group set up on a topic."""

from __future__ import annotations

import uuid
from typing import Any

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import build_plain_batch

V = 1
ACCEPT, RELEASE, REJECT = 1, 2, 3


def heartbeat(
    client: WireClient, group: str, member: str, epoch: int, topics: list[str] | None
) -> dict[str, Any]:
    body = {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": topics,
    }
    return client.request(ApiKey.SHARE_GROUP_HEARTBEAT, V, body)


def share_fetch(
    client: WireClient, group: str, member: str, epoch: int, topic_id: uuid.UUID,
    acks: list[tuple[int, int, list[int]]] | None = None, max_wait_ms: int = 0,
) -> dict[str, Any]:
    body = {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500,
        "batch_size": 500,
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition_index": 0,
            "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                for f, last, types in acks or []
            ],
        }]}],
        "forgotten_topics_data": [],
    }
    return client.request(ApiKey.SHARE_FETCH, V, body)


def share_ack(
    client: WireClient, group: str, member: str, epoch: int, topic_id: uuid.UUID,
    acks: list[tuple[int, int, list[int]]],
) -> dict[str, Any]:
    body = {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition_index": 0,
            "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                for f, last, types in acks
            ],
        }]}],
    }
    return client.request(ApiKey.SHARE_ACKNOWLEDGE, V, body)


def acquired(response: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [
        (r["first_offset"], r["last_offset"], r["delivery_count"])
        for t in response["responses"] for p in t["partitions"] for r in p["acquired_records"]
    ]


def partition_answer(response: dict[str, Any]) -> dict[str, Any]:
    return response["responses"][0]["partitions"][0]  # type: ignore[no-any-return]


def share_group(client: WireClient, topic: str, group: str) -> Any:
    values = [b"v%d" % i for i in range(10)]
    client.produce(topic, 0, build_plain_batch(values, timestamp=1_700_000_000_000))
    altered = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 32, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"},
        ]}],
        "validate_only": False,
    })
    assert altered["responses"][0]["error_code"] == ErrorCode.NONE
    topic_id = next(
        t["topic_id"] for t in client.metadata([topic])["topics"] if t["name"] == topic
    )
    # FindCoordinator creates __consumer_offsets; the group's partition then loads
    client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    joined = wait_for(
        lambda: (r := heartbeat(client, group, "member-a", 0, [topic]))["error_code"] == 0 and r,
        what="the share group's coordinator",
    )
    return client, group, topic_id, joined


def topic_name(client: WireClient, topic_id: uuid.UUID) -> str:
    return next(  # type: ignore[no-any-return]
        t["name"] for t in client.metadata(None)["topics"] if t["topic_id"] == topic_id
    )


def join(client: WireClient, group: str, member: str, topic: str) -> dict[str, Any]:
    """Join `member` once the group's coordinator answers (after a start, it loads)."""
    return wait_for(  # type: ignore[no-any-return]
        lambda: (r := heartbeat(client, group, member, 0, [topic]))["error_code"] == 0 and r,
        what="the share group's coordinator",
    )
