"""Confluent REST Proxy's v3 API: clusters, brokers, topics, partitions and replicas;
partition reassignments; topic, broker and cluster-wide configs; consumer groups, their
members and lag; producing records (one JSON object per record, streamed); ACLs. Every
resource carries Confluent's `kind`, `metadata.self` (and `resource_name`) and `related`
links; errors are Confluent's `{"error_code", "message"}` bodies.

The entry point is `ROUTES` (the app mounts each with `v3_endpoint`).
"""

from __future__ import annotations

from typing import Any

from logbus.restproxy.v3 import (
    acls,
    clusters,
    configs,
    groups,
    reassignments,
    records,
    topics,
)

# configs and reassignments first: `topics/-/configs`, `brokers/-/configs` and
# `partitions/-/reassignment` before the routes that would read "-" as a name or number
ROUTES: list[tuple[str, Any, list[str]]] = [
    *configs.ROUTES,
    *reassignments.ROUTES,
    *clusters.ROUTES,
    *topics.ROUTES,
    *records.ROUTES,
    *groups.ROUTES,
    *acls.ROUTES,
]

__all__ = ["ROUTES"]
