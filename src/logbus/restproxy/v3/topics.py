"""The v3 topic, partition and replica resources: `.../topics` (list, create),
`.../topics/{topic_name}` (get, PATCH the partition count, delete),
`.../topics/{topic_name}/partitions[/{partition_id}]` (with `/offset`: the earliest and
latest), `.../partitions/{partition_id}/replicas[/{broker_id}]` and a broker's replicas
(`.../brokers/{broker_id}/partition-replicas`)."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request

from logbus.client.admin import NewPartitions, NewTopic, PartitionInfo, TopicDescription
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.restproxy.v3.clusters import broker_of
from logbus.restproxy.v3.resources import (
    Links,
    V3Response,
    admin,
    int_param,
    invalid_payload,
    links,
    no_content,
    not_found,
    object_body,
)

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def topic_json(
    site: Links, name: str, *, internal: bool, replication_factor: int, partitions_count: int
) -> dict[str, Any]:
    return site.resource(
        "KafkaTopic", ("topics", name), (("topic", name),),
        topic_name=name, is_internal=internal, replication_factor=replication_factor,
        partitions_count=partitions_count,
        partitions=site.related("topics", name, "partitions"),
        configs=site.related("topics", name, "configs"),
        partition_reassignments=site.related("topics", name, "partitions", "-", "reassignment"),
        authorized_operations=[],
    )


def described_json(site: Links, info: TopicDescription) -> dict[str, Any]:
    return topic_json(
        site, info.name, internal=info.is_internal, replication_factor=info.replication_factor,
        partitions_count=len(info.partitions),
    )


def partition_json(site: Links, topic: str, info: PartitionInfo) -> dict[str, Any]:
    p = info.partition
    body = site.resource(
        "KafkaPartition", ("topics", topic, "partitions", p),
        (("topic", topic), ("partition", p)), topic_name=topic, partition_id=p,
    )
    if info.leader >= 0:
        body["leader"] = site.related("topics", topic, "partitions", p, "replicas", info.leader)
    body["replicas"] = site.related("topics", topic, "partitions", p, "replicas")
    body["reassignment"] = site.related("topics", topic, "partitions", p, "reassignment")
    return body


def replica_json(site: Links, topic: str, info: PartitionInfo, broker: int) -> dict[str, Any]:
    p = info.partition
    return site.resource(
        "KafkaReplica", ("topics", topic, "partitions", p, "replicas", broker),
        (("topic", topic), ("partition", p), ("replica", broker)),
        topic_name=topic, partition_id=p, broker_id=broker, is_leader=broker == info.leader,
        is_in_sync=broker in info.isr, broker=site.related("brokers", broker),
    )


async def describe(request: Request, topic: str) -> TopicDescription:
    """The topic (KafkaError UNKNOWN_TOPIC_OR_PARTITION if there is none)."""
    found = await admin(request).describe_topics([topic])
    return found[topic]


# -- topics ---------------------------------------------------------------------------


async def list_topics(request: Request) -> Any:
    site = await links(request)
    found = await admin(request).describe_topics()
    return site.collection(
        "KafkaTopicList", ("topics",),
        # internal topics (`__consumer_offsets`) left out, as Kafka's listTopics leaves them
        [described_json(site, info) for name, info in sorted(found.items())
         if info.error_code == ErrorCode.NONE and not info.is_internal],
    )


async def get_topic(request: Request) -> Any:
    site = await links(request)
    return described_json(site, await describe(request, request.path_params["topic_name"]))


def _new_topic(body: dict[str, Any]) -> NewTopic:
    """The topic a create request asks for (422 for a body that does not say one)."""
    name = body.get("topic_name")
    if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise invalid_payload("Invalid topic name.")
    count, factor = body.get("partitions_count"), body.get("replication_factor")
    for field, value in (("partitions_count", count), ("replication_factor", factor)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise invalid_payload(f"{field} must be a whole number.")
    configs = body.get("configs") or []
    if not isinstance(configs, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in configs
    ):
        raise invalid_payload("configs must be a list of {\"name\", \"value\"} objects.")
    assignment = _assignment(body.get("replicas_assignments"))
    return NewTopic(
        name,
        -1 if count is None else count,
        -1 if factor is None else factor,
        # a config without a value keeps the broker's default
        {c["name"]: str(c["value"]) for c in configs if c.get("value") is not None},
        assignment,
    )


def _assignment(value: Any) -> dict[int, list[int]] | None:
    if not value:
        return None
    try:
        assert isinstance(value, dict)
        return {int(p): [int(b) for b in brokers] for p, brokers in value.items()}
    except (AssertionError, TypeError, ValueError):
        raise invalid_payload(
            "replicas_assignments maps partition ids to lists of broker ids."
        ) from None


async def create_topic(request: Request) -> Any:
    site = await links(request)
    body = await object_body(request)
    topic = _new_topic(body)
    validate_only = body.get("validate_only") is True
    created = (
        await admin(request).create_topics([topic], validate_only=validate_only)
    )[topic.name]
    answer = topic_json(
        site, topic.name, internal=False, replication_factor=created.replication_factor,
        partitions_count=created.num_partitions,
    )
    response = V3Response(answer, status_code=200 if validate_only else 201)
    response.headers["location"] = answer["metadata"]["self"]
    return response


async def update_partition_count(request: Request) -> Any:
    site = await links(request)
    body = await object_body(request)
    count = body.get("partitions_count")
    if isinstance(count, bool) or not isinstance(count, int):
        raise invalid_payload("Request body is empty. Partitions_count is required.")
    topic = request.path_params["topic_name"]
    await admin(request).create_partitions({topic: NewPartitions(count)})
    return described_json(site, await describe(request, topic))


async def delete_topic(request: Request) -> Any:
    await links(request)
    await admin(request).delete_topics([request.path_params["topic_name"]])
    return no_content()


# -- partitions and replicas ----------------------------------------------------------


async def list_partitions(request: Request) -> Any:
    site = await links(request)
    topic = request.path_params["topic_name"]
    info = await describe(request, topic)
    return site.collection(
        "KafkaPartitionList", ("topics", topic, "partitions"),
        [partition_json(site, topic, info.partitions[p]) for p in sorted(info.partitions)],
    )


async def partition_of(request: Request) -> PartitionInfo:
    info = await describe(request, request.path_params["topic_name"])
    found = info.partitions.get(int_param(request, "partition_id"))
    if found is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return found


async def get_partition(request: Request) -> Any:
    site = await links(request)
    info = await partition_of(request)
    return partition_json(site, request.path_params["topic_name"], info)


async def list_replicas(request: Request) -> Any:
    site = await links(request)
    topic = request.path_params["topic_name"]
    info = await partition_of(request)
    return site.collection(
        "KafkaReplicaList", ("topics", topic, "partitions", info.partition, "replicas"),
        [replica_json(site, topic, info, broker) for broker in info.replicas],
    )


async def get_replica(request: Request) -> Any:
    site = await links(request)
    info = await partition_of(request)
    broker = int_param(request, "broker_id")
    if broker not in info.replicas:
        raise not_found(f"Replica {broker} cannot be found.")
    return replica_json(site, request.path_params["topic_name"], info, broker)


async def partition_offsets(request: Request) -> Any:
    """`GET .../partitions/{partition_id}/offset`: its earliest and latest offsets."""
    site = await links(request)
    topic = request.path_params["topic_name"]
    info = await partition_of(request)
    tp = TopicPartition(topic, info.partition)
    earliest = await admin(request).list_offsets({tp: "earliest"})
    latest = await admin(request).list_offsets({tp: "latest"})
    p = info.partition
    return site.resource(
        "KafkaPartitionWithOffsets", ("topics", topic, "partitions", p, "offset"),
        (("topic", topic), ("partition", p), ("offset", "")),
        topic_name=topic, partition_id=p,
        earliest_offset=earliest[tp].offset, latest_offset=latest[tp].offset,
    )


async def broker_replicas(request: Request) -> Any:
    """`GET .../brokers/{broker_id}/partition-replicas`: every replica the broker holds."""
    site = await links(request)
    broker = (await broker_of(request)).node_id
    found = await admin(request).describe_topics()
    data = [
        replica_json(site, name, info.partitions[p], broker)
        for name, info in sorted(found.items()) if info.error_code == ErrorCode.NONE
        for p in sorted(info.partitions) if broker in info.partitions[p].replicas
    ]
    return site.collection("KafkaReplicaList", ("brokers", broker, "partition-replicas"), data)


_TOPICS = "/v3/clusters/{cluster_id}/topics"
_PARTITION = _TOPICS + "/{topic_name}/partitions/{partition_id}"
ROUTES: list[tuple[str, Any, list[str]]] = [
    (_TOPICS, list_topics, ["GET"]),
    (_TOPICS, create_topic, ["POST"]),
    (_TOPICS + "/{topic_name}", get_topic, ["GET"]),
    (_TOPICS + "/{topic_name}", update_partition_count, ["PATCH"]),
    (_TOPICS + "/{topic_name}", delete_topic, ["DELETE"]),
    (_TOPICS + "/{topic_name}/partitions", list_partitions, ["GET"]),
    (_PARTITION, get_partition, ["GET"]),
    (_PARTITION + "/replicas", list_replicas, ["GET"]),
    (_PARTITION + "/replicas/{broker_id}", get_replica, ["GET"]),
    (_PARTITION + "/offset", partition_offsets, ["GET"]),
    ("/v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas", broker_replicas,
     ["GET"]),
]
