"""The cluster overview: brokers, controller, topic and partition counts, under-replicated
and offline partitions."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.metadata import NO_LEADER, TopicInfo
from logbus.console.pages import admin, render


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def problems(topics: dict[str, TopicInfo]) -> tuple[list[PartitionProblem], list[PartitionProblem]]:
    """The under-replicated (ISR smaller than the replicas) and offline (no leader)
    partitions."""
    under: list[PartitionProblem] = []
    offline: list[PartitionProblem] = []
    for name in sorted(topics):
        for p in sorted(topics[name].partitions.values(), key=lambda p: p.partition):
            row = PartitionProblem(name, p.partition, p.leader, p.replicas, p.isr)
            if p.leader == NO_LEADER:
                offline.append(row)
            elif len(p.isr) < len(p.replicas):
                under.append(row)
    return under, offline


async def overview(request: Request) -> Response:
    client = await admin(request)
    cluster = await client.describe_cluster()
    topics = await client.describe_topics()
    under, offline = problems(topics)
    return render(
        request,
        "overview.html",
        cluster_info=cluster,
        topic_count=sum(1 for t in topics.values() if not t.is_internal),
        internal_count=sum(1 for t in topics.values() if t.is_internal),
        partition_count=sum(len(t.partitions) for t in topics.values()),
        under_replicated=under,
        offline=offline,
    )


routes = [Route("/", overview, name="overview")]
