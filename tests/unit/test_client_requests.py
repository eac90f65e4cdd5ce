"""Every request `logbus.client.requests` builds is what the broker's decoder reads, at
every version the broker serves; every reader reads what the broker's encoder writes.

Requests: build -> encode as the client does -> `protocol.codec.decode_request` (the
broker's own decoder, the hand-written Produce path included) -> the fields the version
carries equal what was built, and the builder used no field name the schema lacks.
Responses: a body the broker could send -> `codec.encode_response` (the hand-written
Fetch encoder included) -> `codec.decode_response` as the connection does -> reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import pytest
from share_request_bodies import SHARE_BUILDERS
from txn_request_bodies import TXN_BUILDERS

from logbus.client.errors import KafkaError
from logbus.client.requests import (
    acls,
    alter_configs,
    alter_partition,
    api_versions,
    client_quotas,
    cluster,
    configs,
    consumer_group,
    consumer_protocol,
    controller,
    delete_records,
    fetch,
    find_coordinator,
    group_membership,
    group_offsets,
    leader_elections,
    leader_epochs,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer_id,
    reassignments,
    sasl,
    scram_credentials,
    topics,
    transactions_marker,
)
from logbus.controller.cluster_metadata import (
    BrokerInfo,
    EndPoint,
    PartitionState,
    TopicMetadata,
)
from logbus.protocol import ApiKey, ErrorCode, codec, schema
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbus.records.builder import NewRecord, build_batch
from logbus.server.api.registry import build_registry
from logbus.types import TopicPartition

TOPIC_ID = UUID("12345678-1234-5678-1234-567812345678")
OTHER_ID = UUID("87654321-4321-8765-4321-876543218765")
BATCH = build_batch([NewRecord(b"k", b"v", timestamp=1000)], base_offset=0)
MEMBER = group_membership.MemberIdentity("member-1", 4, "instance-1")
SERVED = {key: (h.min_version, h.max_version) for key, h in build_registry().items()}
# Produce and Fetch below v3/v4 carry the old message formats, which this client never
# writes or reads.
CLIENT_MIN = {ApiKey.PRODUCE: produce.MIN_VERSION, ApiKey.FETCH: fetch.MIN_VERSION,
              ApiKey.DESCRIBE_CONFIGS: configs.MIN_VERSION}

CONTROL = controller.ControlHeader(controller_id=2, controller_epoch=7, broker_epoch=4242)
CONTROL_TOPIC = TopicMetadata(
    "a",
    TOPIC_ID,
    {0: PartitionState(1, 5, (1, 2), (1, 2, 3), 7, 11), 1: PartitionState(2, 3, (2,), (2, 3))},
)
CONTROL_BROKERS = [
    BrokerInfo(
        1, "h1", 9092, "rack-a", "PLAINTEXT",
        (EndPoint("PLAINTEXT", "h1", 9092), EndPoint("INTERNAL", "i1", 9093)),
    ),
    BrokerInfo(2, "h2", 9092),
]

# api key -> builder of a request body at a version (with everything optional filled in)
ACL_BINDING = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
)
ACL_FILTER = AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice")

BUILDERS: dict[int, Callable[[int], dict[str, Any]]] = {
    ApiKey.API_VERSIONS: lambda v: api_versions.build_api_versions(v, "1.2.3"),
    ApiKey.METADATA: lambda v: metadata.build_metadata(
        v, ["a", "b"], allow_auto_topic_creation=True
    ),
    ApiKey.PRODUCE: lambda v: produce.build_produce(
        v, {("a", 0): BATCH, ("a", 2): BATCH, ("b", 1): BATCH}, -1, timeout_ms=1234
    ),
    ApiKey.FETCH: lambda v: fetch.build_fetch(
        v,
        {
            ("a", 0): fetch.FetchPosition(10, 3, 2, 5),
            ("a", 1): fetch.FetchPosition(20),
            ("b", 0): fetch.FetchPosition(0, 1),
        },
        fetch.FetchOptions(
            max_wait_ms=250, min_bytes=7, max_bytes=1000, partition_max_bytes=100,
            isolation_level=fetch.READ_COMMITTED, rack_id="rack-1", replica_id=-1,
        ),
        {"a": TOPIC_ID, "b": OTHER_ID},
    ),
    ApiKey.LIST_OFFSETS: lambda v: list_offsets.build_list_offsets(
        v,
        {("a", 0): list_offsets.EARLIEST, ("a", 1): 123456, ("b", 0): list_offsets.LATEST},
        isolation_level=1,
        timeout_ms=999,
    ),
    ApiKey.CREATE_TOPICS: lambda v: topics.build_create_topics(
        v,
        [
            topics.new_topic("a", 3, 1, {"cleanup.policy": "compact", "x": None}),
            topics.new_topic("b", assignments={0: [1, 2], 1: [2, 3]}),
        ],
        validate_only=True,
        timeout_ms=5000,
    ),
    ApiKey.DELETE_TOPICS: lambda v: topics.build_delete_topics(v, ["a", "b"], timeout_ms=77),
    ApiKey.CREATE_PARTITIONS: lambda v: topics.build_create_partitions(
        v, {"a": (5, None), "b": (3, [[1, 2], [2, 3]])}, validate_only=True, timeout_ms=88
    ),
    ApiKey.DESCRIBE_CONFIGS: lambda v: configs.build_describe_configs(
        v,
        configs.DescribeConfigsRequest(
            configs.RESOURCE_TOPIC, "a", ["retention.ms"], include_documentation=True
        ),
    ),
    ApiKey.ALTER_CONFIGS: lambda v: alter_configs.build_alter_configs(
        v, configs.RESOURCE_TOPIC, "a", {"retention.ms": "1000"}, validate_only=True
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda v: alter_configs.build_incremental_alter_configs(
        v,
        configs.RESOURCE_BROKER,
        "1",
        [("log.retention.ms", alter_configs.OP_SET, "5"), ("x", alter_configs.OP_DELETE, None)],
    ),
    ApiKey.CONTROLLED_SHUTDOWN: lambda v: leader_elections.build_controlled_shutdown(v, 1, 42),
    ApiKey.ELECT_LEADERS: lambda v: leader_elections.build_elect_leaders(
        v, leader_elections.ElectionType.PREFERRED, [TopicPartition("a", 0)], 1000
    ),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda v: reassignments.build_alter_reassignments(
        {TopicPartition("a", 0): [1, 2], TopicPartition("a", 1): None}, 1000
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda v: reassignments.build_list_reassignments(
        [TopicPartition("a", 0)], 1000
    ),
    ApiKey.DESCRIBE_LOG_DIRS: lambda v: log_dirs.build_describe_log_dirs(
        v, [("a", 0), ("a", 2), ("b", 1)]
    ),
    ApiKey.DELETE_RECORDS: lambda v: delete_records.build_delete_records(
        v, {("a", 0): 5, ("a", 1): delete_records.HIGH_WATERMARK}, timeout_ms=66
    ),
    ApiKey.DESCRIBE_CLUSTER: cluster.build_describe_cluster,
    ApiKey.INIT_PRODUCER_ID: lambda v: producer_id.build_init_producer_id(
        v, producer_id.ProducerIdAndEpoch(7, 3), timeout_ms=4321
    ),
    ApiKey.FIND_COORDINATOR: lambda v: find_coordinator.build_find_coordinator(v, "group-1"),
    ApiKey.JOIN_GROUP: lambda v: group_membership.build_join_group(
        v,
        group_membership.JoinGroupRequest(
            "g",
            "member-1",
            [("range", consumer_protocol.encode_subscription(["a"])), ("roundrobin", b"x")],
            session_timeout_ms=10000,
            rebalance_timeout_ms=20000,
            group_instance_id="instance-1",
            reason="because",
        ),
    ),
    ApiKey.SYNC_GROUP: lambda v: group_membership.build_sync_group(
        v,
        "g",
        MEMBER,
        {"member-1": consumer_protocol.encode_assignment({"a": [0, 1]}), "member-2": b""},
        "range",
    ),
    ApiKey.HEARTBEAT: lambda v: group_membership.build_heartbeat(v, "g", MEMBER),
    ApiKey.LEAVE_GROUP: lambda v: group_membership.build_leave_group(v, "g", "m", "bye"),
    ApiKey.DESCRIBE_GROUPS: lambda v: group_membership.build_describe_groups(v, ["g", "h"]),
    ApiKey.LIST_GROUPS: lambda v: group_membership.build_list_groups(
        v, ["Stable"] if v >= 4 else ()
    ),
    ApiKey.DELETE_GROUPS: lambda v: group_membership.build_delete_groups(v, ["g", "h"]),
    ApiKey.OFFSET_FETCH: lambda v: group_offsets.build_offset_fetch(
        v, "g", [("a", 0), ("a", 1), ("b", 2)]
    ),
    ApiKey.OFFSET_COMMIT: lambda v: group_offsets.build_offset_commit(
        v, "g", {("a", 0): 5, ("b", 1): (7, "meta")}, MEMBER
    ),
    ApiKey.OFFSET_DELETE: lambda v: group_offsets.build_offset_delete(v, "g", [("a", 0)]),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: lambda v: leader_epochs.build_offset_for_leader_epoch(
        v,
        {
            TopicPartition("a", 0): leader_epochs.EpochQuery(3, 4),
            TopicPartition("a", 2): leader_epochs.EpochQuery(0),
            TopicPartition("b", 1): leader_epochs.EpochQuery(7, 7),
        },
        replica_id=2,
    ),
    ApiKey.ALTER_PARTITION: lambda v: alter_partition.build_alter_partition(
        v,
        1,
        4294967299,
        {
            TopicPartition("a", 0): alter_partition.IsrChange(TOPIC_ID, 5, (1, 2), 9, {2: 77}),
            TopicPartition("b", 3): alter_partition.IsrChange(OTHER_ID, 1, (1,), 0),
        },
    ),
    ApiKey.LEADER_AND_ISR: lambda v: controller.build_leader_and_isr(
        v, CONTROL, [(CONTROL_TOPIC, [0, 1])], CONTROL_BROKERS, listener="INTERNAL"
    ),
    ApiKey.UPDATE_METADATA: lambda v: controller.build_update_metadata(
        v,
        CONTROL,
        CONTROL_BROKERS,
        [CONTROL_TOPIC],
        [TopicMetadata("gone", OTHER_ID, {0: PartitionState(3, 1, (3,), (3,))})],
    ),
    ApiKey.STOP_REPLICA: lambda v: controller.build_stop_replica(
        v, CONTROL, {"a": [(0, 5), (1, controller.EPOCH_DURING_DELETE)], "b": [(2, -1)]}, True
    ),
    ApiKey.SASL_HANDSHAKE: lambda v: sasl.build_sasl_handshake(v, "SCRAM-SHA-512"),
    ApiKey.SASL_AUTHENTICATE: lambda v: sasl.build_sasl_authenticate(v, b"n,,n=alice,r=x"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda v: (
        scram_credentials.build_alter_user_scram_credentials(
            v,
            [("bob", 1)],
            [scram_credentials.Upsertion("alice", 2, 4096, b"salt", b"salted" * 10)],
        )
    ),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda v: (
        scram_credentials.build_describe_user_scram_credentials(v, ["alice"])
    ),
    ApiKey.WRITE_TXN_MARKERS: lambda v: transactions_marker.build_write_txn_markers(
        v,
        [
            transactions_marker.MarkerEntry(
                7, 3, 5, True, (TopicPartition("a", 0), TopicPartition("b", 2))
            ),
            transactions_marker.MarkerEntry(8, 0, 5, False, (TopicPartition("a", 1),)),
        ],
    ),
    ApiKey.CREATE_ACLS: lambda v: acls.build_create_acls(v, [ACL_BINDING]),
    ApiKey.DESCRIBE_ACLS: lambda v: acls.build_describe_acls(v, ACL_FILTER),
    ApiKey.DELETE_ACLS: lambda v: acls.build_delete_acls(v, [ACL_FILTER, AclBindingFilter()]),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda v: client_quotas.build_describe_client_quotas(
        v, [("user", 0, "alice"), ("client-id", 1, None)], strict=True
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: lambda v: client_quotas.build_alter_client_quotas(
        v,
        {
            (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0},
            (("user", None),): {"request_percentage": None},
        },
        validate_only=True,
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda v: consumer_group.build_consumer_group_heartbeat(
        "g",
        "m-1",
        3,
        instance_id="i",
        rack_id="r",
        rebalance_timeout_ms=30000,
        topics=["b", "a"],
        server_assignor="uniform",
        owned={UUID(int=7): [2, 0]},
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda v: consumer_group.build_consumer_group_describe(
        ["g", "h"]
    ),
    ApiKey.ALTER_REPLICA_LOG_DIRS: lambda v: log_dirs.build_alter_replica_log_dirs(
        {TopicPartition("a", 0): "/data/1", TopicPartition("b", 1): "/data/2"}
    ),
}

# The transaction APIs' builders live with their own tests; those the broker serves count.
BUILDERS.update({k: b for k, b in TXN_BUILDERS.items() if k in SERVED})
BUILDERS.update(SHARE_BUILDERS)


def served_versions() -> Iterator[tuple[int, int]]:
    for key, (low, high) in sorted(SERVED.items()):
        for version in range(max(low, CLIENT_MIN.get(key, 0)), high + 1):
            yield key, version


def test_every_served_api_has_a_builder() -> None:
    assert set(SERVED) == set(BUILDERS)


def _field_names(fields: tuple[Any, ...]) -> dict[str, tuple[Any, ...]]:
    return {spec[0]: spec[8] for spec in fields}


def _check_names(built: Any, fields: tuple[Any, ...], path: str) -> None:
    """Every key the builder wrote is a field of the message (at some version)."""
    if not isinstance(built, dict):
        return
    names = _field_names(fields)
    for key, value in built.items():
        assert key in names, f"{path}.{key} is not a field of the message"
        inner = names[key]
        if inner:
            for item in value if isinstance(value, list) else [value]:
                _check_names(item, inner, f"{path}.{key}")


def _in_version(spec: tuple[Any, ...], version: int) -> bool:
    return any(rng is not None and rng[0] <= version <= rng[1] for rng in (spec[2], spec[5]))


def _check_values(
    built: Any, decoded: Any, fields: tuple[Any, ...], version: int, path: str
) -> None:
    """What the broker decoded equals what was built, for the fields the version has."""
    specs = {spec[0]: spec for spec in fields}
    for key, value in built.items():
        spec = specs[key]
        if not _in_version(spec, version):
            continue
        got, where = decoded[key], f"{path}.{key}"
        if spec[8] and isinstance(value, dict):
            _check_values(value, got, spec[8], version, where)
        elif spec[8] and isinstance(value, list):
            assert isinstance(got, list) and len(got) == len(value), where
            for i, (b, d) in enumerate(zip(value, got, strict=True)):
                _check_values(b, d, spec[8], version, f"{where}[{i}]")
        elif isinstance(value, bytes | bytearray | memoryview):
            assert bytes(got) == bytes(value), where
        else:
            assert got == value, where


def _round_trip(key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    header = codec.RequestHeader(key, version, 17, "logbus-test")
    frame = codec.encode_request(header, body)
    decoded_header, decoded = codec.decode_request(frame[4:])
    if codec.request_header_version(key, version) == 0:  # ControlledShutdown v0: no client id
        header = codec.RequestHeader(key, version, 17, None)
    assert decoded_header == header
    return decoded


@pytest.mark.parametrize(("key", "version"), list(served_versions()))
def test_request_decodes_as_built(key: int, version: int) -> None:
    body = BUILDERS[key](version)
    _check_names(body, schema.request(key).fields, ApiKey(key).name)
    decoded = _round_trip(key, version, body)
    _check_values(body, decoded, schema.request(key).fields, version, ApiKey(key).name)


# --- what the version-dependent builders put where --------------------------------------


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_names_topics_by_name_then_by_id(version: int) -> None:
    decoded = _round_trip(ApiKey.FETCH, version, BUILDERS[ApiKey.FETCH](version))
    topics_sent = decoded["topics"]
    if version >= 13:
        assert [t["topic_id"] for t in topics_sent] == [TOPIC_ID, OTHER_ID]
    else:
        assert [t["topic"] for t in topics_sent] == ["a", "b"]
    first = topics_sent[0]["partitions"][0]
    assert first["fetch_offset"] == 10
    assert first["partition_max_bytes"] == 100
    assert first["current_leader_epoch"] == (3 if version >= 9 else -1)
    assert first["last_fetched_epoch"] == (2 if version >= 12 else -1)
    assert decoded["isolation_level"] == fetch.READ_COMMITTED
    assert decoded["rack_id"] == ("rack-1" if version >= 11 else "")
    replica_id = decoded["replica_state"]["replica_id"] if version >= 15 else decoded["replica_id"]
    assert replica_id == -1


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_names_the_group_at_every_version(version: int) -> None:
    decoded = _round_trip(ApiKey.OFFSET_FETCH, version, BUILDERS[ApiKey.OFFSET_FETCH](version))
    group = decoded["groups"][0] if version >= 8 else decoded
    assert group["group_id"] == "g"
    assert {(t["name"], p) for t in group["topics"] for p in t["partition_indexes"]} == {
        ("a", 0), ("a", 1), ("b", 2)
    }
    every = _round_trip(
        ApiKey.OFFSET_FETCH, version, group_offsets.build_offset_fetch(version, "g", None)
    )
    every_group = every["groups"][0] if version >= 8 else every
    assert every_group["topics"] == (None if version >= 2 else [])


@pytest.mark.parametrize("version", range(6))
def test_leave_group_names_the_member_at_every_version(version: int) -> None:
    decoded = _round_trip(ApiKey.LEAVE_GROUP, version, BUILDERS[ApiKey.LEAVE_GROUP](version))
    members = [m["member_id"] for m in decoded["members"]] if version >= 3 else [
        decoded["member_id"]
    ]
    assert members == ["m"]


def test_init_producer_id_bumps_only_from_v3() -> None:
    for version in range(6):
        decoded = _round_trip(
            ApiKey.INIT_PRODUCER_ID, version, BUILDERS[ApiKey.INIT_PRODUCER_ID](version)
        )
        expected = (7, 3) if version >= 3 else (-1, -1)
        assert (decoded["producer_id"], decoded["producer_epoch"]) == expected


def test_builders_refuse_what_the_version_cannot_say() -> None:
    with pytest.raises(KafkaError) as exc:
        list_offsets.build_list_offsets(6, {("a", 0): list_offsets.MAX_TIMESTAMP})
    assert exc.value.code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(KafkaError) as exc:
        group_membership.build_list_groups(3, ["Stable"])
    assert exc.value.code == ErrorCode.UNSUPPORTED_VERSION


# --- readers: what the broker's encoder writes ------------------------------------------


def _response(key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` through the broker's encoder and the client's decoder."""
    chunks = codec.encode_response(key, version, 5, body)
    frame = b"".join(bytes(c) for c in chunks)
    correlation_id, decoded = codec.decode_response(key, version, frame[4:])
    assert correlation_id == 5
    return decoded


@pytest.mark.parametrize("version", range(3, 12))
def test_read_produce(version: int) -> None:
    body = {
        "responses": [
            {
                "name": "a",
                "partition_responses": [
                    {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1,
                     "log_start_offset": 3, "record_errors": [], "error_message": None},
                    {"index": 1, "error_code": ErrorCode.CORRUPT_MESSAGE, "base_offset": -1,
                     "log_append_time_ms": -1, "log_start_offset": -1,
                     "record_errors": [{"batch_index": 0, "batch_index_error_message": "bad"}],
                     "error_message": "broken"},
                ],
            }
        ],
    }
    asked = {("a", 0): BATCH, ("a", 1): BATCH, ("a", 2): BATCH}
    out = produce.read_produce(_response(ApiKey.PRODUCE, version, body), asked)
    ok = out[("a", 0)]
    assert isinstance(ok, produce.ProduceResult)
    assert ok.base_offset == 42
    assert ok.log_start_offset == (3 if version >= 5 else -1)
    failed = out[("a", 1)]
    assert isinstance(failed, KafkaError) and failed.code == ErrorCode.CORRUPT_MESSAGE
    if version >= 8:
        assert failed.message == "broken; record 0: bad"
    left_out = out[("a", 2)]
    assert isinstance(left_out, KafkaError) and left_out.code == ErrorCode.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize("version", range(4, 18))
def test_read_fetch(version: int) -> None:
    partition = {
        "partition_index": 1,
        "error_code": 0,
        "high_watermark": 9,
        "last_stable_offset": 8,
        "log_start_offset": 2,
        "aborted_transactions": [{"producer_id": 5, "first_offset": 4}],
        "preferred_read_replica": -1,
        "records": BATCH,
    }
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {"topic": "a", "topic_id": TOPIC_ID, "partitions": [partition]},
            {"topic": "zz", "topic_id": UUID(int=99), "partitions": [partition]},
        ],
    }
    response = fetch.read_fetch(_response(ApiKey.FETCH, version, body), version, {"a": TOPIC_ID})
    assert response.error_code == ErrorCode.NONE
    expected = {("a", 1)} if version >= 13 else {("a", 1), ("zz", 1)}
    assert set(response.partitions) == expected
    data = response.partitions[("a", 1)]
    assert (data.high_watermark, data.last_stable_offset) == (9, 8)
    assert data.log_start_offset == (2 if version >= 5 else -1)
    assert data.aborted_transactions == [(5, 4)]
    assert bytes(data.records or b"") == BATCH


@pytest.mark.parametrize("version", range(11))
def test_read_list_offsets(version: int) -> None:
    body = {
        "topics": [
            {
                "name": "a",
                "partitions": [
                    {"partition_index": 0, "error_code": 0, "old_style_offsets": [17],
                     "timestamp": 1000, "offset": 17, "leader_epoch": 2},
                    {"partition_index": 1, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                     "old_style_offsets": [], "timestamp": -1, "offset": -1,
                     "leader_epoch": -1},
                ],
            }
        ]
    }
    out = list_offsets.read_list_offsets(
        _response(ApiKey.LIST_OFFSETS, version, body), version, {("a", 0): -1, ("a", 1): -1}
    )
    found = out[("a", 0)]
    assert isinstance(found, list_offsets.ListedOffset) and found.offset == 17
    error = out[("a", 1)]
    assert isinstance(error, KafkaError) and error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("version", range(7))
def test_read_find_coordinator(version: int) -> None:
    body = {
        "error_code": 0, "error_message": None, "node_id": 3, "host": "h", "port": 9,
        "coordinators": [{"key": "g", "node_id": 3, "host": "h", "port": 9, "error_code": 0,
                          "error_message": None}],
    }
    found = find_coordinator.read_find_coordinator(
        _response(ApiKey.FIND_COORDINATOR, version, body), version
    )
    assert found == find_coordinator.FoundCoordinator(0, None, 3, "h", 9)


@pytest.mark.parametrize("version", range(1, 10))
def test_read_offset_fetch(version: int) -> None:
    partitions = [
        {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
         "metadata": "m", "error_code": 0},
        {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": 0},
    ]
    topics_body = [{"name": "a", "partitions": partitions}]
    body = {
        "error_code": 0,
        "topics": topics_body,
        "groups": [{"group_id": "g", "topics": topics_body, "error_code": 0}],
    }
    out = group_offsets.read_offset_fetch(_response(ApiKey.OFFSET_FETCH, version, body),
                                          version, "g")
    assert out == {("a", 0): (5, "m")}


@pytest.mark.parametrize("version", range(10))
def test_read_join_group(version: int) -> None:
    body = {
        "error_code": 0, "generation_id": 4, "protocol_type": "consumer",
        "protocol_name": "range", "leader": "m1", "member_id": "m1",
        "members": [{"member_id": "m1", "group_instance_id": None, "metadata": b"sub"}],
    }
    joined = group_membership.read_join_group(_response(ApiKey.JOIN_GROUP, version, body))
    assert (joined.generation_id, joined.leader, joined.member_id) == (4, "m1", "m1")
    assert joined.members == [group_membership.JoinedMember("m1", None, b"sub")]


@pytest.mark.parametrize("version", range(13))
def test_read_metadata(version: int) -> None:
    body = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "a", "topic_id": TOPIC_ID, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1,
                                    "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1],
                                    "offline_replicas": []}]}],
    }
    md = metadata.read_metadata(_response(ApiKey.METADATA, version, body))
    assert md.leader("a", 0) == 1
    assert md.topics["a"].topic_id == (TOPIC_ID if version >= 10 else UUID(int=0))


@pytest.mark.parametrize("version", range(2, 10))
def test_read_offset_commit(version: int) -> None:
    body = {"topics": [{"name": "a", "partitions": [
        {"partition_index": 0, "error_code": 0},
        {"partition_index": 1, "error_code": ErrorCode.OFFSET_METADATA_TOO_LARGE},
    ]}]}
    out = group_offsets.read_partition_errors(
        _response(ApiKey.OFFSET_COMMIT, version, body), [("a", 0), ("a", 1), ("b", 0)],
        "OffsetCommit",
    )
    assert out[("a", 0)] is None
    assert [e.code for e in (out[("a", 1)], out[("b", 0)]) if isinstance(e, KafkaError)] == [
        ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR
    ]


def test_read_offset_delete_raises_the_group_error() -> None:
    body = {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "topics": []}
    with pytest.raises(KafkaError) as exc:
        group_offsets.read_offset_delete(_response(ApiKey.OFFSET_DELETE, 0, body), "g", [])
    assert exc.value.code == ErrorCode.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", range(6))
def test_read_describe_groups(version: int) -> None:
    member = {
        "member_id": "m", "group_instance_id": "i", "client_id": "c", "client_host": "/h",
        "member_metadata": b"", "member_assignment":
            consumer_protocol.encode_assignment({"a": [1, 0]}),
    }
    body = {"groups": [
        {"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
         "protocol_data": "range", "members": [member]},
        {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "group_id": "gone", "group_state": "",
         "protocol_type": "", "protocol_data": "", "members": []},
    ]}
    out = group_membership.read_describe_groups(
        _response(ApiKey.DESCRIBE_GROUPS, version, body), ["g", "gone"]
    )
    described = out["g"]
    assert isinstance(described, group_membership.GroupDescription)
    assert described.members[0].assignment == {"a": [0, 1]}
    assert described.members[0].group_instance_id == ("i" if version >= 4 else None)
    gone = out["gone"]
    assert isinstance(gone, group_membership.GroupDescription) and not gone.exists


@pytest.mark.parametrize("key", [ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS])
def test_read_topic_results(key: int) -> None:
    low, high = SERVED[key]
    for version in range(low, high + 1):
        ok = {"name": "a", "topic_id": TOPIC_ID, "error_code": 0, "error_message": None,
              "num_partitions": 3, "replication_factor": 1, "configs": []}
        bad = {**ok, "name": "b", "error_code": ErrorCode.TOPIC_ALREADY_EXISTS,
               "error_message": "Topic 'b' already exists."}
        results = [ok, bad]
        if key == ApiKey.CREATE_TOPICS:
            out: dict[str, Any] = topics.read_create_topics(
                _response(key, version, {"topics": results}), ["a", "b", "c"]
            )
            assert isinstance(out["a"], topics.CreatedTopic)
            assert out["a"].num_partitions == (3 if version >= 5 else -1)  # v5+ say
        else:
            out = topics.read_delete_topics(
                _response(key, version, {"responses": results}), ["a", "b", "c"]
            )
            assert out["a"] is None
        assert out["b"].code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert out["c"].code == ErrorCode.UNKNOWN_SERVER_ERROR


# --- the controller's requests ------------------------------------------------------------


@pytest.mark.parametrize("version", range(8))
def test_leader_and_isr_carries_states_epochs_and_leaders(version: int) -> None:
    decoded = _round_trip(
        ApiKey.LEADER_AND_ISR, version, BUILDERS[ApiKey.LEADER_AND_ISR](version)
    )
    if version >= 2:
        [topic] = decoded["topic_states"]
        assert topic["topic_name"] == "a"
        assert topic["topic_id"] == (TOPIC_ID if version >= 5 else UUID(int=0))
        states = topic["partition_states"]
        assert decoded["broker_epoch"] == 4242
    else:
        states = decoded["ungrouped_partition_states"]
        assert {s["topic_name"] for s in states} == {"a"}
    first = states[0]
    assert (first["leader"], first["leader_epoch"], first["isr"], first["replicas"]) == (
        1, 5, [1, 2], [1, 2, 3]
    )
    assert (first["partition_epoch"], first["controller_epoch"]) == (11, 7)
    assert (decoded["controller_id"], decoded["controller_epoch"]) == (2, 7)
    # the leaders' inter-broker endpoints
    assert [(b["broker_id"], b["host_name"], b["port"]) for b in decoded["live_leaders"]] == [
        (1, "i1", 9093), (2, "h2", 9092)
    ]


@pytest.mark.parametrize("version", range(9))
def test_update_metadata_sends_deleted_topics_led_by_minus_two(version: int) -> None:
    decoded = _round_trip(
        ApiKey.UPDATE_METADATA, version, BUILDERS[ApiKey.UPDATE_METADATA](version)
    )
    if version >= 5:
        states = {
            (t["topic_name"], s["partition_index"]): s
            for t in decoded["topic_states"]
            for s in t["partition_states"]
        }
    else:
        states = {
            (s["topic_name"], s["partition_index"]): s
            for s in decoded["ungrouped_partition_states"]
        }
    assert states[("gone", 0)]["leader"] == controller.LEADER_DURING_DELETE
    assert states[("a", 0)]["leader"] == 1 and states[("a", 0)]["zk_version"] == 11
    if version >= 4:
        assert states[("a", 0)]["offline_replicas"] == [3]
    brokers = {b["id"]: b for b in decoded["live_brokers"]}
    if version == 0:
        assert (brokers[1]["v0_host"], brokers[1]["v0_port"]) == ("h1", 9092)
    else:
        endpoints = [(e["host"], e["port"]) for e in brokers[1]["endpoints"]]
        assert endpoints == [("h1", 9092), ("i1", 9093)]
    if version >= 2:
        assert (brokers[1]["rack"], brokers[2]["rack"]) == ("rack-a", None)
    if version >= 3:
        assert brokers[1]["endpoints"][1]["listener"] == "INTERNAL"


@pytest.mark.parametrize("version", range(5))
def test_stop_replica_sends_leader_epochs_from_v3(version: int) -> None:
    decoded = _round_trip(ApiKey.STOP_REPLICA, version, BUILDERS[ApiKey.STOP_REPLICA](version))
    if version >= 3:
        got = {
            (t["topic_name"], p["partition_index"]): (p["leader_epoch"], p["delete_partition"])
            for t in decoded["topic_states"]
            for p in t["partition_states"]
        }
        assert got == {("a", 0): (5, True), ("a", 1): (-2, True), ("b", 2): (-1, True)}
    elif version >= 1:
        assert decoded["delete_partitions"] is True
        assert [(t["name"], t["partition_indexes"]) for t in decoded["topics"]] == [
            ("a", [0, 1]), ("b", [2])
        ]
    else:
        named = [(p["topic_name"], p["partition_index"]) for p in decoded["ungrouped_partitions"]]
        assert named == [("a", 0), ("a", 1), ("b", 2)]


@pytest.mark.parametrize("version", range(8))
def test_read_leader_and_isr(version: int) -> None:
    errors = [{"topic_name": "a", "partition_index": 0, "error_code": 0},
              {"topic_name": "a", "partition_index": 1,
               "error_code": ErrorCode.STALE_CONTROLLER_EPOCH}]
    body = {"error_code": 0, "partition_errors": errors,
            "topics": [{"topic_id": TOPIC_ID, "partition_errors": errors}]}
    result = controller.read_leader_and_isr(
        _response(ApiKey.LEADER_AND_ISR, version, body), version, {TOPIC_ID: "a"}
    )
    assert result.error == ErrorCode.NONE
    assert result.failed() == {("a", 1): ErrorCode.STALE_CONTROLLER_EPOCH}
    assert set(result.partitions) == {("a", 0), ("a", 1)}
