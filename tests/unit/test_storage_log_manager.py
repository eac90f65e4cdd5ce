from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from storage_helpers import make_batch

from logbus.storage.errors import InconsistentBrokerMetadataError
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager


def manager(dirs: list[Path], **kwargs: object) -> LogManager:
    m = LogManager(dirs, broker_id=1, cluster_id="cluster-A", **kwargs)  # type: ignore[arg-type]
    m.startup(now_ms=0)
    return m


def test_startup_writes_meta_properties(tmp_path: Path) -> None:
    m = manager([tmp_path / "a", tmp_path / "b"])
    for d in ("a", "b"):
        text = (tmp_path / d / "meta.properties").read_text()
        assert (
            "broker.id=1\n" in text and "cluster.id=cluster-A\n" in text and "version=0\n" in text
        )
    m.shutdown()
    with pytest.raises(InconsistentBrokerMetadataError):
        LogManager([tmp_path / "a"], broker_id=2).startup()
    m = LogManager([tmp_path / "a"], broker_id=1)
    m.startup()
    assert m.cluster_id == "cluster-A"
    m.shutdown()


def test_new_logs_go_to_the_least_loaded_dir(tmp_path: Path) -> None:
    m = manager([tmp_path / "a", tmp_path / "b"])
    for p in range(4):
        m.get_or_create_log("t", p, topic_id=uuid.uuid4())
    assert len(list((tmp_path / "a").glob("t-*"))) == 2
    assert len(list((tmp_path / "b").glob("t-*"))) == 2
    assert m.get_or_create_log("t", 0) is m.get_log("t", 0)
    m.shutdown()


def test_checkpoints_and_clean_shutdown_marker(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.get_or_create_log("orders", 3)
    for _ in range(4):
        log.append_as_leader(make_batch(2), 0)
    log.high_watermark = 6
    log.flush()
    m.checkpoint_all()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 3 8\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\norders 3 6\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    m.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    m = manager([tmp_path])
    assert m.had_clean_shutdown[tmp_path.resolve()]
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    log2 = m.get_log("orders", 3)
    assert log2 is not None
    assert (log2.log_end_offset, log2.high_watermark, log2.recovery_point) == (8, 6, 8)
    m.shutdown()


def test_log_start_offset_checkpoint(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(10), 0)
    log.high_watermark = 10
    log.maybe_increment_log_start_offset(4)
    m.shutdown()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 4\n"
    m = manager([tmp_path])
    log = m.get_log("t", 0)
    assert log is not None and log.log_start_offset == 4
    m.shutdown()


def test_delete_log(tmp_path: Path) -> None:
    m = manager([tmp_path], default_config=LogConfig(file_delete_delay_ms=500))
    log = m.get_or_create_log("gone", 0)
    log.append_as_leader(make_batch(1), 0)
    slice_before = log.read(0, 100).records
    assert m.delete_log("gone", 0, now_ms=1000)
    assert m.get_log("gone", 0) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-0.")
    assert slice_before is not None and len(slice_before.read()) == slice_before.size
    m.remove_deleted(now_ms=1400)
    assert (tmp_path / renamed[0]).exists()
    m.remove_deleted(now_ms=1500)
    assert not (tmp_path / renamed[0]).exists()
    assert not m.delete_log("gone", 0)
    m.shutdown()


def test_leftover_delete_dirs_are_removed(tmp_path: Path) -> None:
    m = manager([tmp_path])
    m.get_or_create_log("x", 0)
    m.shutdown()
    (tmp_path / "x-0").rename(tmp_path / f"x-0.{uuid.uuid4().hex}-delete")
    m = manager([tmp_path])
    assert m.get_log("x", 0) is None
    m.remove_deleted(now_ms=1)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    m.shutdown()


def test_flush_dirty_by_time(tmp_path: Path) -> None:
    m = manager([tmp_path], default_config=LogConfig(flush_ms=1000))
    log = m.get_or_create_log("t", 0, now_ms=0)
    log.append_as_leader(make_batch(3), 0)
    assert m.flush_dirty(now_ms=500) == 0
    assert log.recovery_point == 0
    assert m.flush_dirty(now_ms=1000) == 1
    assert log.recovery_point == 3
    assert m.flush_dirty(now_ms=5000) == 0  # nothing new
    m.shutdown()


def test_every_log_reports_its_flushes_to_the_managers_listener(tmp_path: Path) -> None:
    """The broker's flush metrics come through the `on_flush` it gives its LogManager:
    logs created and logs loaded at start-up report each flush that wrote something."""
    flushes: list[float] = []
    m = manager([tmp_path], on_flush=flushes.append)
    created = m.get_or_create_log("t", 0)
    created.flush()
    assert flushes == []  # nothing to write
    created.append_as_leader(make_batch(3), 0)
    created.flush()
    assert len(flushes) == 1 and flushes[0] >= 0
    m.shutdown()

    reloaded: list[float] = []
    m = manager([tmp_path], on_flush=reloaded.append)
    loaded = m.get_log("t", 0)
    assert loaded is not None
    loaded.append_as_leader(make_batch(2), 0)
    loaded.flush()
    assert len(reloaded) == 1 and len(flushes) == 1
    m.shutdown()


def test_flush_dirty_flushes_rolled_segments(tmp_path: Path) -> None:
    m = manager([tmp_path], default_config=LogConfig(segment_bytes=300))
    log = m.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(make_batch(2, value_size=50), 0)
    assert len(log.segments) > 1 and log.pending_flush_offset is not None
    m.flush_dirty()
    assert log.recovery_point >= log.segments[-1].base_offset
    assert log.pending_flush_offset is None
    m.shutdown()


def test_retention_through_the_manager(tmp_path: Path) -> None:
    m = manager([tmp_path], default_config=LogConfig(segment_bytes=300, retention_ms=100))
    log = m.get_or_create_log("t", 0)
    for i in range(6):
        log.append_as_leader(make_batch(2, timestamp=i), 0)
    log.high_watermark = log.log_end_offset
    assert m.cleanup_logs(now_ms=10_000) > 0
    assert log.log_start_offset == log.log_end_offset == 12
    m.shutdown()


@pytest.mark.parametrize("threads", [1, 4])
def test_logs_load_in_threads_and_a_torn_tail_is_still_cut(tmp_path: Path, threads: int) -> None:
    m = manager([tmp_path])
    for p in range(12):
        log = m.get_or_create_log("many", p, topic_id=uuid.uuid4())
        for _ in range(p % 3 + 1):
            log.append_as_leader(make_batch(2), 0)
    torn = m.get_log("many", 5)
    assert torn is not None
    torn_path = torn.active_segment.log_path
    m.shutdown(clean=False)  # as a crash leaves the disk
    with open(torn_path, "r+b") as f:
        f.truncate(torn_path.stat().st_size - 7)

    m = manager([tmp_path], recovery_threads=threads)
    assert not m.had_clean_shutdown[tmp_path.resolve()]
    ends = {}
    for p in range(12):
        log = m.get_log("many", p)
        assert log is not None
        ends[p] = log.log_end_offset
    # every log back, the torn one without its last (partial) batch
    assert ends == {p: 2 * (p % 3 + 1) - (2 if p == 5 else 0) for p in range(12)}
    m.shutdown()
