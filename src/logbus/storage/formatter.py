"""Formatting storage for KRaft mode, as Kafka's `kafka-storage` tool does: every log
directory and the metadata log directory get a version 1 `meta.properties` naming the
cluster, the node and the directory itself (a random Kafka Uuid).

The entry points are `random_uuid`, `format_directories` and `describe_directories`;
`logbus storage` (the CLI) prints what they return.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from logbus.storage.errors import KafkaStorageError
from logbus.storage.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)

__all__ = [
    "FormatterError",
    "StorageDescription",
    "check_uuid",
    "describe_directories",
    "format_directories",
    "random_uuid",
]

# Kafka reserves the all-zero Uuid (none) and the one ending in 1 (the metadata topic).
_RESERVED = {bytes(16), bytes(15) + b"\x01"}


class FormatterError(Exception):
    """Formatting was refused; the message is for the person who asked."""


def random_uuid() -> str:
    """A random Kafka Uuid: 16 bytes in URL-safe base64 without padding, never starting
    with '-' (it would read as a command-line option) and never a reserved one."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if raw not in _RESERVED and not text.startswith("-"):
            return text


def check_uuid(text: str, what: str = "Cluster ID") -> None:
    """Raise FormatterError unless `text` is a Kafka Uuid (22 base64url characters)."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise FormatterError(
            f"{what} string {text} does not appear to be a valid UUID: {exc}"
        ) from None
    if len(text) != 22 or len(raw) != 16:
        raise FormatterError(
            f"{what} string {text} does not appear to be a valid UUID: it must be 16 bytes "
            "in base64url (22 characters)"
        )


def format_directories(
    log_dirs: Sequence[str],
    metadata_log_dir: str,
    *,
    cluster_id: str,
    node_id: int,
    ignore_formatted: bool = False,
) -> list[str]:
    """Write meta.properties into every directory (creating it), or refuse: a directory
    already formatted stops everything unless `ignore_formatted`, which skips it. Returns
    the lines to print."""
    check_uuid(cluster_id)
    directories = list(dict.fromkeys([*log_dirs, metadata_log_dir]))
    formatted = [d for d in directories if (Path(d) / META_PROPERTIES_FILE).exists()]
    if formatted and not ignore_formatted:
        raise FormatterError(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to "
            "ignore this directory and format the others."
        )
    todo = [d for d in directories if d not in formatted]
    if not todo:
        return ["All of the log directories are already formatted."]
    lines = []
    for directory in todo:
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            write_meta_properties(
                path, MetaProperties(node_id, cluster_id, 1, directory_id=random_uuid())
            )
        except OSError as exc:
            raise FormatterError(f"Unable to format {directory}: {exc.strerror or exc}") from exc
        kind = "metadata" if directory == metadata_log_dir else "data"
        lines.append(f"Formatting {kind} directory {directory}.")
    return lines


@dataclass
class StorageDescription:
    """What `logbus storage info` found: the directories, their (shared) properties, and
    the problems in them."""

    directories: list[str] = field(default_factory=list)
    metadata: MetaProperties | None = None
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = ["Found log directories:" if len(self.directories) > 1 else "Found log directory:"]
        out += [f"  {d}" for d in self.directories]
        if self.metadata is not None:
            meta = self.metadata
            fields = (
                f"cluster.id={meta.cluster_id}, directory.id={meta.directory_id}, "
                f"node.id={meta.broker_id}, version=1"
                if meta.version == 1
                else f"broker.id={meta.broker_id}, cluster.id={meta.cluster_id}, version=0"
            )
            out += ["", f"Found metadata: {{{fields}}}"]
        if self.problems:
            out += ["", "Found problems:" if len(self.problems) > 1 else "Found problem:"]
            out += [f"  {p}" for p in self.problems]
        return out


def describe_directories(directories: Sequence[str]) -> StorageDescription:
    """Read every directory's meta.properties; a missing, unformatted or disagreeing
    directory is a problem."""
    found = StorageDescription(directories=list(dict.fromkeys(directories)))
    for directory in found.directories:
        path = Path(directory)
        if not path.is_dir():
            found.problems.append(f"{directory} does not exist")
            continue
        try:
            meta = read_meta_properties(path)
        except KafkaStorageError as exc:
            found.problems.append(str(exc))
            continue
        if meta is None:
            found.problems.append(f"{directory} is not formatted.")
            continue
        if found.metadata is None:
            found.metadata = meta
        elif (meta.cluster_id, meta.broker_id) != (
            found.metadata.cluster_id,
            found.metadata.broker_id,
        ):
            found.problems.append(
                f"{directory}: cluster.id {meta.cluster_id} node.id {meta.broker_id} differ "
                f"from {found.metadata.cluster_id} and {found.metadata.broker_id}"
            )
        if meta.version == 0:
            found.problems.append(
                f"{directory} is in the ZooKeeper-era format (version 0); "
                "KRaft mode needs version 1 (logbus storage format)"
            )
    return found
