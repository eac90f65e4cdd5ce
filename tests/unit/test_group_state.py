"""The classic group coordinator as a pure state machine: events in, records, responses
and timers out. A small harness plays the runtime (a fake clock and a timer table)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from logbus.coordinator.group import (
    Cancel,
    GroupConfig,
    GroupsState,
    GroupState,
    Result,
    Schedule,
    apply,
    load_complete,
    replay,
)
from logbus.coordinator.group import events as ev
from logbus.coordinator.group import records as rec
from logbus.coordinator.group.state import TRANSITIONS, Group, IllegalTransition
from logbus.protocol import ErrorCode, schema

E = ErrorCode
CFG = GroupConfig(initial_rebalance_delay_ms=0)


def sub(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v1 bytes."""
    return b"\x00\x01" + schema.message("ConsumerProtocolSubscription").encode(
        {"topics": list(topics)}, 1
    )


class Runtime:
    """Plays the runtime: a clock, a timer table, and the log of records written."""

    def __init__(self, cfg: GroupConfig = CFG) -> None:
        self.state = GroupsState()
        self.cfg = cfg
        self.now = 0
        self.timers: dict[tuple[str, ...], tuple[int, Any]] = {}
        self.log: list[rec.KeyValue] = []
        self.responses: dict[int, dict[str, Any]] = {}
        self._tokens = itertools.count(1)
        self._uuids = itertools.count(1)

    def token(self) -> int:
        return next(self._tokens)

    def take(self, result: Result) -> Result:
        self.log.extend(result.records)
        for token, response in result.responses:
            assert token not in self.responses, f"token {token} answered twice"
            self.responses[token] = response  # type: ignore[index]
        for change in result.timers:
            if isinstance(change, Schedule):
                self.timers[change.key] = (change.deadline_ms, change.event)
            else:
                assert isinstance(change, Cancel)
                self.timers.pop(change.key, None)
        return result

    def apply(self, event: Any) -> Result:
        return self.take(apply(self.state, event, self.cfg))

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = [(d, k) for k, (d, _) in self.timers.items() if d <= target]
            if not due:
                break
            deadline, key = min(due)
            _, event = self.timers.pop(key)
            self.now = max(self.now, deadline)
            self.apply(event.at(self.now))
        self.now = target

    def join(
        self,
        member_id: str = "",
        group: str = "g",
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),),
        instance: str | None = None,
        version: int = 9,
        session: int = 10_000,
        rebalance: int = 30_000,
        protocol_type: str = "consumer",
    ) -> int:
        t = self.token()
        self.apply(
            ev.JoinGroup(
                token=t,
                now_ms=self.now,
                group_id=group,
                member_id=member_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance,
                group_instance_id=instance,
                client_id="c",
                client_host="/127.0.0.1",
                api_version=version,
                new_member_uuid=f"u{next(self._uuids)}",
            )
        )
        return t

    def new_member(self, **kw: Any) -> str:
        """KIP-394 dance: join without an id, get MEMBER_ID_REQUIRED, return the id."""
        t = self.join(**kw)
        assert self.responses[t]["error_code"] == E.MEMBER_ID_REQUIRED
        return str(self.responses[t]["member_id"])

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: tuple[tuple[str, bytes], ...] = (),
        group: str = "g",
        instance: str | None = None,
    ) -> int:
        t = self.token()
        self.apply(
            ev.SyncGroup(
                t, self.now, group, generation, member_id, instance, assignments=assignments
            )
        )
        return t

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        t = self.token()
        self.apply(ev.Heartbeat(t, self.now, "g", generation, member_id, instance))
        return ErrorCode(self.responses[t]["error_code"])

    def commit(
        self, member_id: str = "", generation: int = -1, group: str = "g", **parts: int
    ) -> dict[str, Any]:
        t = self.token()
        topics = tuple(
            (topic, (ev.PartitionCommit(0, offset, metadata="m"),))
            for topic, offset in parts.items()
        )
        self.apply(ev.OffsetCommit(t, self.now, group, topics, generation, member_id))
        return self.responses[t]

    def group(self, group_id: str = "g") -> Group:
        return self.state.groups[group_id]


def commit_errors(response: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t["partitions"][0]["error_code"] for t in response["topics"]}


def stable_pair(rt: Runtime, protocol: str = "range") -> tuple[str, str]:
    """Two members a (leader) and b in a Stable group at generation 2."""
    protocols = ((protocol, sub("t1")),)
    a = rt.new_member(protocols=protocols)
    ja = rt.join(a, protocols=protocols)
    assert rt.responses[ja]["generation_id"] == 1
    b = rt.new_member(protocols=protocols)
    jb = rt.join(b, protocols=protocols)
    assert jb not in rt.responses  # parked until a rejoins
    ja2 = rt.join(a, protocols=protocols)
    assert rt.responses[ja2]["generation_id"] == 2 and rt.responses[jb]["generation_id"] == 2
    sb = rt.sync(b, 2)
    sa = rt.sync(a, 2, ((a, b"A"), (b, b"B")))
    assert rt.responses[sa]["assignment"] == b"A" and rt.responses[sb]["assignment"] == b"B"
    assert rt.group().state is GroupState.STABLE
    return a, b


# --- state table -----------------------------------------------------------------------


def test_transition_table_is_kafkas() -> None:
    assert TRANSITIONS[GroupState.STABLE] == {GroupState.COMPLETING_REBALANCE}
    assert TRANSITIONS[GroupState.EMPTY] == {GroupState.PREPARING_REBALANCE}
    g = Group("g")
    with pytest.raises(IllegalTransition):
        g.transition(GroupState.STABLE, 0)


# --- JoinGroup -------------------------------------------------------------------------


def test_kip394_member_id_required_then_join_completes() -> None:
    rt = Runtime()
    t = rt.join()
    assert rt.responses[t]["error_code"] == E.MEMBER_ID_REQUIRED
    member_id = rt.responses[t]["member_id"]
    assert member_id == "c-u1"
    assert member_id in rt.group().pending_members
    t2 = rt.join(member_id)
    resp = rt.responses[t2]
    assert resp["error_code"] == E.NONE
    assert resp["generation_id"] == 1 and resp["leader"] == member_id
    assert resp["protocol_name"] == "range"
    assert resp["members"] == [
        {"member_id": member_id, "group_instance_id": None, "metadata": b"r"}
    ]
    assert rt.group().state is GroupState.COMPLETING_REBALANCE
    assert not rt.group().pending_members


def test_old_clients_join_without_member_id_required() -> None:
    rt = Runtime()
    t = rt.join(version=3)
    assert rt.responses[t]["error_code"] == E.NONE
    assert rt.responses[t]["member_id"] == "c-u1"


def test_pending_member_expires() -> None:
    rt = Runtime()
    member_id = rt.new_member()
    rt.advance(10_001)
    assert member_id not in rt.group().pending_members
    t = rt.join(member_id)
    assert rt.responses[t]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_two_members_rebalance_and_sync() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    group = rt.group()
    assert group.leader_id == a and group.generation_id == 2
    assert group.subscribed_topics == {"t1"}
    decoded = rec.decode_record(*rt.log[-1])
    assert isinstance(decoded, rec.GroupMetadata)
    assert decoded.generation == 2 and decoded.leader == a
    assert {m.member_id: m.assignment for m in decoded.members} == {a: b"A", b: b"B"}


def test_heartbeats_report_rebalance_in_progress() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    assert rt.heartbeat(a, 2) == E.NONE
    t = rt.join(b, protocols=(("range", sub("t1")),))  # same metadata: current generation
    assert rt.responses[t]["generation_id"] == 2 and rt.responses[t]["members"] == []
    assert rt.group().state is GroupState.STABLE
    c = rt.new_member()
    rt.join(c)
    assert rt.group().state is GroupState.PREPARING_REBALANCE
    assert rt.heartbeat(a, 2) == E.REBALANCE_IN_PROGRESS
    assert rt.heartbeat(a, 1) == E.ILLEGAL_GENERATION
    assert rt.heartbeat("nobody", 2) == E.UNKNOWN_MEMBER_ID


def test_leader_rejoin_in_stable_forces_rebalance() -> None:
    rt = Runtime()
    a, _b = stable_pair(rt)
    rt.join(a, protocols=(("range", sub("t1")),))
    assert rt.group().state is GroupState.PREPARING_REBALANCE


def test_protocol_selection_by_votes_among_common_protocols() -> None:
    rt = Runtime(replace(CFG, initial_rebalance_delay_ms=1000))
    ta = rt.join(version=3, protocols=(("x", b""), ("y", b"")))
    tb = rt.join(version=3, protocols=(("y", b""), ("x", b"")))
    tc = rt.join(version=3, protocols=(("y", b""), ("x", b""), ("z", b"")))
    rt.advance(1000)  # members arrived during the delay: one more delay
    assert ta not in rt.responses
    rt.advance(1000)
    for t in (ta, tb, tc):
        assert rt.responses[t]["protocol_name"] == "y"
    # a newcomer supporting only "x" still shares a protocol with everyone
    td = rt.join(version=3, protocols=(("x", b""),))
    assert td not in rt.responses


def test_inconsistent_protocol_and_protocol_type() -> None:
    rt = Runtime()
    a = rt.new_member()
    rt.join(a)
    t = rt.join(protocols=(("roundrobin", b""),))
    assert rt.responses[t]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    t = rt.join(protocol_type="connect")
    assert rt.responses[t]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    t = rt.join(group="other", protocols=())
    assert rt.responses[t]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_unknown_member_and_invalid_requests() -> None:
    rt = Runtime()
    t = rt.join("ghost")
    assert rt.responses[t]["error_code"] == E.UNKNOWN_MEMBER_ID
    t = rt.join(session=1)
    assert rt.responses[t]["error_code"] == E.INVALID_SESSION_TIMEOUT
    t = rt.join(session=CFG.max_session_timeout_ms + 1)
    assert rt.responses[t]["error_code"] == E.INVALID_SESSION_TIMEOUT
    t = rt.join(group="")
    assert rt.responses[t]["error_code"] == E.INVALID_GROUP_ID


def test_group_max_size() -> None:
    rt = Runtime(replace(CFG, max_size=1))
    a = rt.new_member()
    rt.join(a)
    t = rt.join()  # refused before a member id is even handed out
    assert rt.responses[t]["error_code"] == E.GROUP_MAX_SIZE_REACHED
    assert list(rt.group().members) == [a]


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    rt = Runtime(replace(CFG, initial_rebalance_delay_ms=3000))
    ta = rt.join(version=3)
    assert ta not in rt.responses
    rt.advance(1000)
    tb = rt.join(version=3)
    rt.advance(2000)  # first delay ends; a member arrived meanwhile: wait another delay
    assert ta not in rt.responses and tb not in rt.responses
    rt.advance(3000)
    assert rt.responses[ta]["generation_id"] == 1 == rt.responses[tb]["generation_id"]
    assert len(rt.responses[ta]["members"]) == 2


def test_rebalance_timeout_drops_members_that_did_not_rejoin() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    t = rt.join(a, protocols=(("range", sub("t2")),))
    for _ in range(6):  # b stays alive but never rejoins
        rt.advance(5_000)
        rt.heartbeat(b, 2)
    assert rt.responses[t]["generation_id"] == 3
    assert list(rt.group().members) == [a]


def test_session_timeout_removes_member_and_rebalances() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    for _ in range(3):
        rt.advance(5_000)
        rt.heartbeat(a, 2)
    assert b not in rt.group().members
    assert rt.group().state is GroupState.PREPARING_REBALANCE
    t = rt.join(a, protocols=(("range", sub("t1")),))
    assert rt.responses[t]["generation_id"] == 3


def test_leader_leaving_elects_next_member() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    t = rt.token()
    rt.apply(ev.LeaveGroup(t, rt.now, "g", (ev.LeavingMember(a),)))
    assert rt.responses[t]["members"][0]["error_code"] == E.NONE
    assert rt.group().leader_id == b
    tb = rt.join(b, protocols=(("range", sub("t1")),))
    assert rt.responses[tb]["leader"] == b and rt.responses[tb]["generation_id"] == 3


def test_leave_group_batched_and_legacy() -> None:
    rt = Runtime()
    t = rt.join(instance="i-a")  # static members need no KIP-394 round trip
    assert rt.responses[t]["error_code"] == E.NONE
    rt.join(instance="i-b")
    group = rt.group()
    a_id, b_id = group.static_members["i-a"], group.static_members["i-b"]
    t = rt.token()
    rt.apply(
        ev.LeaveGroup(
            t,
            rt.now,
            "g",
            (
                ev.LeavingMember(a_id, "i-a"),
                ev.LeavingMember("ghost"),
                ev.LeavingMember("", "i-b"),
                ev.LeavingMember("stale-id", "i-a"),
            ),
        )
    )
    errors = [m["error_code"] for m in rt.responses[t]["members"]]
    assert errors == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert b_id not in group.members and not group.members
    t = rt.token()
    rt.apply(ev.LeaveGroup(t, rt.now, "g", (ev.LeavingMember("ghost"),), batched=False))
    assert rt.responses[t] == {"error_code": E.UNKNOWN_MEMBER_ID, "members": []}
    t = rt.token()
    rt.apply(ev.LeaveGroup(t, rt.now, "nope", (ev.LeavingMember("x"),)))
    assert rt.responses[t]["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("batched", [True, False])
def test_leave_group_without_a_group_id_is_invalid_group_id(batched: bool) -> None:
    """A group-level error answers with no per-member results (found by tests/fuzz: a
    batched LeaveGroup with an empty group id raised instead of answering)."""
    rt = Runtime()
    t = rt.token()
    members = (ev.LeavingMember("m-1"), ev.LeavingMember("", "i-a"))
    rt.apply(ev.LeaveGroup(t, rt.now, "", members, batched=batched))
    assert rt.responses[t] == {"error_code": E.INVALID_GROUP_ID, "members": []}


def test_sync_errors() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    assert rt.responses[rt.sync(a, 1)]["error_code"] == E.ILLEGAL_GENERATION
    assert rt.responses[rt.sync("ghost", 2)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert rt.responses[rt.sync(a, 2, group="nope")]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert rt.responses[rt.sync(b, 2)]["assignment"] == b"B"  # Stable: current assignment
    rt.join(a, protocols=(("range", sub("t1")),))
    assert rt.responses[rt.sync(b, 2)]["error_code"] == E.REBALANCE_IN_PROGRESS


def test_parked_sync_gets_rebalance_in_progress_when_a_member_joins() -> None:
    rt = Runtime()
    a = rt.new_member()
    rt.join(a)
    b = rt.new_member()
    rt.join(b)
    rt.join(a)
    sb = rt.sync(b, 2)
    c = rt.new_member()
    rt.join(c)
    assert rt.responses[sb]["error_code"] == E.REBALANCE_IN_PROGRESS


# --- static membership -------------------------------------------------------------------


def test_static_member_rejoin_replaces_old_id_without_rebalance() -> None:
    rt = Runtime()
    protocols = (("range", sub("t1")),)
    ta = rt.join(instance="i-a", protocols=protocols)
    a = rt.responses[ta]["member_id"]
    tb = rt.join(instance="i-b", protocols=protocols)
    b = rt.group().static_members["i-b"]
    assert tb not in rt.responses
    rt.join(a, instance="i-a", protocols=protocols)
    rt.sync(b, 2, instance="i-b")
    rt.sync(a, 2, ((a, b"A"), (b, b"B")), instance="i-a")
    assert rt.group().state is GroupState.STABLE
    records_before = len(rt.log)

    t = rt.join(instance="i-a", protocols=protocols)  # restarted: no member id
    resp = rt.responses[t]
    new_a = resp["member_id"]
    assert resp["error_code"] == E.NONE and new_a != a and new_a.startswith("i-a-")
    assert resp["generation_id"] == 2 and resp["skip_assignment"] is True
    group = rt.group()
    assert group.state is GroupState.STABLE and group.leader_id == new_a
    assert len(rt.log) == records_before + 1  # the new member id is persisted
    assert rt.heartbeat(a, 2, instance="i-a") == E.FENCED_INSTANCE_ID
    assert rt.responses[rt.sync(new_a, 2, instance="i-a")]["assignment"] == b"A"
    # a pre-v9 rejoin of the non-leader gets the current leader, no assignment duty
    t = rt.join(instance="i-b", protocols=protocols, version=8)
    assert rt.responses[t]["leader"] == new_a and rt.responses[t]["members"] == []


def test_static_member_rejoin_with_new_protocol_rebalances() -> None:
    rt = Runtime()
    t = rt.join(instance="i-a")
    a = rt.responses[t]["member_id"]
    rt.sync(a, 1, ((a, b"A"),), instance="i-a")
    t = rt.join(instance="i-a", protocols=(("sticky", b""), ("range", b"")))
    assert rt.responses[t]["generation_id"] == 2  # rebalanced (a lone member: at once)
    assert rt.group().protocol_name == "sticky"


# --- offsets -----------------------------------------------------------------------------


def test_simple_consumer_commits_and_fetches() -> None:
    rt = Runtime()
    assert commit_errors(rt.commit(t1=5, t2=7)) == {"t1": E.NONE, "t2": E.NONE}
    decoded = rec.decode_record(*rt.log[0])
    assert isinstance(decoded, rec.OffsetCommit) and decoded.offset == 5
    t = rt.token()
    rt.apply(ev.OffsetFetch(t, rt.now, "g"))
    fetched = {x["name"]: x["partitions"][0]["committed_offset"] for x in rt.responses[t]["topics"]}
    assert fetched == {"t1": 5, "t2": 7}
    t = rt.token()
    rt.apply(ev.OffsetFetch(t, rt.now, "g", (("t1", (0, 1)),)))
    parts = rt.responses[t]["topics"][0]["partitions"]
    assert [(p["committed_offset"], p["metadata"]) for p in parts] == [(5, "m"), (-1, "")]
    t = rt.token()
    rt.apply(ev.OffsetFetch(t, rt.now, "unknown", (("t1", (0,)),)))
    assert rt.responses[t]["topics"][0]["partitions"][0]["committed_offset"] == -1


def test_commit_checks_generation_and_membership() -> None:
    rt = Runtime()
    assert commit_errors(rt.commit("m", 3, group="x", t=1)) == {"t": E.ILLEGAL_GENERATION}
    a, b = stable_pair(rt)
    assert commit_errors(rt.commit(t=1)) == {"t": E.UNKNOWN_MEMBER_ID}
    assert commit_errors(rt.commit(a, 1, t=1)) == {"t": E.ILLEGAL_GENERATION}
    assert commit_errors(rt.commit("ghost", 2, t=1)) == {"t": E.UNKNOWN_MEMBER_ID}
    assert commit_errors(rt.commit(a, 2, t=1)) == {"t": E.NONE}
    rt.join(a, protocols=(("range", sub("t1")),))
    assert commit_errors(rt.commit(b, 2, t=2)) == {"t": E.NONE}  # preparing: still allowed
    rt.join(b, protocols=(("range", sub("t1")),))
    assert rt.group().state is GroupState.COMPLETING_REBALANCE
    assert commit_errors(rt.commit(a, 3, t=3)) == {"t": E.REBALANCE_IN_PROGRESS}


def test_commit_runtime_hook_and_metadata_limit() -> None:
    rt = Runtime(replace(CFG, offset_metadata_max_bytes=3))
    t = rt.token()
    topics = (
        (
            "known",
            (ev.PartitionCommit(0, 1, metadata="abc"), ev.PartitionCommit(1, 1, metadata="abcd")),
        ),
        ("gone", (ev.PartitionCommit(0, 1),)),
    )
    rt.apply(
        ev.OffsetCommit(
            t, rt.now, "g", topics, partition_errors={("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        )
    )
    errors = [[p["error_code"] for p in x["partitions"]] for x in rt.responses[t]["topics"]]
    assert errors == [[E.NONE, E.OFFSET_METADATA_TOO_LARGE], [E.UNKNOWN_TOPIC_OR_PARTITION]]
    assert len(rt.log) == 1


def test_commit_with_a_retention_past_the_largest_timestamp_never_expires() -> None:
    """OffsetCommit v2-v4 with retention_time_ms = 2^63-1 (found by tests/fuzz: now +
    retention overflowed int64 and encoding the offset record raised)."""
    rt = Runtime()
    rt.now = 1_700_000_000_000
    t = rt.token()
    topics = (("t1", (ev.PartitionCommit(0, 5),)),)
    rt.apply(ev.OffsetCommit(t, rt.now, "g", topics, retention_time_ms=2**63 - 1))
    assert rt.responses[t]["topics"][0]["partitions"][0]["error_code"] == E.NONE
    (commit,) = rt.state.groups["g"].offsets.values()
    assert commit.expire_timestamp == 2**63 - 1
    (key, value), = rt.log
    assert rec.decode_record(key, value) == commit


def test_offsets_expire_per_kip211() -> None:
    day = 24 * 3600 * 1000
    rt = Runtime(replace(CFG, offsets_retention_ms=day))
    rt.commit(group="simple", t1=1)
    a, _b = stable_pair(rt)
    rt.commit(a, 2, t1=1, t2=2)  # subscribed to t1 only
    rt.now += day  # the clock moves; the members' session timers are not fired here
    rt.apply(ev.ExpireOffsets(rt.now))
    assert "simple" not in rt.state.groups  # offsets-only group with nothing left: gone
    assert set(rt.group().offsets) == {("t1", 0)}
    tombstones = [rec.decode_record(k, v) for k, v in rt.log if v is None]
    assert rec.OffsetDeleted("g", "t2", 0) in tombstones
    assert rec.OffsetDeleted("simple", "t1", 0) in tombstones
    assert rec.GroupDeleted("simple") not in tombstones  # generation 0: no metadata written


def test_empty_group_offsets_expire_from_when_it_became_empty() -> None:
    day = 24 * 3600 * 1000
    rt = Runtime(replace(CFG, offsets_retention_ms=day))
    a = rt.new_member()
    rt.join(a)
    rt.sync(a, 1, ((a, b""),))
    rt.commit(a, 1, t=1)
    rt.now += 2 * day  # timers not fired: a is still a live member
    rt.apply(ev.ExpireOffsets(rt.now))
    assert rt.group().offsets  # still Stable
    t = rt.token()
    rt.apply(ev.LeaveGroup(t, rt.now, "g", (ev.LeavingMember(a),)))
    assert rt.group().state is GroupState.EMPTY
    rt.now += day - 1
    rt.apply(ev.ExpireOffsets(rt.now))
    assert rt.group().offsets
    rt.now += 1
    rt.apply(ev.ExpireOffsets(rt.now))
    assert "g" not in rt.state.groups
    assert rec.decode_record(*rt.log[-1]) == rec.GroupDeleted("g")


def test_delete_groups() -> None:
    rt = Runtime()
    a, _b = stable_pair(rt)
    rt.commit(a, 2, t=1)
    t = rt.token()
    rt.apply(ev.DeleteGroup(t, rt.now, "g"))
    assert rt.responses[t]["error_code"] == E.NON_EMPTY_GROUP
    t = rt.token()
    rt.apply(ev.DeleteGroup(t, rt.now, "nope"))
    assert rt.responses[t]["error_code"] == E.GROUP_ID_NOT_FOUND
    rt.commit(group="simple", t=1)
    t = rt.token()
    rt.apply(ev.DeleteGroup(t, rt.now, "simple"))
    assert rt.responses[t]["error_code"] == E.NONE
    assert rec.decode_record(*rt.log[-1]) == rec.OffsetDeleted("simple", "t", 0)
    assert "simple" not in rt.state.groups


def test_offset_delete() -> None:
    rt = Runtime()
    a, _b = stable_pair(rt)
    rt.commit(a, 2, t1=1, t2=2)
    t = rt.token()
    rt.apply(ev.OffsetDelete(t, rt.now, "g", (("t1", (0,)), ("t2", (0,)))))
    errors = {x["name"]: x["partitions"][0]["error_code"] for x in rt.responses[t]["topics"]}
    assert errors == {"t1": E.GROUP_SUBSCRIBED_TO_TOPIC, "t2": E.NONE}
    assert set(rt.group().offsets) == {("t1", 0)}
    t = rt.token()
    rt.apply(ev.OffsetDelete(t, rt.now, "nope", (("t1", (0,)),)))
    assert rt.responses[t]["error_code"] == E.GROUP_ID_NOT_FOUND


def test_describe_and_list_groups() -> None:
    rt = Runtime()
    a, _b = stable_pair(rt)
    rt.commit(group="simple", t=1)
    t = rt.token()
    rt.apply(ev.DescribeGroup(t, rt.now, "g"))
    d = rt.responses[t]
    assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == (
        "Stable",
        "consumer",
        "range",
    )
    assert d["members"][0]["member_id"] == a and d["members"][0]["member_assignment"] == b"A"
    t = rt.token()
    rt.apply(ev.DescribeGroup(t, rt.now, "nope"))
    assert rt.responses[t]["group_state"] == "Dead"
    t = rt.token()
    rt.apply(ev.ListGroups(t, rt.now))
    assert {g["group_id"]: g["group_state"] for g in rt.responses[t]["groups"]} == {
        "g": "Stable",
        "simple": "Empty",
    }
    t = rt.token()
    rt.apply(ev.ListGroups(t, rt.now, states_filter=("Empty",)))
    assert [g["group_id"] for g in rt.responses[t]["groups"]] == ["simple"]
    t = rt.token()
    rt.apply(ev.ListGroups(t, rt.now, types_filter=("consumer",)))
    assert rt.responses[t]["groups"] == []


# --- loading -----------------------------------------------------------------------------


def test_replay_rebuilds_state() -> None:
    rt = Runtime()
    a, b = stable_pair(rt)
    rt.commit(a, 2, t1=4)
    rt.commit(group="simple", t=1)
    t = rt.token()
    rt.apply(ev.DeleteGroup(t, rt.now, "simple"))
    loaded = GroupsState()
    for key, value in rt.log:
        replay(loaded, key, value)
    assert set(loaded.groups) == {"g"}
    g = loaded.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 2 and g.leader_id == a
    assert {m: x.assignment for m, x in g.members.items()} == {a: b"A", b: b"B"}
    assert g.offsets[("t1", 0)].offset == 4
    result = load_complete(loaded, 100, CFG)
    assert g.subscribed_topics == {"t1"}
    assert {c.key for c in result.timers} == {("session", "g", a), ("session", "g", b)}


# --- cooperative rebalancing ---------------------------------------------------------------


def test_cooperative_sticky_two_more_rounds() -> None:
    """The broker only relays assignments: incremental rebalances are plain rounds."""
    rt = Runtime()
    protocols = (("cooperative-sticky", sub("t")),)
    a, b = stable_pair(rt, "cooperative-sticky")
    for round_, assignments in enumerate([((a, b"A2"), (b, b"B2")), ((a, b"A3"), (b, b"B3"))]):
        generation = 3 + round_
        ta = rt.join(a, protocols=protocols)  # the leader asks for a follow-up rebalance
        tb = rt.join(b, protocols=protocols)
        assert rt.responses[ta]["generation_id"] == generation == rt.responses[tb]["generation_id"]
        assert rt.responses[ta]["protocol_name"] == "cooperative-sticky"
        sb = rt.sync(b, generation)
        sa = rt.sync(a, generation, assignments)
        assert rt.responses[sa]["assignment"] == assignments[0][1]
        assert rt.responses[sb]["assignment"] == assignments[1][1]
        assert rt.group().state is GroupState.STABLE
        assert rt.heartbeat(b, generation) == E.NONE


# --- property: random sessions keep the invariants -----------------------------------------


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rt = Runtime(replace(CFG, initial_rebalance_delay_ms=500, max_size=4))
        self.last_generation = 0
        self.known: list[str] = []  # member ids handed out, current or not

    def _generation(self) -> int:
        g = self.rt.state.groups.get("g")
        return g.generation_id if g else 0

    @rule(
        who=st.integers(0, 5),
        instance=st.none() | st.sampled_from(["i1", "i2"]),
        proto=st.sampled_from(["range", "sticky"]),
    )
    def join(self, who: int, instance: str | None, proto: str) -> None:
        member_id = self.known[who] if who < len(self.known) else ""
        t = self.rt.join(member_id, instance=instance, protocols=((proto, b""),), rebalance=5_000)
        resp = self.rt.responses.get(t)
        if resp and resp["member_id"] and resp["member_id"] not in self.known:
            self.known.append(resp["member_id"])

    @precondition(lambda self: self.known)
    @rule(who=st.integers(0, 5), gen_delta=st.sampled_from([0, 0, 0, -1]))
    def sync(self, who: int, gen_delta: int) -> None:
        member_id = self.known[who % len(self.known)]
        group = self.rt.state.groups.get("g")
        members = list(group.members) if group else []
        assignments = tuple((m, m.encode()) for m in members)
        self.rt.sync(member_id, self._generation() + gen_delta, assignments)

    @precondition(lambda self: self.known)
    @rule(who=st.integers(0, 5))
    def heartbeat(self, who: int) -> None:
        self.rt.heartbeat(self.known[who % len(self.known)], self._generation())

    @precondition(lambda self: self.known)
    @rule(who=st.integers(0, 5))
    def leave(self, who: int) -> None:
        t = self.rt.token()
        member = ev.LeavingMember(self.known[who % len(self.known)])
        self.rt.apply(ev.LeaveGroup(t, self.rt.now, "g", (member,)))

    @rule(ms=st.sampled_from([100, 1_000, 6_000, 11_000]))
    def time_passes(self, ms: int) -> None:
        self.rt.advance(ms)

    @invariant()
    def invariants(self) -> None:
        group = self.rt.state.groups.get("g")
        if group is None:
            return
        assert group.generation_id >= self.last_generation
        self.last_generation = group.generation_id
        if group.members:
            assert group.leader_id in group.members
        else:
            assert group.state in (GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
        assert not set(group.pending_members) & set(group.members)
        assert len(set(group.static_members.values())) == len(group.static_members)
        for instance, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance
        if group.state is GroupState.STABLE:
            assert group.protocol_name is not None
            for member in group.members.values():
                assert member.assignment != b""
                assert not member.is_awaiting_join
        if group.state is not GroupState.PREPARING_REBALANCE:
            assert all(not m.is_awaiting_join for m in group.members.values())
        if group.state is not GroupState.COMPLETING_REBALANCE:
            assert all(not m.is_awaiting_sync for m in group.members.values())


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
