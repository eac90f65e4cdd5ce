"""Kafka's checkpoint text files.

Every checkpoint is "<version>\\n<count>\\n" then one entry per line, fields separated by
single spaces; version 0 is the only one. Offset checkpoints
(`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint`) hold "<topic> <partition> <offset>" lines; the
`leader-epoch-checkpoint` of a partition holds "<epoch> <start offset>" lines.
Writes are atomic: a temporary file is written and fsynced, then renamed over the old one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from logbus.storage.errors import CorruptCheckpointError
from logbus.types import TopicPartition

__all__ = ["OffsetCheckpointFile", "TopicPartition", "write_atomically"]

CHECKPOINT_VERSION = 0



class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def fsync_dir(path: Path) -> None:
    """Make a rename or creation inside `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class _CheckpointFile:
    """Shared read/write of one checkpoint file; safe to share between threads."""

    FIELDS = 0

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _write_lines(self, lines: Iterable[str]) -> None:
        body = list(lines)
        text = f"{CHECKPOINT_VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)
        with self._lock:
            write_atomically(self.path, text.encode())

    def _read_lines(self) -> list[list[str]]:
        with self._lock:
            try:
                text = self.path.read_text()
            except FileNotFoundError:
                return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            version = int(lines[0])
            count = int(lines[1])
        except (IndexError, ValueError) as exc:
            raise CorruptCheckpointError(f"malformed header in checkpoint {self.path}") from exc
        if version != CHECKPOINT_VERSION:
            raise CorruptCheckpointError(f"unknown version {version} in checkpoint {self.path}")
        entries = [line.split(" ") for line in lines[2:]]
        if len(entries) != count or any(len(fields) != self.FIELDS for fields in entries):
            raise CorruptCheckpointError(
                f"checkpoint {self.path} promises {count} entries of {self.FIELDS} fields "
                f"but holds {len(entries)} lines"
            )
        return entries


class OffsetCheckpointFile(_CheckpointFile):
    """A "<topic> <partition> <offset>" checkpoint of one log dir."""

    FIELDS = 3

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._write_lines(
            f"{topic} {partition} {offset}"
            for (topic, partition), offset in sorted(offsets.items())
        )

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets ({} when the file does not exist)."""
        out: dict[TopicPartition, int] = {}
        for topic, partition, offset in self._read_lines():
            try:
                out[TopicPartition(topic, int(partition))] = int(offset)
            except ValueError as exc:
                raise CorruptCheckpointError(f"malformed line in checkpoint {self.path}") from exc
        return out


class LeaderEpochCheckpointFile(_CheckpointFile):
    """The "<epoch> <start offset>" checkpoint of one partition."""

    FIELDS = 2

    def write(self, entries: Iterable[EpochEntry]) -> None:
        self._write_lines(f"{entry.epoch} {entry.start_offset}" for entry in entries)

    def read(self) -> list[EpochEntry]:
        out: list[EpochEntry] = []
        for epoch, start_offset in self._read_lines():
            try:
                out.append(EpochEntry(int(epoch), int(start_offset)))
            except ValueError as exc:
                raise CorruptCheckpointError(f"malformed line in checkpoint {self.path}") from exc
        return out
