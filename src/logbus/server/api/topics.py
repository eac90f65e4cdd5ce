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

Limits (issue 13): a request creating more than 10,000 partitions in all is refused
whole with POLICY_VIOLATION, as Kafka's KRaft controller does; so is a creation that
would put more than `max.broker.partitions` replicas on a broker, or more partitions on
this broker than it has file descriptors to spare. `validate_only` checks the counts and
the assignment arithmetic without building anything. A large creation is done in chunks:
each chunk's logs are created in a worker thread, then its leaders elected on the event
loop, so other clients are served meanwhile. Topic changes run one at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections import Counter
from typing import Any, TypeVar
from uuid import UUID

from logbus.common.config_def import ConfigError
from logbus.controller.cluster_controller import ControllerMovedError
from logbus.controller.controller import (
    EXCESSIVE_PARTITIONS_MESSAGE,
    MAX_PARTITIONS_PER_REQUEST,
    Controller,
    NewTopic,
    PartitionCreation,
    TopicResult,
)
from logbus.controller.metadata_store import StoreUnavailable
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from logbus.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from logbus.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from logbus.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from logbus.protocol.messages.delete_topics_request import DeleteTopicsRequest
from logbus.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.topic_admin import (
    active_controller,
    has_leaders,
    on_controller,
    propagated,
)
from logbus.server.config.topic_config import describe_topic, validate_topic_configs
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.errors import StorageError
from logbus.storage.open_files import spare_descriptors

log = logging.getLogger(__name__)

T = TypeVar("T")
ZERO_UUID = UUID(int=0)
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
AUTHORIZATION_MESSAGE = "Authorization failed."


_ADMIN_LOCKS: weakref.WeakKeyDictionary[Controller, asyncio.Lock] = weakref.WeakKeyDictionary()


def admin_lock(controller: Controller) -> asyncio.Lock:
    """Topic changes through the API run one at a time, as Kafka's controller runs its
    event queue: a deletion never meets a creation half-way through its chunks."""
    lock = _ADMIN_LOCKS.get(controller)
    if lock is None:
        lock = _ADMIN_LOCKS[controller] = asyncio.Lock()
    return lock


# --- CreateTopics -----------------------------------------------------------------------


def _created_error(name: str, error: ErrorCode, message: str | None) -> CreatableTopicResult:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": error,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


def _topic_configs(ctx: RequestContext, overrides: dict[str, str]) -> list[CreatableTopicConfigs]:
    entries = describe_topic(
        overrides, ctx.config, include_synonyms=False, include_documentation=False
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


def _assignments(topic: CreatableTopic) -> dict[int, list[int]] | str:
    """The manual assignment of a CreateTopics entry, or why it is malformed."""
    assignments: dict[int, list[int]] = {}
    for entry in topic["assignments"]:
        index = entry["partition_index"]
        if index in assignments:
            return f"Partition {index} is assigned twice"
        assignments[index] = list(entry["broker_ids"])
    return assignments


async def start_new_partitions(
    ctx: RequestContext, controller: Controller, creation: PartitionCreation
) -> TopicResult:
    """Elect the leaders of new partitions a chunk at a time; before each chunk, this
    broker's logs of it are created in a worker thread (the file work, fsyncs included),
    so the event loop only does the bookkeeping and serves other clients in between."""
    topic = creation.topic
    broker_id = ctx.services.broker_id
    replica_manager = ctx.services.replica_manager
    log_manager = ctx.services.log_manager
    for chunk in creation.chunks():
        config = replica_manager.log_config_for(topic)
        hosted = [p for p in chunk if broker_id in topic.partitions[p].replicas]
        led = [p for p in hosted if topic.partitions[p].replicas[0] == broker_id]
        followed = [p for p in hosted if topic.partitions[p].replicas[0] != broker_id]
        try:
            # A first election gives a new partition leader epoch 0 (its preferred
            # leader).
            await asyncio.to_thread(
                log_manager.create_logs, topic.name, led, config, topic.topic_id, leader_epoch=0
            )
            if followed:
                await asyncio.to_thread(
                    log_manager.create_logs, topic.name, followed, config, topic.topic_id
                )
        except (OSError, StorageError) as exc:
            # The partitions not started stay without a leader (as after a crash) until
            # the controller starts again; the topic can be deleted meanwhile.
            log.warning("cannot create the logs of %s: %s", topic.name, exc)
            return TopicResult(
                topic.name,
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"Cannot create the logs of partitions {chunk.start}-{chunk.stop - 1}: {exc}",
            )
        controller.start_partitions(creation, chunk)
    return controller.finish_creation(creation)


def _local_share(
    ctx: RequestContext, controller: Controller, partitions: int, replication_factor: int
) -> int:
    """At most how many replicas of `partitions` new partitions this broker will host."""
    if ctx.services.in_cluster:
        live = max(1, len(ctx.services.metadata_cache.brokers))
    else:
        live = max(1, len(controller.live_brokers()))
    return min(partitions, -(-partitions * replication_factor // live))


class _DescriptorBudget:
    """The file descriptors this broker can spare for new partitions, counted once per
    request and spent as its topics are accepted (each hosted partition keeps one open)."""

    def __init__(self) -> None:
        self.spare = spare_descriptors()

    def refusal(self, partitions: int) -> str | None:
        """Why `partitions` more cannot be hosted, or None (and they are counted)."""
        if self.spare is None:
            return None
        if partitions <= self.spare:
            self.spare -= partitions
            return None
        return (
            f"This broker cannot host {partitions} more partitions: it can open only "
            f"{max(self.spare, 0)} more files within its RLIMIT_NOFILE, keeping a reserve "
            f"for connections (each partition keeps its active segment open)."
        )


def _excessive(topics: list[CreatableTopic], default_partitions: int) -> bool:
    """Kafka's `validateTotalNumberOfPartitions`: more than 10,000 partitions requested
    in all (counting the broker default for -1, nothing for other invalid counts)."""
    total = 0
    for topic in topics:
        if topic["assignments"]:
            total += len(topic["assignments"])
        elif topic["num_partitions"] == -1:
            total += default_partitions
        elif topic["num_partitions"] > 0:
            total += topic["num_partitions"]
    return total > MAX_PARTITIONS_PER_REQUEST


async def _create_topic(
    ctx: RequestContext,
    controller: Controller,
    topic: CreatableTopic,
    validate_only: bool,
    budget: _DescriptorBudget,
    timeout_ms: int = 0,
) -> CreatableTopicResult:
    name: str = topic["name"]
    null_configs = [c["name"] for c in topic["configs"] if c["value"] is None]
    if null_configs:
        return _created_error(
            name,
            ErrorCode.INVALID_CONFIG,
            f"Null value not supported for topic configs: {','.join(null_configs)}",
        )
    configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
    assignments = _assignments(topic)
    if isinstance(assignments, str):
        return _created_error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, assignments)
    spec = NewTopic(
        name, topic["num_partitions"], topic["replication_factor"], assignments, configs
    )
    checked = await on_controller(ctx, lambda: controller.validate_new_topic(spec))
    if checked.error != ErrorCode.NONE:
        return _created_error(name, checked.error, checked.message)
    try:
        # Again with the broker's settings, which some checks (compaction lags) need.
        validate_topic_configs(configs, ctx.config)
        topic_configs = _topic_configs(ctx, configs) if ctx.version >= 5 else []
    except ConfigError as exc:
        return _created_error(name, ErrorCode.INVALID_CONFIG, str(exc))
    refusal = budget.refusal(
        _local_share(ctx, controller, checked.num_partitions, checked.replication_factor)
    )
    if refusal is not None:
        return _created_error(name, ErrorCode.POLICY_VIOLATION, refusal)
    result: TopicResult = checked
    if not validate_only and ctx.services.in_cluster:
        # In a cluster every broker creates its own logs on the controller's LeaderAndIsr.
        result = await on_controller(ctx, lambda: controller.create_topic(spec))
        if result.error == ErrorCode.NONE:
            result = await propagated(ctx, result, lambda: has_leaders(ctx, name), timeout_ms)
    elif not validate_only:
        creation = controller.register_topic(spec)
        if isinstance(creation, TopicResult):
            result = creation
        else:
            result = await start_new_partitions(ctx, controller, creation)
    if result.error != ErrorCode.NONE:
        return _created_error(name, result.error, result.message)
    # as Kafka (v5+): the configs are shown only to a principal that may describe them
    shown = ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
    return {
        "name": name,
        "topic_id": result.topic_id,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topic_config_error_code": ErrorCode.NONE
        if shown
        else ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": topic_configs if shown else [],
    }


async def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    controller = active_controller(ctx)
    validate_only = bool(request["validate_only"])
    topics = request["topics"]
    counts = Counter(topic["name"] for topic in topics)
    unique = [topic for topic in topics if counts[topic["name"]] == 1]
    excessive = controller is not None and _excessive(unique, controller.default_partitions)
    results: list[CreatableTopicResult] = []
    budget = _DescriptorBudget()
    # Create on the cluster allows every topic, else Create on each topic (Kafka's order)
    creatable = (
        set(counts)
        if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
        else ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, counts)
    )
    for topic in topics:
        name = topic["name"]
        if counts[name] > 1:
            # Every entry of a name given twice fails, as in Kafka.
            results.append(
                _created_error(
                    name, ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."
                )
            )
        elif name not in creatable:
            results.append(
                _created_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_MESSAGE)
            )
        elif controller is None:
            results.append(_created_error(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE))
        elif excessive:
            # The whole request is refused before anything is built, as in Kafka.
            results.append(
                _created_error(name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS_MESSAGE)
            )
        else:
            async with admin_lock(controller):
                try:
                    results.append(
                        await _create_topic(
                            ctx, controller, topic, validate_only, budget, request["timeout_ms"]
                        )
                    )
                except ControllerMovedError:
                    results.append(
                        _created_error(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
                    )
                except StoreUnavailable as exc:
                    results.append(_created_error(name, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
    return {"throttle_time_ms": 0, "topics": results}


# --- DeleteTopics -----------------------------------------------------------------------


def _deleted(
    name: str | None, topic_id: UUID, error: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> DeletableTopicResult:
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


def _delete_targets(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> list[tuple[str | None, UUID]]:
    if ctx.version >= 6:
        return [(t["name"], t["topic_id"]) for t in request["topics"]]
    return [(name, ZERO_UUID) for name in request["topic_names"]]


def _delete_all(
    controller: Controller, targets: list[tuple[str | None, UUID]], deletable: set[str]
) -> list[DeletableTopicResult]:
    """KIP-516 checks (ControllerApis): exactly one of name and id per entry, each topic
    once; then resolve ids and delete, one result per distinct topic, in request order."""
    names = Counter(
        name for name, topic_id in targets if name is not None and topic_id == ZERO_UUID
    )
    ids = Counter(topic_id for name, topic_id in targets if name is None and topic_id != ZERO_UUID)
    by_id = {topic.topic_id: topic.name for topic in controller.topics.values()}
    # Topics also named by an id elsewhere in the request: the id wins, as in Kafka.
    id_of_named = {by_id[topic_id]: topic_id for topic_id in ids if topic_id in by_id}
    results: list[DeletableTopicResult] = []
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
            elif found not in deletable:
                results.append(
                    _deleted(
                        None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_MESSAGE
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
        elif name not in deletable:
            results.append(
                _deleted(
                    name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_MESSAGE
                )
            )
        else:
            results.append(_delete_one(controller, name))
    return results


def _delete_one(controller: Controller, name: str) -> DeletableTopicResult:
    result = controller.delete_topic(name)
    if result.error != ErrorCode.NONE:
        return _deleted(name, ZERO_UUID, result.error, result.message)
    return _deleted(name, result.topic_id)


async def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    targets = _delete_targets(ctx, request)
    cache = ctx.services.metadata_cache
    named = {name if name is not None else cache.topic_name(topic_id) for name, topic_id in targets}
    deletable = ctx.authorized(
        AclOperation.DELETE, ResourceType.TOPIC, (n for n in named if n is not None)
    )
    controller = active_controller(ctx)
    results: list[DeletableTopicResult]
    if controller is None:
        results = [
            _deleted(name, topic_id, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            for name, topic_id in targets
        ]
    elif not ctx.config.delete_topic_enable:
        # TOPIC_DELETION_DISABLED came with v3; older clients get INVALID_REQUEST.
        error = ErrorCode.INVALID_REQUEST if ctx.version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        results = [
            _deleted(name, topic_id, error, "Topic deletion is disabled.")
            for name, topic_id in targets
        ]
    else:
        async with admin_lock(controller):
            try:
                results = await on_controller(
                    ctx, lambda: _delete_all(controller, targets, deletable)
                )
                if ctx.services.in_cluster:
                    await _deletions_propagated(ctx, results, request["timeout_ms"])
            except ControllerMovedError:
                results = [
                    _deleted(name, topic_id, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
                    for name, topic_id in targets
                ]
            except StoreUnavailable as exc:
                results = [
                    _deleted(name, topic_id, ErrorCode.REQUEST_TIMED_OUT, str(exc))
                    for name, topic_id in targets
                ]
    return {"throttle_time_ms": 0, "responses": results}


async def _deletions_propagated(
    ctx: RequestContext, results: list[DeletableTopicResult], timeout_ms: int
) -> None:
    """In a cluster, wait until this broker's metadata no longer shows the deleted topics
    (REQUEST_TIMED_OUT for those still there after `timeout_ms`)."""
    cache = ctx.services.metadata_cache
    for i, entry in enumerate(results):
        name = entry["name"]
        if entry["error_code"] != ErrorCode.NONE or name is None:
            continue
        gone = functools.partial(lambda n: n not in cache.topics, name)
        done = await propagated(ctx, TopicResult(name), gone, timeout_ms)
        if done.error != ErrorCode.NONE:
            results[i] = _deleted(name, entry["topic_id"], done.error, done.message)


# --- CreatePartitions -------------------------------------------------------------------


def _partitions_result(
    name: str, error: ErrorCode = ErrorCode.NONE, message: str | None = None
) -> CreatePartitionsTopicResult:
    return {"name": name, "error_code": error, "error_message": message}


def _partitions_added(controller: Controller, topics: list[CreatePartitionsTopic]) -> int:
    """How many partitions a CreatePartitions request adds in all (increases only)."""
    added = 0
    for topic in topics:
        existing = controller.topics.get(topic["name"])
        if existing is not None:
            added += max(0, topic["count"] - len(existing.partitions))
    return added


async def _create_partitions(
    ctx: RequestContext,
    controller: Controller,
    topic: CreatePartitionsTopic,
    validate_only: bool,
    budget: _DescriptorBudget,
) -> CreatePartitionsTopicResult:
    name: str = topic["name"]
    raw: list[Any] | None = topic["assignments"]
    assignments = None if raw is None else [list(a["broker_ids"]) for a in raw]

    def check() -> tuple[PartitionCreation | TopicResult, int, int]:
        checked = controller.register_partitions(name, topic["count"], assignments, True)
        existing = controller.topics.get(name)
        if existing is None:
            return checked, 0, 0
        added = topic["count"] - len(existing.partitions)
        return checked, added, len(next(iter(existing.partitions.values())).replicas)

    checked, added, replication_factor = await on_controller(ctx, check)
    if isinstance(checked, TopicResult) and checked.error != ErrorCode.NONE:
        return _partitions_result(name, checked.error, checked.message)
    refusal = budget.refusal(_local_share(ctx, controller, added, replication_factor))
    if refusal is not None:
        return _partitions_result(name, ErrorCode.POLICY_VIOLATION, refusal)
    if validate_only:
        return _partitions_result(name)
    if ctx.services.in_cluster:

        def create() -> TopicResult:
            creation = controller.register_partitions(name, topic["count"], assignments, False)
            if isinstance(creation, TopicResult):
                return creation
            controller.start_partitions(creation, creation.new_partitions)
            return controller.finish_creation(creation)

        done = await on_controller(ctx, create)
        return _partitions_result(name, done.error, done.message)
    creation = controller.register_partitions(name, topic["count"], assignments, False)
    if isinstance(creation, TopicResult):
        return _partitions_result(name, creation.error, creation.message)
    result = await start_new_partitions(ctx, controller, creation)
    return _partitions_result(name, result.error, result.message)


async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    controller = active_controller(ctx)
    validate_only = bool(request["validate_only"])
    topics = request["topics"]
    counts = Counter(topic["name"] for topic in topics)
    unique = [topic for topic in topics if counts[topic["name"]] == 1]
    excessive = (
        controller is not None
        and await on_controller(ctx, lambda: _partitions_added(controller, unique))
        > MAX_PARTITIONS_PER_REQUEST
    )
    budget = _DescriptorBudget()
    results: list[CreatePartitionsTopicResult] = []
    alterable = ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, counts)
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
        elif name not in alterable:
            results.append(
                _partitions_result(
                    name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_MESSAGE
                )
            )
        elif controller is None:
            results.append(
                _partitions_result(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
            )
        elif excessive:
            results.append(
                _partitions_result(name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS_MESSAGE)
            )
        else:
            async with admin_lock(controller):
                try:
                    results.append(
                        await _create_partitions(ctx, controller, topic, validate_only, budget)
                    )
                except ControllerMovedError:
                    results.append(
                        _partitions_result(name, ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
                    )
                except StoreUnavailable as exc:
                    results.append(_partitions_result(name, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = [
    ApiHandler(ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics),
    ApiHandler(ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics),
    ApiHandler(ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions),
]
