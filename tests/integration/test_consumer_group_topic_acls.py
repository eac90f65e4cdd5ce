"""Topic ACLs on KIP-848 and KIP-932 subscriptions, as Kafka 4 checks them: a heartbeat
naming a topic its principal may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED; a regular
expression resolves, for each member, to the matching topics its principal may describe
only, and picks up a topic whose ACL is added at the member's next heartbeat; describing
a group whose members hold a topic the caller may not describe is refused.

Principals come from the client id (`acl_helpers.assign_principals`), for the wire calls
and for confluent-kafka alike."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from acl_helpers import ADMIN, ALICE, acl, call, create_topic, grant, secured
from confluent_kafka import Consumer, KafkaError

from kafka_wire import wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation as Op
from logbus.protocol.acl_types import ResourceType as R

pytestmark = pytest.mark.timeout(120)

E = ErrorCode
BOB = "User:bob"


def heartbeat(bootstrap: str, principal: str, group: str, **fields: Any) -> dict[str, Any]:
    body = {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": None, "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": [], **fields,
    }
    return call(bootstrap, principal, ApiKey.CONSUMER_GROUP_HEARTBEAT, body, 1)


def share_heartbeat(bootstrap: str, principal: str, group: str, topics: list[str]) -> int:
    body = {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
            "rack_id": None, "subscribed_topic_names": topics}
    code: int = call(bootstrap, principal, ApiKey.SHARE_GROUP_HEARTBEAT, body, 1)["error_code"]
    return code


def topic_ids(bootstrap: str, *names: str) -> dict[uuid.UUID, str]:
    r = call(bootstrap, ADMIN, ApiKey.METADATA, {"topics": [{"name": n} for n in names]}, 12)
    return {t["topic_id"]: t["name"] for t in r["topics"]}


def assigned(response: dict[str, Any], names: dict[uuid.UUID, str]) -> dict[str, list[int]]:
    """The member's assignment in a heartbeat response, by topic name ({} when absent)."""
    assignment = response["assignment"] or {"topic_partitions": []}
    return {names[t["topic_id"]]: sorted(t["partitions"])
            for t in assignment["topic_partitions"]}


def joined(bootstrap: str, principal: str, group: str, **fields: Any) -> dict[str, Any]:
    """A first heartbeat that got past the coordinator's loading (the first group lookup
    creates __consumer_offsets)."""
    def attempt() -> dict[str, Any] | None:
        call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
        r = heartbeat(bootstrap, principal, group, **fields)
        assert r["error_code"] in (E.NONE, E.NOT_COORDINATOR,
                                   E.COORDINATOR_LOAD_IN_PROGRESS), r
        return r if r["error_code"] == E.NONE else None

    return wait_for(attempt, 30, 0.1, what=f"{principal} joining {group}")  # type: ignore[no-any-return]


def test_subscribing_by_name_needs_describe_on_every_topic(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "named-a")
    grant(bootstrap, acl(R.GROUP, "named", Op.READ), acl(R.TOPIC, "named-a", Op.DESCRIBE))
    # a topic that does not exist is judged all the same: the answer tells nothing of it
    for topics in (["named-a", "named-b"], ["named-missing"]):
        r = heartbeat(bootstrap, ALICE, "named", subscribed_topic_names=topics)
        assert (r["error_code"], r["member_epoch"]) == (E.TOPIC_AUTHORIZATION_FAILED, -1), r
    assert joined(bootstrap, ALICE, "named", subscribed_topic_names=["named-a"])["member_epoch"]
    # no group ACL: the group is refused first, as in Kafka
    r = heartbeat(bootstrap, ALICE, "other", subscribed_topic_names=["named-b"])
    assert r["error_code"] == E.GROUP_AUTHORIZATION_FAILED


def test_regex_resolves_per_principal_and_picks_up_new_acls(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "rx-a", 2)
    create_topic(bootstrap, "rx-b", 1)
    names = topic_ids(bootstrap, "rx-a", "rx-b")
    grant(
        bootstrap,
        acl(R.GROUP, "rx", Op.READ), acl(R.GROUP, "rx", Op.READ, principal=BOB),
        acl(R.GROUP, "rx-solo", Op.READ),
        acl(R.TOPIC, "rx-a", Op.DESCRIBE),
        acl(R.TOPIC, "rx-b", Op.DESCRIBE, principal=BOB),
    )
    # one expression, two principals: each member gets the topics it may describe only
    alice = joined(bootstrap, ALICE, "rx", subscribed_topic_regex="rx-.*")
    assert assigned(alice, names) == {"rx-a": [0, 1]}
    bob = joined(bootstrap, BOB, "rx", subscribed_topic_regex="rx-.*")
    assert assigned(bob, names) == {"rx-b": [0]}
    assert describe_target(bootstrap, "rx", alice["member_id"]) == {"rx-a": [0, 1]}
    assert describe_target(bootstrap, "rx", bob["member_id"]) == {"rx-b": [0]}
    # describing the group names bob's topic: refused to alice, who may not describe it
    grant(bootstrap, acl(R.GROUP, "rx", Op.DESCRIBE))
    (refused,) = call(bootstrap, ALICE, ApiKey.CONSUMER_GROUP_DESCRIBE,
                      {"group_ids": ["rx"], "include_authorized_operations": False})["groups"]
    assert (refused["error_code"], refused["members"]) == (E.TOPIC_AUTHORIZATION_FAILED, [])

    # a topic whose ACL comes later joins the member's assignment at its next heartbeat
    solo = joined(bootstrap, ALICE, "rx-solo", subscribed_topic_regex="rx-.*")
    assert assigned(solo, names) == {"rx-a": [0, 1]}
    ids = {name: topic_id for topic_id, name in names.items()}
    owned = [{"topic_id": ids["rx-a"], "partitions": [0, 1]}]
    again = heartbeat(bootstrap, ALICE, "rx-solo", member_id=solo["member_id"],
                      member_epoch=solo["member_epoch"], rebalance_timeout_ms=-1,
                      topic_partitions=owned)
    assert again["error_code"] == E.NONE and again["assignment"] is None, again
    grant(bootstrap, acl(R.TOPIC, "rx-b", Op.DESCRIBE))
    after = heartbeat(bootstrap, ALICE, "rx-solo", member_id=solo["member_id"],
                      member_epoch=solo["member_epoch"], rebalance_timeout_ms=-1,
                      topic_partitions=owned)
    assert after["error_code"] == E.NONE, after
    assert after["member_epoch"] > solo["member_epoch"]
    assert assigned(after, names) == {"rx-a": [0, 1], "rx-b": [0]}


def describe_target(bootstrap: str, group: str, member_id: str) -> dict[str, list[int]]:
    """A member's target assignment as the admin describes it."""
    r = call(bootstrap, ADMIN, ApiKey.CONSUMER_GROUP_DESCRIBE,
             {"group_ids": [group], "include_authorized_operations": False})
    for m in r["groups"][0]["members"]:
        if m["member_id"] == member_id:
            return {t["topic_name"]: sorted(t["partitions"])
                    for t in m["target_assignment"]["topic_partitions"]}
    raise AssertionError(f"{member_id} is not a member of {group}: {r}")


def test_share_heartbeat_needs_describe_on_every_topic(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "sh-a")
    grant(bootstrap, acl(R.GROUP, "sh", Op.READ), acl(R.TOPIC, "sh-a", Op.DESCRIBE))
    assert share_heartbeat(bootstrap, ALICE, "sh", ["sh-a", "sh-b"]) == (
        E.TOPIC_AUTHORIZATION_FAILED)

    def passes() -> bool:
        call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": "sh", "key_type": 0}, 3)
        code = share_heartbeat(bootstrap, ALICE, "sh", ["sh-a"])
        assert code in (E.NONE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS), code
        return code == E.NONE

    wait_for(passes, 30, 0.1, what="the share heartbeat to pass")


def test_confluent_kafka_consumer_protocol_reports_the_topic(broker_factory: Any) -> None:
    bootstrap = secured(broker_factory).bootstrap
    create_topic(bootstrap, "ck-denied")
    grant(bootstrap, acl(R.GROUP, "ck", Op.READ))
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "ck", "group.protocol": "consumer",
        "client.id": ALICE,
    })
    try:
        consumer.subscribe(["ck-denied"])

        def error_code() -> int | None:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                code: int = message.error().code()
                return code
            return None

        code = wait_for(error_code, 30, 0, what="an error from poll")
        assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()
