"""Three controller-only `logbus` processes (process.roles=controller) form a KRaft
quorum: kill -9 of the leader elects a new one and every record committed before is on
the survivors; a leader cut off from the others steps down and commits nothing more, and
catches up once the links heal; `logbus metadata-quorum` describes it all. The controller
on the quorum: a topic created through the active controller is known to the next one
after a kill -9, and is in the survivors' snapshots."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from kraft_quorum_processes import ControllerQuorum

from logbus.client.connection import Connection
from logbus.metadata.records import decode_record
from logbus.protocol import ApiKey, ErrorCode
from logbus.raft.snapshots import latest_snapshot, read_snapshot_records


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


def controller_request(
    quorum: ControllerQuorum, node: int, api_key: ApiKey, body: dict[str, Any]
) -> dict[str, Any]:
    host, port = quorum.nodes[node].address.rsplit(":", 1)

    async def send() -> dict[str, Any]:
        conn = await Connection.connect(host, int(port), client_id="test-broker")
        try:
            return await conn.request(api_key, body)
        finally:
            await conn.close()

    return asyncio.run(send())


def create_topic(quorum: ControllerQuorum, node: int, name: str) -> dict[str, Any]:
    body = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1}],
            "timeout_ms": 10_000}  # fmt: skip
    answer: dict[str, Any] = controller_request(quorum, node, ApiKey.CREATE_TOPICS, body)
    return answer["topics"][0]


def topics_in_snapshot(directory: Path) -> set[str]:
    snapshot = latest_snapshot(directory)
    if snapshot is None:
        return set()
    records = [decode_record(v) for v in read_snapshot_records(directory, snapshot)]
    return {r.data["name"] for r in records if r.name == "TopicRecord"}


def test_a_topic_created_through_the_controller_outlives_its_kill_9(tmp_path: Path) -> None:
    snapshots_every = {"metadata.log.max.record.bytes.between.snapshots": "1000"}
    with ControllerQuorum(tmp_path, **snapshots_every) as quorum:
        leader = quorum.wait_for_leader(high_watermark_above=2)["leader_id"]
        registration = {
            "broker_id": 1, "cluster_id": "q1Yl9sGSSLCuOUJ6dqbGdA", "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092,
                           "security_protocol": 0}],
            "features": [], "rack": None,
        }  # fmt: skip
        registered = quorum.wait_for(
            lambda: (
                answer
                if (answer := controller_request(
                    quorum, leader, ApiKey.BROKER_REGISTRATION, registration
                ))["error_code"] == 0
                else None
            ),
            "the active controller registers a broker",
        )  # fmt: skip
        epoch = registered["broker_epoch"]
        beat = {"broker_id": 1, "broker_epoch": epoch, "current_metadata_offset": epoch,
                "want_fence": False, "want_shut_down": False}  # fmt: skip
        answer = controller_request(quorum, leader, ApiKey.BROKER_HEARTBEAT, beat)
        assert answer["error_code"] == 0 and not answer["is_fenced"]
        created = create_topic(quorum, leader, "orders")
        assert created["error_code"] == 0, created
        follower = next(n for n in quorum.ids if n != leader)
        assert create_topic(quorum, follower, "other")["error_code"] == ErrorCode.NOT_CONTROLLER

        survivors = [n for n in quorum.ids if n != leader]
        for node in survivors:
            directory = quorum.nodes[node].data_dir / "__cluster_metadata-0"
            quorum.wait_for(
                lambda d=directory: "orders" in topics_in_snapshot(d),
                f"a snapshot holding the topic on {node}",
            )
        old_epoch = quorum.describe()["leader_epoch"]  # type: ignore[index]
        quorum.kill(leader)
        new_leader = quorum.wait_for_leader(*survivors, above_epoch=old_epoch)["leader_id"]
        again = quorum.wait_for(
            lambda: (
                topic
                if (topic := create_topic(quorum, new_leader, "orders"))["error_code"]
                != ErrorCode.NOT_CONTROLLER
                else None
            ),
            "the new active controller answers",
        )  # fmt: skip
        assert again["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
