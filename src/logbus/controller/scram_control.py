"""SCRAM credentials as the active KRaft controller changes them (Kafka's
`ScramControlManager`, KIP-554): AlterUserScramCredentials' upsertions become
UserScramCredentialRecords (the stored and server keys derived from the salted
password, as in ZooKeeper mode), its deletions RemoveUserScramCredentialRecords. Each
user's changes are written together, or none of them when one is refused (the checks of
`common.security.scram.alteration_error`; deleting a credential that does not exist is
RESOURCE_NOT_FOUND).

A pure function of the image.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from logbus.common.security.scram import MECHANISM_TYPES, ScramCredential, alteration_error
from logbus.controller.control_result import ControllerResult, record
from logbus.metadata.image import MetadataImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = ["alter_user_scram_credentials"]


def _entry_records(
    image: MetadataImage, entry: dict[str, Any]
) -> tuple[list[MetadataRecord], tuple[int, str] | None]:
    name, mechanism = entry["name"], entry["mechanism"]
    if "salted_password" not in entry:
        if (name, mechanism) not in image.scram:
            return [], (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return [record("RemoveUserScramCredentialRecord", name=name, mechanism=mechanism)], None
    credential = ScramCredential.from_salted(
        bytes(entry["salted_password"]), bytes(entry["salt"]), entry["iterations"],
        MECHANISM_TYPES[mechanism],
    )  # fmt: skip
    return [
        record(
            "UserScramCredentialRecord",
            name=name,
            mechanism=mechanism,
            salt=credential.salt,
            stored_key=credential.stored_key,
            server_key=credential.server_key,
            iterations=credential.iterations,
        )
    ], None


def alter_user_scram_credentials(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    entries = [dict(d) for d in body.get("deletions") or ()]
    entries += [dict(u) for u in body.get("upsertions") or ()]
    pairs = Counter((e["name"], e["mechanism"]) for e in entries)
    errors: dict[str, tuple[int, str]] = {}
    changes: dict[str, list[MetadataRecord]] = {}
    for entry in entries:
        user = entry["name"]
        if user in errors:
            continue
        error = alteration_error(entry, pairs[(user, entry["mechanism"])] > 1)
        if error is None:
            records, error = _entry_records(image, entry)
            changes.setdefault(user, []).extend(records)
        if error is not None:
            errors[user] = error
    results = []
    written: list[MetadataRecord] = []
    for user in dict.fromkeys(e["name"] for e in entries):
        code, message = errors.get(user, (0, None))
        if user not in errors:
            written += changes[user]
        results.append({"user": user, "error_code": int(code), "error_message": message})
    return ControllerResult(written, {"throttle_time_ms": 0, "results": results})
