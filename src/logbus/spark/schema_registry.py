"""The `logbus` data source's client of a schema registry (Confluent's REST API, as
logbus's own `logbus schema-registry` serves it): the calls the Avro formats need, made
with urllib, synchronously (the driver plans, an executor's task decodes; neither has
an event loop to spare). The entry point is `RegistryClient`.

A failure raises `RegistryError`, a `LogbusSparkError` carrying the registry's HTTP
status and Confluent error code (None for a registry that did not answer), so a caller
can tell an unknown subject or id from a registry that is down.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from logbus.common.registry_http import RegistryRefused, RegistryUnreachable, call_registry
from logbus.spark.options import LogbusSparkError

# Confluent's error codes a caller tells apart.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403


class RegistryError(LogbusSparkError):
    """A registry call that failed: its HTTP status and Confluent error code, or None
    for both when the registry could not be reached."""

    def __init__(self, message: str, status: int | None = None, code: int | None = None):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject: its schema's id and text."""

    subject: str
    version: int
    schema_id: int
    schema: str


class RegistryClient:
    """Calls one registry (`schema.registry.url`). Holds no connection between calls, so
    it is safe to ship to executors and to share between threads."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return call_registry(self.url, method, path, body, timeout=self.timeout)
        except RegistryRefused as exc:
            raise RegistryError(
                f"the schema registry answered {exc.status}: {exc.message}", exc.status,
                exc.error_code,
            ) from None
        except RegistryUnreachable as exc:
            raise RegistryError(
                f"cannot reach the schema registry at {self.url} "
                f"(option 'schema.registry.url'): {exc}"
            ) from None

    @staticmethod
    def _subject_path(subject: str) -> str:
        return f"/subjects/{urllib.parse.quote(subject, safe='')}"

    @staticmethod
    def _avro_text(answer: Any, what: str) -> str:
        schema_type = answer.get("schemaType", "AVRO")
        if schema_type != "AVRO":
            raise LogbusSparkError(f"{what} is a {schema_type} schema, not an Avro one")
        return str(answer["schema"])

    def version(self, subject: str, version: int | str = "latest") -> SubjectVersion:
        """A version of `subject` ("latest" for its newest)."""
        answer = self._call(
            "GET", f"{self._subject_path(subject)}/versions/"
            f"{urllib.parse.quote(str(version), safe='')}"
        )
        text = self._avro_text(answer, f"version {version} of subject {subject!r}")
        return SubjectVersion(subject, int(answer["version"]), int(answer["id"]), text)

    def schema(self, schema_id: int) -> str:
        """The text of the schema with this id."""
        answer = self._call("GET", f"/schemas/ids/{schema_id}")
        return self._avro_text(answer, f"schema id {schema_id}")

    def register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject` (or find it there): its id. A schema the
        subject's compatibility rules refuse raises the registry's 409."""
        answer = self._call("POST", f"{self._subject_path(subject)}/versions", {"schema": schema})
        return int(answer["id"])

    def lookup(self, subject: str, schema: str) -> int:
        """The id `schema` has under `subject`, which must already hold it."""
        answer = self._call("POST", self._subject_path(subject), {"schema": schema})
        return int(answer["id"])
