"""Snapshots of the metadata log (KIP-630): `<end offset>-<epoch>.checkpoint` files in
the log's directory, each a sequence of record batches in Kafka's on-disk format that
opens with a control batch holding a SnapshotHeaderRecord and closes with one holding a
SnapshotFooterRecord. A snapshot at (end offset E, epoch P) holds the state of every
record below E; P is the epoch of the record at E - 1.

The entry points are `write_snapshot`, `read_snapshot_records` and `latest_snapshot`.
Files are written under a `.checkpoint.part` name and renamed once complete, so a crash
never leaves a half snapshot under the final name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from logbus.protocol import schema
from logbus.records.batch import InvalidBatch, iter_batches
from logbus.records.builder import build_batch
from logbus.records.reader import decode_batch
from logbus.storage.checkpoint import write_atomically
from logbus.storage.errors import CorruptSnapshotError

__all__ = [
    "SNAPSHOT_FOOTER",
    "SNAPSHOT_HEADER",
    "SnapshotId",
    "latest_snapshot",
    "read_snapshot_records",
    "snapshot_path",
    "write_snapshot",
]

LEADER_CHANGE: Final = 2
SNAPSHOT_HEADER: Final = 3
SNAPSHOT_FOOTER: Final = 4
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_CONTROL_KEY_VERSION: Final = 0


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch of a snapshot."""

    end_offset: int
    epoch: int


def control_key(control_type: int) -> bytes:
    return _CONTROL_KEY_VERSION.to_bytes(2, "big") + control_type.to_bytes(2, "big")


def snapshot_path(directory: Path, snapshot_id: SnapshotId) -> Path:
    return directory / f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}.checkpoint"


def list_snapshots(directory: Path) -> list[SnapshotId]:
    found = []
    for path in directory.glob("*.checkpoint"):
        match = _NAME.match(path.name)
        if match is not None:
            found.append(SnapshotId(int(match[1]), int(match[2])))
    return sorted(found)


def latest_snapshot(directory: Path) -> SnapshotId | None:
    snapshots = list_snapshots(directory)
    return snapshots[-1] if snapshots else None


def encode_snapshot(
    snapshot_id: SnapshotId, values: Sequence[bytes], *, timestamp_ms: int
) -> bytes:
    """The bytes of a snapshot holding `values` (one record each)."""
    header = schema.message("SnapshotHeaderRecord").encode(
        {"version": 0, "last_contained_log_timestamp": timestamp_ms}, 0
    )
    footer = schema.message("SnapshotFooterRecord").encode({"version": 0}, 0)
    epoch = snapshot_id.epoch
    parts = [
        build_batch(
            [(control_key(SNAPSHOT_HEADER), header)],
            is_control=True,
            partition_leader_epoch=epoch,
            base_timestamp=timestamp_ms,
        )
    ]
    offset = 1
    step = 1000
    for start in range(0, len(values), step):
        chunk = values[start : start + step]
        parts.append(
            build_batch(
                [(None, v) for v in chunk],
                base_offset=offset,
                partition_leader_epoch=epoch,
                base_timestamp=timestamp_ms,
            )
        )
        offset += len(chunk)
    parts.append(
        build_batch(
            [(control_key(SNAPSHOT_FOOTER), footer)],
            base_offset=offset,
            is_control=True,
            partition_leader_epoch=epoch,
            base_timestamp=timestamp_ms,
        )
    )
    return b"".join(parts)


def write_snapshot(
    directory: Path, snapshot_id: SnapshotId, values: Sequence[bytes], *, timestamp_ms: int
) -> Path:
    """Write a snapshot file (atomically) and return its path."""
    return write_snapshot_bytes(
        directory, snapshot_id, encode_snapshot(snapshot_id, values, timestamp_ms=timestamp_ms)
    )


def write_snapshot_bytes(directory: Path, snapshot_id: SnapshotId, data: bytes) -> Path:
    """Store a snapshot received whole from the leader, after checking its frame."""
    check_snapshot(data)
    path = snapshot_path(directory, snapshot_id)
    part = path.with_name(path.name + ".part")
    write_atomically(part, data)
    os.replace(part, path)
    return path


def _control_type(key: bytes | None) -> int | None:
    if key is None or len(key) != 4:
        return None
    return int.from_bytes(key[2:], "big")


def check_snapshot(data: bytes) -> list[bytes]:
    """The values of a snapshot's data records; CorruptSnapshotError unless it opens with
    a header and closes with a footer control record and every CRC holds."""
    values: list[bytes] = []
    try:
        batches = iter_batches(data)
    except InvalidBatch as exc:
        raise CorruptSnapshotError(f"unreadable snapshot: {exc}") from exc
    if not batches:
        raise CorruptSnapshotError("empty snapshot")
    view = memoryview(data)
    kinds: list[int | None] = []
    for position, header in batches:
        try:
            _, records = decode_batch(view[position : position + header.size])
        except (InvalidBatch, ValueError) as exc:
            raise CorruptSnapshotError(f"unreadable snapshot batch: {exc}") from exc
        if header.is_control:
            kinds += [_control_type(r.key) for r in records]
        else:
            values += [bytes(r.value or b"") for r in records]
    if not kinds or kinds[0] != SNAPSHOT_HEADER or kinds[-1] != SNAPSHOT_FOOTER:
        raise CorruptSnapshotError("a snapshot must open with a header and close with a footer")
    return values


def read_snapshot_records(directory: Path, snapshot_id: SnapshotId) -> list[bytes]:
    """The values of the records in a snapshot file."""
    return check_snapshot(snapshot_path(directory, snapshot_id).read_bytes())
