"""Produce v3-11 (record batch magic v2): acks 0, 1 and all; batches appended as sent.

With acks=0 there is no response; if such a request fails, the connection is closed so
the client notices and refreshes its metadata, as Kafka does.
"""

from __future__ import annotations

from logbus.protocol import ApiKey, ErrorCode
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.network.connection import CloseConnection


async def handle_produce(ctx: RequestContext, request: Body) -> Body | None:
    broker = ctx.broker
    assert broker.replica_manager is not None
    acks = request["acks"]
    entries: list[tuple[str, int, memoryview | None]] = []
    for topic in request["topic_data"]:
        for part in topic["partition_data"]:
            entries.append((topic["name"], part["index"], part["records"]))
    if acks not in (0, 1, -1):
        errors: list[tuple[str, int, ErrorCode, str | None]] = [
            (t, p, ErrorCode.INVALID_REQUIRED_ACKS, None) for t, p, _r in entries
        ]
    elif request["transactional_id"] is not None:
        errors = [
            (
                t,
                p,
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "transactions are not supported by this broker yet",
            )
            for t, p, _r in entries
        ]
    else:
        cache = broker.metadata_cache
        results = await broker.replica_manager.append_records(
            acks, request["timeout_ms"], entries, lambda t, p: cache.partition(t, p) is not None
        )
        if acks == 0:
            failed = [r for r in results if r.error != ErrorCode.NONE]
            if failed:
                raise CloseConnection(f"acks=0 produce failed: {failed[0].error.name}")
            return None
        return _response(entries, results)
    if acks == 0:
        raise CloseConnection("acks=0 produce failed")
    return {
        "responses": _group(
            (
                t,
                {
                    "index": p,
                    "error_code": e,
                    "error_message": m,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                },
            )
            for t, p, e, m in errors
        ),
        "throttle_time_ms": 0,
    }


def _group(items: object) -> list[Body]:
    by_topic: dict[str, list[Body]] = {}
    for topic, partition in items:  # type: ignore[attr-defined]
        by_topic.setdefault(topic, []).append(partition)
    return [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()]


def _response(entries: list[tuple[str, int, memoryview | None]], results: list) -> Body:  # type: ignore[type-arg]
    return {
        "responses": _group(
            (
                topic,
                {
                    "index": index,
                    "error_code": r.error,
                    "base_offset": r.base_offset,
                    "log_append_time_ms": r.log_append_time,
                    "log_start_offset": r.log_start_offset,
                    "error_message": r.message if r.error != ErrorCode.NONE else None,
                },
            )
            for (topic, index, _records), r in zip(entries, results, strict=True)
        ),
        "throttle_time_ms": 0,
    }


HANDLERS = [ApiHandler(ApiKey.PRODUCE, 3, 11, handle_produce)]
