"""Share groups (KIP-932) over the raw wire against a real broker: the heartbeat's epochs,
share sessions, acquisition and acknowledgement, and bad input answered with Kafka's error
codes without changing any state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_wire import WireClient, create_topic, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import build_plain_batch

V = 1
ACCEPT, RELEASE, REJECT = 1, 2, 3

pytestmark = pytest.mark.timeout(60)


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


@pytest.fixture
def share_setup(broker_factory: Any) -> Any:
    """A broker with 10 records in a fresh one-partition topic, a share group reading it
    from the earliest offset, and one joined member."""
    broker = broker_factory()
    topic = create_topic(broker.bootstrap, f"share-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        yield share_group(client, topic, group)


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


def topic_name(client: WireClient, topic_id: uuid.UUID) -> str:
    return next(  # type: ignore[no-any-return]
        t["name"] for t in client.metadata(None)["topics"] if t["topic_id"] == topic_id
    )


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


def join(client: WireClient, group: str, member: str, topic: str) -> dict[str, Any]:
    """Join `member` once the group's coordinator answers (after a start, it loads)."""
    return wait_for(  # type: ignore[no-any-return]
        lambda: (r := heartbeat(client, group, member, 0, [topic]))["error_code"] == 0 and r,
        what="the share group's coordinator",
    )


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
