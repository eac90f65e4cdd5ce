"""The Raft quorum (KIP-595) with three in-process voters over loopback sockets:
elections, a killed leader, a follower catching up, the uncommitted suffix of a leader cut
off in a minority truncated once the link heals, and snapshots loaded and fetched."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path

import pytest
from raft_quorum import CLUSTER_ID, RaftQuorum

from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.raft import raft_messages as msg
from logbus.raft.quorum_config import VoterAddress
from logbus.raft.quorum_state import Role
from logbus.raft.raft_client import RaftClient


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def test_three_voters_elect_one_leader_and_replicate(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            assert leader.epoch >= 1
            written = values("a", 20)
            for value in written:
                await quorum.commit(leader, [value])
            await quorum.wait_caught_up(written)
            for node, client in quorum.nodes.items():
                state = json.loads((tmp_path / f"node-{node}" / "quorum-state").read_text())
                assert state["leaderEpoch"] == leader.epoch
                assert state["leaderId"] == leader.node_id
                assert [v["voterId"] for v in state["currentVoters"]] == [1, 2, 3]
                assert (client.metadata_log.dir / "00000000000000000000.log").exists()

    asyncio.run(scenario())


def test_a_killed_leader_is_replaced_and_nothing_committed_is_lost(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            written = values("before", 30)
            await quorum.commit(leader, written)
            old_id, old_epoch = leader.node_id, leader.epoch
            await quorum.kill(old_id)
            leader = await quorum.wait_for_leader(above_epoch=old_epoch)
            assert leader.node_id != old_id
            more = values("after", 10)
            await quorum.commit(leader, more)
            await quorum.wait_caught_up(written + more)
            await quorum.start(old_id)  # comes back a follower and catches up
            await quorum.wait_for_leader()
            await quorum.wait_caught_up(written + more)

    asyncio.run(scenario())


def test_a_stopped_follower_catches_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            follower = next(n for n in quorum.ids if n != leader.node_id)
            await quorum.kill(follower)
            written = values("x", 200)
            for start in range(0, 200, 20):
                await quorum.commit(leader, written[start : start + 20])
            await quorum.start(follower)
            await quorum.wait_caught_up(written)

    asyncio.run(scenario())


def test_a_leader_cut_off_resigns_and_loses_only_its_uncommitted_suffix(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            committed = values("c", 10)
            await quorum.commit(leader, committed)
            await quorum.wait_caught_up(committed)
            old, old_epoch = leader, leader.epoch
            quorum.isolate(old.node_id)
            doomed = values("lost", 5)
            doomed_offset = old.append(doomed)  # can never reach a majority
            others = [n for n in quorum.ids if n != old.node_id]
            leader = await quorum.wait_for_leader(others, above_epoch=old_epoch)
            more = values("m", 10)
            await quorum.commit(leader, more)
            # The old leader hears from no majority: it resigns and never commits.
            await quorum.wait_for(lambda: not old.is_leader, "the cut-off leader resigns")
            assert old.high_watermark <= doomed_offset
            assert old.metadata_log.end_offset > doomed_offset  # the suffix is still there
            quorum.heal()
            await quorum.wait_for_leader()
            await quorum.wait_caught_up(committed + more)
            assert all(v not in old.committed_values() for v in doomed)

    asyncio.run(scenario())


def test_a_minority_cannot_elect_or_commit(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            follower = next(n for n in quorum.ids if n != leader.node_id)
            await quorum.commit(leader, values("a", 3))
            quorum.isolate(follower)
            lonely = quorum.nodes[follower]
            # Cut off, it stands for election again and again but never wins.
            await quorum.wait_for(
                lambda: lonely.state.role is Role.CANDIDATE, "the cut-off voter stands"
            )
            epoch = lonely.epoch
            await quorum.wait_for(lambda: lonely.epoch > epoch + 1, "another failed election")
            assert not lonely.is_leader
            # The majority goes on committing.
            majority_leader = quorum.leaders([n for n in quorum.ids if n != follower])
            assert majority_leader and majority_leader[0].is_leader
            await quorum.commit(majority_leader[0], values("b", 3))
            quorum.heal()
            await quorum.wait_for_leader()
            await quorum.wait_caught_up(values("a", 3) + values("b", 3))

    asyncio.run(scenario())


def test_snapshots_are_loaded_on_restart_and_fetched_by_a_wiped_follower(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            follower = next(n for n in quorum.ids if n != leader.node_id)
            await quorum.kill(follower)
            written = values("s", 50)
            await quorum.commit(leader, written)
            snapshot = leader.create_snapshot(leader.high_watermark, written)
            assert snapshot.end_offset == leader.high_watermark
            files = list(leader.metadata_log.dir.glob("*.checkpoint"))
            assert [f.name for f in files] == [
                f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}.checkpoint"
            ]
            assert leader.metadata_log.start_offset == snapshot.end_offset
            more = values("t", 5)
            await quorum.commit(leader, more)
            # The follower's log stopped below the leader's log start: it needs the snapshot.
            for path in (tmp_path / f"node-{follower}").rglob("*"):
                if path.is_file():
                    path.unlink()
            await quorum.start(follower)
            await quorum.wait_caught_up(written + more)
            fetched = quorum.nodes[follower].metadata_log.snapshot_id
            assert fetched == snapshot
            # A restarted voter loads its own snapshot.
            await quorum.kill(follower)
            restarted = await quorum.start(follower)
            assert restarted.metadata_log.snapshot_id == snapshot
            await quorum.wait_caught_up(written + more)

    asyncio.run(scenario())


def test_requests_from_outside_the_quorum_or_with_stale_epochs_change_nothing(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            await quorum.commit(leader, values("v", 3))
            epoch, state = leader.epoch, leader.state
            conn = await Connection.connect("127.0.0.1", quorum.ports[leader.node_id])
            try:
                stale = msg.vote_request(CLUSTER_ID, epoch - 1, 2, epoch, 100)
                answer = await conn.request(ApiKey.VOTE, stale)
                part = msg.only_partition(answer)
                assert part is not None
                assert part["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
                assert not part["vote_granted"]
                assert (part["leader_id"], part["leader_epoch"]) == (leader.node_id, epoch)
                stranger = msg.vote_request(CLUSTER_ID, epoch + 5, 9, epoch, 100)
                part = msg.only_partition(await conn.request(ApiKey.VOTE, stranger))
                assert part is not None
                assert part["error_code"] == ErrorCode.INCONSISTENT_VOTER_SET
                other_cluster = msg.vote_request("other", epoch + 5, 2, epoch, 100)
                answer = await conn.request(ApiKey.VOTE, other_cluster)
                assert answer["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
                old_begin = msg.begin_quorum_epoch_request(CLUSTER_ID, 2, epoch - 1)
                part = msg.only_partition(await conn.request(ApiKey.BEGIN_QUORUM_EPOCH, old_begin))
                assert part is not None
                assert part["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
                fetch = msg.fetch_request(CLUSTER_ID, 2, epoch - 1, 0, 0, 0)
                answer = await conn.request(ApiKey.FETCH, fetch)
                part = msg.only_partition(answer, "responses")
                assert part is not None
                assert part["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
                assert leader.state == state  # nothing moved
                described = await conn.request(
                    ApiKey.DESCRIBE_QUORUM, msg.describe_quorum_request()
                )
                part = msg.only_partition(described)
                assert part is not None and part["error_code"] == ErrorCode.NONE
                assert (part["leader_id"], part["leader_epoch"]) == (leader.node_id, epoch)
                assert part["high_watermark"] == leader.high_watermark
                assert [v["replica_id"] for v in part["current_voters"]] == [1, 2, 3]
            finally:
                await conn.close()

    asyncio.run(scenario())


def test_a_request_the_controller_listener_does_not_serve_closes_only_that_connection(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", quorum.ports[leader.node_id]
            )
            header = codec.RequestHeader(ApiKey.METADATA, 12, 7, "stranger")
            writer.write(codec.encode_request(header, {"topics": None}))
            await writer.drain()
            assert await reader.read() == b""  # closed, no answer
            writer.close()
            conn = await Connection.connect("127.0.0.1", quorum.ports[leader.node_id])
            try:
                answer = await conn.request(ApiKey.DESCRIBE_QUORUM, msg.describe_quorum_request())
                part = msg.only_partition(answer)
                assert part is not None and part["leader_id"] == leader.node_id
            finally:
                await conn.close()

    asyncio.run(scenario())


def test_a_voter_with_another_voter_list_changes_nothing_and_is_told_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with RaftQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader()
            await quorum.commit(leader, values("v", 2))
            epochs = {n: c.epoch for n, c in quorum.nodes.items()}
            # Node 4 believes the voters are 1, 2 and itself.
            config = quorum.config(1)
            voters = {
                1: VoterAddress(1, "127.0.0.1", quorum.ports[1]),
                2: VoterAddress(2, "127.0.0.1", quorum.ports[2]),
                4: VoterAddress(4, "127.0.0.1", 9),
            }
            stranger = RaftClient(
                dataclasses.replace(
                    config, node_id=4, voters=voters, metadata_log_dir=tmp_path / "node-4"
                )
            )
            with caplog.at_level(logging.ERROR, logger="logbus.raft.raft_client"):
                await stranger.start()
                try:
                    await quorum.wait_for(
                        lambda: "answered INCONSISTENT_VOTER_SET" in caplog.text,
                        "the stranger is told its voter set differs",
                    )
                    assert stranger.epoch >= 1 and not stranger.is_leader
                finally:
                    await stranger.close()
            assert "check controller.quorum.voters on every controller" in caplog.text
            assert {n: c.epoch for n, c in quorum.nodes.items()} == epochs
            assert leader.is_leader

    asyncio.run(scenario())
