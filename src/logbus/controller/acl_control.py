"""ACLs as the active KRaft controller changes them (Kafka's `AclControlManager`):
CreateAcls writes an AccessControlEntryRecord (with a new id) for each binding not
stored yet, DeleteAcls a RemoveAccessControlEntryRecord for each stored binding a
filter matches. The runtime parses and checks the request's bindings and filters with
the broker's rules (as in ZooKeeper mode) and hands them here, each as a value or as the
message that refused it (INVALID_REQUEST).

Pure functions of the image.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from logbus.controller.control_result import ControllerResult, record
from logbus.metadata.image import AclEntry, MetadataImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["binding_of_entry", "create_acls", "delete_acls"]


def binding_of_entry(entry: AclEntry) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(entry.resource_type), entry.resource_name, PatternType(entry.pattern_type)
        ),
        AccessControlEntry(
            entry.principal, entry.host, AclOperation(entry.operation),
            AclPermissionType(entry.permission_type),
        ),
    )  # fmt: skip


def _entry_record(acl_id: uuid.UUID, binding: AclBinding) -> MetadataRecord:
    pattern, entry = binding
    return record(
        "AccessControlEntryRecord",
        id=acl_id, resource_type=int(pattern.resource_type), resource_name=pattern.name,
        pattern_type=int(pattern.pattern_type), principal=entry.principal, host=entry.host,
        operation=int(entry.operation), permission_type=int(entry.permission),
    )  # fmt: skip


def create_acls(image: MetadataImage, bindings: Sequence[AclBinding | str]) -> ControllerResult:
    stored = {binding_of_entry(e) for e in image.acls.values()}
    records: list[MetadataRecord] = []
    results: list[dict[str, Any]] = []
    for binding in bindings:
        if isinstance(binding, str):
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": binding})
            continue
        if binding not in stored:
            stored.add(binding)
            records.append(_entry_record(uuid.uuid4(), binding))
        results.append({"error_code": 0, "error_message": None})
    return ControllerResult(records, {"throttle_time_ms": 0, "results": results})


def _matching(binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding
    return {
        "error_code": 0,
        "error_message": None,
        "resource_type": int(pattern.resource_type),
        "resource_name": pattern.name,
        "pattern_type": int(pattern.pattern_type),
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission),
    }


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter | str]
) -> ControllerResult:
    removed: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[dict[str, Any]] = []
    for acl_filter in filters:
        if isinstance(acl_filter, str):
            results.append(
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": acl_filter,
                 "matching_acls": []}
            )  # fmt: skip
            continue
        matched = sorted(
            (binding_of_entry(e), acl_id)
            for acl_id, e in image.acls.items()
            if acl_filter.matches(binding_of_entry(e))
        )
        for _binding, acl_id in matched:
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(record("RemoveAccessControlEntryRecord", id=acl_id))
        results.append(
            {"error_code": 0, "error_message": None,
             "matching_acls": [_matching(b) for b, _ in matched]}
        )  # fmt: skip
    return ControllerResult(records, {"throttle_time_ms": 0, "filter_results": results})
