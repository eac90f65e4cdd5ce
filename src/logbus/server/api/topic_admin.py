"""Topic administration in a cluster: where the controller's work runs, topics a client
creates implicitly on any broker, and waiting until this broker's metadata shows a change.

On a stand-alone broker the controller lives on the event loop and is called inline; in a
cluster (`zookeeper.connect`) it lives on the controller event thread and is awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from logbus.controller.cluster_controller import ControllerMovedError, admin_create_topic
from logbus.controller.controller import Controller, NewTopic, TopicResult
from logbus.controller.metadata_store import StoreUnavailable
from logbus.protocol import ErrorCode
from logbus.server.api import RequestContext

T = TypeVar("T")


def active_controller(ctx: RequestContext) -> Controller | None:
    """The controller, if this broker is the active one (topic changes go through it)."""
    services = ctx.services
    if services.in_cluster:
        controller = services.controller
        return controller if getattr(controller, "active", False) else None
    if services.metadata_cache.controller_id != services.broker_id:
        return None
    return services.controller


async def on_controller(ctx: RequestContext, action: Callable[[], T]) -> T:
    """Run controller work: on the controller thread in a cluster (awaited), inline on a
    stand-alone broker (its controller lives on the event loop)."""
    return await ctx.services.on_controller(action)


async def create_topic_for_client(ctx: RequestContext, spec: NewTopic) -> TopicResult:
    """Create a topic a client asked for implicitly (auto-creation, the offsets topic).

    The active controller creates it; any other broker of a cluster writes the topic's
    znodes itself, as Kafka's `AdminZkClient` does, and the controller, which watches
    `/brokers/topics`, elects its leaders; the topic is then not known here yet. A KRaft
    broker asks the active controller."""
    if ctx.services.forwarding is not None:
        return await ctx.services.forwarding.create_topic(spec)
    controller = ctx.services.controller
    if not ctx.services.in_cluster:
        return controller.create_topic(spec)
    config = ctx.config
    try:
        try:
            if getattr(controller, "active", False):
                return await on_controller(ctx, lambda: controller.create_topic(spec))
        except ControllerMovedError:
            pass
        return await asyncio.to_thread(
            admin_create_topic,
            ctx.services.store,
            spec,
            list(ctx.services.metadata_cache.brokers.values()),
            config.num_partitions,
            config.default_replication_factor,
        )
    except StoreUnavailable as exc:
        # ZooKeeper is unreachable: a retriable answer (the client asks again later).
        return TopicResult(spec.name, ErrorCode.LEADER_NOT_AVAILABLE, str(exc))


def has_leaders(ctx: RequestContext, name: str) -> bool:
    topic = ctx.services.metadata_cache.topics.get(name)
    return topic is not None and all(s.leader >= 0 for s in topic.partitions.values())


async def propagated(
    ctx: RequestContext, result: TopicResult, done: Callable[[], bool], timeout_ms: int
) -> TopicResult:
    """In a cluster, wait (at most `timeout_ms`) until this broker's metadata shows the
    change, as Kafka's broker waits in its purgatory; REQUEST_TIMED_OUT if it does not
    (the change itself is made and goes on)."""
    if timeout_ms <= 0:
        return result
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    while not done():
        if asyncio.get_running_loop().time() >= deadline:
            return TopicResult(
                result.name,
                ErrorCode.REQUEST_TIMED_OUT,
                "The controller made the change; this broker has not seen it yet.",
            )
        await asyncio.sleep(0.01)
    return result
