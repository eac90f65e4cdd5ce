"""Three controller-only `logbus` processes (process.roles=controller) form a KRaft
quorum: kill -9 of the leader elects a new one and every record committed before is on
the survivors; a leader cut off from the others steps down and commits nothing more, and
catches up once the links heal; `logbus metadata-quorum` describes it all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kraft_quorum_processes import ControllerQuorum


def metadata_quorum(quorum: ControllerQuorum, *args: str, bootstrap: str = "") -> str:
    result = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "metadata-quorum",
         "--bootstrap-controller", bootstrap or quorum.bootstrap, "describe", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kill_9_of_the_leader_loses_no_committed_record(tmp_path: Path) -> None:
    snapshots_every = {"metadata.log.max.record.bytes.between.snapshots": "3000"}
    with ControllerQuorum(tmp_path, **snapshots_every) as quorum:
        before = quorum.wait_for_leader(high_watermark_above=20)
        old_leader, old_epoch = before["leader_id"], before["leader_epoch"]
        committed = before["high_watermark"]
        status = metadata_quorum(quorum, "--status")
        assert status.startswith("ClusterId:              q1Yl9sGSSLCuOUJ6dqbGdA\n")
        assert f"LeaderId:               {old_leader}\n" in status
        assert "CurrentVoters:          [1,2,3]\n" in status
        replication = metadata_quorum(quorum, "--replication").splitlines()
        assert replication[0].split() == [
            "NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp",
            "LastCaughtUpTimestamp", "Status",
        ]  # fmt: skip
        assert replication[1].split()[0] == str(old_leader)
        assert replication[1].split()[-1] == "Leader"
        assert sorted(line.split()[-1] for line in replication[2:]) == ["Follower"] * 2
        # One follower is enough to find the leader (DescribeCluster names it).
        follower = next(n for n in quorum.ids if n != old_leader)
        status = metadata_quorum(quorum, "--status", bootstrap=quorum.nodes[follower].address)
        assert f"LeaderId:               {old_leader}\n" in status
        quorum.kill(old_leader)
        survivors = [n for n in quorum.ids if n != old_leader]
        after = quorum.wait_for_leader(
            *survivors, above_epoch=old_epoch, high_watermark_above=committed
        )
        assert after["leader_id"] in survivors
        # Every voter writes a snapshot once its log grew by 3000 bytes.
        for node in survivors:
            directory = quorum.nodes[node].data_dir / "__cluster_metadata-0"
            quorum.wait_for(
                lambda d=directory: list(d.glob("*.checkpoint")), f"a snapshot on {node}"
            )
        for node in survivors:
            quorum.stop(node)
        reference = quorum.batches(old_leader, committed)
        assert sum(1 for _ in reference) > 0
        for node in survivors:
            assert quorum.batches(node, committed) == reference


def test_a_leader_cut_off_from_the_quorum_steps_down_and_catches_up(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path) as quorum:
        before = quorum.wait_for_leader(high_watermark_above=5)
        old_leader, old_epoch = before["leader_id"], before["leader_epoch"]
        quorum.isolate(old_leader)
        others = [n for n in quorum.ids if n != old_leader]
        after = quorum.wait_for_leader(*others, above_epoch=old_epoch)
        assert after["leader_id"] in others
        # In the minority it hears from no majority: it resigns, so it no longer
        # answers DescribeQuorum as the leader.
        quorum.wait_for(
            lambda: quorum.describe(old_leader) is None, "the cut-off leader steps down"
        )
        progressed = quorum.wait_for_leader(
            *others, above_epoch=old_epoch, high_watermark_above=after["high_watermark"] + 10
        )
        quorum.heal()
        healed = quorum.wait_for(
            lambda: (
                (part := quorum.describe())
                and all(
                    v["log_end_offset"] >= progressed["high_watermark"]
                    for v in part["current_voters"]
                )
                and part
            ),
            "every voter caught up after the heal",
        )
        committed = healed["high_watermark"]
        for node in quorum.ids:
            quorum.stop(node)
        reference = quorum.batches(others[0], committed)
        for node in quorum.ids:
            assert quorum.batches(node, committed) == reference
