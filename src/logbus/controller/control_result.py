"""What a KRaft controller decision returns (the shape of Kafka's `ControllerResult`):
the metadata records to write, and the response to send once they are committed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logbus.metadata.delta import replay_all
from logbus.metadata.image import MetadataImage
from logbus.metadata.records import MetadataRecord, latest_version

__all__ = ["ControllerResult", "record", "then"]


@dataclass
class ControllerResult:
    records: list[MetadataRecord] = field(default_factory=list)
    response: dict[str, Any] = field(default_factory=dict)


def record(record_name: str, /, **data: Any) -> MetadataRecord:
    """A metadata record at its newest version."""
    return MetadataRecord(record_name, latest_version(record_name), data)


def then(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    """`image` with `records` applied: a decision that writes several steps reads the
    image its earlier steps leave."""
    return replay_all(image, records) if records else image
