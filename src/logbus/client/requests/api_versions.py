"""ApiVersions v0-4 (KIP-35, KIP-511): which versions of each API the broker serves. Sent
by `Connection.connect` before anything else; this module imports no connection, so the
connection can use it."""

from __future__ import annotations

from typing import NamedTuple

from logbus.protocol.messages.api_versions_request import ApiVersionsRequest
from logbus.protocol.messages.api_versions_response import ApiVersionsResponse

SOFTWARE_NAME = "logbus"


class ApiVersionsResult(NamedTuple):
    """The error code and api key -> (min_version, max_version). With
    UNSUPPORTED_VERSION the broker answered in v0 and named its own range (KIP-511)."""

    error_code: int
    ranges: dict[int, tuple[int, int]]


def build_api_versions(version: int, software_version: str) -> ApiVersionsRequest:
    return {"client_software_name": SOFTWARE_NAME, "client_software_version": software_version}


def read_api_versions(response: ApiVersionsResponse) -> ApiVersionsResult:
    return ApiVersionsResult(
        response["error_code"],
        {
            entry["api_key"]: (entry["min_version"], entry["max_version"])
            for entry in response["api_keys"]
        },
    )
