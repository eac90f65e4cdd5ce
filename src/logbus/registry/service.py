"""The registry's operations, as Confluent Schema Registry's REST resources define them,
on top of the store: register and look up schemas, read subjects, versions and ids,
check compatibility, soft and hard deletes, compatibility levels and modes. HTTP is the
caller's business (`app.py`); this module takes parsed request bodies and query values
and returns JSON-ready values or raises `RegistryError`.

The entry point is `SchemaRegistry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from logbus.registry import errors
from logbus.registry.compatibility import DEFAULT_LEVEL, LEVELS, check
from logbus.registry.schema_types import AVRO, SCHEMA_TYPES, ParsedSchema, parse_schema
from logbus.registry.state import (
    GLOBAL,
    Reference,
    RegistryState,
    SchemaVersion,
    config_record,
    mode_record,
    schema_record,
    schema_tombstone,
)
from logbus.registry.store import KafkaStore

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for "latest" / -1."""
    if text == "latest" or text == "-1":
        return None
    try:
        number = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


class SchemaRequest:
    """The body of a register, lookup or compatibility request."""

    def __init__(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("{schema=null}, details: Empty schema")
        schema_type = body.get("schemaType") or AVRO
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise errors.RegistryError(422, 42201, f"Invalid schema type {schema_type}")
        self.schema = schema
        self.schema_type = schema_type.upper()
        self.references = tuple(_reference(r) for r in body.get("references") or ())
        self.schema_id = _optional_int(body, "id")
        self.version = _optional_int(body, "version")


def _reference(item: Any) -> Reference:
    try:
        return Reference(str(item["name"]), str(item["subject"]), int(item["version"]))
    except (KeyError, TypeError, ValueError):
        raise errors.invalid_schema(f"{{references={item}}}, details: a reference needs "
                                    "a name, a subject and a version") from None


def _optional_int(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None or (isinstance(value, int) and value <= 0 and name == "id"):
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.bad_request(f"'{name}' must be a number")
    return value


class SchemaRegistry:
    """The operations on one store. Reads use the state as the reader left it; every
    change holds the store's lock from its checks to its last record, so two changes of
    this process never interleave."""

    def __init__(self, store: KafkaStore, default_level: str = DEFAULT_LEVEL) -> None:
        self.store = store
        self.default_level = default_level.upper()
        self._parsed: dict[tuple[str, str, tuple[Reference, ...]], ParsedSchema] = {}

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # -- reading ---------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subject_names(deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        versions = self.state.live_versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return [v.version for v in versions]

    def version(self, subject: str, version_text: str, *, deleted: bool = False) -> SchemaVersion:
        number = parse_version(version_text)
        versions = self.state.live_versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        if number is None:
            return versions[-1]
        for version in versions:
            if version.version == number:
                return version
        raise errors.version_not_found(subject, number)

    def schema_by_id(self, schema_id: int) -> SchemaVersion:
        found = self.state.schema_by_id(schema_id)
        if found is None:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return found

    def id_body(self, schema_id: int, *, fetch_max_id: bool = False) -> dict[str, Any]:
        """The body of GET /schemas/ids/{id}."""
        body = self.schema_by_id(schema_id).id_json()
        if fetch_max_id:
            body["maxId"] = self.state.max_id
        return body

    def lookup(
        self, subject: str, body: Any, *, normalize: bool = False, deleted: bool = False
    ) -> SchemaVersion:
        request = SchemaRequest(body)
        versions = self.state.live_versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        parsed = self._parse(request, normalize)
        for version in reversed(versions):
            if (
                version.schema_type == parsed.schema_type
                and version.references == request.references
                and self._stored(version, normalize).canonical == parsed.canonical
            ):
                return version
        raise errors.schema_not_found()

    # -- parsing -----------------------------------------------------------------------

    def _resolve(self, references: tuple[Reference, ...], seen: set[str]) -> list[str]:
        """The schema strings `references` name, the ones they reference first."""
        resolved: list[str] = []
        for ref in references:
            key = f"{ref.subject}/{ref.version}"
            if key in seen:
                continue
            seen.add(key)
            try:
                target = self.version(ref.subject, str(ref.version))
            except errors.RegistryError:
                raise errors.invalid_schema(
                    f"{{reference={ref.as_json()}}}, details: the referenced schema is not "
                    "registered"
                ) from None
            resolved += self._resolve(target.references, seen)
            resolved.append(target.schema)
        return resolved

    def _parse(self, request: SchemaRequest, normalize: bool) -> ParsedSchema:
        references = self._resolve(request.references, set())
        return parse_schema(
            request.schema_type, request.schema, references, normalize=normalize
        )

    def _stored(self, version: SchemaVersion, normalize: bool = False) -> ParsedSchema:
        """A stored version parsed (once per process)."""
        key = (version.schema_type, version.schema, version.references)
        parsed = self._parsed.get(key)
        if parsed is None:
            references = self._resolve(version.references, set())
            parsed = parse_schema(version.schema_type, version.schema, references)
            self._parsed[key] = parsed
        if normalize and version.schema_type == AVRO:
            return ParsedSchema(AVRO, parsed.parsed.canonical_form, parsed.parsed)
        return parsed

    # -- compatibility -----------------------------------------------------------------

    def level(self, subject: str | None) -> str:
        return self.state.configs.get(subject) or self.state.configs.get(GLOBAL) or (
            self.default_level
        )

    def mode(self, subject: str | None) -> str:
        return self.state.modes.get(subject) or self.state.modes.get(GLOBAL) or "READWRITE"

    def test_compatibility(
        self, subject: str, version_text: str | None, body: Any, *, normalize: bool = False
    ) -> list[str]:
        """Why the schema of `body` breaks the subject's level against one version (or,
        without `version_text`, the versions the level names); [] when compatible."""
        request = SchemaRequest(body)
        parsed = self._parse(request, normalize)
        level = self.level(subject)
        if version_text is None:
            previous = [self._stored(v) for v in self.state.live_versions(subject)]
            return check(level, parsed, previous)
        target = self.version(subject, version_text)
        return check(level.removesuffix("_TRANSITIVE"), parsed, [self._stored(target)])

    # -- registering -------------------------------------------------------------------

    async def register(self, subject: str, body: Any, *, normalize: bool = False) -> int:
        """Register the schema of `body` under `subject`: its id (an existing one when
        the subject already has this schema, or another subject has it)."""
        _check_subject(subject)
        request = SchemaRequest(body)
        async with self.store.lock:
            self._check_writable(subject, request)
            parsed = self._parse(request, normalize)
            live = self.state.live_versions(subject)
            for version in live:
                if (
                    version.schema_type == parsed.schema_type
                    and version.references == request.references
                    and self._stored(version, normalize).canonical == parsed.canonical
                    and request.schema_id in (None, version.schema_id)
                ):
                    return version.schema_id
            if self.mode(subject) != "IMPORT":
                messages = check(self.level(subject), parsed, [self._stored(v) for v in live])
                if messages:
                    raise errors.incompatible_schema(subject, messages)
            new = self._new_version(subject, request, parsed)
            await self.store.write([schema_record(new)])
            return new.schema_id

    def _check_writable(self, subject: str, request: SchemaRequest) -> None:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        if request.schema_id is not None and mode != "IMPORT":
            raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")

    def _new_version(
        self, subject: str, request: SchemaRequest, parsed: ParsedSchema
    ) -> SchemaVersion:
        schema_id = request.schema_id
        existing = self.state.find_id(parsed.schema_type, parsed.canonical, request.references)
        if schema_id is None:
            schema_id = existing if existing is not None else self.state.max_id + 1
        elif schema_id in self.state.by_id and existing != schema_id:
            raise errors.operation_not_permitted(
                f"Overwrite new schema with id {schema_id} is not permitted."
            )
        every = self.state.subjects.get(subject, {})
        number = request.version or (max(every) + 1 if every else 1)
        if number in every:
            raise errors.operation_not_permitted(
                f"Overwrite new schema with version {number} is not permitted."
            )
        return SchemaVersion(
            subject, number, schema_id, parsed.schema_type, parsed.canonical, request.references
        )

    # -- deleting ----------------------------------------------------------------------

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        async with self.store.lock:
            self._check_deletable(subject)
            every = self.state.live_versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                await self.store.write([schema_tombstone(subject, v.version) for v in every])
                return [v.version for v in every]
            if not live:
                raise errors.subject_soft_deleted(subject)
            for version in live:
                self._check_not_referenced(version)
            await self.store.write([schema_record(replace(v, deleted=True)) for v in live])
            return [v.version for v in live]

    async def delete_version(
        self, subject: str, version_text: str, *, permanent: bool = False
    ) -> int:
        number = parse_version(version_text)
        async with self.store.lock:
            self._check_deletable(subject)
            every = self.state.live_versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            candidates = every if permanent else [v for v in every if not v.deleted]
            if number is None:
                if not candidates:
                    raise errors.version_not_found(subject, "latest")
                number = candidates[-1].version
            target = next((v for v in every if v.version == number), None)
            if target is None:
                raise errors.version_not_found(subject, number)
            self._check_not_referenced(target)
            if permanent:
                if not target.deleted:
                    raise errors.version_not_soft_deleted(subject, number)
                await self.store.write([schema_tombstone(subject, number)])
            else:
                if target.deleted:
                    raise errors.version_soft_deleted(subject, number)
                await self.store.write([schema_record(replace(target, deleted=True))])
            return number

    def _check_deletable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def _check_not_referenced(self, version: SchemaVersion) -> None:
        if self.state.referenced_by(version.subject, version.version):
            raise errors.reference_exists(version.subject, version.version)

    # -- configs and modes -------------------------------------------------------------

    def get_config(self, subject: str | None, *, default_to_global: bool = False) -> str:
        level = self.state.configs.get(subject)
        if level is not None:
            return level
        if subject is None or default_to_global:
            return self.level(GLOBAL)
        raise errors.subject_compatibility_not_configured(subject)

    async def set_config(self, subject: str | None, body: Any) -> str:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        level = body.get("compatibility") or body.get("compatibilityLevel")
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.invalid_compatibility_level(level)
        async with self.store.lock:
            await self.store.write([config_record(subject, level.upper())])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        async with self.store.lock:
            previous = self.get_config(subject)
            await self.store.write([config_record(subject, None)])
        return previous

    def get_mode(self, subject: str | None, *, default_to_global: bool = False) -> str:
        mode = self.state.modes.get(subject)
        if mode is not None:
            return mode
        if subject is None or default_to_global:
            return self.mode(GLOBAL)
        raise errors.subject_mode_not_configured(subject)

    async def set_mode(self, subject: str | None, body: Any, *, force: bool = False) -> str:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self.store.lock:
            if mode == "IMPORT" and not force:
                names = self.state.subject_names(deleted=True)
                if (subject is None and names) or subject in names:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects"
                    )
            await self.store.write([mode_record(subject, mode)])
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self.store.lock:
            previous = self.get_mode(subject)
            await self.store.write([mode_record(subject, None)])
        return previous


def _check_subject(subject: str) -> None:
    if not subject or any(ord(c) < 0x20 for c in subject):
        raise errors.invalid_subject(subject)
