"""Produce v0-11: acks 0, 1 and all; record batches (magic 2, v3+) appended as sent.
Message sets of the old formats (magic 0 and 1, only in v0-2) are up-converted to record
batches first, as Kafka does with a current message format.

Clients may not write to internal topics (INVALID_TOPIC_EXCEPTION). With acks=0 there is
no response; if such a request fails, the connection is closed so the client notices and
refreshes its metadata, as Kafka does.

Transactional batches are appended like others (the log tracks the open transaction from
their headers); a request carrying any without a transactional id fails as a whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and control batches from clients are refused
(INVALID_RECORD) by validation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from logbus.controller.topic_validation import INTERNAL_TOPICS
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.produce_request import ProduceRequest
from logbus.records.batch import InvalidBatch, has_transactional_batch
from logbus.records.legacy import is_legacy, upconvert_message_set
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.network.connection import CloseConnection
from logbus.server.replica.replica_manager import ProduceResult
from logbus.server.security.acl import AclOperation, ResourceType

Entry = tuple[str, int, memoryview | None]
# Produce v3 is the first that carries record batches (magic 2).
MAGIC_V2_FROM = 3


def _rejection(
    acks: int, unauthorized_txn: bool, topic: str, records: memoryview | None, version: int
) -> ProduceResult | None:
    """Why a partition's records are refused before reaching the log, if they are."""
    if records is not None and version >= MAGIC_V2_FROM and is_legacy(records):
        return ProduceResult(
            ErrorCode.INVALID_RECORD,
            message=f"Produce v{version} requires record batches of magic 2",
        )
    if acks not in (0, 1, -1):
        return ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
    if unauthorized_txn:
        return ProduceResult(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            message="transactional batches need the request's transactional id",
        )
    if topic in INTERNAL_TOPICS:
        return ProduceResult(
            ErrorCode.INVALID_TOPIC_EXCEPTION, message=f"Cannot append to internal topic {topic}"
        )
    return None


def _denied(
    ctx: RequestContext, transactional_id: str | None, topics: set[str]
) -> Callable[[str], ProduceResult | None]:
    """Kafka's checks: Write on the transactional id (every partition refused without it),
    then Write on each topic."""
    if transactional_id is not None and not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        refused = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return lambda _topic: refused
    writable = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, topics)
    topic_refused = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return lambda topic: None if topic in writable else topic_refused


def _upconvert(entries: list[Entry]) -> tuple[list[Entry], dict[int, ProduceResult]]:
    """Old-format message sets as record batches; invalid ones become CORRUPT_MESSAGE."""
    now_ms = int(time.time() * 1000)
    converted: list[Entry] = []
    errors: dict[int, ProduceResult] = {}
    for i, (topic, index, records) in enumerate(entries):
        if records is not None and is_legacy(records):
            try:
                records = memoryview(upconvert_message_set(records, now_ms=now_ms))
            except InvalidBatch as exc:
                errors[i] = ProduceResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        converted.append((topic, index, records))
    return converted, errors


async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> Body | None:
    replica_manager = ctx.services.replica_manager
    acks = request["acks"]
    entries: list[Entry] = [
        (topic["name"], part["index"], part["records"])
        for topic in request["topic_data"]
        for part in topic["partition_data"]
    ]
    if ctx.version < MAGIC_V2_FROM:
        entries, conversion_errors = _upconvert(entries)
    else:
        conversion_errors = {}
    # As Kafka: transactional batches in a request without a transactional id fail the
    # whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).
    unauthorized_txn = request["transactional_id"] is None and any(
        records is not None and has_transactional_batch(records)
        for _t, _p, records in entries
    )
    denied = _denied(ctx, request["transactional_id"], {topic for topic, _p, _r in entries})
    results: list[ProduceResult | None] = [
        denied(topic)
        or conversion_errors.get(i)
        or _rejection(acks, unauthorized_txn, topic, records, ctx.version)
        for i, (topic, _p, records) in enumerate(entries)
    ]
    metrics = ctx.services.metrics
    if metrics is not None:  # refused before the append: failed produces
        for (topic, _p, _r), result in zip(entries, results, strict=True):
            if result is not None:
                metrics.topics.produce_failed(topic)
    accepted = [entry for entry, result in zip(entries, results, strict=True) if result is None]
    if accepted:
        cache = ctx.services.metadata_cache
        appended = iter(
            await replica_manager.append_records(
                acks,
                request["timeout_ms"],
                accepted,
                lambda t, p: cache.partition(t, p) is not None,
            )
        )
        results = [next(appended) if r is None else r for r in results]
    final = [r for r in results if r is not None]
    if acks == 0:
        failed = [r for r in final if r.error != ErrorCode.NONE]
        if failed:
            raise CloseConnection(f"acks=0 produce failed: {failed[0].error.name}")
        return None
    by_topic: dict[str, list[Body]] = {}
    for (topic, index, _records), r in zip(entries, final, strict=True):
        by_topic.setdefault(topic, []).append(
            {
                "index": index,
                "error_code": r.error,
                "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time,
                "log_start_offset": r.log_start_offset,
                "error_message": r.message if r.error != ErrorCode.NONE else None,
                "record_errors": [
                    {"batch_index": index, "batch_index_error_message": text}
                    for index, text in r.record_errors
                ],
            }
        )
    return {
        "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()],
        "throttle_time_ms": 0,
    }


HANDLERS = [ApiHandler(ApiKey.PRODUCE, 0, 11, handle_produce)]
