from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from logbus.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from logbus.storage.errors import (
    CorruptCheckpointError,
    InconsistentBrokerMetadataError,
    KafkaStorageError,
)
from logbus.storage.leader_epoch import LeaderEpochCache
from logbus.storage.meta_properties import (
    MetaProperties,
    ensure_meta_properties,
    read_meta_properties,
)
from logbus.storage.partition_metadata import (
    decode_topic_id,
    encode_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("orders", 1): 42, ("my-topic", 0): 7})
    assert path.read_text() == "0\n2\nmy-topic 0 7\norders 1 42\n"
    assert checkpoint.read() == {("orders", 1): 42, ("my-topic", 0): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_offset_checkpoint_missing_and_empty(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    assert checkpoint.read() == {}
    checkpoint.write({})
    assert (tmp_path / "cp").read_text() == "0\n0\n"
    assert checkpoint.read() == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "zero\n"],
)
def test_offset_checkpoint_malformed(tmp_path: Path, text: str) -> None:
    (tmp_path / "cp").write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    checkpoint = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    checkpoint.write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert checkpoint.read() == [EpochEntry(0, 0), EpochEntry(3, 120)]


def test_leader_epoch_cache_assign_and_end_offsets(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    assert cache.latest_epoch == -1
    assert cache.end_offset_for(0, 10) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: no change
    cache.assign(2, 10)
    cache.assign(4, 30)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 30)]
    assert cache.latest_epoch == 4
    assert cache.end_offset_for(4, 50) == (4, 50)
    assert cache.end_offset_for(2, 50) == (2, 30)
    assert cache.end_offset_for(3, 50) == (2, 30)  # unknown epoch: the one before it
    assert cache.end_offset_for(0, 50) == (0, 0)  # older than every epoch
    assert cache.end_offset_for(5, 50) == (-1, -1)
    assert cache.epoch_for_offset(15) == 2
    assert cache.epoch_for_offset(30) == 4
    assert LeaderEpochCache(path).entries == cache.entries


def test_leader_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(20)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(2, 15)]
    cache.assign(5, 40)
    cache.assign(3, 35)  # a lower epoch replaces the conflicting later entries
    assert cache.entries == [EpochEntry(2, 15), EpochEntry(3, 35)]
    reread = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint").read()
    assert reread == [EpochEntry(2, 15), EpochEntry(3, 35)]


def test_topic_id_text_form() -> None:
    topic_id = uuid.UUID("6e1c4a1e-8a9f-4c43-9a1b-0c77a2d4c5a1")
    text = encode_topic_id(topic_id)
    assert len(text) == 22 and "=" not in text
    assert decode_topic_id(text) == topic_id


def test_partition_metadata_round_trip(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path) is None
    topic_id = uuid.uuid4()
    write_partition_metadata(tmp_path, topic_id)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
    assert read_partition_metadata(tmp_path) == topic_id
    (tmp_path / "partition.metadata").write_text("version: 0\n")
    with pytest.raises(KafkaStorageError):
        read_partition_metadata(tmp_path)


def test_meta_properties(tmp_path: Path) -> None:
    meta = ensure_meta_properties(tmp_path, 3, None)
    assert meta == MetaProperties(3, None)
    text = (tmp_path / "meta.properties").read_text()
    assert "version=0\n" in text and "broker.id=3\n" in text
    meta = ensure_meta_properties(tmp_path, 3, "abcDEF123")
    assert read_meta_properties(tmp_path) == MetaProperties(3, "abcDEF123")
    with pytest.raises(InconsistentBrokerMetadataError):
        ensure_meta_properties(tmp_path, 4, None)
    with pytest.raises(InconsistentBrokerMetadataError):
        ensure_meta_properties(tmp_path, 3, "other")


def test_meta_properties_written_by_kafka(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Jan 01 00:00:00 UTC 2024\ncluster.id=Ab3_xYz\nversion=0\nbroker.id=1\n"
    )
    assert read_meta_properties(tmp_path) == MetaProperties(1, "Ab3_xYz")
