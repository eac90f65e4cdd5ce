"""KIP-848 consumer groups in the pure group coordinator: heartbeats in, epochs,
assignments, records and error codes out. Members are driven as a client would (each
heartbeat reports what the member owns after its last answer), and a replay of the
written records must rebuild the same groups."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.coordinator.group import GroupConfig, GroupsState, apply, migration, replay
from logbus.coordinator.group import events as ev
from logbus.coordinator.group.assignors import range_, uniform
from logbus.coordinator.group.consumer_group import (
    Assignment,
    MemberState,
    TopicInfo,
    pairs_of,
)
from logbus.coordinator.group.records import KeyValue
from logbus.protocol import ErrorCode, schema

E = ErrorCode
CFG = GroupConfig()
T1 = TopicInfo("t1", uuid.UUID(int=1), 12)
T2 = TopicInfo("t2", uuid.UUID(int=2), 3)
TOPICS = {"t1": T1, "t2": T2}


class Coordinator:
    """Plays the runtime around `apply`: a clock, the records written, the answers."""

    def __init__(self, cfg: GroupConfig = CFG) -> None:
        self.state = GroupsState()
        self.cfg = cfg
        self.now = 0
        self.log: list[KeyValue] = []
        self._tokens = itertools.count(1)

    def heartbeat(self, **fields: Any) -> dict[str, Any]:
        token = next(self._tokens)
        fields.setdefault("topics", TOPICS)
        fields.setdefault("new_member_uuid", f"m{token}")
        result = apply(self.state, ev.ConsumerGroupHeartbeat(token, self.now, **fields), self.cfg)
        self.log.extend(result.records)
        (answered,) = [body for t, body in result.responses if t == token]
        return dict(answered)

    def describe(self, group_id: str) -> dict[str, Any]:
        names = {t.topic_id: t.name for t in TOPICS.values()}
        result = apply(self.state, ev.ConsumerGroupDescribe(0, self.now, group_id, names), self.cfg)
        return dict(result.responses[0][1])


class Client:
    """A consumer-protocol member: it owns what its last answer assigned."""

    def __init__(self, coordinator: Coordinator, group: str = "g", **join: Any) -> None:
        self.c = coordinator
        self.group = group
        fields = {"member_id": "", "api_version": 0, "subscribed_topic_names": ("t1",), **join}
        answer = coordinator.heartbeat(
            group_id=group, member_epoch=0, rebalance_timeout_ms=30_000, owned={}, **fields
        )
        assert answer["error_code"] == E.NONE, answer
        self.member_id: str = answer["member_id"]
        # what the broker adds to each of its heartbeats (its principal's describable topics)
        self.per_beat = {k: v for k, v in join.items() if k == "may_describe"}
        self.epoch: int = answer["member_epoch"]
        self.owned: Assignment = self._assignment(answer)

    @staticmethod
    def _assignment(answer: dict[str, Any]) -> Assignment:
        parts = answer["assignment"]["topic_partitions"]
        return {t["topic_id"]: frozenset(t["partitions"]) for t in parts}

    def beat(self) -> dict[str, Any]:
        answer = self.c.heartbeat(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            owned=self.owned, **self.per_beat,
        )
        if answer["error_code"] == E.NONE:
            self.epoch = answer["member_epoch"]
            if answer["assignment"] is not None:
                self.owned = self._assignment(answer)
        return answer

    def leave(self) -> dict[str, Any]:
        return self.c.heartbeat(group_id=self.group, member_id=self.member_id, member_epoch=-1)


def settle(clients: list[Client], rounds: int = 10) -> None:
    """Heartbeat every member round after round, checking after each heartbeat that no
    partition is owned by two members, until the group is stable."""
    for _ in range(rounds):
        for client in clients:
            assert client.beat()["error_code"] == E.NONE
            owned = [tp for c in clients for tp in pairs_of(c.owned)]
            assert len(owned) == len(set(owned)), "a partition owned by two members"
        group = clients[0].c.state.consumer_groups[clients[0].group]
        if group.state().value == "Stable":
            return
    raise AssertionError("the group did not settle")


def test_members_join_and_split_the_partitions() -> None:
    c = Coordinator()
    members = [Client(c) for _ in range(3)]
    settle(members)
    counts = sorted(len(pairs_of(m.owned)) for m in members)
    assert counts == [4, 4, 4]
    group = c.state.consumer_groups["g"]
    assert {m.member_epoch for m in group.members.values()} == {group.assignment_epoch}
    assert group.group_epoch == group.assignment_epoch == 3


def test_scale_up_and_down_never_owns_twice_and_keepers_keep() -> None:
    c = Coordinator()
    members = [Client(c) for _ in range(3)]
    settle(members)
    before = {m.member_id: pairs_of(m.owned) for m in members}
    members += [Client(c) for _ in range(3)]
    settle(members)
    assert sorted(len(pairs_of(m.owned)) for m in members) == [2] * 6
    for m in members[:3]:  # sticky: the first three kept a subset of what they had
        assert pairs_of(m.owned) <= before[m.member_id]
    for m in members[2:6]:
        assert m.leave()["member_epoch"] == -1
    members = members[:2]
    settle(members)
    assert sorted(len(pairs_of(m.owned)) for m in members) == [6, 6]


def test_revoking_member_keeps_its_epoch_until_it_reports_the_revocation() -> None:
    c = Coordinator()
    first = Client(c)
    assert len(pairs_of(first.owned)) == 12
    second = Client(c)
    assert pairs_of(second.owned) == set()  # all still owned by the first member
    answer = first.beat()
    group = c.state.consumer_groups["g"]
    assert group.members[first.member_id].state is MemberState.UNREVOKED_PARTITIONS
    assert answer["member_epoch"] == 1 and len(pairs_of(first.owned)) == 6
    assert second.beat()["assignment"] is None or pairs_of(second.owned) == set()
    first.beat()  # reports the revocation: it moves to the new epoch
    assert group.members[first.member_id].member_epoch == 2
    second.beat()
    assert len(pairs_of(second.owned)) == 6
    assert group.state().value == "Stable"


def test_bad_heartbeats_get_kafkas_error_codes_and_change_nothing() -> None:
    c = Coordinator()
    member = Client(c)
    records = len(c.log)
    base = {"group_id": "g", "member_id": member.member_id, "owned": member.owned}
    assert c.heartbeat(**base, member_epoch=member.epoch + 1)["error_code"] == E.FENCED_MEMBER_EPOCH
    assert c.heartbeat(**{**base, "member_id": "nobody"}, member_epoch=1)["error_code"] == (
        E.UNKNOWN_MEMBER_ID
    )
    join = {"group_id": "g", "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": 1000,
            "owned": {}, "api_version": 0}
    assert c.heartbeat(**join, subscribed_topic_names=("t1",), server_assignor="sticky")[
        "error_code"] == E.UNSUPPORTED_ASSIGNOR
    assert c.heartbeat(**join, subscribed_topic_regex="t[")["error_code"] == (
        E.INVALID_REGULAR_EXPRESSION
    )
    assert c.heartbeat(**{**join, "rebalance_timeout_ms": -1}, subscribed_topic_names=("t1",))[
        "error_code"] == E.INVALID_REQUEST
    assert c.heartbeat(**join)["error_code"] == E.INVALID_REQUEST  # no subscription
    assert c.heartbeat(**{**join, "group_id": ""}, subscribed_topic_names=("t1",))[
        "error_code"] == E.INVALID_REQUEST
    assert c.heartbeat(**{**join, "member_epoch": 5, "group_id": "other"})["error_code"] == (
        E.INVALID_REQUEST  # no subscription needed past 0, but a member id is
    )
    assert len(c.log) == records
    assert len(c.state.consumer_groups["g"].members) == 1
    assert member.beat()["error_code"] == E.NONE


def test_static_member_rejoins_with_its_assignment_and_an_instance_in_use_is_refused() -> None:
    c = Coordinator()
    static = Client(c, instance_id="i-1")
    other = Client(c)
    settle([static, other])
    kept = static.owned
    refused = c.heartbeat(group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=1000,
                          subscribed_topic_names=("t1",), owned={}, instance_id="i-1",
                          api_version=0)
    assert refused["error_code"] == E.UNRELEASED_INSTANCE_ID
    left = c.heartbeat(group_id="g", member_id=static.member_id, member_epoch=-2,
                       instance_id="i-1")
    assert left["member_epoch"] == -2
    back = Client(c, instance_id="i-1")
    assert back.member_id != static.member_id
    assert back.owned == kept


def test_regex_subscription_is_resolved_on_the_broker() -> None:
    c = Coordinator()
    member = Client(c, subscribed_topic_names=None, subscribed_topic_regex="t.*", api_version=1,
                    member_id=str(uuid.UUID(int=7)))
    settle([member])
    assert pairs_of(member.owned) == {(T1.topic_id, p) for p in range(12)} | {
        (T2.topic_id, p) for p in range(3)
    }


def test_regex_resolves_to_the_topics_each_member_may_describe() -> None:
    c = Coordinator()
    regex = {"subscribed_topic_names": None, "subscribed_topic_regex": "t.*", "api_version": 1}
    only_t1 = Client(c, **regex, member_id="a", may_describe={"t1"}.__contains__)
    only_t2 = Client(c, **regex, member_id="b", may_describe={"t2"}.__contains__)
    settle([only_t1, only_t2])
    assert pairs_of(only_t1.owned) == {(T1.topic_id, p) for p in range(12)}
    assert pairs_of(only_t2.owned) == {(T2.topic_id, p) for p in range(3)}
    # an ACL added on t1 for the second member: its next heartbeat resolves t1 too
    only_t2.per_beat["may_describe"] = {"t1", "t2"}.__contains__
    settle([only_t1, only_t2])
    assert {t for t, _ in pairs_of(only_t2.owned)} == {T1.topic_id, T2.topic_id}
    assert {t for t, _ in pairs_of(only_t1.owned)} == {T1.topic_id}

    # after a reload the coordinator no longer knows what each member may describe; the
    # first member's heartbeat tells it again before it is given anything
    reloaded = GroupsState()
    for key, value in c.log:
        replay(reloaded, key, value)
    c.state = reloaded
    for _ in range(5):
        for client in (only_t2, only_t1):
            assert client.beat()["error_code"] == E.NONE
            assert {t for t, _ in pairs_of(only_t1.owned)} <= {T1.topic_id}
    settle([only_t1, only_t2])


def test_offset_commits_are_checked_against_the_member_epoch() -> None:
    c = Coordinator()
    member = Client(c)

    def commit(member_id: str, epoch: int) -> int:
        e = ev.OffsetCommit(
            99, 0, "g", (("t1", (ev.PartitionCommit(0, 5),)),), generation_id=epoch,
            member_id=member_id,
        )
        result = apply(c.state, e, CFG)
        return int(result.responses[0][1]["topics"][0]["partitions"][0]["error_code"])

    assert commit(member.member_id, member.epoch) == E.NONE
    assert commit(member.member_id, member.epoch + 3) == E.STALE_MEMBER_EPOCH
    assert commit("nobody", member.epoch) == E.UNKNOWN_MEMBER_ID
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID  # the group has members


def test_replaying_the_records_rebuilds_the_groups() -> None:
    c = Coordinator()
    members = [Client(c) for _ in range(4)]
    settle(members)
    members[0].leave()
    settle(members[1:])
    reloaded = GroupsState()
    for key, value in c.log:
        replay(reloaded, key, value)
    before = c.state.consumer_groups["g"]
    after = reloaded.consumer_groups["g"]
    assert (after.group_epoch, after.assignment_epoch) == (
        before.group_epoch, before.assignment_epoch
    )
    assert after.target == before.target
    for member_id, member in before.members.items():
        loaded = after.members[member_id]
        assert (loaded.member_epoch, loaded.assigned, loaded.state) == (
            member.member_epoch, member.assigned, member.state
        )
        assert loaded.subscribed_topic_names == member.subscribed_topic_names


def test_describe_and_list_show_the_consumer_group() -> None:
    c = Coordinator()
    members = [Client(c) for _ in range(2)]
    settle(members)
    described = c.describe("g")
    assert described["group_state"] == "Stable" and described["assignor_name"] == "uniform"
    assert {m["member_epoch"] for m in described["members"]} == {2}
    assert c.describe("missing")["error_code"] == E.GROUP_ID_NOT_FOUND
    classic = apply(c.state, ev.DescribeGroup(2, 0, "g"), CFG).responses[0][1]
    assert (classic["group_state"], classic["protocol_type"], classic["protocol_data"]) == (
        "Stable", "consumer", "uniform"
    )
    owned = {m["member_id"]: migration.assignment_of(m["member_assignment"], TOPICS)
             for m in classic["members"]}
    assert owned == {m.member_id: m.owned for m in members}
    result = apply(c.state, ev.ListGroups(1, 0, types_filter=("consumer",)), CFG)
    listed = result.responses[0][1]["groups"]
    assert [(g["group_id"], g["group_type"]) for g in listed] == [("g", "consumer")]


@settings(max_examples=60)
@given(
    members=st.integers(1, 8),
    partitions=st.integers(0, 40),
    previous_seed=st.integers(0, 1000),
)
def test_uniform_is_balanced_and_complete(
    members: int, partitions: int, previous_seed: int
) -> None:
    topic = TopicInfo("t", uuid.UUID(int=9), partitions)
    subs = {f"m{i}": {"t"} for i in range(members)}
    previous = {f"m{i}": {topic.topic_id: frozenset(
        p for p in range(partitions) if (p + previous_seed) % (i + 2) == 0)}
        for i in range(members)}
    result = uniform(subs, {"t": topic}, previous)
    got = [tp for a in result.values() for tp in pairs_of(a)]
    assert sorted(got) == [(topic.topic_id, p) for p in range(partitions)]
    sizes = [len(pairs_of(a)) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_assignors_respect_subscriptions(assignor: Any) -> None:
    subs = {"a": {"t1"}, "b": {"t1", "t2"}, "c": {"t2"}}
    result = assignor(subs, TOPICS, {})
    assert {t for t, _ in pairs_of(result["a"])} <= {T1.topic_id}
    assert {t for t, _ in pairs_of(result["c"])} <= {T2.topic_id}
    every = [tp for a in result.values() for tp in pairs_of(a)]
    assert len(every) == len(set(every)) == 15


def _subscription(*topics: str) -> bytes:
    return b"\x00\x00" + schema.message("ConsumerProtocolSubscription").encode(
        {"topics": list(topics), "user_data": None}, 0
    )


def test_classic_group_upgraded_when_a_consumer_protocol_member_joins() -> None:
    c = Coordinator(GroupConfig(initial_rebalance_delay_ms=0))
    join = ev.JoinGroup(1, 0, "g", "", "consumer", (("range", _subscription("t1")),), 10_000,
                        10_000, api_version=3, new_member_uuid="u1", client_id="classic",
                        topics=TOPICS)
    joined = apply(c.state, join, c.cfg)
    c.log.extend(joined.records)
    (answer,) = [body for _t, body in joined.responses]
    classic_id, generation = answer["member_id"], answer["generation_id"]
    everything = migration.encode_assignment(
        {T1.topic_id: frozenset(range(12))}, {T1.topic_id: "t1"}
    )
    synced = apply(c.state, ev.SyncGroup(2, 0, "g", generation, classic_id,
                                         assignments=((classic_id, everything),)), c.cfg)
    c.log.extend(synced.records)
    assert synced.responses[0][1]["error_code"] == E.NONE

    modern = Client(c)  # the first consumer-protocol member: the group is upgraded
    group = c.state.consumer_groups["g"]
    assert set(group.members) == {classic_id, modern.member_id}
    assert group.members[classic_id].uses_classic_protocol
    assert pairs_of(modern.owned) == set()  # all still owned by the classic member
    beat = apply(c.state, ev.Heartbeat(3, 0, "g", generation, classic_id), c.cfg)
    assert beat.responses[0][1]["error_code"] == E.REBALANCE_IN_PROGRESS
    # The eager classic member revokes everything and rejoins: it gets its half.
    rejoin = apply(c.state, ev.JoinGroup(4, 0, "g", classic_id, "consumer",
                                         (("range", _subscription("t1")),), 10_000, 10_000,
                                         api_version=3, topics=TOPICS), c.cfg)
    c.log.extend(rejoin.records)
    new_generation = rejoin.responses[0][1]["generation_id"]
    resynced = apply(c.state, ev.SyncGroup(5, 0, "g", new_generation, classic_id), c.cfg)
    classic_owned = migration.assignment_of(resynced.responses[0][1]["assignment"], TOPICS)
    assert len(pairs_of(classic_owned)) == 6
    modern.beat()
    assert len(pairs_of(modern.owned)) == 6
    assert not pairs_of(modern.owned) & pairs_of(classic_owned)
    reloaded = GroupsState()
    for key, value in c.log:
        replay(reloaded, key, value)
    assert reloaded.consumer_groups["g"].members[classic_id].uses_classic_protocol
    assert "g" not in reloaded.groups  # the classic metadata is gone (no offsets either)


def test_migration_policy_disabled_keeps_the_protocols_apart() -> None:
    c = Coordinator(GroupConfig(initial_rebalance_delay_ms=0, consumer_migration_policy="disabled"))
    join = ev.JoinGroup(1, 0, "classic", "", "consumer", (("range", _subscription("t1")),),
                        10_000, 10_000, api_version=3, new_member_uuid="u1", topics=TOPICS)
    classic_id = apply(c.state, join, c.cfg).responses[0][1]["member_id"]
    apply(c.state, ev.SyncGroup(2, 0, "classic", 1, classic_id), c.cfg)
    refused = c.heartbeat(group_id="classic", member_id="", member_epoch=0,
                          rebalance_timeout_ms=1000, subscribed_topic_names=("t1",), owned={},
                          api_version=0)
    assert refused["error_code"] == E.GROUP_ID_NOT_FOUND
    assert "classic" not in c.state.consumer_groups
    Client(c, group="modern")
    classic_join = ev.JoinGroup(3, 0, "modern", "", "consumer",
                                (("range", _subscription("t1")),), 10_000, 10_000,
                                api_version=3, new_member_uuid="u2", topics=TOPICS)
    answer = apply(c.state, classic_join, c.cfg).responses[0][1]
    assert answer["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
