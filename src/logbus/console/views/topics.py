"""Topics: the list (with each topic's size), one topic's partitions (leader, replicas,
ISR, offsets, size) and configs, and the forms that create and delete topics, add
partitions and alter a config."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.admin import (
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from logbus.client.errors import KafkaError
from logbus.client.metadata import TopicInfo
from logbus.client.types import TopicPartition
from logbus.console.errors import ConsoleError
from logbus.console.forms import whole_number
from logbus.console.pages import admin, posted_form, redirect, render
from logbus.console.sizes import partition_size, replica_sizes, topic_size


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start: int | None
    end: int | None
    # bytes of the leader's copy, and of each replica's by broker (None/absent: unknown)
    size: int | None = None
    replica_sizes: tuple[tuple[int, int], ...] = ()

    @property
    def records(self) -> int | None:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start


def _one_error(exc: AdminBatchError) -> KafkaError:
    """The error of a call on one item, as itself (its message names the item)."""
    return next(iter(exc.errors.values()))


async def topic_list(request: Request) -> Response:
    client = await admin(request)
    topics = await client.describe_topics()
    rows = [topics[name] for name in sorted(topics)]
    sizes = await replica_sizes(client)
    totals = {
        t.name: topic_size(sizes, t.name, {p: i.leader for p, i in t.partitions.items()})
        for t in rows
    }
    return render(request, "topics.html", topics=rows, sizes=totals)


async def create_topic(request: Request) -> Response:
    form = await posted_form(request)
    name = str(form.get("name", "")).strip()
    if not name:
        raise ConsoleError("topic name: a name is required")
    partitions = whole_number(str(form.get("partitions", "")), "partitions", minimum=1,
                              default=1)
    replication = whole_number(str(form.get("replication_factor", "")), "replication factor",
                               minimum=1, default=1)
    client = await admin(request)
    try:
        await client.create_topics([NewTopic(name, partitions, replication)])
    except AdminBatchError as exc:
        raise _one_error(exc) from None
    return redirect(f"/topics/{name}", f"Created topic {name} with {partitions} partition(s).")


async def describe(request: Request, name: str) -> tuple[TopicInfo, list[PartitionRow]]:
    client = await admin(request)
    try:
        topic = (await client.describe_topics([name]))[name]
    except AdminBatchError as exc:
        raise _one_error(exc) from None
    tps = [TopicPartition(name, p) for p in sorted(topic.partitions)]
    starts: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    if tps:
        try:
            starts = {tp: o.offset for tp, o in
                      (await client.list_offsets(dict.fromkeys(tps, "earliest"))).items()}
            ends = {tp: o.offset for tp, o in
                    (await client.list_offsets(dict.fromkeys(tps, "latest"))).items()}
        except AdminBatchError as exc:  # offline partitions: show the others
            starts = {tp: o.offset for tp, o in exc.results.items()}
    sizes = await replica_sizes(client, tps) if tps else {}
    rows = [
        PartitionRow(p.partition, p.leader, p.replicas, p.isr,
                     starts.get(TopicPartition(name, p.partition)),
                     ends.get(TopicPartition(name, p.partition)),
                     partition_size(sizes, TopicPartition(name, p.partition), p.leader),
                     tuple(sorted(sizes.get(TopicPartition(name, p.partition), {}).items())))
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
    ]
    return topic, rows


async def topic_page(request: Request) -> Response:
    name = request.path_params["name"]
    topic, rows = await describe(request, name)
    client = await admin(request)
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = (await client.describe_configs([resource]))[resource]
    known = [row.size for row in rows if row.size is not None]
    return render(
        request, "topic.html", topic=topic, partitions=rows,
        total_size=sum(known) if known else None,
        configs=[configs[k] for k in sorted(configs)],
    )


async def delete_topic(request: Request) -> Response:
    name = request.path_params["name"]
    form = await posted_form(request)
    if str(form.get("confirm", "")).strip() != name:
        raise ConsoleError(
            f"Not deleted: type the topic's name ({name}) in the confirmation box to delete it."
        )
    client = await admin(request)
    try:
        await client.delete_topics([name])
    except AdminBatchError as exc:
        raise _one_error(exc) from None
    return redirect("/topics", f"Deleted topic {name}.")


async def add_partitions(request: Request) -> Response:
    name = request.path_params["name"]
    form = await posted_form(request)
    total = whole_number(str(form.get("total", "")), "new partition count", minimum=1)
    client = await admin(request)
    try:
        await client.create_partitions({name: total})
    except AdminBatchError as exc:
        raise _one_error(exc) from None
    return redirect(f"/topics/{name}", f"{name} now has {total} partitions.")


async def alter_config(request: Request) -> Response:
    name = request.path_params["name"]
    form = await posted_form(request)
    key = str(form.get("config", "")).strip()
    if not key:
        raise ConsoleError("config: a config name is required")
    value = str(form.get("value", ""))
    op = (
        AlterConfigOp(key, None, AlterConfigOpType.DELETE)
        if form.get("action") == "delete"
        else AlterConfigOp(key, value)
    )
    client = await admin(request)
    try:
        await client.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, name): [op]})
    except AdminBatchError as exc:
        raise _one_error(exc) from None
    done = f"Reset {key} to its default." if op.value is None else f"Set {key} = {value}."
    return redirect(f"/topics/{name}", done)


routes = [
    Route("/topics", topic_list, name="topics"),
    Route("/topics", create_topic, methods=["POST"]),
    Route("/topics/{name}", topic_page, name="topic"),
    Route("/topics/{name}/delete", delete_topic, methods=["POST"]),
    Route("/topics/{name}/partitions", add_partitions, methods=["POST"]),
    Route("/topics/{name}/configs", alter_config, methods=["POST"]),
]
