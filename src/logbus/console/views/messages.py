"""The message browser: one partition's records from an offset, from a time, or the
latest ones (with a live tail that htmx refreshes), keys, values and headers shown as
text, JSON or hex."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.admin import AdminBatchError
from logbus.client.types import TopicPartition
from logbus.console import browse
from logbus.console.errors import ConsoleError
from logbus.console.forms import iso_utc, timestamp_ms, whole_number
from logbus.console.pages import admin, is_fragment, render
from logbus.console.payloads import MODES, Mode, Shown, show

DEFAULT_COUNT = 20
TAIL_SECONDS = 2


@dataclass(frozen=True)
class ShownRecord:
    offset: int
    timestamp: int
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]


async def messages(request: Request) -> Response:
    name = request.path_params["name"]
    q = request.query_params
    client = await admin(request)
    try:
        topic = (await client.describe_topics([name]))[name]
    except AdminBatchError as exc:
        raise next(iter(exc.errors.values())) from None
    partition = whole_number(q.get("partition"), "partition", default=0)
    if partition not in topic.partitions:
        raise ConsoleError(
            f"partition: {name} has partitions 0 to {len(topic.partitions) - 1}, "
            f"not {partition}", 404
        )
    count = whole_number(q.get("count"), "number of messages", minimum=1,
                         default=DEFAULT_COUNT)
    if count > browse.MAX_COUNT:
        raise ConsoleError(f"number of messages: at most {browse.MAX_COUNT}, got {count}")
    mode_text = q.get("mode") or "text"
    if mode_text not in MODES:
        raise ConsoleError(f"show as: one of {', '.join(MODES)}, not {mode_text!r}")
    mode: Mode = mode_text
    origin = q.get("from") or "latest"
    tail = q.get("tail") == "on" and origin == "latest"
    tp = TopicPartition(name, partition)
    note = ""
    offset: int | None
    if origin == "offset":
        offset = whole_number(q.get("offset"), "offset", default=0)
    elif origin == "timestamp":
        ms = timestamp_ms(q.get("time"), "time")
        offset = await browse.offset_for_time(client, tp, ms)
        if offset is None:
            note = f"No record of {name}-{partition} has a timestamp at or after {iso_utc(ms)}."
            offset = (await browse.offsets_of(client, tp))[1]
    elif origin == "latest":
        offset = None
    else:
        raise ConsoleError(f"from: one of offset, timestamp, latest; not {origin!r}")
    window = await browse.read(client, tp, offset, count)
    rows = [
        ShownRecord(
            r.offset, r.timestamp, show(r.key, mode, strict_json=False), show(r.value, mode),
            [(h[0], show(h[1], mode, strict_json=False)) for h in r.headers],
        )
        for r in window.records
    ]
    context: dict[str, Any] = {
        "topic": topic, "partition": partition, "count": count, "mode": mode,
        "origin": origin, "tail": tail, "tail_seconds": TAIL_SECONDS, "window": window,
        "rows": rows, "note": note, "offset_text": q.get("offset", ""),
        "time_text": q.get("time", ""), "modes": MODES,
    }
    if is_fragment(request):
        return render(request, "messages_rows.html", **context)
    return render(request, "messages.html", **context)


routes = [Route("/topics/{name}/messages", messages, name="messages")]
