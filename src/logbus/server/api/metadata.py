"""Metadata v0-12: brokers, controller, cluster id and topic leadership, with topic ids
(v10+), lookups by topic id (v12) and auto-creation (`auto.create.topics.enable`)."""

from __future__ import annotations

from uuid import UUID

from logbus.controller.cluster_metadata import TopicMetadata
from logbus.controller.controller import NewTopic
from logbus.controller.topic_validation import topic_name_error
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.metadata_request import MetadataRequest
from logbus.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.cluster import cluster_authorized_operations
from logbus.server.api.topic_admin import create_topic_for_client
from logbus.server.network.connection import CloseConnection
from logbus.server.security.acl import AclOperation, ResourceType

NO_OPERATIONS = -2147483648
ZERO_UUID = UUID(int=0)
# The operations a topic supports; bit positions are Kafka's AclOperation codes.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def topic_entry(
    topic: TopicMetadata, include_ops: bool, live: set[int], ctx: RequestContext
) -> MetadataResponseTopic:
    partitions: list[MetadataResponsePartition] = []
    for index in sorted(topic.partitions):
        state = topic.partitions[index]
        offline = [r for r in state.replicas if r not in live]
        error = ErrorCode.NONE if state.leader in live else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(
            {
                "error_code": error,
                "partition_index": index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr),
                "offline_replicas": offline,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": (
            ctx.authorized_operations(ResourceType.TOPIC, topic.name, TOPIC_OPERATIONS)
            if include_ops
            else NO_OPERATIONS
        ),
    }



def error_entry(
    name: str | None, error: ErrorCode, topic_id: UUID = ZERO_UUID
) -> MetadataResponseTopic:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": NO_OPERATIONS,
    }


# The first version whose response may carry a null topic name (lookups by topic id).
TOPIC_IDS_FROM = 12


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    cache = ctx.services.metadata_cache
    version = ctx.version
    include_ops = bool(request["include_topic_authorized_operations"])
    live = set(cache.brokers)
    requested = request["topics"]
    all_topics = requested is None or (version == 0 and not requested)
    auto_create = (
        request["allow_auto_topic_creation"] if version >= 4 else True
    ) and ctx.config.get("auto.create.topics.enable")
    topics: list[MetadataResponseTopic] = []
    if all_topics:
        # as Kafka: the topics the principal may not describe are left out
        visible = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, cache.topics)
        topics = [
            topic_entry(t, include_ops, live, ctx)
            for t in cache.topics.values()
            if t.name in visible
        ]
    else:
        # Each topic once, as Kafka's set of requested topics: a 500 KB request naming
        # one topic 100,000 times asked for a 12 MB answer and held the event loop 4 s.
        seen: set[tuple[str | None, UUID]] = set()
        for entry in requested or ():
            name, topic_id = entry["name"], entry["topic_id"]
            key = (name, ZERO_UUID if name is not None else topic_id)
            if key in seen:
                continue
            seen.add(key)
            if name is None and version < TOPIC_IDS_FROM:
                # v10-11 carry the fields but their responses cannot name a topic by id
                # (nor hold a null name): Kafka refuses the request as invalid.
                raise CloseConnection(f"Metadata v{version} cannot look a topic up by id")
            if name is None:
                found = cache.topic_name(topic_id) if topic_id != ZERO_UUID else None
                if found is None:
                    topics.append(error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, found):
                    topics.append(
                        error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id)
                    )
                else:
                    topics.append(topic_entry(cache.topics[found], include_ops, live, ctx))
                continue
            topic = cache.topics.get(name)
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                topics.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif topic is not None:
                topics.append(topic_entry(topic, include_ops, live, ctx))
            elif topic_name_error(name) is not None:
                topics.append(error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif auto_create and not (
                ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)
            ):
                topics.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif auto_create:
                result = await create_topic_for_client(ctx, NewTopic(name, -1, -1, {}, {}))
                created = cache.topics.get(name)
                if result.error == ErrorCode.NONE and created is not None:
                    topics.append(topic_entry(created, include_ops, live, ctx))
                elif result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    # Created in a cluster, its leaders not elected yet (Kafka answers so).
                    topics.append(error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE))
                else:
                    topics.append(error_entry(name, result.error))
            else:
                topics.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    brokers: list[MetadataResponseBroker] = [
        {"node_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack}
        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
        for ep in (b.endpoint(ctx.listener or None),)
    ]
    include_cluster_ops = bool(request["include_cluster_authorized_operations"])
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_authorized_operations(ctx)
        if include_cluster_ops
        else NO_OPERATIONS,
    }


HANDLERS = [ApiHandler(ApiKey.METADATA, 0, 12, handle_metadata)]
