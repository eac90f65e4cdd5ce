"""AlterConfigs v0-2 (KIP-133) and IncrementalAlterConfigs v0-1 (KIP-339).

Resources, as Kafka's broker answers them in ZooKeeper mode (`ZkAdminManager`, with the
request checks of `ConfigAdminManager`):
- TOPIC (2): the topic's overrides in `/config/topics/<topic>`; a missing topic is
  UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): named "" the cluster-wide defaults (`/config/brokers/<default>`), named after
  this broker's id its own dynamic configs (`/config/brokers/<id>`); another id is
  INVALID_REQUEST.
- BROKER_LOGGER (8), incremental only: the level of a logger of this process (SET,
  DELETE), not persisted, as Kafka's log4j levels (KIP-412).
- anything else: INVALID_REQUEST.

AlterConfigs replaces the resource's whole set of dynamic configs; IncrementalAlterConfigs
applies SET, DELETE, APPEND and SUBTRACT to the stored set. A resource named twice in one
request fails both times. With `validate_only` nothing is written. A change is written
with a change notification, so every broker applies it at once (`dynamic_config`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from typing import cast

from logbus.controller.config_store import (
    BROKER,
    DEFAULT_ENTITY,
    TOPIC,
    change_entity_config,
    fetch_entity_config,
)
from logbus.controller.metadata_store import StoreUnavailable
from logbus.controller.topic_validation import topic_name_error
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import alter_configs_request as alter_req
from logbus.protocol.messages import incremental_alter_configs_request as incremental_req
from logbus.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from logbus.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from logbus.server import log4j_controller
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.configs import (
    BROKER as BROKER_RESOURCE,
)
from logbus.server.api.configs import (
    BROKER_LOGGER,
    RESOURCE_TYPE_NAMES,
    ResourceError,
    config_authorization,
)
from logbus.server.api.configs import (
    TOPIC as TOPIC_RESOURCE,
)
from logbus.server.config.broker_config_def import BROKER_CONFIG_DEF
from logbus.server.config.config_admin import (
    AlterOp,
    ConfigUpdateError,
    OpType,
    apply_ops,
    check_broker_update,
    check_request_entries,
    check_topic_update,
)
from logbus.server.config.topic_config import TOPIC_CONFIG_DEF
from logbus.server.security.acl import AclOperation
from logbus.server.share.group_configs import (
    GROUP_RESOURCE,
    GroupConfigError,
    alter_group_configs,
)

log = logging.getLogger(__name__)

Resource = alter_req.AlterConfigsResource | incremental_req.AlterConfigsResource


def _broker_entity(ctx: RequestContext, name: str) -> str:
    """The store entity of a BROKER resource: <default> for "", else this broker's id."""
    if not name:
        return DEFAULT_ENTITY
    try:
        broker_id = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != ctx.services.broker_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.services.broker_id}, but received {name}",
        )
    return str(broker_id)


def _alter_topic(
    ctx: RequestContext,
    name: str,
    new_configs: Mapping[str, str] | None,
    ops: list[AlterOp] | None,
    validate_only: bool,
) -> None:
    problem = topic_name_error(name)
    if problem is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    store = ctx.services.store
    if name not in ctx.services.metadata_cache.topics:
        raise ResourceError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )
    if ops is not None:
        new_configs = apply_ops(fetch_entity_config(store, TOPIC, name), ops, TOPIC_CONFIG_DEF)
    assert new_configs is not None
    check_topic_update(new_configs, ctx.config)
    if not validate_only:
        log.info("updating topic %s with new configuration: %s", name, dict(new_configs))
        change_entity_config(store, TOPIC, name, new_configs)


def _alter_broker(
    ctx: RequestContext,
    name: str,
    new_configs: Mapping[str, str] | None,
    ops: list[AlterOp] | None,
    validate_only: bool,
) -> None:
    dynamic_config = ctx.services.dynamic_config
    entity = _broker_entity(ctx, name)
    default, per_broker = dynamic_config.dynamic_layers()
    if ops is not None:
        current = default if entity == DEFAULT_ENTITY else per_broker
        new_configs = apply_ops(current, ops, BROKER_CONFIG_DEF)
    assert new_configs is not None
    check_broker_update(
        new_configs,
        per_broker=entity != DEFAULT_ENTITY,
        static=dynamic_config.static,
        dynamic_default=default,
        dynamic_per_broker=per_broker,
    )
    if not validate_only:
        log.info("updating broker config %s with: %s", entity, dict(new_configs))
        change_entity_config(ctx.services.store, BROKER, entity, new_configs)


def _alter_group(ctx: RequestContext, name: str, ops: list[AlterOp], validate_only: bool) -> None:
    """A group's configs (KIP-932's `share.auto.offset.reset`, ...): server/share/group_configs."""
    try:
        alter_group_configs(
            ctx.services.store, name, [(op.name, op.op, op.value) for op in ops], validate_only
        )
    except GroupConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from exc


def _alter_loggers(ctx: RequestContext, name: str, ops: list[AlterOp], validate_only: bool) -> None:
    """SET and DELETE a logger's level, as Kafka's `ConfigAdminManager.validateLogLevelConfigs`
    checks them: every operation is checked before any level changes."""
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    _broker_entity(ctx, name)
    for op in ops:
        if op.op in (OpType.APPEND, OpType.SUBTRACT):
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"{OpType(op.op).name} operation is not allowed for the BROKER_LOGGER resource",
            )
        if op.op not in (OpType.SET, OpType.DELETE):
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op.op}")
        if not log4j_controller.logger_exists(op.name):
            raise ResourceError(ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!")
        if op.op == OpType.SET and op.value not in log4j_controller.SETTABLE_LEVELS:
            raise ResourceError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {op.name} to {op.value} as it is not a supported "
                f"log level. Valid log levels are {', '.join(log4j_controller.SETTABLE_LEVELS)}",
            )
        if op.op == OpType.DELETE and op.name == log4j_controller.ROOT_LOGGER:
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                "Removing the log level of the root logger is not allowed",
            )
    if validate_only:
        return
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None
            log.info("updating the log level of %s to %s", op.name, op.value)
            log4j_controller.set_level(op.name, op.value)
        else:
            log.info("unsetting the log level of %s", op.name)
            log4j_controller.unset_level(op.name)


def _result(
    resource: Resource, error: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> AlterConfigsResourceResponse:
    return {
        "error_code": error,
        "error_message": message,
        "resource_type": resource["resource_type"],
        "resource_name": resource["resource_name"],
    }


def _alter_one(
    ctx: RequestContext, resource: Resource, incremental: bool, validate_only: bool
) -> AlterConfigsResourceResponse:
    resource_type: int = resource["resource_type"]
    name: str = resource["resource_name"]
    entries = resource["configs"]
    new_configs: dict[str, str] | None = None
    try:
        if incremental:
            # An IncrementalAlterConfigs resource: its entries carry their operation.
            changes = cast(list[incremental_req.AlterableConfig], entries)
            ops = [AlterOp(e["name"], e["config_operation"], e["value"]) for e in changes]
        else:
            ops = None
            check_request_entries(
                [e["name"] for e in entries], [e["name"] for e in entries if e["value"] is None]
            )
            # (no value is None past the check above)
            new_configs = {e["name"]: v for e in entries if (v := e["value"]) is not None}
        if resource_type == TOPIC_RESOURCE:
            _alter_topic(ctx, name, new_configs, ops, validate_only)
        elif resource_type == BROKER_RESOURCE:
            _alter_broker(ctx, name, new_configs, ops, validate_only)
        elif resource_type == BROKER_LOGGER and ops is not None:
            check_request_entries([op.name for op in ops], [])
            _alter_loggers(ctx, name, ops, validate_only)
        elif resource_type == GROUP_RESOURCE and ops is not None:
            _alter_group(ctx, name, ops, validate_only)
        else:
            kind = RESOURCE_TYPE_NAMES.get(resource_type, "UNKNOWN")
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"AlterConfigs is only supported for topics and brokers, but resource type is "
                f"{kind}",
            )
    except (ConfigUpdateError, ResourceError) as exc:
        return _result(resource, exc.error, exc.message)
    except StoreUnavailable as exc:
        # ZooKeeper unreachable past zookeeper.connection.timeout.ms: nothing was changed
        return _result(resource, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    return _result(resource)


def _alter_all(
    ctx: RequestContext,
    request: alter_req.AlterConfigsRequest | incremental_req.IncrementalAlterConfigsRequest,
    incremental: bool,
) -> AlterConfigsResponse:
    validate_only = bool(request["validate_only"])
    resources: list[Resource] = list(request["resources"])
    counts = Counter((r["resource_type"], r["resource_name"]) for r in resources)
    results = []
    for resource in resources:
        if counts[(resource["resource_type"], resource["resource_name"])] > 1:
            results.append(
                _result(
                    resource, ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
                )
            )
        elif denied := config_authorization(
            ctx, resource["resource_type"], resource["resource_name"], AclOperation.ALTER_CONFIGS
        ):
            results.append(_result(resource, denied))
        else:
            results.append(_alter_one(ctx, resource, incremental, validate_only))
    return {"throttle_time_ms": 0, "responses": results}


async def _run(
    ctx: RequestContext,
    request: alter_req.AlterConfigsRequest | incremental_req.IncrementalAlterConfigsRequest,
    incremental: bool,
) -> AlterConfigsResponse:
    """Inline over the embedded store (it lives on the event loop); in a cluster in a
    worker thread, as ZooKeeper's reads and writes must not block the loop."""
    if not ctx.services.in_cluster:
        return _alter_all(ctx, request, incremental)
    return await asyncio.to_thread(_alter_all, ctx, request, incremental)


async def handle_alter_configs(
    ctx: RequestContext, request: alter_req.AlterConfigsRequest
) -> AlterConfigsResponse:
    return await _run(ctx, request, incremental=False)


async def handle_incremental_alter_configs(
    ctx: RequestContext, request: incremental_req.IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    return await _run(ctx, request, incremental=True)


HANDLERS = [
    ApiHandler(ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs),
    ApiHandler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs),
]
