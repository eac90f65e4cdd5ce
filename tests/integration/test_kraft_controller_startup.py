"""`logbus server start` in KRaft mode refuses what it cannot run, naming why: storage not
formatted by `logbus storage format`, formatted for another node, and the broker role
(not available yet)."""

from __future__ import annotations

from pathlib import Path

from broker_cli import start_broker

from logbus.storage.formatter import format_directories, random_uuid

CONTROLLER = (
    "process.roles=controller",
    "node.id=1",
    "controller.quorum.voters=1@127.0.0.1:9",
    "controller.listener.names=CONTROLLER",
    "listeners=CONTROLLER://127.0.0.1:0",
)


def test_unformatted_storage_stops_start_up(tmp_path: Path) -> None:
    result = start_broker(tmp_path, *CONTROLLER)
    assert result.returncode == 1
    assert "logbus storage format" in result.stderr


def test_storage_of_another_node_stops_start_up(tmp_path: Path) -> None:
    format_directories([str(tmp_path)], str(tmp_path), cluster_id=random_uuid(), node_id=2)
    result = start_broker(tmp_path, *CONTROLLER)
    assert result.returncode == 1
    assert "Stored node id 2" in result.stderr and "node.id 1" in result.stderr


def test_the_broker_role_is_refused_for_now(tmp_path: Path) -> None:
    result = start_broker(
        tmp_path,
        "process.roles=broker,controller",
        *CONTROLLER[1:4],
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    )
    assert result.returncode == 1
    assert "broker role is not available yet" in result.stderr
