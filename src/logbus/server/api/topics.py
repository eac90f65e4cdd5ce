"""Topic administration: CreateTopics v2-7, DeleteTopics v1-6, CreatePartitions v0-3.

Checks and error messages follow Kafka's broker (`KafkaApis` and `ZkAdminManager`);
DeleteTopics v6 (KIP-516, topics by id) follows the per-topic checks of Kafka's
`ControllerApis`. The controller decides; a broker that is not the active controller
answers NOT_CONTROLLER, as Kafka does.

Differences from Kafka, on purpose:
- The controller creates and deletes synchronously, so every answer reports the outcome.
  Kafka answers REQUEST_TIMED_OUT for a topic whose change it started but did not wait for
  (`timeout_ms` <= 0); logbus has nothing left to wait for and answers NONE.
- CreateTopics v5+ reports the topic's configs (sources included) as DescribeConfigs does
  (KIP-525); a failed topic gets -1 partitions, -1 replicas and an empty config list, as in
  Kafka.
- Internal topics may be deleted, as in Kafka: the broker does not stop it (Kafka's
  `kafka-topics.sh` refuses on the client side).
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

from logbus.controller.controller import Controller, NewTopic, TopicResult
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.config_def import ConfigError
from logbus.server.topic_config import describe_topic, validate_topic_configs

ZERO_UUID = UUID(int=0)
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def active_controller(ctx: RequestContext) -> Controller | None:
    """The controller, if this broker is the active one (topic changes go through it)."""
    broker = ctx.broker
    if broker.metadata_cache.controller_id != broker.broker_id:
        return None
    return ctx.services.controller


# --- CreateTopics -----------------------------------------------------------------------


def _created_error(name: str, error: ErrorCode, message: str | None) -> Body:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": error,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _topic_configs(ctx: RequestContext, overrides: dict[str, str]) -> list[Body]:
    entries = describe_topic(
        overrides, ctx.broker.config, include_synonyms=False, include_documentation=False
    )
    return [
        {
            "name": e.name,
            "value": e.value,
            "read_only": e.read_only,
            "config_source": int(e.source),
            "is_sensitive": e.is_sensitive,
        }
        for e in entries
    ]


def _assignments(topic: Body) -> dict[int, list[int]] | str:
    """The manual assignment of a CreateTopics entry, or why it is malformed."""
    assignments: dict[int, list[int]] = {}
    for entry in topic["assignments"]:
        index = entry["partition_index"]
        if index in assignments:
            return f"Partition {index} is assigned twice"
        assignments[index] = list(entry["broker_ids"])
    return assignments


def _create_topic(
    ctx: RequestContext, controller: Controller, topic: Body, validate_only: bool
) -> Body:
    name: str = topic["name"]
    null_configs = [c["name"] for c in topic["configs"] if c["value"] is None]
    if null_configs:
        return _created_error(
            name,
            ErrorCode.INVALID_CONFIG,
            f"Null value not supported for topic configs: {','.join(null_configs)}",
        )
    configs: dict[str, str] = {c["name"]: c["value"] for c in topic["configs"]}
    assignments = _assignments(topic)
    if isinstance(assignments, str):
        return _created_error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, assignments)
    spec = NewTopic(
        name, topic["num_partitions"], topic["replication_factor"], assignments, configs
    )
    checked = controller.validate_new_topic(spec)
    if checked.error != ErrorCode.NONE:
        return _created_error(name, checked.error, checked.message)
    try:
        # Again with the broker's settings, which some checks (compaction lags) need.
        validate_topic_configs(configs, ctx.broker.config)
        topic_configs = _topic_configs(ctx, configs) if ctx.version >= 5 else []
    except ConfigError as exc:
        return _created_error(name, ErrorCode.INVALID_CONFIG, str(exc))
    result: TopicResult = checked if validate_only else controller.create_topic(spec)
    if result.error != ErrorCode.NONE:
        return _created_error(name, result.error, result.message)
    return {
        "name": name,
        "topic_id": result.topic_id,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": topic_configs,
    }


async def handle_create_topics(ctx: RequestContext, request: Body) -> Body:
    controller = active_controller(ctx)
    validate_only = bool(request["validate_only"])
    topics: list[Body] = request["topics"]
    counts = Counter(topic["name"] for topic in topics)
    results: list[Body] = []
    for topic in topics:
        name = topic["name"]
        if counts[name] > 1:
            # Every entry of a name given twice fails, as in Kafka.
            results.append(
                _created_error(
                    name, ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."
                )
            )
        elif controller is None:
            results.append(_created_error(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE))
        else:
            results.append(_create_topic(ctx, controller, topic, validate_only))
    return {"throttle_time_ms": 0, "topics": results}


# --- DeleteTopics -----------------------------------------------------------------------


def _deleted(
    name: str | None, topic_id: UUID, error: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> Body:
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


def _delete_targets(ctx: RequestContext, request: Body) -> list[tuple[str | None, UUID]]:
    if ctx.version >= 6:
        return [(t["name"], t["topic_id"]) for t in request["topics"]]
    return [(name, ZERO_UUID) for name in request["topic_names"]]


def _delete_all(controller: Controller, targets: list[tuple[str | None, UUID]]) -> list[Body]:
    """KIP-516 checks (ControllerApis): exactly one of name and id per entry, each topic
    once; then resolve ids and delete, one result per distinct topic, in request order."""
    names = Counter(
        name for name, topic_id in targets if name is not None and topic_id == ZERO_UUID
    )
    ids = Counter(topic_id for name, topic_id in targets if name is None and topic_id != ZERO_UUID)
    by_id = {topic.topic_id: topic.name for topic in controller.topics.values()}
    # Topics also named by an id elsewhere in the request: the id wins, as in Kafka.
    id_of_named = {by_id[topic_id]: topic_id for topic_id in ids if topic_id in by_id}
    results: list[Body] = []
    reported: set[str | UUID] = set()
    for name, topic_id in targets:
        if name is None and topic_id == ZERO_UUID:
            results.append(
                _deleted(
                    None,
                    ZERO_UUID,
                    ErrorCode.INVALID_REQUEST,
                    "Neither topic name nor id were specified.",
                )
            )
            continue
        if name is not None and topic_id != ZERO_UUID:
            results.append(
                _deleted(
                    name,
                    topic_id,
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            )
            continue
        key: str | UUID = name if name is not None else topic_id
        if key in reported:
            continue
        reported.add(key)
        if name is not None and names[name] > 1:
            results.append(
                _deleted(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            )
        elif name is None and ids[topic_id] > 1:
            results.append(
                _deleted(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
            )
        elif name is None:
            found = by_id.get(topic_id)
            if found is None:
                results.append(
                    _deleted(
                        None,
                        topic_id,
                        ErrorCode.UNKNOWN_TOPIC_ID,
                        "This server does not host this topic ID.",
                    )
                )
            else:
                results.append(_delete_one(controller, found))
        elif name in id_of_named:
            results.append(
                _deleted(
                    name,
                    id_of_named[name],
                    ErrorCode.INVALID_REQUEST,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            results.append(_delete_one(controller, name))
    return results


def _delete_one(controller: Controller, name: str) -> Body:
    result = controller.delete_topic(name)
    if result.error != ErrorCode.NONE:
        return _deleted(name, ZERO_UUID, result.error, result.message)
    return _deleted(name, result.topic_id)


async def handle_delete_topics(ctx: RequestContext, request: Body) -> Body:
    targets = _delete_targets(ctx, request)
    controller = active_controller(ctx)
    results: list[Body]
    if controller is None:
        results = [
            _deleted(name, topic_id, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            for name, topic_id in targets
        ]
    elif not ctx.broker.config.delete_topic_enable:
        # TOPIC_DELETION_DISABLED came with v3; older clients get INVALID_REQUEST.
        error = ErrorCode.INVALID_REQUEST if ctx.version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        results = [
            _deleted(name, topic_id, error, "Topic deletion is disabled.")
            for name, topic_id in targets
        ]
    else:
        results = _delete_all(controller, targets)
    return {"throttle_time_ms": 0, "responses": results}


# --- CreatePartitions -------------------------------------------------------------------


def _partitions_result(
    name: str, error: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> Body:
    return {"name": name, "error_code": error, "error_message": message}


async def handle_create_partitions(ctx: RequestContext, request: Body) -> Body:
    controller = active_controller(ctx)
    validate_only = bool(request["validate_only"])
    topics: list[Body] = request["topics"]
    counts = Counter(topic["name"] for topic in topics)
    results: list[Body] = []
    seen: set[str] = set()
    for topic in topics:
        name: str = topic["name"]
        if name in seen:
            continue
        seen.add(name)
        if counts[name] > 1:
            # One result per name, as Kafka answers from a map keyed by topic.
            results.append(
                _partitions_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            )
        elif controller is None:
            results.append(
                _partitions_result(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            )
        else:
            raw: list[Any] | None = topic["assignments"]
            assignments = None if raw is None else [list(a["broker_ids"]) for a in raw]
            result = controller.create_partitions(name, topic["count"], assignments, validate_only)
            results.append(_partitions_result(name, result.error, result.message))
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = [
    ApiHandler(ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics),
    ApiHandler(ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics),
    ApiHandler(ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions),
]
