"""The schema registry's subjects (with their latest versions and the compatibility
levels) and one subject's versions, each schema shown with its id, type and references.
Only when the console was given `--schema-registry-url`."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.console.errors import ConsoleError
from logbus.console.forms import whole_number
from logbus.console.pages import render
from logbus.console.schemas import RegistryClient

# Subjects whose latest version the list shows (one registry call each); past this the
# list shows names only.
MAX_DETAILED = 100


def registry(request: Request) -> RegistryClient:
    found: RegistryClient | None = request.app.state.registry
    if found is None:
        raise ConsoleError(
            "This console shows no schema registry: start it with --schema-registry-url.", 404
        )
    return found


async def subject_list(request: Request) -> Response:
    client = registry(request)
    subjects = await client.subjects()
    compatibility, mode = await asyncio.gather(client.compatibility(), client.mode())
    latest = await asyncio.gather(
        *(client.version(s, "latest") for s in subjects[:MAX_DETAILED])
    )
    return render(request, "schemas.html", subjects=subjects,
                  latest={v.subject: v for v in latest}, compatibility=compatibility,
                  mode=mode, registry_url=client.url)


async def subject_page(request: Request) -> Response:
    client = registry(request)
    subject = request.path_params["subject"]
    versions = await client.versions(subject)
    asked = request.query_params.get("version")
    version = whole_number(asked, "version", minimum=1) if asked else versions[-1]
    if version not in versions:
        raise ConsoleError(
            f"version: {subject} has versions {', '.join(map(str, versions))}, not {version}",
            404,
        )
    shown, compatibility = await asyncio.gather(
        client.version(subject, version), client.compatibility(subject)
    )
    return render(request, "schema.html", subject=subject, versions=versions, shown=shown,
                  compatibility=compatibility)


routes = [
    Route("/schemas", subject_list, name="schemas"),
    Route("/schemas/{subject:path}", subject_page, name="schema"),
]
