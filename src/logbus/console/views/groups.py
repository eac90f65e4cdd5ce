"""Groups of every kind: the list (classic and KIP-848 consumer groups, KIP-932 share
groups, with each group's type and state); a consumer group's state, members and
assignments (a KIP-848 group's epochs, each member's epoch and its assignment beside its
target assignment), lag per partition with a chart of the total over time (refreshed by
htmx polling), and resetting its offsets while it has no members; a share group's members,
their subscriptions and assignments, and its share-partition start offsets with the lag
behind each partition's end."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.admin import Admin, AdminBatchError, ConsumerGroupDescription
from logbus.client.admin.share_groups import ShareGroupDescription
from logbus.client.errors import KafkaError
from logbus.client.requests.group_membership import ListedGroup
from logbus.client.types import TopicPartition
from logbus.console.errors import ConsoleError
from logbus.console.forms import timestamp_ms, whole_number
from logbus.console.lag import group_lag, lag_chart, share_group_lag, total_lag
from logbus.console.pages import admin, lag_history, posted_form, redirect, render
from logbus.protocol import ErrorCode

LAG_REFRESH_SECONDS = 3
# Groups whose offsets may be reset: no member would overwrite them (Kafka's
# kafka-consumer-groups --reset-offsets asks the same).
_INACTIVE = ("Empty", "Dead")
RESET_STRATEGIES = ("earliest", "latest", "offset", "timestamp")


async def _describe(client: Admin, group_id: str) -> ConsumerGroupDescription:
    try:
        return (await client.describe_consumer_groups([group_id]))[group_id]
    except AdminBatchError as exc:
        raise next(iter(exc.errors.values())) from None


def _assigned(group: ConsumerGroupDescription) -> set[TopicPartition]:
    return {
        TopicPartition(topic, p)
        for m in group.members
        for topic, parts in m.assignment.items()
        for p in parts
    }


async def _describe_share(client: Admin, group_id: str) -> ShareGroupDescription:
    try:
        return (await client.describe_share_groups([group_id]))[group_id]
    except AdminBatchError as exc:
        raise next(iter(exc.errors.values())) from None


async def _share_groups(client: Admin) -> tuple[list[ListedGroup], dict[str, Any]]:
    """The share groups and their descriptions (none from a broker that cannot list them
    by type)."""
    try:
        listed = await client.list_share_groups()
    except KafkaError as exc:
        if exc.code != ErrorCode.UNSUPPORTED_VERSION:
            raise
        return [], {}
    if not listed:
        return [], {}
    try:
        described = await client.describe_share_groups([g.group_id for g in listed])
    except AdminBatchError as exc:
        described = dict(exc.results)
    return listed, dict(described)


async def group_list(request: Request) -> Response:
    client = await admin(request)
    listed = await client.list_consumer_groups()
    described: dict[str, Any] = {}
    if listed:
        try:
            described = dict(
                await client.describe_consumer_groups([g.group_id for g in listed])
            )
        except AdminBatchError as exc:
            described = dict(exc.results)
    shares, shares_described = await _share_groups(client)
    groups = sorted([*listed, *shares], key=lambda g: g.group_id)
    return render(request, "groups.html", groups=groups,
                  described={**described, **shares_described})


async def _lag_context(request: Request, group: ConsumerGroupDescription) -> dict[str, Any]:
    client = await admin(request)
    lags = await group_lag(client, group.group_id, _assigned(group))
    history = lag_history(request)
    history.add(group.group_id, total_lag(lags))
    return {
        "group": group,
        "lags": lags,
        "total": total_lag(lags),
        "chart": lag_chart(history.samples(group.group_id)),
        "refresh": LAG_REFRESH_SECONDS,
    }


async def group_page(request: Request) -> Response:
    client = await admin(request)
    group_id = request.path_params["group"]
    if request.query_params.get("type") == "share":
        return await _share_page(request, await _describe_share(client, group_id))
    try:
        group = await _describe(client, group_id)
    except KafkaError as exc:
        # not a classic or consumer group: a share group, or nothing (the first error)
        if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        try:
            share = await _describe_share(client, group_id)
        except KafkaError:
            raise exc from None
        return await _share_page(request, share)
    context = await _lag_context(request, group)
    return render(request, "group.html", inactive=group.state in _INACTIVE,
                  strategies=RESET_STRATEGIES, **context)


async def _share_page(request: Request, group: ShareGroupDescription) -> Response:
    context = await _share_lag_context(request, group.group_id)
    return render(request, "share_group.html", group=group, **context)


async def _share_lag_context(request: Request, group_id: str) -> dict[str, Any]:
    lags = await share_group_lag(await admin(request), group_id)
    history = lag_history(request)
    key = f"share:{group_id}"  # its samples kept apart from the consumer groups'
    history.add(key, total_lag(lags))
    return {
        "group_id": group_id,
        "lags": lags,
        "total": total_lag(lags),
        "chart": lag_chart(history.samples(key)),
        "refresh": LAG_REFRESH_SECONDS,
    }


async def share_lag_fragment(request: Request) -> Response:
    group_id = request.path_params["group"]
    await _describe_share(await admin(request), group_id)  # a readable 404 if it is gone
    return render(request, "share_group_lag.html", **(await _share_lag_context(request, group_id)))


async def group_lag_fragment(request: Request) -> Response:
    group = await _describe(await admin(request), request.path_params["group"])
    return render(request, "group_lag.html", **(await _lag_context(request, group)))


async def reset_offsets(request: Request) -> Response:
    group_id = request.path_params["group"]
    form = await posted_form(request)
    client = await admin(request)
    group = await _describe(client, group_id)
    if group.state not in _INACTIVE:
        raise ConsoleError(
            f"Offsets of group {group_id} are not reset: it is {group.state} with "
            f"{len(group.members)} member(s). Stop its consumers first; offsets can only be "
            "reset while the group is Empty.", 409
        )
    strategy = str(form.get("strategy", ""))
    if strategy not in RESET_STRATEGIES:
        raise ConsoleError(f"reset to: one of {', '.join(RESET_STRATEGIES)}, not {strategy!r}")
    committed = await client.list_consumer_group_offsets(group_id)
    topic = str(form.get("topic", "")).strip()
    if topic:
        try:
            info = (await client.describe_topics([topic]))[topic]
        except AdminBatchError as exc:
            raise next(iter(exc.errors.values())) from None
        partitions = [TopicPartition(topic, p) for p in sorted(info.partitions)]
    else:
        partitions = sorted(committed)
    if not partitions:
        raise ConsoleError(f"Group {group_id} has no committed offsets: name a topic to reset.")
    starts = {tp: o.offset for tp, o in
              (await client.list_offsets(dict.fromkeys(partitions, "earliest"))).items()}
    ends = {tp: o.offset for tp, o in
            (await client.list_offsets(dict.fromkeys(partitions, "latest"))).items()}
    if strategy == "earliest":
        wanted = starts
    elif strategy == "latest":
        wanted = ends
    elif strategy == "offset":
        target = whole_number(str(form.get("offset", "")), "offset")
        # As kafka-consumer-groups does: an offset outside the log becomes its nearest end.
        wanted = {tp: min(max(target, starts[tp]), ends[tp]) for tp in partitions}
    else:
        ms = timestamp_ms(str(form.get("time", "")), "time")
        found = await client.list_offsets(dict.fromkeys(partitions, ms))
        wanted = {tp: o.offset if o.offset >= 0 else ends[tp] for tp, o in found.items()}
    await client.alter_consumer_group_offsets(group_id, wanted)
    summary = ", ".join(f"{tp.topic}-{tp.partition} to {o}" for tp, o in sorted(wanted.items()))
    return redirect(f"/groups/{group_id}", f"Reset offsets of {group_id}: {summary}.")


routes = [
    Route("/groups", group_list, name="groups"),
    Route("/groups/{group}", group_page, name="group"),
    Route("/groups/{group}/lag", group_lag_fragment, name="group_lag"),
    Route("/groups/{group}/share-lag", share_lag_fragment, name="share_group_lag"),
    Route("/groups/{group}/reset", reset_offsets, methods=["POST"]),
]
