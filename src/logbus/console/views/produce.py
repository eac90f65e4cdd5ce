"""The produce form: one record (topic, optional partition, key, value, headers) sent by
the console's producer; the page says where it was written."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from logbus.client.admin import AdminBatchError
from logbus.console.access import console_access
from logbus.console.errors import ConsoleError
from logbus.console.forms import header_lines, optional_number
from logbus.console.pages import admin, clients, posted_form, render


async def produce_form(request: Request) -> Response:
    if console_access(request).read_only:
        raise ConsoleError("Refused: this console is read-only; it sends no records.", 403)
    client = await admin(request)
    topics = await client.list_topics()
    return render(request, "produce.html", topics=topics,
                  chosen=request.query_params.get("topic", ""), written=None, form={})


async def produce(request: Request) -> Response:
    form = await posted_form(request)
    topic = str(form.get("topic", "")).strip()
    if not topic:
        raise ConsoleError("topic: a topic is required")
    partition = optional_number(str(form.get("partition", "")), "partition")
    key_text = str(form.get("key", ""))
    value_text = str(form.get("value", ""))
    headers = header_lines(str(form.get("headers", "")))
    client = await admin(request)
    try:
        info = (await client.describe_topics([topic]))[topic]
    except AdminBatchError as exc:
        raise next(iter(exc.errors.values())) from None
    if partition is not None and partition not in info.partitions:
        raise ConsoleError(
            f"partition: {topic} has partitions 0 to {len(info.partitions) - 1}, "
            f"not {partition}"
        )
    producer = await clients(request).producer()
    written = await producer.send_and_wait(
        topic,
        value_text.encode(),
        key_text.encode() if key_text else None,
        partition=partition,
        headers=headers or None,
    )
    topics = await client.list_topics()
    return render(request, "produce.html", topics=topics, chosen=topic, written=written,
                  form={"key": key_text, "value": value_text,
                        "headers": str(form.get("headers", ""))})


routes = [
    Route("/produce", produce_form, name="produce"),
    Route("/produce", produce, methods=["POST"]),
]
