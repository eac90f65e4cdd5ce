"""DescribeConfigs v1-4: every config of one resource (a topic, a broker, or "" for the
cluster-wide broker defaults), with sources, synonyms, types and documentation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import check
from logbus.client.requests.common import require_version, send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages import describe_configs_request as describe_configs_request_
from logbus.protocol.messages.describe_configs_response import DescribeConfigsResponse

# Config resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
MIN_VERSION = 1  # v0 has no config sources


@dataclass(frozen=True, slots=True)
class ConfigSynonymInfo:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigInfo:
    """One DescribeConfigs entry; `source` and `config_type` are the protocol's ids."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    config_type: int
    synonyms: list[ConfigSynonymInfo]
    documentation: str | None


class DescribeConfigsRequest(NamedTuple):
    """One resource's configs: every one, or only `names`; a BROKER resource named ""
    asks for the cluster-wide defaults."""

    resource_type: int
    name: str
    names: Sequence[str] | None = None
    include_synonyms: bool = True
    include_documentation: bool = False


def build_describe_configs(
    version: int, request: DescribeConfigsRequest
) -> describe_configs_request_.DescribeConfigsRequest:
    return {
        "resources": [
            {
                "resource_type": request.resource_type,
                "resource_name": request.name,
                "configuration_keys": list(request.names) if request.names else None,
            }
        ],
        "include_synonyms": request.include_synonyms,
        "include_documentation": request.include_documentation,
    }


def read_describe_configs(response: DescribeConfigsResponse) -> list[ConfigInfo]:
    """The one resource's configs; raises its error."""
    [result] = response["results"]
    check(result["error_code"], result["error_message"])
    return [
        ConfigInfo(
            entry["name"],
            entry["value"],
            entry["config_source"],
            entry["is_sensitive"],
            entry["read_only"],
            entry.get("config_type", 0) or 0,
            [ConfigSynonymInfo(s["name"], s["value"], s["source"]) for s in entry["synonyms"]],
            entry.get("documentation"),
        )
        for entry in result["configs"]
    ]


async def describe_configs(conn: Connection, request: DescribeConfigsRequest) -> list[ConfigInfo]:
    """The configs of one resource, as the broker describes them. A BROKER resource must
    go to that broker."""
    version = require_version(conn, ApiKey.DESCRIBE_CONFIGS, MIN_VERSION)
    body = build_describe_configs(version, request)
    response = await send(conn, apis.DESCRIBE_CONFIGS, body, version)
    return read_describe_configs(response)
