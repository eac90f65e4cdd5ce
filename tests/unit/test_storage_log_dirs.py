"""Several log dirs in `LogManager`, without a broker: a future log filled batch by batch
and swapped in (AlterReplicaLogDirs), the names of renamed partition directories, an
unfinished move found at start-up, and a dir that fails (its checkpoint cannot be
written) going offline alone. Also the controller's pure steps for a failed dir."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from storage_helpers import make_batch

from logbus.controller.cluster_metadata import PartitionState
from logbus.controller.log_dir_events import (
    notify_log_dir_failure,
    offline_replica_state,
    take_log_dir_events,
)
from logbus.controller.metadata_store import EmbeddedStore
from logbus.server.replica.alter_log_dirs import whole_batches
from logbus.storage.log_cleaner import CleanerConfig
from logbus.storage.log_loader import parse_topic_partition
from logbus.storage.log_manager import LogManager
from logbus.types import TopicPartition


def manager(dirs: list[Path]) -> LogManager:
    m = LogManager(dirs, broker_id=1, cluster_id="cluster-A")
    m.startup(now_ms=0)
    return m


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-3", ("orders", 3)),
        ("my-topic-12", ("my-topic", 12)),
        ("orders-3.0123456789abcdef0123456789abcdef-future", ("orders", 3)),
        ("a-b-0.0123456789abcdef0123456789abcdef-delete", ("a-b", 0)),
    ],
)
def test_partition_directory_names(name: str, expected: tuple[str, int]) -> None:
    assert parse_topic_partition(Path(name)) == expected


def test_a_future_log_is_filled_then_swapped_in(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    current = m.get_or_create_log("t", 0)
    source = m.log_dir_of("t", 0)
    assert source is not None
    target = b.resolve() if source == a.resolve() else a.resolve()
    for _ in range(3):
        current.append_as_leader(make_batch(2), 0)
    future = m.create_future_log("t", 0, target)
    assert future.dir.name.endswith("-future") and future.dir.parent == target
    assert m.future_logs_by_dir() == {target: [(TopicPartition("t", 0), future)]}
    raw = current.read(0, 1 << 20).records
    assert raw is not None
    future.append_as_follower(whole_batches(raw.read()))
    assert future.log_end_offset == current.log_end_offset == 6
    current.high_watermark = 6
    moved = m.replace_current_with_future("t", 0)
    assert moved is future and m.get_log("t", 0) is future
    assert m.log_dir_of("t", 0) == target
    assert (target / "t-0").is_dir()
    assert not (source / "t-0").exists()
    assert moved.high_watermark == 6
    assert m.future_logs_by_dir() == {}
    m.shutdown()


def test_whole_batches_cuts_a_partial_batch(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(2), 0)
    log.append_as_leader(make_batch(2), 0)
    raw = log.read(0, 1 << 20).records
    assert raw is not None
    data = raw.read()
    assert whole_batches(data) == data
    first = len(whole_batches(data[: len(data) - 1]))
    assert 0 < first < len(data)
    assert whole_batches(data[: first - 1]) == b""
    m.shutdown()


def test_an_unfinished_move_is_dropped_at_start_up(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    m.get_or_create_log("t", 0).append_as_leader(make_batch(2), 0)
    source = m.log_dir_of("t", 0)
    target = b.resolve() if source == a.resolve() else a.resolve()
    future = m.create_future_log("t", 0, target)
    future_dir = future.dir
    m.shutdown()
    assert future_dir.is_dir()
    m = manager([a, b])
    assert m.log_dir_of("t", 0) == source
    m.remove_deleted(now_ms=10**13)
    assert not future_dir.exists()
    m.shutdown()


def test_create_future_log_needs_a_log_dir(tmp_path: Path) -> None:
    m = manager([tmp_path / "a"])
    m.get_or_create_log("t", 0)
    assert not m.has_log_dir(tmp_path / "elsewhere")
    with pytest.raises(KeyError):
        m.create_future_log("t", 0, tmp_path / "elsewhere")
    m.shutdown()


def test_a_dir_whose_checkpoint_fails_goes_offline_alone(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = manager([a, b])
    for p in range(4):
        m.get_or_create_log("t", p)
    failed: list[Path] = []
    m.on_dir_failure = failed.append
    shutil.rmtree(a)
    a.write_text("not a directory")
    m.checkpoint_all()
    assert failed == [a.resolve()]
    gone = m.mark_dir_offline(a.resolve())
    assert sorted(gone) == [TopicPartition("t", 0), TopicPartition("t", 2)]
    assert m.get_log("t", 0) is None and m.get_log("t", 1) is not None
    assert m.mark_dir_offline(a.resolve()) == []
    m.checkpoint_all()  # the offline dir is skipped, the other written
    assert "t 1" in (b / "replication-offset-checkpoint").read_text()
    new = m.get_or_create_log("u", 0)
    assert new.dir.parent == b.resolve()  # nothing new goes to an offline dir
    m.shutdown()


def test_the_cleaner_goes_on_with_the_other_dirs_after_one_failed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager([a, b], broker_id=1, cluster_id="cluster-A", cleaner_config=CleanerConfig())
    for p in range(4):
        m.get_or_create_log("t", p)
    assert m.cleaner is not None
    m.cleaner.manager.update_checkpoint(b.resolve(), TopicPartition("t", 1), 0)
    m.cleaner.manager.update_checkpoint(a.resolve(), TopicPartition("t", 0), 0)
    shutil.rmtree(a)
    a.write_text("not a directory")
    m.mark_dir_offline(a.resolve())
    # the failed dir's cleaner checkpoint is not read again (it would fail every pass)
    assert m.cleaner.manager.all_checkpoints() == {TopicPartition("t", 1): 0}
    assert m.cleaner.manager.grab_filthiest_log(0) is None  # nothing compacted: no error
    m.shutdown()


def test_the_controller_takes_an_offline_replica_out() -> None:
    led = PartitionState(0, 4, (0, 1, 2), (0, 1, 2), 1, 7)
    moved = offline_replica_state(led, 0, {0, 1, 2}, False, 2)
    assert moved is not None and moved.leader == 1 and moved.isr == (1, 2)
    followed = PartitionState(1, 4, (1, 0, 2), (1, 0, 2), 1, 7)
    shrunk = offline_replica_state(followed, 0, {0, 1, 2}, False, 2)
    assert shrunk is not None and shrunk.leader == 1 and shrunk.isr == (1, 2)
    assert offline_replica_state(shrunk, 0, {0, 1, 2}, False, 2) is None


def test_log_dir_events_are_read_once(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    notify_log_dir_failure(store, 3)
    notify_log_dir_failure(store, 5)
    notify_log_dir_failure(store, 3)
    assert take_log_dir_events(store, lambda _path: None) == {3, 5}
    assert take_log_dir_events(store, lambda _path: None) == set()
