"""`partition.metadata`: the topic id of a partition's log directory (KIP-516).

Format: "version: 0\ntopic_id: <topic id>\n", the id in Kafka's text form (URL-safe
base64 of its 16 bytes, without padding).
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from logbus.storage.checkpoint import write_atomically
from logbus.storage.errors import KafkaStorageError

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def decode_topic_id(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    text = f"version: {_VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n"
    write_atomically(directory / PARTITION_METADATA_FILE, text.encode())


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id stored in `directory`, or None if there is no file."""
    path = directory / PARTITION_METADATA_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise KafkaStorageError(f"malformed line {line!r} in {path}")
        fields[key.strip()] = value.strip()
    try:
        if int(fields["version"]) != _VERSION:
            raise KafkaStorageError(f"unknown version {fields['version']} in {path}")
        return decode_topic_id(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        raise KafkaStorageError(f"malformed {path}: {exc}") from exc
