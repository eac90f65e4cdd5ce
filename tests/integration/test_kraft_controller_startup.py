"""`logbus server start` in KRaft mode refuses what it cannot run, naming why: storage not
formatted by `logbus storage format`, formatted for another node or for two clusters, and
a broker without `controller.quorum.voters`; and a broker still waiting to be unfenced
stops on SIGTERM."""

from __future__ import annotations

from pathlib import Path

from broker_cli import start_broker

from brokers import BrokerProcess
from logbus.storage.formatter import format_directories, random_uuid
from ports import free_port

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


BROKER = (
    "process.roles=broker",
    "node.id=5",
    "controller.quorum.voters=1@127.0.0.1:9",
    "controller.listener.names=CONTROLLER",
)


def test_a_broker_without_quorum_voters_stops_start_up(tmp_path: Path) -> None:
    result = start_broker(tmp_path, *BROKER[:2], BROKER[3])
    assert result.returncode == 1
    assert "controller.quorum.voters" in result.stderr


def test_a_broker_on_unformatted_storage_stops_start_up(tmp_path: Path) -> None:
    for roles in ("process.roles=broker", "process.roles=broker,controller"):
        node = "node.id=1" if "controller" in roles else "node.id=5"
        listeners = "listeners=PLAINTEXT://127.0.0.1:0"
        if "controller" in roles:
            listeners += ",CONTROLLER://127.0.0.1:0"
        result = start_broker(tmp_path, roles, node, *BROKER[2:], listeners)
        assert result.returncode == 1, result.stderr
        assert "logbus storage format" in result.stderr


def test_a_broker_on_storage_of_two_clusters_stops_start_up(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    format_directories([str(first)], str(first), cluster_id=random_uuid(), node_id=5)
    format_directories([str(second)], str(second), cluster_id=random_uuid(), node_id=5)
    result = start_broker(tmp_path, *BROKER, f"log.dirs={first},{second}")
    assert result.returncode == 1
    assert "Invalid cluster.id" in result.stderr


def test_a_broker_waiting_to_be_unfenced_stops_on_sigterm(tmp_path: Path) -> None:
    """No controller answers: the broker listens, waits to be unfenced, and SIGTERM ends
    the wait (the start is undone) rather than being held until it has started."""
    data = tmp_path / "data"
    format_directories([str(data)], str(data), cluster_id=random_uuid(), node_id=5)
    extra = [arg for setting in BROKER for arg in ("--override", setting)]
    broker = BrokerProcess(data, free_port(), extra).start()
    try:
        assert broker.terminate() == 0
    finally:
        broker.kill()
    log = (tmp_path / f"broker-{broker.port}.log").read_text()
    assert "waiting to be unfenced" in log and "stopped while starting" in log
