"""Share groups (KIP-932) over the raw wire against a real broker: the heartbeat's epochs,
share sessions, acquisition and acknowledgement, and bad input answered with Kafka's error
codes without changing any state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from share_wire import (
    ACCEPT,
    REJECT,
    RELEASE,
    V,
    acquired,
    heartbeat,
    join,
    partition_answer,
    share_ack,
    share_fetch,
    share_group,
    topic_name,
)

from kafka_wire import WireClient, create_topic, wait_for
from logbus.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def share_setup(broker_factory: Any) -> Any:
    """A broker with 10 records in a fresh one-partition topic, a share group reading it
    from the earliest offset, and one joined member."""
    broker = broker_factory()
    topic = create_topic(broker.bootstrap, f"share-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        yield share_group(client, topic, group)


def test_heartbeat_assigns_the_partition_and_fences_stale_epochs(share_setup: Any) -> None:
    client, group, topic_id, joined = share_setup
    assert joined["assignment"]["topic_partitions"] == [
        {"topic_id": topic_id, "partitions": [0]}
    ]
    epoch = joined["member_epoch"]
    assert epoch > 0
    other = heartbeat(client, group, "member-b", 0, None)
    assert other["error_code"] == ErrorCode.INVALID_REQUEST  # joining needs a subscription
    second = heartbeat(client, group, "member-b", 0, [topic_name(client, topic_id)])
    assert second["assignment"]["topic_partitions"][0]["partitions"] == [0]  # shared
    assert heartbeat(client, group, "member-a", epoch + 5, None)["error_code"] == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert heartbeat(client, group, "nobody", 3, None)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    described = client.request(
        ApiKey.SHARE_GROUP_DESCRIBE, V,
        {"group_ids": [group, "no-such-group"], "include_authorized_operations": False},
    )["groups"]
    assert described[0]["error_code"] == ErrorCode.NONE
    assert sorted(m["member_id"] for m in described[0]["members"]) == ["member-a", "member-b"]
    assert described[1]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_acquire_acknowledge_and_redeliver(share_setup: Any) -> None:
    client, group, topic_id, _ = share_setup
    first = share_fetch(client, group, "member-a", 0, topic_id)
    assert first["error_code"] == ErrorCode.NONE
    assert acquired(first) == [(0, 9, 1)]
    assert first["acquisition_lock_timeout_ms"] == 30_000
    # accept 0-4, release 5-7, reject 8-9 in one batch of per-offset types
    acked = share_fetch(
        client, group, "member-a", 1, topic_id,
        acks=[(0, 9, [ACCEPT] * 5 + [RELEASE] * 3 + [REJECT] * 2)],
    )
    answer = partition_answer(acked)
    assert answer["acknowledge_error_code"] == ErrorCode.NONE
    assert acquired(acked) == [(5, 7, 2)]  # only the released ones come back
    # the same records again: not acquired by anyone now -> INVALID_RECORD_STATE
    # a partition answered with no records carries an empty record set, not a null one
    # (librdkafka cannot parse a null one)
    empty = share_fetch(client, group, "member-a", 2, topic_id, acks=[(5, 7, [ACCEPT])])
    assert acquired(empty) == []
    assert partition_answer(empty)["records"] is not None
    twice = share_ack(client, group, "member-a", 3, topic_id, [(0, 4, [ACCEPT])])
    assert partition_answer(twice)["error_code"] == ErrorCode.INVALID_RECORD_STATE


def test_bad_acknowledgements_change_nothing(share_setup: Any) -> None:
    client, group, topic_id, _ = share_setup
    assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
    # 0-9 held; 0-12 includes offsets never delivered: the whole batch is refused
    bad = share_ack(client, group, "member-a", 1, topic_id, [(0, 12, [ACCEPT])])
    assert partition_answer(bad)["error_code"] == ErrorCode.INVALID_RECORD_STATE
    # overlapping batches are a malformed request
    overlap = share_ack(
        client, group, "member-a", 2, topic_id, [(0, 3, [ACCEPT]), (2, 4, [ACCEPT])]
    )
    assert partition_answer(overlap)["error_code"] == ErrorCode.INVALID_REQUEST
    # an unknown acknowledge type
    odd = share_ack(client, group, "member-a", 3, topic_id, [(0, 0, [9])])
    assert partition_answer(odd)["error_code"] == ErrorCode.INVALID_REQUEST
    # a second member cannot acknowledge what the first holds
    heartbeat(client, group, "member-b", 0, [topic_name(client, topic_id)])
    share_fetch(client, group, "member-b", 0, topic_id)
    theirs = share_ack(client, group, "member-b", 1, topic_id, [(0, 9, [ACCEPT])])
    assert partition_answer(theirs)["error_code"] == ErrorCode.INVALID_RECORD_STATE
    # none of that changed anything: the holder still accepts all ten
    good = share_ack(client, group, "member-a", 4, topic_id, [(0, 9, [ACCEPT])])
    assert partition_answer(good)["error_code"] == ErrorCode.NONE


def test_share_session_epochs(share_setup: Any) -> None:
    client, group, topic_id, _ = share_setup
    assert share_fetch(client, group, "member-a", 3, topic_id)["error_code"] == (
        ErrorCode.SHARE_SESSION_NOT_FOUND
    )
    assert share_fetch(client, group, "member-a", 0, topic_id)["error_code"] == ErrorCode.NONE
    assert share_fetch(client, group, "member-a", 7, topic_id)["error_code"] == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    assert share_ack(client, group, "member-a", 0, topic_id, [])["error_code"] == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    # acknowledgements on a request opening a session are refused
    assert share_fetch(
        client, group, "member-a", 0, topic_id, acks=[(0, 0, [ACCEPT])]
    )["error_code"] == ErrorCode.INVALID_REQUEST
    # an unknown member of a group coordinated here
    assert share_fetch(client, group, "stranger", 0, topic_id)["error_code"] == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    # closing the session releases what it held: another member gets it, delivery 2
    share_fetch(client, group, "member-a", -1, topic_id)
    heartbeat(client, group, "member-b", 0, [topic_name(client, topic_id)])
    assert acquired(share_fetch(client, group, "member-b", 0, topic_id)) == [(0, 9, 2)]


def test_delivery_count_limit_archives(share_setup: Any) -> None:
    client, group, topic_id, _ = share_setup
    epoch = 0
    deliveries = []
    for _ in range(7):
        response = share_fetch(client, group, "member-a", epoch, topic_id)
        epoch += 1
        got = acquired(response)
        deliveries.append(got)
        if got:
            share_ack(client, group, "member-a", epoch, topic_id, [(0, 9, [RELEASE])])
            epoch += 1
    # delivered 5 times (the default group.share.delivery.count.limit), then archived
    assert deliveries[:5] == [[(0, 9, n)] for n in range(1, 6)]
    assert deliveries[5:] == [[], []]


def test_delivery_state_survives_a_restart(broker_factory: Any) -> None:
    """Kept in __share_group_state: accepted records are never delivered again, records in
    flight are delivered again with their delivery count."""
    broker = broker_factory()
    topic = create_topic(broker.bootstrap, f"share-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        _, _, topic_id, _ = share_group(client, topic, group)
        assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
        accepted = share_ack(client, group, "member-a", 1, topic_id, [(0, 4, [ACCEPT])])
        assert partition_answer(accepted)["error_code"] == ErrorCode.NONE
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        join(client, group, "member-b", topic)
        again = wait_for(
            lambda: acquired(share_fetch(client, group, "member-b", 0, topic_id)),
            what="the share partition's state read back",
        )
    assert again == [(5, 9, 2)]


def test_list_and_delete_share_groups(share_setup: Any) -> None:
    client, group, topic_id, _ = share_setup
    listed = client.request(
        ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}
    )["groups"]
    assert {"group_id": group, "protocol_type": "share", "group_state": "Stable",
            "group_type": "share"} in listed
    assert client.request(
        ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]}
    )["groups"] == []
    delete = {"groups_names": [group]}
    busy = client.request(ApiKey.DELETE_GROUPS, 2, delete)["results"][0]
    assert busy["error_code"] == ErrorCode.NON_EMPTY_GROUP
    share_fetch(client, group, "member-a", 0, topic_id)
    heartbeat(client, group, "member-a", -1, None)  # the last member leaves
    share_fetch(client, group, "member-a", -1, topic_id)
    done = client.request(ApiKey.DELETE_GROUPS, 2, delete)["results"][0]
    assert done["error_code"] == ErrorCode.NONE
    body = {"group_ids": [group], "include_authorized_operations": False}
    described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, V, body)["groups"][0]
    assert described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
