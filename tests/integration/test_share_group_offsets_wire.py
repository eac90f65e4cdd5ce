"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets v0 (KIP-932)
over the raw wire against a real broker, with a share group set up over the wire: the
start offsets a group's acknowledgements moved, a reset that an empty group's next member
reads from, a deletion after which the group starts again where `share.auto.offset.reset`
says, and Kafka's codes for bad input with nothing changed; a reset that reaches records a
departed member still holds; start offsets that outlive a restart of the coordinator."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from share_wire import ACCEPT, acquired, heartbeat, join, share_ack, share_fetch, share_group

from kafka_wire import WireClient, create_topic, wait_for
from logbus.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.timeout(120)
NO_TOPIC = uuid.UUID(int=0)


def describe(client: WireClient, group: str, topics: list[tuple[str, list[int]]] | None) -> Any:
    asked = None if topics is None else [
        {"topic_name": t, "partitions": ps} for t, ps in topics
    ]
    body = {"groups": [{"group_id": group, "topics": asked}]}
    return client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, body)["groups"][0]


def offsets(described: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, error code)."""
    assert described["error_code"] == ErrorCode.NONE, described
    return {
        (t["topic_name"], p["partition_index"]): (p["start_offset"], p["error_code"])
        for t in described["topics"] for p in t["partitions"]
    }


def alter(client: WireClient, group: str, moves: dict[tuple[str, int], int]) -> Any:
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), offset in moves.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "start_offset": offset}
        )
    body = {"group_id": group, "topics": [
        {"topic_name": t, "partitions": ps} for t, ps in topics.items()
    ]}
    return client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)


def alter_codes(response: Any) -> dict[tuple[str, int], int]:
    assert response["error_code"] == ErrorCode.NONE, response
    return {
        (t["topic_name"], p["partition_index"]): p["error_code"]
        for t in response["responses"] for p in t["partitions"]
    }


def delete(client: WireClient, group: str, topics: list[str]) -> Any:
    body = {"group_id": group, "topics": [{"topic_name": t} for t in topics]}
    return client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body)


def leave(client: WireClient, group: str, member: str, topic_id: uuid.UUID) -> None:
    share_fetch(client, group, member, -1, topic_id)
    assert heartbeat(client, group, member, -1, None)["error_code"] == ErrorCode.NONE


def test_describe_reset_and_delete_a_groups_offsets(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        _, _, topic_id, _ = share_group(client, topic, group)
        assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
        share_ack(client, group, "member-a", 1, topic_id, [(0, 4, [ACCEPT])])

        # every partition the group has a start offset for; asked ones (-1: none)
        assert offsets(describe(client, group, None)) == {(topic, 0): (5, 0)}
        described = describe(client, group, [(topic, [0, 7]), (missing, [0])])
        assert offsets(described) == {
            (topic, 0): (5, 0), (topic, 7): (-1, 0), (missing, 0): (-1, 0)
        }
        assert [t["topic_id"] for t in described["topics"]] == [topic_id, NO_TOPIC]
        assert describe(client, group, [])["topics"] == []

        # a group with a member is not changed
        busy = alter(client, group, {(topic, 0): 0})
        assert (busy["error_code"], busy["responses"]) == (ErrorCode.NON_EMPTY_GROUP, [])
        assert delete(client, group, [topic])["error_code"] == ErrorCode.NON_EMPTY_GROUP
        assert offsets(describe(client, group, None)) == {(topic, 0): (5, 0)}

        leave(client, group, "member-a", topic_id)
        codes = alter_codes(alter(client, group, {
            (topic, 0): 2, (topic, 3): 0, (missing, 0): 0,
        }))
        assert codes == {
            (topic, 0): ErrorCode.NONE,
            (topic, 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            (missing, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert alter_codes(alter(client, group, {(topic, 0): -5})) == {
            (topic, 0): ErrorCode.INVALID_REQUEST
        }
        assert offsets(describe(client, group, None)) == {(topic, 0): (2, 0)}

        # the next member reads from the new start offset: 2-4 were accepted before
        join(client, group, "member-b", topic)
        assert acquired(share_fetch(client, group, "member-b", 0, topic_id)) == [(2, 9, 1)]
        share_ack(client, group, "member-b", 1, topic_id, [(2, 9, [ACCEPT])])
        assert offsets(describe(client, group, None)) == {(topic, 0): (10, 0)}
        leave(client, group, "member-b", topic_id)

        deleted = delete(client, group, [topic, missing])
        assert deleted["error_code"] == ErrorCode.NONE
        answers = {t["topic_name"]: (t["error_code"], t["topic_id"]) for t in deleted["responses"]}
        assert answers == {
            topic: (ErrorCode.NONE, topic_id),
            missing: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_TOPIC),
        }
        assert describe(client, group, None)["topics"] == []
        assert offsets(describe(client, group, [(topic, [0])])) == {(topic, 0): (-1, 0)}
        again = delete(client, group, [topic])["responses"][0]
        assert again["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert again["error_message"]

        # without state the group starts where share.auto.offset.reset (earliest) says
        join(client, group, "member-c", topic)
        assert acquired(share_fetch(client, group, "member-c", 0, topic_id)) == [(0, 9, 1)]
        leave(client, group, "member-c", topic_id)


def test_a_group_that_does_not_exist(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    group = f"nobody-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        # as Kafka: describing finds no offsets, altering and deleting find no group
        assert offsets(describe(client, group, [(topic, [0])])) == {(topic, 0): (-1, 0)}
        assert describe(client, group, None)["topics"] == []
        refused = alter(client, group, {(topic, 0): 0})
        assert (refused["error_code"], refused["responses"]) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
        assert delete(client, group, [topic])["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert describe(client, group, None)["topics"] == []
        empty = alter(client, "", {(topic, 0): 0})
        assert empty["error_code"] == ErrorCode.INVALID_GROUP_ID


def test_a_reset_reaches_records_a_departed_member_still_holds(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        _, _, topic_id, _ = share_group(client, topic, group)
        assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
        # the member leaves the group without closing its share session: its records stay
        # acquired until their locks expire
        assert heartbeat(client, group, "member-a", -1, None)["error_code"] == ErrorCode.NONE
        assert alter_codes(alter(client, group, {(topic, 0): 3})) == {(topic, 0): 0}
        join(client, group, "member-b", topic)
        assert acquired(share_fetch(client, group, "member-b", 0, topic_id)) == [(3, 9, 1)]
        leave(client, group, "member-b", topic_id)


def test_offsets_outlive_a_restart_of_the_coordinator(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        _, _, topic_id, _ = share_group(client, topic, group)
        assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
        share_ack(client, group, "member-a", 1, topic_id, [(0, 4, [ACCEPT])])
        leave(client, group, "member-a", topic_id)
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        # the start offset is kept by the share coordinator, not the group's membership
        wait_for(
            lambda: (d := describe(client, group, None))["error_code"] == ErrorCode.NONE
            and offsets(d) == {(topic, 0): (5, 0)},
            what="the start offset after the restart",
        )
        # no member has come back, so only its state says the group exists
        assert alter_codes(alter(client, group, {(topic, 0): 1})) == {(topic, 0): 0}
        assert offsets(describe(client, group, None)) == {(topic, 0): (1, 0)}
        deleted = delete(client, group, [topic])
        assert [t["error_code"] for t in deleted["responses"]] == [ErrorCode.NONE]
        gone = alter(client, group, {(topic, 0): 1})
        assert gone["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert describe(client, group, None)["topics"] == []
