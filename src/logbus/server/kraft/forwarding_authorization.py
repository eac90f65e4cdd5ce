"""A KRaft broker's authorization of the admin requests it forwards (KIP-590's first step:
the broker checks, then sends what may pass as its own request, since the controller does
not take an Envelope with the client's principal yet).

Per-topic requests are split as Kafka's broker does in ZooKeeper mode: the entries the
principal may act on are forwarded, the others answered TOPIC_AUTHORIZATION_FAILED (or
CLUSTER_AUTHORIZATION_FAILED for broker configs) beside the controller's answers.
Cluster-level requests go whole or not at all; a refused one is answered by the broker's
own handler, whose refusal comes before it touches anything. The entry point is
`screen`; the operations are those the broker's own handlers check (server/api/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from logbus.controller.topic_admin import ZERO_UUID
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation, ResourceType
from logbus.server.api import RequestContext

__all__ = ["CLUSTER_LEVEL", "Screened", "screen"]

AUTHORIZATION_MESSAGE: Final = "Authorization failed."
TOPIC_CONFIG: Final = 2

CLUSTER_LEVEL: Final[Mapping[int, AclOperation]] = {
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
}
"""Requests that need one permission on the cluster."""


@dataclass
class Screened:
    """What may be forwarded (`body`, None when nothing), and the answers of the entries
    refused here, to go under `results_key` of the response."""

    body: dict[str, Any] | None
    results_key: str
    refused: list[dict[str, Any]] = field(default_factory=list)

    def merge(self, answer: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = dict(answer) if answer is not None else {"throttle_time_ms": 0}
        out[self.results_key] = list(out.get(self.results_key) or []) + self.refused
        return out


def _split(
    body: dict[str, Any], items_key: str, allowed: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    items = list(body.get(items_key) or [])
    kept = [item for item in items if allowed(item)]
    refused = [item for item in items if not allowed(item)]
    return ({**body, items_key: kept} if kept else None), refused


def _topic_names(ctx: RequestContext, op: AclOperation, names: list[str]) -> set[str]:
    return ctx.authorized(op, ResourceType.TOPIC, names)


def _create_topics(ctx: RequestContext, body: dict[str, Any]) -> Screened:
    names = [t["name"] for t in body["topics"]]
    may = (
        set(names)
        if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
        else _topic_names(ctx, AclOperation.CREATE, names)
    )
    kept, refused = _split(body, "topics", lambda t: t["name"] in may)
    return Screened(kept, "topics", [
        {"name": t["name"], "topic_id": ZERO_UUID,
         "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
         "error_message": AUTHORIZATION_MESSAGE, "topic_config_error_code": 0,
         "num_partitions": -1, "replication_factor": -1, "configs": None}
        for t in refused
    ])  # fmt: skip


def _delete_topics(ctx: RequestContext, body: dict[str, Any]) -> Screened:
    cache = ctx.services.metadata_cache
    if body.get("topics"):  # v6: names or topic ids
        def name_of(t: dict[str, Any]) -> str:
            return t.get("name") or cache.topic_name(t["topic_id"]) or ""

        may = _topic_names(ctx, AclOperation.DELETE, [name_of(t) for t in body["topics"]])
        kept, refused = _split(body, "topics", lambda t: name_of(t) in may)
        entries = [(name_of(t), t.get("topic_id", ZERO_UUID)) for t in refused]
    else:
        names = list(body.get("topic_names") or [])
        may = _topic_names(ctx, AclOperation.DELETE, names)
        kept_names = [n for n in names if n in may]
        kept = {**body, "topic_names": kept_names} if kept_names else None
        entries = [(n, ZERO_UUID) for n in names if n not in may]
    return Screened(kept, "responses", [
        {"name": name, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
         "error_message": AUTHORIZATION_MESSAGE}
        for name, topic_id in entries
    ])  # fmt: skip


def _create_partitions(ctx: RequestContext, body: dict[str, Any]) -> Screened:
    may = _topic_names(ctx, AclOperation.ALTER, [t["name"] for t in body["topics"]])
    kept, refused = _split(body, "topics", lambda t: t["name"] in may)
    return Screened(kept, "results", [
        {"name": t["name"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
         "error_message": AUTHORIZATION_MESSAGE}
        for t in refused
    ])  # fmt: skip


def _alter_configs(ctx: RequestContext, body: dict[str, Any]) -> Screened:
    cluster = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)

    def allowed(resource: dict[str, Any]) -> bool:
        if resource["resource_type"] == TOPIC_CONFIG:
            return ctx.authorize(
                AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource["resource_name"]
            )
        return cluster

    kept, refused = _split(body, "resources", allowed)
    return Screened(kept, "responses", [
        {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED
         if r["resource_type"] == TOPIC_CONFIG else ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
         "error_message": AUTHORIZATION_MESSAGE, "resource_type": r["resource_type"],
         "resource_name": r["resource_name"]}
        for r in refused
    ])  # fmt: skip


PER_ENTRY: Final[Mapping[int, Callable[[RequestContext, dict[str, Any]], Screened]]] = {
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs,
}


def screen(ctx: RequestContext, api_key: int, body: dict[str, Any]) -> Screened | None:
    """The part of a per-entry request the principal may forward (with the refused
    entries' answers); None for a cluster-level request the principal may not send."""
    per_entry = PER_ENTRY.get(api_key)
    if per_entry is not None:
        return per_entry(ctx, body)
    if ctx.authorize(CLUSTER_LEVEL[api_key], ResourceType.CLUSTER):
        return Screened(body, "", [])
    return None
