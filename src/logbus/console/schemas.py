"""The schema registry the console shows (`--schema-registry-url`): its REST API (the
Confluent Schema Registry's, as `logbus schema-registry` serves it) read over HTTP with
urllib in a worker thread, so the event loop never waits on it. Read only: the console
registers, changes and deletes nothing there."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from logbus.console.errors import ConsoleError

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"
# A page must answer while a person waits (as the cluster's clients' API_TIMEOUT_MS).
TIMEOUT_SECONDS = 5.0
# Bodies larger than this are not read (a registry answers in kilobytes).
_MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject: its version number, global id, type (AVRO, JSON or
    PROTOBUF), the schema text and the schemas it references (name, subject, version)."""

    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: tuple[tuple[str, str, int], ...]

    @property
    def pretty(self) -> str:
        """The schema as shown: JSON (Avro, JSON Schema) indented, Protobuf as written."""
        if self.schema_type == "PROTOBUF":
            return self.schema
        try:
            return json.dumps(json.loads(self.schema), indent=2, ensure_ascii=False)
        except ValueError:
            return self.schema


def quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class RegistryClient:
    """Reads the registry at `url`. Safe to share between tasks (no state but the URL)."""

    def __init__(self, url: str, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def get(self, path: str) -> Any:
        """The JSON of GET `path`; a ConsoleError with the registry's status and message
        when it answers with an error, 503 when it cannot be reached."""
        return await asyncio.to_thread(self._get, path)

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path, headers={"Accept": _ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read(_MAX_BODY))
        except urllib.error.HTTPError as exc:
            raise ConsoleError(
                f"The schema registry answered {exc.code}: {_message(exc)}",
                exc.code if exc.code in (404, 403, 401) else 502,
            ) from None
        except (OSError, ValueError) as exc:
            raise ConsoleError(
                f"The schema registry at {self.url} could not be reached ({exc}).", 503
            ) from None

    async def subjects(self) -> list[str]:
        found = await self.get("/subjects")
        return sorted(str(s) for s in found)

    async def versions(self, subject: str) -> list[int]:
        found = await self.get(f"/subjects/{quoted(subject)}/versions")
        return sorted(int(v) for v in found)

    async def version(self, subject: str, version: int | str) -> SchemaVersion:
        found = await self.get(f"/subjects/{quoted(subject)}/versions/{version}")
        return SchemaVersion(
            subject=str(found["subject"]),
            version=int(found["version"]),
            schema_id=int(found["id"]),
            schema_type=str(found.get("schemaType") or "AVRO"),
            schema=str(found["schema"]),
            references=tuple(
                (str(r["name"]), str(r["subject"]), int(r["version"]))
                for r in found.get("references") or ()
            ),
        )

    async def compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of `subject` (its own, else the global one), or the
        global one."""
        path = "/config" if subject is None else f"/config/{quoted(subject)}?defaultToGlobal=true"
        found = await self.get(path)
        return str(found.get("compatibilityLevel") or found.get("compatibility") or "-")

    async def mode(self) -> str:
        found = await self.get("/mode")
        return str(found.get("mode") or "-")


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read(64 * 1024))
    except ValueError:
        return str(exc.reason)
    if isinstance(body, dict) and "message" in body:
        code = body.get("error_code")
        return f"{body['message']} (error {code})" if code else str(body["message"])
    return str(exc.reason)
