"""One call to a schema registry's REST API (Confluent's, as logbus's own registry
serves it) over the standard library's HTTP client, for the registry's clients inside
logbus: the REST proxy's embedded formats and the Spark source and sink. Each maps the
two errors below onto its own."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryRefused(Exception):
    """The registry answered with an error: its HTTP status, message and error code."""

    def __init__(self, status: int, message: str, error_code: int | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_code = error_code


class RegistryUnreachable(Exception):
    """No answer, or one that is not JSON."""


def call_registry(
    url: str, method: str, path: str, body: Any = None, *, timeout: float
) -> Any:
    """`method` `url + path` with `body` as JSON; the answer's JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, method=method,
        headers={"Content-Type": REGISTRY_TYPE, "Accept": REGISTRY_TYPE},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
            message, code = str(answer.get("message", exc)), answer.get("error_code")
        except (ValueError, AttributeError):
            message, code = str(exc), None
        raise RegistryRefused(
            exc.code, message, code if isinstance(code, int) else None
        ) from None
    except (OSError, ValueError) as exc:
        raise RegistryUnreachable(str(exc)) from None
