"""Client quotas as the active KRaft controller changes them (Kafka's
`ClientQuotaControlManager`, KIP-546): each AlterClientQuotas entry, checked by the
`QuotaEntryCheck` the runtime gives (ZooKeeper mode's checks of entity types, keys and
values), becomes one ClientQuotaRecord per key that changes: a value set, or removed.
A refused entry writes nothing; `validate_only` writes nothing.

A pure function of the image.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logbus.controller.control_result import ControllerResult, record
from logbus.metadata.image import MetadataImage, QuotaEntity
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = ["QuotaEntryCheck", "alter_client_quotas"]

# One entry of the request -> its entity (as the image keys it) and, per key, the new
# value (None: removed); raises ValueError with Kafka's message for a refused entry.
QuotaEntryCheck = Callable[[dict[str, Any]], tuple[QuotaEntity, dict[str, float | None]]]


def _entry_records(
    image: MetadataImage, entity: QuotaEntity, changes: dict[str, float | None]
) -> list[MetadataRecord]:
    current = image.client_quotas.get(entity, {})
    parts = [{"entity_type": kind, "entity_name": name} for kind, name in entity]
    records = []
    for key, value in sorted(changes.items()):
        if value is None and key in current:
            records.append(
                record("ClientQuotaRecord", entity=parts, key=key, value=0.0, remove=True)
            )
        elif value is not None and current.get(key) != value:
            records.append(
                record("ClientQuotaRecord", entity=parts, key=key, value=value, remove=False)
            )
    return records


def alter_client_quotas(
    image: MetadataImage, body: dict[str, Any], check: QuotaEntryCheck
) -> ControllerResult:
    records: list[MetadataRecord] = []
    results = []
    for entry in body["entries"]:
        result = {"error_code": 0, "error_message": None, "entity": entry["entity"]}
        try:
            entity, changes = check(entry)
        except ValueError as exc:
            result.update(error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc))
        else:
            if not body.get("validate_only"):
                records += _entry_records(image, entity, changes)
        results.append(result)
    return ControllerResult(records, {"throttle_time_ms": 0, "entries": results})
