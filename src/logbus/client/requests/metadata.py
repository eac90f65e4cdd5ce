"""Metadata v0-12: brokers, controller, cluster id and the topics asked for (every topic
when none are named), read into a `ClusterMetadata`."""

from __future__ import annotations

from collections.abc import Sequence

from logbus.client.connection import Connection
from logbus.client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from logbus.client.requests.common import send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from logbus.protocol.messages.metadata_response import MetadataResponse


def build_metadata(
    version: int, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
) -> MetadataRequest:
    """Ask for `topics` (None: every topic; v0 says so with an empty list)."""
    requested: list[MetadataRequestTopic] | None
    if topics is None:
        requested = None if version >= 1 else []
    else:
        requested = [{"name": name} for name in topics]
    return {"topics": requested, "allow_auto_topic_creation": allow_auto_topic_creation}


def read_metadata(response: MetadataResponse) -> ClusterMetadata:
    """A decoded Metadata response (any version) as a ClusterMetadata; per-topic errors
    are kept in TopicInfo.error_code (`ClusterMetadata.topic()` raises them)."""
    brokers = {
        b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b["rack"])
        for b in response["brokers"]
    }
    topics: dict[str, TopicInfo] = {}
    for t in response["topics"]:
        partitions = {
            p["partition_index"]: PartitionInfo(
                partition=p["partition_index"],
                leader=p["leader_id"],
                leader_epoch=p["leader_epoch"],
                replicas=tuple(p["replica_nodes"]),
                isr=tuple(p["isr_nodes"]),
                offline_replicas=tuple(p["offline_replicas"]),
                error_code=p["error_code"],
            )
            for p in t["partitions"]
        }
        name = t["name"] or ""
        topics[name] = TopicInfo(
            name=name,
            topic_id=t["topic_id"],
            is_internal=t["is_internal"],
            partitions=dict(sorted(partitions.items())),
            error_code=t["error_code"],
        )
    return ClusterMetadata(
        cluster_id=response["cluster_id"],
        controller_id=response["controller_id"],
        brokers=brokers,
        topics=topics,
    )


async def metadata(
    conn: Connection, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
) -> ClusterMetadata:
    """Brokers, controller, and the given topics (every topic if `topics` is None)."""
    version = conn.choose_version(ApiKey.METADATA)
    body = build_metadata(version, topics, allow_auto_topic_creation=allow_auto_topic_creation)
    return read_metadata(await send(conn, apis.METADATA, body, version))
