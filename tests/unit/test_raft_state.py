"""The Raft quorum's pure parts and files: election-state transitions, the quorum-state
file, `.checkpoint` snapshots and the metadata log's epoch bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logbus.raft.metadata_log import ReplicatedLog
from logbus.raft.quorum_state import (
    ElectionState,
    IllegalTransitionError,
    QuorumStateFile,
    Role,
)
from logbus.raft.snapshots import (
    SnapshotId,
    check_snapshot,
    encode_snapshot,
    read_snapshot_records,
    write_snapshot,
)
from logbus.storage.errors import CorruptSnapshotError


def test_transitions_follow_the_table() -> None:
    start = ElectionState()
    candidate = start.to(Role.CANDIDATE, 1, voted_id=1)
    leader = candidate.to(Role.LEADER, 1, leader_id=1, voted_id=1)
    assert (leader.role, leader.epoch, leader.leader_id) == (Role.LEADER, 1, 1)
    with pytest.raises(IllegalTransitionError):
        start.to(Role.LEADER, 0, leader_id=1)  # only a candidate becomes leader
    with pytest.raises(IllegalTransitionError):
        candidate.to(Role.CANDIDATE, 1)  # a new candidacy needs a new epoch
    with pytest.raises(IllegalTransitionError):
        leader.to(Role.FOLLOWER, 0, leader_id=2)  # epochs never go back
    voted = start.to(Role.UNATTACHED, 3).to(Role.VOTED, 3, voted_id=2)
    with pytest.raises(IllegalTransitionError):
        voted.to(Role.VOTED, 3, voted_id=3)  # one vote per epoch
    follower = voted.to(Role.FOLLOWER, 3, leader_id=2)
    assert follower.voted_id == 2  # the vote given in this epoch stays
    assert voted.to(Role.FOLLOWER, 4, leader_id=3).voted_id == -1


def test_the_quorum_state_file_is_kafkas_json_and_survives_a_restart(tmp_path: Path) -> None:
    file = QuorumStateFile(tmp_path, "cluster", [3, 1, 2])
    assert file.read() == ElectionState()
    file.write(ElectionState(5, Role.VOTED, -1, 2))
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data == {
        "clusterId": "cluster",
        "leaderId": -1,
        "leaderEpoch": 5,
        "votedId": 2,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
        "data_version": 0,
    }
    assert file.read() == ElectionState(5, Role.VOTED, -1, 2)
    file.write(ElectionState(6, Role.FOLLOWER, 3, -1))
    assert file.read() == ElectionState(6, Role.FOLLOWER, 3, -1)


def test_a_snapshot_has_a_header_and_a_footer(tmp_path: Path) -> None:
    values = [f"v{i}".encode() for i in range(2500)]
    snapshot = SnapshotId(100, 4)
    path = write_snapshot(tmp_path, snapshot, values, timestamp_ms=1)
    assert path.name == "00000000000000000100-0000000004.checkpoint"
    assert read_snapshot_records(tmp_path, snapshot) == values
    data = encode_snapshot(snapshot, [], timestamp_ms=1)
    assert check_snapshot(data) == []
    with pytest.raises(CorruptSnapshotError):
        check_snapshot(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    header_only = encode_snapshot(snapshot, [b"x"], timestamp_ms=1)
    with pytest.raises(CorruptSnapshotError, match="footer"):
        # the footer batch is the last one; drop it
        check_snapshot(header_only[: header_only.rfind(b"\x00\x00\x00\x00\x00\x00\x00\x02")])


def test_epoch_end_offsets_and_snapshots_of_the_metadata_log(tmp_path: Path) -> None:
    log = ReplicatedLog(tmp_path)
    log.append_leader_change(1, 1, [1, 2, 3], [1, 2])
    log.append_as_leader([b"a", b"b"], 1)
    log.append_leader_change(3, 2, [1, 2, 3], [2, 3])
    log.append_as_leader([b"c"], 3)
    assert log.end_offset == 5 and log.last_fetched_epoch == 3
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)  # no epoch 2: epoch 1 ends where 3 starts
    assert log.end_offset_for_epoch(3) == (3, 5)
    log.set_high_watermark(4)
    log.set_high_watermark(2)
    assert log.high_watermark == 4  # never back
    snapshot = log.create_snapshot(4, [b"state"])
    assert snapshot == SnapshotId(4, 3)
    assert log.start_offset == 4
    assert log.end_offset_for_epoch(1) == (3, 4)  # below the log: the snapshot's epoch
    with pytest.raises(ValueError, match="above the high watermark"):
        log.create_snapshot(5, [])
    log.close()
    reopened = ReplicatedLog(tmp_path)
    assert reopened.snapshot_id == snapshot and reopened.start_offset == 4
    assert reopened.snapshot_values() == [b"state"]
    reopened.close()
