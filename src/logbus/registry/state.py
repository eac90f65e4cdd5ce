"""What the registry knows, rebuilt from its store topic (`_schemas`): every subject's
versions, schemas by id, compatibility levels and modes. Pure: `apply` takes one record
of the topic (key and value bytes, None for a tombstone) and updates the state; the
`*_record` functions build the records a change writes. Nothing here reads or writes the
topic (`store.KafkaStore` does).

The records have Confluent Schema Registry's format, so a topic one of them wrote is read
by the other: JSON keys `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}` (and
CONFIG, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT) with JSON values; a key is serialized
with its fields in that order so that compaction keeps the last value of each.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

log = logging.getLogger(__name__)

GLOBAL = None  # the subject of the global config and mode


@dataclass(frozen=True)
class Reference:
    """A named reference of a schema to a version of another subject."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject: the schema registered, its global id, soft deletion."""

    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def as_json(self, *, with_schema: bool = True) -> dict[str, Any]:
        """The version as the REST API shows it (schemaType omitted for AVRO, as
        Confluent's registry does)."""
        body: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.schema_id,
        }
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [ref.as_json() for ref in self.references]
        if with_schema:
            body["schema"] = self.schema
        return body

    def id_json(self) -> dict[str, Any]:
        """The body of GET /schemas/ids/{id} for this version's id."""
        body: dict[str, Any] = {}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [ref.as_json() for ref in self.references]
        body["schema"] = self.schema
        return body

    @cached_property
    def id_answer(self) -> bytes:
        """`id_json()` encoded once, when first asked for: the answer to the serializers'
        lookups, which are many, of few schemas (a frozen dataclass still takes a cached
        property: it is kept in the instance's __dict__, outside the compared fields)."""
        return json.dumps(self.id_json(), separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class RegistryState:
    """Subjects, ids, configs and modes, as the records applied so far describe them.
    Owned by one store; safe to read from the event loop's tasks, written only by the
    store's reader."""

    subjects: dict[str, dict[int, SchemaVersion]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    # id -> the versions registered with it (a schema registered under several subjects
    # has one id)
    by_id: dict[int, dict[tuple[str, int], SchemaVersion]] = field(default_factory=dict)

    # -- applying the store's records --------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of the store topic; records it cannot read are logged and
        skipped (a registry of a newer format may share the topic)."""
        if key is None:
            return
        try:
            key_json = json.loads(key)
            value_json = None if value is None else json.loads(value)
            keytype = key_json["keytype"]
        except (ValueError, KeyError, TypeError):
            log.warning("skipping a record of the schemas topic that is not JSON: %r", key)
            return
        handler = _HANDLERS.get(keytype)
        if handler is None:
            return
        try:
            handler(self, key_json, value_json)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("skipping a %s record of the schemas topic: %s", keytype, exc)

    def _apply_schema(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        subject, number = key["subject"], int(key["version"])
        version = None if value is None else _version_of(value)
        versions = self.subjects.setdefault(subject, {})
        old = versions.pop(number, None)
        if old is not None:
            self._unindex(old)
        if version is None:
            if not versions:
                del self.subjects[subject]
            return
        versions[number] = version
        self.by_id.setdefault(version.schema_id, {})[(subject, number)] = version
        self.max_id = max(self.max_id, version.schema_id)

    def _unindex(self, version: SchemaVersion) -> None:
        users = self.by_id.get(version.schema_id, {})
        users.pop((version.subject, version.version), None)
        if not users:
            self.by_id.pop(version.schema_id, None)

    def _apply_config(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        subject = key.get("subject")
        if value is None:
            self.configs.pop(subject, None)
        else:
            level = value.get("compatibilityLevel") or value.get("compatibility")
            if level:
                self.configs[subject] = str(level).upper()

    def _apply_mode(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        subject = key.get("subject")
        if value is None:
            self.modes.pop(subject, None)
        else:
            self.modes[subject] = str(value["mode"]).upper()

    def _apply_delete_subject(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        if value is None:
            return
        subject, last = value["subject"], int(value["version"])
        versions = self.subjects.get(subject, {})
        for number, version in list(versions.items()):
            if number <= last and not version.deleted:
                versions[number] = replace(version, deleted=True)
                self.by_id[version.schema_id][(subject, number)] = versions[number]

    def _apply_clear_subject(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        if value is None:
            return
        subject = value["subject"]
        for version in list(self.subjects.get(subject, {}).values()):
            if version.deleted:
                self._apply_schema({"subject": subject, "version": version.version}, None)

    # -- reading ---------------------------------------------------------------------

    def live_versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions in order (soft-deleted ones only with `deleted`)."""
        versions = self.subjects.get(subject, {})
        return [versions[n] for n in sorted(versions) if deleted or not versions[n].deleted]

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.live_versions(s, deleted=deleted))

    def schema_by_id(self, schema_id: int) -> SchemaVersion | None:
        """A version registered with `schema_id` (a live one when there is one)."""
        users = self.by_id.get(schema_id)
        if not users:
            return None
        return min(users.values(), key=lambda v: (v.deleted, v.subject, v.version))

    def versions_with_id(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        users = self.by_id.get(schema_id, {})
        return sorted(
            (v for v in users.values() if deleted or not v.deleted),
            key=lambda v: (v.subject, v.version),
        )

    def find_id(
        self, schema_type: str, schema: str, references: tuple[Reference, ...]
    ) -> int | None:
        """The id already given to this schema (same type, text and references)."""
        for schema_id, users in self.by_id.items():
            any_version = next(iter(users.values()))
            if (
                any_version.schema_type == schema_type
                and any_version.schema == schema
                and any_version.references == references
            ):
                return schema_id
        return None

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas whose references name this subject version."""
        return sorted(
            {
                v.schema_id
                for versions in self.subjects.values()
                for v in versions.values()
                if not v.deleted
                and any(r.subject == subject and r.version == version for r in v.references)
            }
        )


def _version_of(value: dict[str, Any]) -> SchemaVersion:
    """The version a SCHEMA record's value describes (KeyError, TypeError, ValueError
    when it is not one)."""
    return SchemaVersion(
        subject=value["subject"],
        version=int(value["version"]),
        schema_id=int(value["id"]),
        schema_type=value.get("schemaType") or "AVRO",
        schema=value["schema"],
        references=tuple(
            Reference(r["name"], r["subject"], int(r["version"]))
            for r in value.get("references") or ()
        ),
        deleted=bool(value.get("deleted", False)),
    )


_HANDLERS = {
    "SCHEMA": RegistryState._apply_schema,
    "CONFIG": RegistryState._apply_config,
    "MODE": RegistryState._apply_mode,
    "DELETE_SUBJECT": RegistryState._apply_delete_subject,
    "CLEAR_SUBJECT": RegistryState._apply_clear_subject,
}


# -- the records a change writes ---------------------------------------------------------

Record = tuple[bytes, bytes | None]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_record(version: SchemaVersion) -> Record:
    value: dict[str, Any] = {
        "subject": version.subject,
        "version": version.version,
        "id": version.schema_id,
    }
    if version.schema_type != "AVRO":
        value["schemaType"] = version.schema_type
    if version.references:
        value["references"] = [ref.as_json() for ref in version.references]
    value["schema"] = version.schema
    value["deleted"] = version.deleted
    return schema_key(version.subject, version.version), _dumps(value)


def schema_tombstone(subject: str, version: int) -> Record:
    return schema_key(subject, version), None


def config_record(subject: str | None, level: str | None) -> Record:
    key = _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})
    return key, None if level is None else _dumps({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _dumps({"keytype": "MODE", "subject": subject, "magic": 0})
    return key, None if mode is None else _dumps({"mode": mode})


def noop_record() -> Record:
    """The record a registry writes to learn it has read the topic to its end."""
    return _dumps({"keytype": "NOOP", "magic": 0}), None
