"""DescribeConfigs v1-4 (KIP-226 sources and synonyms, KIP-569 types and documentation).

Resources as Kafka's broker answers them (`ConfigHelper.describeConfigs`):
- TOPIC (2): every topic setting with its source; an illegal name is
  INVALID_TOPIC_EXCEPTION, a missing topic UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): named after this broker's id, every broker setting; named "", the dynamic
  cluster-wide defaults only; any other name is INVALID_REQUEST.
- BROKER_LOGGER (8): named after this broker's id, the level of every logger of the broker
  (`server/log4j_controller.py`, as Kafka lists its log4j loggers), with log4j's level
  names; any other name is INVALID_REQUEST.
- anything else: INVALID_REQUEST "Unsupported resource type".

An empty or null `configuration_keys` asks for every setting. Sensitive values are null.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection

from logbus.common.config_def import ConfigEntry, ConfigError, ConfigSource
from logbus.controller.topic_validation import topic_name_error
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from logbus.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from logbus.server import log4j_controller
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.config.topic_config import describe_broker, describe_topic
from logbus.server.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
RESOURCE_TYPE_NAMES = {
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
# Java's Integer.parseInt: an optional sign and ASCII digits.
_BROKER_ID = re.compile(r"[+-]?[0-9]+")


class ResourceError(Exception):
    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _entry(entry: ConfigEntry, include_documentation: bool) -> DescribeConfigsResourceResult:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": int(entry.source),
        "is_sensitive": entry.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": int(s.source)} for s in entry.synonyms
        ],
        "config_type": int(entry.config_type),
        "documentation": entry.documentation if include_documentation else None,
    }


def _broker_id(ctx: RequestContext, name: str, expected: str) -> None:
    """Check that a broker resource names this broker, with Kafka's messages."""
    if not _BROKER_ID.fullmatch(name):
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        )
    broker_id = ctx.services.broker_id
    if int(name) != broker_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id}{expected} but received {name}",
        )


def _topic_configs(
    ctx: RequestContext,
    name: str,
    keys: Collection[str] | None,
    synonyms: bool,
    documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    problem = topic_name_error(name)
    if problem is not None:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    topic = ctx.services.metadata_cache.topics.get(name)
    if topic is None:
        raise ResourceError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        )
    try:
        entries = describe_topic(
            topic.configs,
            ctx.config,
            names=keys,
            include_synonyms=synonyms,
            include_documentation=documentation,
        )
    except ConfigError as exc:  # a stored override this version no longer accepts
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return [_entry(e, documentation) for e in entries]


def _broker_configs(
    ctx: RequestContext,
    name: str,
    keys: Collection[str] | None,
    synonyms: bool,
    documentation: bool,
) -> list[DescribeConfigsResourceResult]:
    if name:
        _broker_id(ctx, name, " or empty string,")
    entries = describe_broker(
        ctx.config,
        names=keys,
        cluster_default=not name,
        include_synonyms=synonyms,
        include_documentation=documentation,
    )
    return [_entry(e, documentation) for e in entries]


def _logger_configs(
    ctx: RequestContext, name: str, keys: Collection[str] | None
) -> list[DescribeConfigsResourceResult]:
    """Kafka lists every logger with the source DYNAMIC_BROKER_LOGGER_CONFIG, whether or
    not its level was changed at run time; a logger named but unknown is left out."""
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    _broker_id(ctx, name, "")
    return [
        {
            "name": logger,
            "value": level,
            "read_only": False,
            "is_default": False,
            "config_source": int(ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG),
            "is_sensitive": False,
            "synonyms": [],
            "documentation": None,
        }
        for logger, level in log4j_controller.loggers().items()
        if keys is None or logger in keys
    ]


def describe_resource(
    ctx: RequestContext, resource: DescribeConfigsResource, synonyms: bool, documentation: bool
) -> DescribeConfigsResult:
    resource_type: int = resource["resource_type"]
    name: str = resource["resource_name"]
    requested: list[str] | None = resource["configuration_keys"]
    keys = set(requested) if requested else None
    log.debug("describing the configs of %s %r", RESOURCE_TYPE_NAMES.get(resource_type), name)
    result: DescribeConfigsResult = {"resource_type": resource_type, "resource_name": name}
    denied = config_authorization(ctx, resource_type, name, AclOperation.DESCRIBE_CONFIGS)
    if denied is not None:
        return {**result, "error_code": denied, "error_message": None, "configs": []}
    try:
        if resource_type == TOPIC:
            configs = _topic_configs(ctx, name, keys, synonyms, documentation)
        elif resource_type == BROKER:
            configs = _broker_configs(ctx, name, keys, synonyms, documentation)
        elif resource_type == BROKER_LOGGER:
            configs = _logger_configs(ctx, name, keys)
        else:
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"Unsupported resource type: {RESOURCE_TYPE_NAMES.get(resource_type, 'UNKNOWN')}",
            )
    except ResourceError as exc:
        return {**result, "error_code": exc.error, "error_message": exc.message, "configs": []}
    return {**result, "error_code": ErrorCode.NONE, "error_message": None, "configs": configs}


def config_authorization(
    ctx: RequestContext, resource_type: int, name: str, operation: AclOperation
) -> ErrorCode | None:
    """Kafka's check for a config resource: `operation` (DescribeConfigs, AlterConfigs)
    on the topic, or on the cluster for a broker or its loggers; the error when refused."""
    if resource_type == TOPIC:
        if not ctx.authorize(operation, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type in (BROKER, BROKER_LOGGER) and not ctx.authorize(
        operation, ResourceType.CLUSTER
    ):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def _resource_key(resource: DescribeConfigsResource) -> tuple[int, str]:
    """What a resource describes: broker ids compare as numbers ("0", "00" and "+0" are
    one broker), anything else by its name."""
    resource_type: int = resource["resource_type"]
    name: str = resource["resource_name"]
    if resource_type in (BROKER, BROKER_LOGGER) and _BROKER_ID.fullmatch(name):
        return resource_type, str(int(name))
    return resource_type, name


def distinct_resources(
    resources: list[DescribeConfigsResource],
) -> list[DescribeConfigsResource]:
    """Each resource once, in the order first asked: a request repeating one resource
    (a 50 KB request naming the broker 10,000 times asked for a 170 MB answer and held the
    event loop for 20 s) costs what one mention of it costs."""
    seen: set[tuple[int, str]] = set()
    distinct = []
    for resource in resources:
        key = _resource_key(resource)
        if key not in seen:
            seen.add(key)
            distinct.append(resource)
    return distinct


async def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    synonyms = bool(request["include_synonyms"])
    documentation = bool(request["include_documentation"])
    return {
        "throttle_time_ms": 0,
        "results": [
            describe_resource(ctx, resource, synonyms, documentation)
            for resource in distinct_resources(request["resources"])
        ],
    }


HANDLERS = [ApiHandler(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs)]
