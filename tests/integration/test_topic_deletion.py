"""Deleting a topic removes every directory of it (issue 13), also when a crash came in the
middle of the deletion: a `-delete` directory left behind (whole or half removed) is
removed at start-up, and so is the log of a partition whose topic is gone from the
metadata store; the topic is not brought back."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from kafka_wire import WireClient, wait_for
from logbus.controller.metadata_store import EmbeddedStore
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch


def traces(data_dir: Path, topic: str) -> list[str]:
    """Every entry of the log dir that belongs to `topic` (live or being deleted)."""
    return sorted(
        entry.name
        for entry in data_dir.iterdir()
        if entry.name.split(".")[0].rpartition("-")[0] == topic
    )


def delete_topics(client: WireClient, names: list[str]) -> dict[str, int]:
    response = client.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": names, "timeout_ms": 10_000})
    return {r["name"]: r["error_code"] for r in response["responses"]}


def fill(client: WireClient, topic: str, partitions: int) -> None:
    error, message = client.create_topic(topic, partitions)
    assert error == ErrorCode.NONE, message
    for p in range(partitions):
        batch = build_batch([NewRecord(b"k", f"{topic}-{p}".encode())])
        assert client.produce(topic, p, batch)["error_code"] == ErrorCode.NONE


def topic_error(client: WireClient, topic: str) -> int:
    (entry,) = client.metadata([topic], auto_create=False)["topics"]
    return int(entry["error_code"])


def test_deleted_topics_leave_no_directory(broker_factory: Any) -> None:
    running = broker_factory(log_segment_delete_delay_ms="0")
    with WireClient(running.bootstrap) as client:
        for topic in ("gone-a", "gone-b", "stays"):
            fill(client, topic, 3)
        assert delete_topics(client, ["gone-a", "gone-b"]) == {
            "gone-a": ErrorCode.NONE,
            "gone-b": ErrorCode.NONE,
        }
        wait_for(
            lambda: not traces(running.data_dir, "gone-a") + traces(running.data_dir, "gone-b")
        )
        assert traces(running.data_dir, "stays") == ["stays-0", "stays-1", "stays-2"]
        assert topic_error(client, "gone-a") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    running.restart()
    assert not traces(running.data_dir, "gone-a") + traces(running.data_dir, "gone-b")
    with WireClient(running.bootstrap) as client:
        assert topic_error(client, "gone-b") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert client.read_all("stays", 1)[0].value == b"stays-1"


def _edit_store(data_dir: Path, change: Any) -> None:
    """Change the stopped broker's metadata store file as a crash could have left it."""
    path = data_dir / EmbeddedStore.FILE_NAME
    nodes: dict[str, list[Any]] = json.loads(path.read_text())
    change(nodes)
    path.write_text(json.dumps(nodes))


def test_a_crash_in_the_middle_of_a_deletion_leaves_nothing_behind(broker_process: Any) -> None:
    proc = broker_process()
    data_dir: Path = proc.data_dir
    with WireClient(proc.bootstrap) as client:
        fill(client, "doomed", 3)
        fill(client, "marked", 2)
        fill(client, "kept", 1)
    proc.kill()

    # "doomed": gone from the metadata store, its directories in every state a deletion
    # passes through: untouched, renamed for deletion, renamed and half removed.
    def forget_doomed(nodes: dict[str, list[Any]]) -> None:
        for path in list(nodes):
            if path.startswith(("/brokers/topics/doomed", "/config/topics/doomed")):
                del nodes[path]

    _edit_store(data_dir, forget_doomed)
    (data_dir / "doomed-1").rename(data_dir / f"doomed-1.{uuid.uuid4().hex}-delete")
    half = data_dir / f"doomed-2.{uuid.uuid4().hex}-delete"
    (data_dir / "doomed-2").rename(half)
    for file in sorted(half.iterdir())[:2]:
        file.unlink()

    # "marked": still in the store, marked for deletion (the crash came right after).
    def mark(nodes: dict[str, list[Any]]) -> None:
        for path in ("/admin", "/admin/delete_topics", "/admin/delete_topics/marked"):
            nodes.setdefault(path, [base64.b64encode(b"").decode(), 0])

    _edit_store(data_dir, mark)

    # Directories renamed for deletion now are removed at once (not after 60 s).
    no_delay = ("--override", "log.segment.delete.delay.ms=0")
    proc = broker_process(*no_delay, data_dir=data_dir, port=proc.port)
    wait_for(lambda: not traces(data_dir, "doomed") + traces(data_dir, "marked"), 30)
    with WireClient(proc.bootstrap) as client:
        for topic in ("doomed", "marked"):
            assert topic_error(client, topic) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert client.read_all("kept", 0)[0].value == b"kept-0"
    assert proc.terminate() == 0
    proc = broker_process(data_dir=data_dir, port=proc.port)
    with WireClient(proc.bootstrap) as client:
        names = {t["name"] for t in client.metadata(None)["topics"]}
        assert names == {"kept"}
    assert not traces(data_dir, "doomed") + traces(data_dir, "marked")


def test_another_brokers_log_dir_inside_the_log_dir_is_left_alone(broker_factory: Any) -> None:
    """`logbus cluster up` keeps its brokers' data in ./data/broker-N, beside a stand-alone
    broker's ./data: a directory named like a partition but holding directories is not a
    log, so it is neither loaded nor deleted as a stray one."""
    broker = broker_factory()
    other = broker.data_dir / "broker-1"
    (other / "orders-0").mkdir(parents=True)
    (other / "meta.properties").write_text("broker.id=1\n")
    (other / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        names = {t["name"] for t in client.metadata(None)["topics"]}
        fill(client, "kept", 1)
    assert "broker" not in names
    assert (other / "meta.properties").read_text() == "broker.id=1\n"
    assert (other / "orders-0" / "00000000000000000000.log").exists()
