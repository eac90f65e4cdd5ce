"""The authorization matrix: for every API the broker serves, a principal without the ACL
Kafka's KafkaApis asks for is refused with Kafka's code and nothing changes; with the ACL
the same request gets past authorization.

One broker (authorizer.class.name=kafka.security.authorizer.AclAuthorizer, super.users=
User:admin) serves every case; each case revokes every ACL first and works on resources
of its own. Principals come from `acl_helpers.assign_principals` (the client id) until
SASL is merged; the cases are the same over SASL/PLAIN.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acl_helpers import (
    ADMIN,
    ALICE,
    SECURED,
    acl,
    acl_filter,
    assign_principals,
    call,
    create_topic,
    grant,
    revoke_all,
)
from wire import batch

from brokers import RunningBroker, collect_leaks
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation as Op
from logbus.protocol.acl_types import ResourceType as R
from logbus.server.api.registry import build_registry

E = ErrorCode
Codes = Callable[[dict[str, Any]], list[int]]
GROUP_OFFSETS = "__consumer_offsets"


def topic_codes(key: str, parts: str = "partitions", name: str = "error_code") -> Codes:
    return lambda r: [p[name] for t in r[key] for p in t[parts]]


def top(r: dict[str, Any]) -> list[int]:
    return [r["error_code"]]


@dataclass
class Case:
    api: ApiKey
    body: dict[str, Any]
    codes: Codes
    denied: ErrorCode
    grants: list[Any]
    version: int | None = None
    setup: Callable[[str], None] | None = None
    # what must not change when refused: a snapshot taken before and after, as the admin
    state: Callable[[str], Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def produce_body(topic: str) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch(b"v")}]}],
    }


def list_offset(topic: str, timestamp: int) -> Callable[[str], Any]:
    """ListOffsets of partition 0 as the admin: -1 its log end, -2 its log start."""

    def state(bootstrap: str) -> Any:
        body = {
            "replica_id": -1,
            "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
            ],
        }
        r = call(bootstrap, ADMIN, ApiKey.LIST_OFFSETS, body)
        return r["topics"][0]["partitions"][0]["offset"]

    return state


def log_end(topic: str) -> Callable[[str], Any]:
    return list_offset(topic, -1)


def log_start(topic: str) -> Callable[[str], Any]:
    return list_offset(topic, -2)


def topic_state(topic: str) -> Callable[[str], Any]:
    def state(bootstrap: str) -> Any:
        r = call(bootstrap, ADMIN, ApiKey.METADATA, {"topics": [{"name": topic}]})
        t = r["topics"][0]
        return t["error_code"], len(t["partitions"])

    return state


def topic_config(topic: str) -> Callable[[str], Any]:
    def state(bootstrap: str) -> Any:
        body = {
            "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}]
        }
        r = call(bootstrap, ADMIN, ApiKey.DESCRIBE_CONFIGS, body)
        return {c["name"]: c["value"] for c in r["results"][0]["configs"]}

    return state


def committed(group: str, topic: str) -> Callable[[str], Any]:
    def state(bootstrap: str) -> Any:
        body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
        r = call(bootstrap, ADMIN, ApiKey.OFFSET_FETCH, body, version=7)
        return r["topics"][0]["partitions"][0]["committed_offset"]

    return state


def commit_as_admin(group: str, topic: str) -> Callable[[str], None]:
    def setup(bootstrap: str) -> None:
        create_topic(bootstrap, topic, exist_ok=True)
        call(bootstrap, ADMIN, ApiKey.PRODUCE, produce_body(topic))
        deadline = time.monotonic() + 30
        while True:  # the first lookup creates __consumer_offsets; its leader comes soon
            call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
            body = commit_body(group, topic, 1)
            r = call(bootstrap, ADMIN, ApiKey.OFFSET_COMMIT, body, version=8)
            if topic_codes("topics")(r) == [0] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert topic_codes("topics")(r) == [0], r

    return setup


def commit_body(group: str, topic: str, offset: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
                ],
            }
        ],
    }


def describe_acls(bootstrap: str) -> Any:
    body = acl_filter()
    r = call(bootstrap, ADMIN, ApiKey.DESCRIBE_ACLS, body)
    return sorted(
        (x["resource_name"], a["principal"], a["operation"])
        for x in r["resources"]
        for a in x["acls"]
    )


def client_quotas(bootstrap: str) -> Any:
    return call(bootstrap, ADMIN, ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [],
                                                                  "strict": False}, 1)


def share_coordinator_loaded(group: str) -> Callable[[str], None]:
    """Wait (as the admin) until the group's coordinator answers for it."""

    def setup(bootstrap: str) -> None:
        body = {"groups": [{"group_id": group, "topics": []}]}
        deadline = time.monotonic() + 30
        while True:  # the first lookup creates __consumer_offsets; its leader comes soon
            call(bootstrap, ADMIN, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
            r = call(bootstrap, ADMIN, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, body)
            if r["groups"][0]["error_code"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r["groups"][0]["error_code"] == 0, r

    return setup


def empty_share_group(group: str, topic: str) -> Callable[[str], None]:
    """As the admin: `topic`, and `group` a share group whose one member joined and left
    (so its coordinator knows it, with no members)."""

    def setup(bootstrap: str) -> None:
        create_topic(bootstrap, topic, exist_ok=True)
        share_coordinator_loaded(group)(bootstrap)
        for epoch in (0, -1):
            body = {"group_id": group, "member_id": "m", "member_epoch": epoch,
                    "rack_id": None, "subscribed_topic_names": [topic] if epoch == 0 else None}
            r = call(bootstrap, ADMIN, ApiKey.SHARE_GROUP_HEARTBEAT, body, 1)
            assert r["error_code"] == 0, r

    return setup


def share_offsets(group: str, topic: str) -> Callable[[str], Any]:
    def state(bootstrap: str) -> Any:
        body = {"groups": [{"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [0]}]}]}
        r = call(bootstrap, ADMIN, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, body)
        return r["groups"][0]

    return state


def topics_setup(*names: str) -> Callable[[str], None]:
    def setup(bootstrap: str) -> None:
        for name in names:
            create_topic(bootstrap, name, exist_ok=True)
            call(bootstrap, ADMIN, ApiKey.PRODUCE, produce_body(name))

    return setup


CLUSTER = "kafka-cluster"
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8


def fetch_body(topic: str, replica_id: int = -1) -> dict[str, Any]:
    """Fetch v12 of partition 0 from offset 0: a consumer's, or a follower's (replica_id)."""
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }


def controller_case(api: ApiKey, version: int, **fields: Any) -> Case:
    """A controller's request (LeaderAndIsr, UpdateMetadata, StopReplica) with nothing in
    it: refused without ClusterAction; the super user gets past the check."""
    body = {
        "controller_id": 0,
        "controller_epoch": 1_000_000,
        "broker_epoch": -1,
        "topic_states": [],
        **fields,
    }
    return Case(
        api,
        body,
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [],
        version=version,
        extra={"deny_only": True},
    )


def describe_configs_case(
    resource_type: int, name: str, denied: ErrorCode, grants: list[Any], **extra: Any
) -> Case:
    """DescribeConfigs of one resource."""
    body = {
        "resources": [
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
        ]
    }
    return Case(
        ApiKey.DESCRIBE_CONFIGS,
        body,
        lambda r: [x["error_code"] for x in r["results"]],
        denied,
        grants,
        **extra,
    )


def alter_configs_case(
    resource_type: int,
    name: str,
    config: tuple[str, str],
    denied: ErrorCode,
    grants: list[Any],
    *,
    incremental: bool = True,
    validate_only: bool = False,
    **extra: Any,
) -> Case:
    """IncrementalAlterConfigs (a SET) or AlterConfigs of one config of one resource."""
    key, value = config
    entry: dict[str, Any] = {"name": key, "value": value}
    if incremental:
        entry["config_operation"] = 0
    body: dict[str, Any] = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": [entry]}]
    }
    if validate_only:
        body["validate_only"] = True
    return Case(
        ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS,
        body,
        lambda r: [x["error_code"] for x in r["responses"]],
        denied,
        grants,
        **extra,
    )


CASES: dict[str, Case] = {
    "metadata": Case(
        ApiKey.METADATA,
        {"topics": [{"name": "md"}], "allow_auto_topic_creation": False},
        lambda r: [t["error_code"] for t in r["topics"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "md", Op.DESCRIBE)],
        setup=topics_setup("md"),
    ),
    "produce": Case(
        ApiKey.PRODUCE,
        produce_body("pr"),
        topic_codes("responses", "partition_responses"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "pr", Op.WRITE)],
        setup=topics_setup("pr"),
        state=log_end("pr"),
    ),
    "fetch": Case(
        ApiKey.FETCH,
        fetch_body("fe"),
        topic_codes("responses"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "fe", Op.READ)],
        version=12,
        setup=topics_setup("fe"),
    ),
    "list_offsets": Case(
        ApiKey.LIST_OFFSETS,
        {
            "replica_id": -1,
            "topics": [{"name": "lo", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "lo", Op.DESCRIBE)],
        setup=topics_setup("lo"),
    ),
    "offset_for_leader_epoch": Case(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": "oe",
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "oe", Op.DESCRIBE)],
        setup=topics_setup("oe"),
    ),
    "create_topics": Case(
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": "ct",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10_000,
        },
        lambda r: [t["error_code"] for t in r["topics"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CREATE)],
        state=topic_state("ct"),
    ),
    "delete_topics": Case(
        ApiKey.DELETE_TOPICS,
        {"topic_names": ["dt"], "timeout_ms": 10_000},
        lambda r: [t["error_code"] for t in r["responses"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dt", Op.DELETE)],
        version=5,
        setup=topics_setup("dt"),
        state=topic_state("dt"),
    ),
    "create_partitions": Case(
        ApiKey.CREATE_PARTITIONS,
        {"topics": [{"name": "cp", "count": 2, "assignments": None}], "timeout_ms": 10_000},
        lambda r: [t["error_code"] for t in r["results"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "cp", Op.ALTER)],
        setup=topics_setup("cp"),
        state=topic_state("cp"),
    ),
    "describe_configs": describe_configs_case(
        TOPIC_RESOURCE,
        "dc",
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dc", Op.DESCRIBE_CONFIGS)],
        setup=topics_setup("dc"),
    ),
    "describe_broker_configs": describe_configs_case(
        BROKER_RESOURCE,
        "0",
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)],
    ),
    "describe_broker_loggers": describe_configs_case(
        BROKER_LOGGER_RESOURCE,
        "0",
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)],
    ),
    "alter_configs": alter_configs_case(
        TOPIC_RESOURCE,
        "ac",
        ("retention.ms", "1234"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "ac", Op.ALTER_CONFIGS)],
        incremental=False,
        setup=topics_setup("ac"),
        state=topic_config("ac"),
    ),
    "incremental_alter_configs": alter_configs_case(
        TOPIC_RESOURCE,
        "ia",
        ("retention.ms", "1234"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "ia", Op.ALTER_CONFIGS)],
        setup=topics_setup("ia"),
        state=topic_config("ia"),
    ),
    "alter_broker_configs": alter_configs_case(
        BROKER_RESOURCE,
        "",
        ("log.retention.ms", "86400000"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)],
    ),
    # validate_only: granted, the change is checked but this process's levels stay
    "alter_broker_loggers": alter_configs_case(
        BROKER_LOGGER_RESOURCE,
        "0",
        ("root", "INFO"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)],
        validate_only=True,
    ),
    "delete_records": Case(
        ApiKey.DELETE_RECORDS,
        {
            "topics": [{"name": "dr", "partitions": [{"partition_index": 0, "offset": 1}]}],
            "timeout_ms": 5000,
        },
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dr", Op.DELETE)],
        setup=topics_setup("dr"),
        state=log_start("dr"),
    ),
    "describe_producers": Case(
        ApiKey.DESCRIBE_PRODUCERS,
        {"topics": [{"name": "dp", "partition_indexes": [0]}]},
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dp", Op.READ)],
        setup=topics_setup("dp"),
    ),
    "describe_log_dirs": Case(
        ApiKey.DESCRIBE_LOG_DIRS,
        {"topics": None},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE)],
        version=4,
    ),
    # a path that is no log dir: once allowed, LOG_DIR_NOT_FOUND and nothing moves
    "alter_replica_log_dirs": Case(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        {"dirs": [{"path": "/no-such-log-dir", "topics": [{"name": "ard", "partitions": [0]}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        version=2,
    ),
    "elect_leaders": Case(
        ApiKey.ELECT_LEADERS,
        {"election_type": 0, "topic_partitions": None, "timeout_ms": 5000},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        version=2,
    ),
    "alter_partition_reassignments": Case(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        {"timeout_ms": 5000, "topics": [{"name": "nope", "partitions": []}]},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        version=0,
    ),
    "list_partition_reassignments": Case(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        {"timeout_ms": 5000, "topics": None},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE)],
        version=0,
    ),
    # the broker's own request to the controller: ClusterAction, which only the super
    # user has here (a stand-alone broker answers it without changing anything)
    "controlled_shutdown": Case(
        ApiKey.CONTROLLED_SHUTDOWN,
        {"broker_id": 0, "broker_epoch": -1},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [],
        version=3,
        extra={"deny_only": True},
    ),
    "find_group_coordinator": Case(
        ApiKey.FIND_COORDINATOR,
        {"key": "fg", "key_type": 0},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "fg", Op.DESCRIBE)],
        version=3,
    ),
    "find_txn_coordinator": Case(
        ApiKey.FIND_COORDINATOR,
        {"key": "ft", "key_type": 1},
        top,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "ft", Op.DESCRIBE)],
        version=3,
    ),
    "join_group": Case(
        ApiKey.JOIN_GROUP,
        {
            "group_id": "jg",
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "jg", Op.READ)],
        version=5,
    ),
    "sync_group": Case(
        ApiKey.SYNC_GROUP,
        {"group_id": "sg", "generation_id": 1, "member_id": "m", "assignments": []},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "sg", Op.READ)],
        version=3,
    ),
    "heartbeat": Case(
        ApiKey.HEARTBEAT,
        {"group_id": "hb", "generation_id": 1, "member_id": "m"},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "hb", Op.READ)],
    ),
    "leave_group": Case(
        ApiKey.LEAVE_GROUP,
        {"group_id": "lg", "member_id": "m"},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "lg", Op.READ)],
        version=2,
    ),
    "offset_commit": Case(
        ApiKey.OFFSET_COMMIT,
        commit_body("oc", "oct", 5),
        topic_codes("topics"),
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "oc", Op.READ), acl(R.TOPIC, "oct", Op.READ)],
        version=8,
        setup=commit_as_admin("oc", "oct"),
        state=committed("oc", "oct"),
    ),
    "offset_commit_topic": Case(
        ApiKey.OFFSET_COMMIT,
        commit_body("ot", "ott", 5),
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "ott", Op.READ)],
        version=8,
        setup=commit_as_admin("ot", "ott"),
        state=committed("ot", "ott"),
        extra={"base": [acl(R.GROUP, "ot", Op.READ)]},
    ),
    "offset_fetch": Case(
        ApiKey.OFFSET_FETCH,
        {"group_id": "of", "topics": [{"name": "oft", "partition_indexes": [0]}]},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "of", Op.DESCRIBE)],
        version=7,
        setup=commit_as_admin("of", "oft"),
    ),
    "offset_fetch_topic": Case(
        ApiKey.OFFSET_FETCH,
        {"group_id": "oh", "topics": [{"name": "oht", "partition_indexes": [0]}]},
        topic_codes("topics"),
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "oht", Op.DESCRIBE)],
        version=7,
        setup=commit_as_admin("oh", "oht"),
        extra={"base": [acl(R.GROUP, "oh", Op.DESCRIBE)]},
    ),
    "offset_delete": Case(
        ApiKey.OFFSET_DELETE,
        {"group_id": "od", "topics": [{"name": "odt", "partitions": [{"partition_index": 0}]}]},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "od", Op.DELETE), acl(R.TOPIC, "odt", Op.READ)],
        setup=commit_as_admin("od", "odt"),
        state=committed("od", "odt"),
    ),
    "describe_groups": Case(
        ApiKey.DESCRIBE_GROUPS,
        {"groups": ["dg"]},
        lambda r: [g["error_code"] for g in r["groups"]],
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "dg", Op.DESCRIBE)],
    ),
    "delete_groups": Case(
        ApiKey.DELETE_GROUPS,
        {"groups_names": ["xg"]},
        lambda r: [g["error_code"] for g in r["results"]],
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "xg", Op.DELETE)],
        setup=commit_as_admin("xg", "xgt"),
        state=committed("xg", "xgt"),
    ),
    "init_producer_id_txn": Case(
        ApiKey.INIT_PRODUCER_ID,
        {
            "transactional_id": "ip",
            "transaction_timeout_ms": 10_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        top,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "ip", Op.WRITE)],
    ),
    "init_producer_id_idempotent": Case(
        ApiKey.INIT_PRODUCER_ID,
        {
            "transactional_id": None,
            "transaction_timeout_ms": 10_000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.IDEMPOTENT_WRITE)],
    ),
    "add_partitions_to_txn": Case(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        {
            "v3_and_below_transactional_id": "ap",
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "apt", "partitions": [0]}],
        },
        lambda r: [
            p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        ],
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "ap", Op.WRITE), acl(R.TOPIC, "apt", Op.WRITE)],
        version=3,
        setup=topics_setup("apt"),
    ),
    "add_partitions_to_txn_topic": Case(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        {
            "v3_and_below_transactional_id": "aq",
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "aqt", "partitions": [0]}],
        },
        lambda r: [
            p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        ],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "aqt", Op.WRITE)],
        version=3,
        setup=topics_setup("aqt"),
        extra={"base": [acl(R.TRANSACTIONAL_ID, "aq", Op.WRITE)]},
    ),
    "add_partitions_to_txn_v4": Case(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        {"transactions": []},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
        version=4,
    ),
    "add_offsets_to_txn": Case(
        ApiKey.ADD_OFFSETS_TO_TXN,
        {"transactional_id": "ao", "producer_id": 1, "producer_epoch": 0, "group_id": "aog"},
        top,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "ao", Op.WRITE), acl(R.GROUP, "aog", Op.READ)],
    ),
    "add_offsets_to_txn_group": Case(
        ApiKey.ADD_OFFSETS_TO_TXN,
        {"transactional_id": "ag", "producer_id": 1, "producer_epoch": 0, "group_id": "agg"},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "agg", Op.READ)],
        extra={"base": [acl(R.TRANSACTIONAL_ID, "ag", Op.WRITE)]},
    ),
    "end_txn": Case(
        ApiKey.END_TXN,
        {"transactional_id": "et", "producer_id": 1, "producer_epoch": 0, "committed": True},
        top,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "et", Op.WRITE)],
    ),
    "txn_offset_commit": Case(
        ApiKey.TXN_OFFSET_COMMIT,
        {
            "transactional_id": "to",
            "group_id": "tog",
            "producer_id": 1,
            "producer_epoch": 0,
            "topics": [
                {
                    "name": "tot",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                    ],
                }
            ],
        },
        topic_codes("topics"),
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [
            acl(R.TRANSACTIONAL_ID, "to", Op.WRITE),
            acl(R.GROUP, "tog", Op.READ),
            acl(R.TOPIC, "tot", Op.READ),
        ],
        setup=topics_setup("tot"),
    ),
    "describe_transactions": Case(
        ApiKey.DESCRIBE_TRANSACTIONS,
        {"transactional_ids": ["dx"]},
        lambda r: [s["error_code"] for s in r["transaction_states"]],
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        [acl(R.TRANSACTIONAL_ID, "dx", Op.DESCRIBE)],
    ),
    "create_acls": Case(
        ApiKey.CREATE_ACLS,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "ca",
                    "resource_pattern_type": 3,
                    "principal": "User:bob",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
        lambda r: [x["error_code"] for x in r["results"]],
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        state=describe_acls,
    ),
    "describe_acls": Case(
        ApiKey.DESCRIBE_ACLS,
        acl_filter(),
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE)],
    ),
    "alter_user_scram_credentials": Case(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {
            "deletions": [],
            "upsertions": [
                {
                    "name": "scram-user",
                    "mechanism": 2,
                    "iterations": 4096,
                    "salt": b"salt",
                    "salted_password": b"x" * 64,
                }
            ],
        },
        lambda r: [x["error_code"] for x in r["results"]],
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        state=lambda b: call(b, ADMIN, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None}),
    ),
    "describe_user_scram_credentials": Case(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        {"users": None},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE)],
    ),
    "delete_acls": Case(
        ApiKey.DELETE_ACLS,
        {"filters": [acl_filter()]},
        lambda r: [x["error_code"] for x in r["filter_results"]],
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER)],
        state=describe_acls,
        extra={"base": [acl(R.TOPIC, "keep", Op.READ, principal="User:bob")]},
    ),
    "leader_and_isr": controller_case(ApiKey.LEADER_AND_ISR, 5, live_leaders=[]),
    "update_metadata": controller_case(ApiKey.UPDATE_METADATA, 7, live_brokers=[]),
    "stop_replica": controller_case(ApiKey.STOP_REPLICA, 3),
    "alter_partition": Case(
        ApiKey.ALTER_PARTITION,
        {"broker_id": 0, "broker_epoch": -1, "topics": []},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
        version=1,
    ),
    "write_txn_markers": Case(
        ApiKey.WRITE_TXN_MARKERS,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": "wm", "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        lambda r: [
            p["error_code"] for m in r["markers"] for t in m["topics"] for p in t["partitions"]
        ],
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
        setup=topics_setup("wm"),
        state=log_end("wm"),
    ),
    # consumer groups (KIP-848): READ on the group to heartbeat, DESCRIBE to describe
    "consumer_group_heartbeat": Case(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        {"group_id": "cgh", "member_id": "", "member_epoch": 0, "instance_id": None,
         "rack_id": None, "rebalance_timeout_ms": 30000,
         "subscribed_topic_names": ["cgh-t"], "server_assignor": None,
         "topic_partitions": []},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "cgh", Op.READ), acl(R.TOPIC, "cgh-t", Op.DESCRIBE)],
    ),
    # DESCRIBE on every topic subscribed to by name, checked before the coordinator
    "consumer_group_heartbeat_topic": Case(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        {"group_id": "cght", "member_id": "", "member_epoch": 0, "instance_id": None,
         "rack_id": None, "rebalance_timeout_ms": 30000,
         "subscribed_topic_names": ["cght-t"], "server_assignor": None,
         "topic_partitions": []},
        top,
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "cght-t", Op.DESCRIBE)],
        extra={"base": [acl(R.GROUP, "cght", Op.READ)]},
    ),
    "consumer_group_describe": Case(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        {"group_ids": ["cgd"], "include_authorized_operations": False},
        lambda r: [g["error_code"] for g in r["groups"]],
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "cgd", Op.DESCRIBE)],
    ),
    # share groups (KIP-932): READ on the group to join, fetch and acknowledge, DESCRIBE
    # to describe; the share coordinator's APIs are broker-to-broker (ClusterAction)
    "share_group_heartbeat": Case(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        {"group_id": "sh", "member_id": "m", "member_epoch": 0, "rack_id": None,
         "subscribed_topic_names": ["sh-t"]},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "sh", Op.READ), acl(R.TOPIC, "sh-t", Op.DESCRIBE)],
    ),
    "share_group_heartbeat_topic": Case(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        {"group_id": "sht", "member_id": "m", "member_epoch": 0, "rack_id": None,
         "subscribed_topic_names": ["sht-t"]},
        top,
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "sht-t", Op.DESCRIBE)],
        extra={"base": [acl(R.GROUP, "sht", Op.READ)]},
    ),
    "share_group_describe": Case(
        ApiKey.SHARE_GROUP_DESCRIBE,
        {"group_ids": ["sd"], "include_authorized_operations": False},
        lambda r: [g["error_code"] for g in r["groups"]],
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "sd", Op.DESCRIBE)],
    ),
    "share_fetch": Case(
        ApiKey.SHARE_FETCH,
        {"group_id": "sf", "member_id": "m", "share_session_epoch": 0, "max_wait_ms": 0,
         "min_bytes": 1, "max_bytes": 1024, "max_records": 10, "batch_size": 10,
         "topics": [], "forgotten_topics_data": []},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "sf", Op.READ)],
    ),
    "share_acknowledge": Case(
        ApiKey.SHARE_ACKNOWLEDGE,
        {"group_id": "sa", "member_id": "m", "share_session_epoch": 1, "topics": []},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "sa", Op.READ)],
    ),
    "read_share_group_state": Case(
        ApiKey.READ_SHARE_GROUP_STATE,
        {"group_id": "rs", "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0, "leader_epoch": 0}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
    ),
    "write_share_group_state": Case(
        ApiKey.WRITE_SHARE_GROUP_STATE,
        {"group_id": "ws", "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0, "state_epoch": 1, "leader_epoch": 0, "start_offset": 0,
             "state_batches": []}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
    ),
    "initialize_share_group_state": Case(
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        {"group_id": "is", "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0, "state_epoch": 1, "start_offset": 0}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
    ),
    "read_share_group_state_summary": Case(
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        {"group_id": "rss", "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0, "leader_epoch": 0}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
    ),
    "delete_share_group_state": Case(
        ApiKey.DELETE_SHARE_GROUP_STATE,
        {"group_id": "ds", "topics": [{"topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0}]}]},
        topic_codes("results"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
    ),
    # a share group's offsets: DESCRIBE on the group and topics to describe them, READ on
    # both to alter them, DELETE on the group and READ on the topics to delete them
    "describe_share_group_offsets": Case(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        {"groups": [{"group_id": "dso", "topics": None}]},
        lambda r: [g["error_code"] for g in r["groups"]],
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "dso", Op.DESCRIBE)],
    ),
    "describe_share_group_offsets_topic": Case(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        {"groups": [{"group_id": "dsot", "topics": [
            {"topic_name": "dsot-t", "partitions": [0]}]}]},
        lambda r: [p["error_code"] for g in r["groups"] for t in g["topics"]
                   for p in t["partitions"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dsot-t", Op.DESCRIBE)],
        setup=share_coordinator_loaded("dsot"),
        extra={"base": [acl(R.GROUP, "dsot", Op.DESCRIBE)]},
    ),
    "alter_share_group_offsets": Case(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        {"group_id": "aso", "topics": [{"topic_name": "aso-t", "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "aso", Op.READ)],
    ),
    "alter_share_group_offsets_topic": Case(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        {"group_id": "asot", "topics": [{"topic_name": "asot-t", "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]},
        lambda r: [p["error_code"] for t in r["responses"] for p in t["partitions"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "asot-t", Op.READ)],
        setup=empty_share_group("asot", "asot-t"),
        state=share_offsets("asot", "asot-t"),
        extra={"base": [acl(R.GROUP, "asot", Op.READ)]},
    ),
    "delete_share_group_offsets_topic": Case(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        {"group_id": "dlot", "topics": [{"topic_name": "dlot-t"}]},
        lambda r: [t["error_code"] for t in r["responses"]],
        E.TOPIC_AUTHORIZATION_FAILED,
        [acl(R.TOPIC, "dlot-t", Op.READ)],
        setup=empty_share_group("dlot", "dlot-t"),
        extra={"base": [acl(R.GROUP, "dlot", Op.DELETE)]},
    ),
    "delete_share_group_offsets": Case(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        {"group_id": "dlo", "topics": [{"topic_name": "dlo-t"}]},
        top,
        E.GROUP_AUTHORIZATION_FAILED,
        [acl(R.GROUP, "dlo", Op.DELETE)],
    ),
    "follower_fetch": Case(
        ApiKey.FETCH,
        fetch_body("ff", replica_id=1),
        topic_codes("responses"),
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.CLUSTER_ACTION)],
        version=12,
        setup=topics_setup("ff"),
    ),
    "describe_client_quotas": Case(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {"components": [], "strict": False},
        top,
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.DESCRIBE_CONFIGS)],
    ),
    "alter_client_quotas": Case(
        ApiKey.ALTER_CLIENT_QUOTAS,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "matrix-quota"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1e12, "remove": False}],
                }
            ],
            "validate_only": False,
        },
        lambda r: [e["error_code"] for e in r["entries"]],
        E.CLUSTER_AUTHORIZATION_FAILED,
        [acl(R.CLUSTER, CLUSTER, Op.ALTER_CONFIGS)],
        state=client_quotas,
    ),
}
# APIs whose refusal is not an error code: they leave out what the principal may not
# describe (tested below), or need no ACL at all (as in Kafka).
NOT_IN_TABLE = {
    ApiKey.API_VERSIONS: "needs no ACL",
    ApiKey.SASL_HANDSHAKE: "needs no ACL (authentication; tests/security/test_sasl.py)",
    ApiKey.SASL_AUTHENTICATE: "needs no ACL (authentication; tests/security/test_sasl.py)",
    ApiKey.DESCRIBE_CLUSTER: "needs no ACL in Kafka; authorized operations tested below",
    ApiKey.LIST_GROUPS: "filters the groups (test_list_groups_shows_only_described_groups)",
    ApiKey.LIST_TRANSACTIONS: "filters the ids (test_list_transactions_filters)",
}


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    data: Path = tmp_path_factory.mktemp("acl-matrix")
    running = RunningBroker(data, {k.replace("_", "."): v for k, v in SECURED.items()})
    running.start()
    assign_principals(running)
    try:
        yield running
    finally:
        running.stop()
        collect_leaks()


def test_every_served_api_is_in_the_matrix() -> None:
    covered = {case.api for case in CASES.values()} | set(NOT_IN_TABLE)
    assert set(build_registry()) == covered


@pytest.mark.parametrize("name", sorted(CASES))
def test_authorization(secured_broker: RunningBroker, name: str) -> None:
    case = CASES[name]
    bootstrap = secured_broker.bootstrap
    revoke_all(bootstrap)
    if case.setup is not None:
        case.setup(bootstrap)
    if case.extra.get("base"):
        grant(bootstrap, *case.extra["base"])
    before = case.state(bootstrap) if case.state is not None else None
    refused = case.codes(call(bootstrap, ALICE, case.api, case.body, case.version))
    assert refused and all(code == case.denied for code in refused), refused
    if case.state is not None:
        assert case.state(bootstrap) == before
    if case.extra.get("deny_only"):
        # the controller's requests: with ClusterAction the super user gets past it
        allowed = case.codes(call(bootstrap, ADMIN, case.api, case.body, case.version))
        assert case.denied not in allowed, allowed
        return
    grant(bootstrap, *case.grants)
    allowed = case.codes(call(bootstrap, ALICE, case.api, case.body, case.version))
    assert allowed and case.denied not in allowed, allowed
    assert E.TOPIC_AUTHORIZATION_FAILED not in allowed, allowed
