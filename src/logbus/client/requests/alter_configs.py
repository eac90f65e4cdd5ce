"""AlterConfigs v0-2 (replace a resource's whole set of dynamic configs) and
IncrementalAlterConfigs v0-1 (set, delete, append to or subtract from single configs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logbus.client.connection import Connection
from logbus.client.errors import check
from logbus.client.requests.common import send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.alter_configs_request import AlterConfigsRequest
from logbus.protocol.messages.alter_configs_response import AlterConfigsResponse
from logbus.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from logbus.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def build_alter_configs(
    version: int,
    resource_type: int,
    name: str,
    configs: Mapping[str, str],
    *,
    validate_only: bool = False,
) -> AlterConfigsRequest:
    return {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": n, "value": v} for n, v in configs.items()],
            }
        ],
        "validate_only": validate_only,
    }


def build_incremental_alter_configs(
    version: int,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> IncrementalAlterConfigsRequest:
    """(config name, OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT, value) operations."""
    return {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [
                    {"name": n, "config_operation": op, "value": v} for n, op, v in ops
                ],
            }
        ],
        "validate_only": validate_only,
    }


def read_alter_configs(response: AlterConfigsResponse | IncrementalAlterConfigsResponse) -> None:
    """Either API's answer for its one resource: raises its error."""
    [result] = response["responses"]
    check(result["error_code"], result["error_message"])


async def alter_configs(
    conn: Connection,
    resource_type: int,
    name: str,
    configs: Mapping[str, str],
    *,
    validate_only: bool = False,
) -> None:
    """Replace the whole set of one resource's dynamic configs (the legacy AlterConfigs)."""
    version = conn.choose_version(ApiKey.ALTER_CONFIGS)
    body = build_alter_configs(version, resource_type, name, configs, validate_only=validate_only)
    read_alter_configs(await send(conn, apis.ALTER_CONFIGS, body, version))


async def incremental_alter_configs(
    conn: Connection,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> None:
    """Apply operations to one resource's dynamic configs. A BROKER resource must go to
    that broker."""
    version = conn.choose_version(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    body = build_incremental_alter_configs(
        version, resource_type, name, ops, validate_only=validate_only
    )
    response = await send(conn, apis.INCREMENTAL_ALTER_CONFIGS, body, version)
    read_alter_configs(response)
