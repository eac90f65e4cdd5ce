"""The four assignors, as pure functions of partition counts and subscriptions."""

from __future__ import annotations

import pytest

from logbus.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
    make_assignors,
    rebalance_protocol,
)
from logbus.client.requests.consumer_protocol import (
    Subscription,
    decode_subscription,
    encode_subscription,
)
from logbus.client.types import TopicPartition as TP


def subs(**topics: list[str]) -> dict[str, Subscription]:
    return {member: Subscription(ts) for member, ts in topics.items()}


def flat(assignment: dict[str, list[int]]) -> set[TP]:
    return {TP(t, p) for t, ps in assignment.items() for p in ps}


def test_range_orders_static_members_by_instance_id_first() -> None:
    plan = RangeAssignor().assign({"t": 3}, subs(a=["t"], b=["t"]), {"a": None, "b": "x"})
    assert plan == {"b": {"t": [0, 1]}, "a": {"t": [2]}}


def test_roundrobin_deals_partitions_skipping_members_not_subscribed() -> None:
    plan = RoundRobinAssignor().assign({"t": 3, "u": 2}, subs(a=["t", "u"], b=["u"], c=["t"]))
    assert plan == {"a": {"t": [0, 2], "u": [1]}, "b": {"u": [0]}, "c": {"t": [1]}}


def test_sticky_keeps_owned_partitions_and_balances() -> None:
    assignor = StickyAssignor()
    counts = {"t": 6}
    owned_a = encode_sticky_user_data([TP("t", p) for p in (0, 1, 2)], 3)
    owned_b = encode_sticky_user_data([TP("t", p) for p in (3, 4, 5)], 3)
    group = {
        "a": Subscription(["t"], user_data=owned_a),
        "b": Subscription(["t"], user_data=owned_b),
        "c": Subscription(["t"]),
    }
    plan = {m: flat(a) for m, a in assignor.assign(counts, group).items()}
    assert [len(plan[m]) for m in "abc"] == [2, 2, 2]
    assert plan["a"] < {TP("t", p) for p in (0, 1, 2)}
    assert plan["b"] < {TP("t", p) for p in (3, 4, 5)}
    assert set().union(*plan.values()) == {TP("t", p) for p in range(6)}


def test_sticky_gives_a_doubly_claimed_partition_to_the_newest_generation() -> None:
    group = {
        "a": Subscription(["t"], user_data=encode_sticky_user_data([TP("t", 0)], 1)),
        "b": Subscription(["t"], user_data=encode_sticky_user_data([TP("t", 0)], 2)),
    }
    plan = StickyAssignor().assign({"t": 2}, group)
    assert plan == {"a": {"t": [1]}, "b": {"t": [0]}}


def test_sticky_user_data_round_trip_and_garbage() -> None:
    partitions = [TP("t", 1), TP("u", 0), TP("t", 0)]
    assert decode_sticky_user_data(encode_sticky_user_data(partitions, 7)) == (
        sorted(partitions), 7)
    assert decode_sticky_user_data(b"\x00\x00") == ([], -1)


def test_cooperative_sticky_withholds_partitions_that_move() -> None:
    group = {
        "a": Subscription(["t"], owned_partitions=[("t", p) for p in range(4)], generation_id=5),
        "b": Subscription(["t"]),
    }
    first = CooperativeStickyAssignor().assign({"t": 4}, group)
    # a keeps two; the two moving to b are withheld this round
    assert len(flat(first["a"])) == 2 and first["b"] == {}
    kept = [(tp.topic, tp.partition) for tp in flat(first["a"])]
    group["a"] = Subscription(["t"], owned_partitions=kept, generation_id=6)
    second = CooperativeStickyAssignor().assign({"t": 4}, group)
    assert flat(second["a"]) == flat(first["a"])
    assert flat(second["b"]) == {TP("t", p) for p in range(4)} - flat(first["a"])


def test_uneven_subscriptions_stay_within_what_each_member_wants() -> None:
    group = subs(a=["t", "u"], b=["t"], c=["u"])
    plan = StickyAssignor().assign({"t": 4, "u": 2}, group)
    assert {tp.topic for tp in flat(plan["b"])} <= {"t"}
    assert {tp.topic for tp in flat(plan["c"])} <= {"u"}
    assert set().union(*(flat(a) for a in plan.values())) == {
        TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 3), TP("u", 0), TP("u", 1)}


def test_protocol_and_names() -> None:
    assert rebalance_protocol(make_assignors(["range", "cooperative-sticky"])) is (
        RebalanceProtocol.EAGER)
    assert rebalance_protocol(make_assignors(["cooperative-sticky"])) is (
        RebalanceProtocol.COOPERATIVE)
    names = ["org.apache.kafka.clients.consumer.RoundRobinAssignor", "Sticky"]
    assert [a.name for a in make_assignors(names)] == ["roundrobin", "sticky"]
    with pytest.raises(ValueError, match="unknown partition assignment strategy 'x'"):
        make_assignors(["x"])


def test_subscription_payload_round_trip() -> None:
    raw = encode_subscription(["b", "a"], user_data=b"ud", owned_partitions=[("a", 1)],
                              generation_id=4)
    assert decode_subscription(raw) == Subscription(["a", "b"], b"ud", [("a", 1)], 4, None)
    # version 0, as kafka-python writes it: topics and user data only
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(v0) == Subscription(["t"])
