"""The KRaft controller's decisions as values (controller/cluster_control.py,
replication_control.py, config_control.py, partition_change.py): an image and a request
in, the metadata records and the answer out, the records replayed to check the image they
leave."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from logbus.controller import (
    acl_control,
    cluster_control,
    config_control,
    election_control,
    quota_control,
    replication_control,
    scram_control,
)
from logbus.controller.assignment import ControllerError
from logbus.controller.control_result import ControllerResult, then
from logbus.controller.partition_change import remove_broker_changes, unfence_changes
from logbus.controller.replication_control import TopicDefaults
from logbus.metadata.delta import replay_all
from logbus.metadata.image import EMPTY_IMAGE, NO_LEADER, ConfigResource, MetadataImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode
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

CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"


def register(image: MetadataImage, broker_id: int, rack: str | None = None) -> MetadataImage:
    body = {
        "broker_id": broker_id, "cluster_id": CLUSTER, "incarnation_id": uuid.UUID(int=broker_id),
        "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 0}],
        "features": [], "rack": rack,
    }  # fmt: skip
    result = cluster_control.register_broker(
        image, body, cluster_id=CLUSTER, next_offset=100 + broker_id, session_alive=False
    )
    assert result.response["error_code"] == 0
    return then(image, result.records)


def beat(image: MetadataImage, broker_id: int, **flags: Any) -> ControllerResult:
    body = {"broker_id": broker_id, "broker_epoch": image.brokers[broker_id].epoch,
            "current_metadata_offset": 10**6, "want_fence": False, "want_shut_down": False,
            **flags}  # fmt: skip
    return cluster_control.heartbeat(image, body)


def live_cluster(brokers: int = 3) -> MetadataImage:
    image = EMPTY_IMAGE
    for b in range(1, brokers + 1):
        image = register(image, b)
    for b in range(1, brokers + 1):
        image = then(image, beat(image, b).records)
    return image


def with_topic(image: MetadataImage, name: str, partitions: int, factor: int) -> MetadataImage:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": factor,
                        "assignments": [], "configs": []}]}  # fmt: skip
    result = replication_control.create_topics(image, body, TopicDefaults())
    assert result.response["topics"][0]["error_code"] == 0, result.response
    return then(image, result.records)


def test_a_broker_registers_fenced_with_its_record_offset_as_epoch() -> None:
    image = register(EMPTY_IMAGE, 7)
    assert image.brokers[7].epoch == 107 and image.brokers[7].fenced
    not_caught_up = {"broker_id": 7, "broker_epoch": 107, "current_metadata_offset": 106,
                     "want_fence": False, "want_shut_down": False}  # fmt: skip
    result = cluster_control.heartbeat(image, not_caught_up)
    assert result.records == [] and result.response["is_fenced"]
    result = beat(image, 7)
    assert result.response["is_caught_up"] and not result.response["is_fenced"]
    assert then(image, result.records).unfenced_brokers() == [7]


def test_a_second_incarnation_is_refused_while_the_first_lives() -> None:
    image = live_cluster(1)
    body = {"broker_id": 1, "cluster_id": CLUSTER, "incarnation_id": uuid.uuid4(),
            "listeners": [], "features": [], "rack": None}  # fmt: skip
    alive = cluster_control.register_broker(
        image, body, cluster_id=CLUSTER, next_offset=500, session_alive=True
    )
    assert alive.response["error_code"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert alive.records == []
    expired = cluster_control.register_broker(
        image, body, cluster_id=CLUSTER, next_offset=500, session_alive=False
    )
    assert expired.response == {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": 500}
    assert then(image, expired.records).brokers[1].fenced


def test_topics_are_placed_over_unfenced_brokers_only() -> None:
    image = register(live_cluster(3), 4)  # broker 4 registered but fenced
    image = with_topic(image, "t", 8, 3)
    partitions = image.topic("t").partitions  # type: ignore[union-attr]
    assert all(4 not in p.replicas and p.isr == p.replicas for p in partitions.values())
    assert all(p.leader == p.replicas[0] for p in partitions.values())
    body = {"topics": [{"name": "u", "num_partitions": 1, "replication_factor": 4,
                        "assignments": [], "configs": []}]}  # fmt: skip
    result = replication_control.create_topics(image, body, TopicDefaults())
    assert result.response["topics"][0]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert result.records == []


def test_a_fenced_broker_leaves_every_isr_and_leadership() -> None:
    image = with_topic(live_cluster(3), "t", 3, 3)
    image = then(image, cluster_control.fence(image, 2))
    assert image.brokers[2].fenced
    for p in image.topic("t").partitions.values():  # type: ignore[union-attr]
        assert 2 not in p.isr and p.leader in (1, 3)
    # The last ISR member stays in the ISR when it goes, leaderless, and leads again
    # once it is back.
    image = then(image, cluster_control.fence(image, 3))
    image = then(image, cluster_control.fence(image, 1))
    partitions = image.topic("t").partitions.values()  # type: ignore[union-attr]
    assert all(p.leader == NO_LEADER and len(p.isr) == 1 for p in partitions)
    last = next(iter(partitions)).isr[0]
    assert remove_broker_changes(image, last) == []
    image = then(image, beat(image, last).records)
    assert unfence_changes(image, last) == []
    for p in image.topic("t").partitions.values():  # type: ignore[union-attr]
        assert (p.leader == last) == (p.isr == (last,))


def test_controlled_shutdown_moves_leadership_then_fences() -> None:
    image = with_topic(live_cluster(3), "t", 6, 2)
    result = beat(image, 1, want_shut_down=True)
    assert result.response["should_shut_down"]  # every leadership could move at once
    image = then(image, result.records)
    assert image.brokers[1].fenced and image.brokers[1].in_controlled_shutdown
    assert all(p.leader != 1 for p in image.topic("t").partitions.values())  # type: ignore[union-attr]
    again = beat(image, 1, want_shut_down=True)
    assert again.records == [] and again.response["should_shut_down"]


def test_stale_heartbeats_change_nothing() -> None:
    image = live_cluster(1)
    body = {"broker_id": 1, "broker_epoch": 5, "current_metadata_offset": 0,
            "want_fence": True, "want_shut_down": False}  # fmt: skip
    result = cluster_control.heartbeat(image, body)
    assert result.records == [] and result.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH


def test_alter_partition_checks_epochs_and_eligibility() -> None:
    image = with_topic(live_cluster(3), "t", 1, 3)
    topic = image.topic("t")
    assert topic is not None
    p = topic.partitions[0]

    def ask(isr: list[int], *, leader_epoch: int, partition_epoch: int) -> dict[str, Any]:
        body = {"broker_id": p.leader, "broker_epoch": image.brokers[p.leader].epoch,
                "topics": [{"topic_id": topic.topic_id, "partitions": [{
                    "partition_index": 0, "leader_epoch": leader_epoch, "new_isr": isr,
                    "leader_recovery_state": 0, "partition_epoch": partition_epoch}]}]}  # fmt: skip
        result = replication_control.alter_partition(image, body)
        answer: dict[str, Any] = result.response["topics"][0]["partitions"][0]
        assert (answer["error_code"] == 0) == bool(result.records)
        return answer

    others = [r for r in p.replicas if r != p.leader]
    shrunk = ask([p.leader], leader_epoch=0, partition_epoch=0)
    assert shrunk["isr"] == [p.leader] and shrunk["partition_epoch"] == 1
    stale = ask([p.leader], leader_epoch=0, partition_epoch=3)
    assert stale["error_code"] == ErrorCode.INVALID_UPDATE_VERSION
    fenced = ask([p.leader], leader_epoch=-1, partition_epoch=0)
    assert fenced["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    image = then(image, cluster_control.fence(image, others[0]))
    p = image.topic("t").partitions[0]  # type: ignore[union-attr]
    grow = ask([*p.isr, others[0]], leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch)
    assert grow["error_code"] == ErrorCode.INELIGIBLE_REPLICA


def test_delete_topics_by_name_and_by_id() -> None:
    image = with_topic(with_topic(live_cluster(1), "a", 1, 1), "b", 1, 1)
    b_id = image.topic_ids["b"]
    body = {"topic_names": ["a", "zzz"], "topics": [{"name": None, "topic_id": b_id}]}
    result = replication_control.delete_topics(image, body)
    codes = [r["error_code"] for r in result.response["responses"]]
    assert codes == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]
    assert then(image, result.records).topics == {}


def test_create_partitions_keeps_the_replication_factor() -> None:
    image = with_topic(live_cluster(3), "t", 2, 2)
    body = {"topics": [{"name": "t", "count": 5, "assignments": None}], "validate_only": False}
    image = then(image, replication_control.create_partitions(image, body).records)
    partitions = image.topic("t").partitions  # type: ignore[union-attr]
    assert sorted(partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in partitions.values())
    fewer = replication_control.create_partitions(
        image, {"topics": [{"name": "t", "count": 3, "assignments": None}]}
    )
    assert fewer.response["results"][0]["error_code"] == ErrorCode.INVALID_PARTITIONS


def set_only(
    resource: ConfigResource, current: Mapping[str, str], ops: list[dict[str, Any]]
) -> dict[str, str]:
    new = dict(current)
    for op in ops:
        if op["config_operation"] != 0 or op["name"] == "bad":
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"no {op['name']}")
        new[op["name"]] = op["value"]
    return new


def test_incremental_alter_configs_writes_only_the_differences() -> None:
    image = with_topic(live_cluster(1), "t", 1, 1)

    def alter(name: str, *ops: tuple[str, str], validate_only: bool = False) -> dict[str, Any]:
        return {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in ops]}],
            "validate_only": validate_only}  # fmt: skip

    result = config_control.incremental_alter_configs(
        image, alter("t", ("a", "1"), ("b", "2")), set_only
    )
    image = then(image, result.records)
    assert image.configs[ConfigResource(2, "t")] == {"a": "1", "b": "2"}
    same = config_control.incremental_alter_configs(image, alter("t", ("a", "1")), set_only)
    assert same.records == [] and same.response["responses"][0]["error_code"] == 0
    bad = config_control.incremental_alter_configs(image, alter("t", ("bad", "1")), set_only)
    assert bad.records == []
    assert bad.response["responses"][0]["error_code"] == ErrorCode.INVALID_CONFIG
    dry = config_control.incremental_alter_configs(
        image, alter("t", ("c", "3"), validate_only=True), set_only
    )
    assert dry.records == [] and dry.response["responses"][0]["error_code"] == 0
    twice = alter("t", ("c", "3"))
    twice["resources"] *= 2
    both = config_control.incremental_alter_configs(image, twice, set_only)
    assert [r["error_code"] for r in both.response["responses"]] == [ErrorCode.INVALID_REQUEST] * 2


@pytest.mark.parametrize("fenced", [False, True])
def test_producer_id_blocks_follow_each_other(fenced: bool) -> None:
    image = live_cluster(1)
    if fenced:
        image = then(image, cluster_control.fence(image, 1))
    body = {"broker_id": 1, "broker_epoch": image.brokers[1].epoch}
    first = config_control.allocate_producer_ids(image, body)
    if fenced:
        assert first.records == [] and first.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH
        return
    image = then(image, first.records)
    second = config_control.allocate_producer_ids(image, body)
    assert (first.response["producer_id_start"], second.response["producer_id_start"]) == (0, 1000)
    assert then(image, second.records).producer_ids.next_producer_id == 2000


def test_acls_are_stored_once_and_deleted_by_filter() -> None:
    def binding(principal: str, name: str = "orders") -> AclBinding:
        return AclBinding(
            ResourcePattern(ResourceType.TOPIC, name, PatternType.PREFIXED),
            AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW),
        )

    image = EMPTY_IMAGE
    created = acl_control.create_acls(image, [binding("User:a"), binding("User:a"), "bad"])
    assert len(created.records) == 1
    codes = [r["error_code"] for r in created.response["results"]]
    assert codes == [0, 0, ErrorCode.INVALID_REQUEST]
    image = then(image, created.records)
    image = then(image, acl_control.create_acls(image, [binding("User:a")]).records)
    assert len(image.acls) == 1  # the same binding again writes nothing
    image = then(image, acl_control.create_acls(image, [binding("User:b", "o")]).records)
    # A MATCH filter for the topic "orders-1" finds both prefixed patterns.
    match = AclBindingFilter(ResourceType.TOPIC, "orders-1", PatternType.MATCH)
    deleted = acl_control.delete_acls(image, [match, match])
    assert len(deleted.records) == 2  # each ACL removed once, though two filters match it
    found = [m["principal"] for m in deleted.response["filter_results"][0]["matching_acls"]]
    assert sorted(found) == ["User:a", "User:b"]
    assert then(image, deleted.records).acls == {}


def test_a_users_scram_changes_are_written_together_or_not_at_all() -> None:
    upsert = {"name": "alice", "mechanism": 2, "iterations": 8192, "salt": b"s",
              "salted_password": b"x" * 64}  # fmt: skip
    result = scram_control.alter_user_scram_credentials(
        EMPTY_IMAGE, {"deletions": [], "upsertions": [upsert]}
    )
    image = then(EMPTY_IMAGE, result.records)
    credential = image.scram[("alice", 2)]
    assert credential.iterations == 8192 and len(credential.stored_key) == 64
    # One refused change (a deletion of what does not exist) keeps the user's others out.
    body = {"deletions": [{"name": "alice", "mechanism": 1}],
            "upsertions": [{**upsert, "iterations": 10000}]}  # fmt: skip
    refused = scram_control.alter_user_scram_credentials(image, body)
    assert refused.records == []
    assert refused.response["results"][0]["error_code"] == ErrorCode.RESOURCE_NOT_FOUND
    weak = scram_control.alter_user_scram_credentials(
        image, {"upsertions": [{**upsert, "name": "bob", "iterations": 10}]}
    )
    assert weak.response["results"][0]["error_code"] == ErrorCode.UNACCEPTABLE_CREDENTIAL


def test_client_quotas_write_only_what_changes() -> None:
    def check(entry: dict[str, Any]) -> tuple[Any, dict[str, float | None]]:
        if entry["ops"][0]["key"] == "bad":
            raise ValueError("Invalid configuration key bad")
        entity = tuple(sorted((p["entity_type"], p["entity_name"]) for p in entry["entity"]))
        return entity, {o["key"]: None if o["remove"] else o["value"] for o in entry["ops"]}

    def body(key: str, value: float, remove: bool = False) -> dict[str, Any]:
        entity = [{"entity_type": "client-id", "entity_name": None}]
        op = {"key": key, "value": value, "remove": remove}
        return {"entries": [{"entity": entity, "ops": [op]}], "validate_only": False}

    first = quota_control.alter_client_quotas(EMPTY_IMAGE, body("request_percentage", 50), check)
    image = then(EMPTY_IMAGE, first.records)
    assert image.client_quotas == {(("client-id", None),): {"request_percentage": 50.0}}
    same = quota_control.alter_client_quotas(image, body("request_percentage", 50), check)
    assert same.records == []
    bad = quota_control.alter_client_quotas(image, body("bad", 1), check)
    assert bad.records == []
    assert bad.response["entries"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    removed = quota_control.alter_client_quotas(image, body("request_percentage", 0, True), check)
    assert then(image, removed.records).client_quotas == {}


def test_an_unregistered_broker_leaves_the_isrs_then_the_cluster() -> None:
    image = with_topic(live_cluster(2), "t", 2, 2)
    result = cluster_control.unregister_broker(image, {"broker_id": 1})
    assert result.response["error_code"] == 0
    assert result.records[-1].name == "UnregisterBrokerRecord"
    image = then(image, result.records)
    assert sorted(image.brokers) == [2]
    for p in image.topic("t").partitions.values():  # type: ignore[union-attr]
        assert (p.leader, p.isr) == (2, (2,)) and 1 in p.replicas
    unknown = cluster_control.unregister_broker(image, {"broker_id": 1})
    assert unknown.records == []
    assert unknown.response["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_preferred_and_unclean_elections() -> None:
    image = with_topic(live_cluster(3), "t", 1, 3)
    p = image.topic("t").partitions[0]  # type: ignore[union-attr]
    preferred = p.replicas[0]
    one = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 7]}]}
    result = election_control.elect_leaders(image, one)
    results = result.response["replica_election_results"][0]["partition_result"]
    codes = [r["error_code"] for r in results]
    assert codes == [ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    # The preferred leader is fenced, then comes back: the election moves leadership back.
    image = then(image, cluster_control.fence(image, preferred))
    assert image.topic("t").partitions[0].leader != preferred  # type: ignore[union-attr]
    assert election_control.elect_leaders(image, one).records == []
    image = then(image, beat(image, preferred).records)
    shrunk = image.topic("t").partitions[0]  # type: ignore[union-attr]
    grow = {"topic_id": image.topic_ids["t"], "partition_id": 0, "isr": list(p.replicas)}
    image = replay_all(image, [MetadataRecord("PartitionChangeRecord", 2, grow)])
    assert shrunk.leader != preferred
    every = election_control.elect_leaders(image, {"election_type": 0, "topic_partitions": None})
    image = then(image, every.records)
    assert image.topic("t").partitions[0].leader == preferred  # type: ignore[union-attr]

    # Unclean: every ISR member gone, a replica outside the ISR is made leader.
    image = with_topic(live_cluster(2), "u", 1, 2)
    first, second = image.topic("u").partitions[0].replicas  # type: ignore[union-attr]
    shrink = {"topic_id": image.topic_ids["u"], "partition_id": 0, "isr": [first]}
    image = replay_all(image, [MetadataRecord("PartitionChangeRecord", 2, shrink)])
    image = then(image, cluster_control.fence(image, first))
    assert image.topic("u").partitions[0].leader == NO_LEADER  # type: ignore[union-attr]
    unclean = {"election_type": 1, "topic_partitions": [{"topic": "u", "partitions": [0]}]}
    image = then(image, election_control.elect_leaders(image, unclean).records)
    p = image.topic("u").partitions[0]  # type: ignore[union-attr]
    assert (p.leader, p.isr, p.leader_recovery_state) == (second, (second,), 1)
