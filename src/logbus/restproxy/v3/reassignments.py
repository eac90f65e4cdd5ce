"""The v3 partition reassignment resources (read-only, as Confluent's proxy has them):
every reassignment in progress (`.../topics/-/partitions/-/reassignment`), a topic's
(`.../topics/{topic_name}/partitions/-/reassignment`) and one partition's
(`.../partitions/{partition_id}/reassignment`, 404 when none is in progress), from
Kafka's ListPartitionReassignments (KIP-455)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from logbus.client.requests.reassignments import PartitionReassignment
from logbus.client.types import TopicPartition
from logbus.restproxy.v3.resources import Links, admin, int_param, links, not_found
from logbus.restproxy.v3.topics import describe


def reassignment_json(
    site: Links, tp: TopicPartition, found: PartitionReassignment
) -> dict[str, Any]:
    t, p = tp
    return site.resource(
        "KafkaReassignment", ("topics", t, "partitions", p, "reassignment"),
        (("topic", t), ("partition", p), ("reassignment", "")),
        topic_name=t, partition_id=p, adding_replicas=list(found.adding_replicas),
        removing_replicas=list(found.removing_replicas),
        replicas=site.related("topics", t, "partitions", p, "replicas"),
    )


async def every_reassignment(request: Request) -> Any:
    site = await links(request)
    found = await admin(request).list_partition_reassignments()
    return site.collection(
        "KafkaReassignmentList", ("topics", "-", "partitions", "-", "reassignment"),
        [reassignment_json(site, tp, found[tp]) for tp in sorted(found)],
    )


async def topic_reassignments(request: Request) -> Any:
    site = await links(request)
    topic = request.path_params["topic_name"]
    info = await describe(request, topic)
    found = await admin(request).list_partition_reassignments(
        [TopicPartition(topic, p) for p in sorted(info.partitions)]
    )
    return site.collection(
        "KafkaReassignmentList", ("topics", topic, "partitions", "-", "reassignment"),
        [reassignment_json(site, tp, found[tp]) for tp in sorted(found)],
    )


async def partition_reassignment(request: Request) -> Any:
    site = await links(request)
    tp = TopicPartition(request.path_params["topic_name"], int_param(request, "partition_id"))
    found = (await admin(request).list_partition_reassignments([tp])).get(tp)
    if found is None:
        raise not_found("HTTP 404 Not Found")
    return reassignment_json(site, tp, found)


_TOPICS = "/v3/clusters/{cluster_id}/topics"
ROUTES: list[tuple[str, Any, list[str]]] = [
    (_TOPICS + "/-/partitions/-/reassignment", every_reassignment, ["GET"]),
    (_TOPICS + "/{topic_name}/partitions/-/reassignment", topic_reassignments, ["GET"]),
    (_TOPICS + "/{topic_name}/partitions/{partition_id}/reassignment", partition_reassignment,
     ["GET"]),
]
