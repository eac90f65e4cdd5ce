"""KIP-848 consumer groups (`group.protocol=consumer`) with confluent-kafka against a real
broker: every record consumed, 3 -> 6 -> 2 members under load with no partition owned twice
and no partition taken from a member that keeps it, classic groups of kafka-python beside
them, Kafka's error codes for bad heartbeats, a group that resumes after a restart, and a
classic group upgraded member by member to the consumer protocol."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest
from compat_clients import new_topic
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from group_members import committed_offsets, new_group, produce_values, wait_all_received

from consumer_protocol_members import ConsumerProtocolMember, Ownership
from kafka_wire import WireClient, create_topic, wait_for
from logbus.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.timeout(180)

E = ErrorCode
BROKER = {"group.consumer.heartbeat.interval.ms": "300"}


class LoadProducer(threading.Thread):
    """Produces numbered values round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions = topic, partitions
        self.sent: list[bytes] = []
        self._stop_requested = threading.Event()

    def run(self) -> None:
        i = 0
        while not self._stop_requested.wait(0.01):
            value = f"load-{i}".encode()
            self.producer.produce(self.topic, value, partition=i % self.partitions)
            self.sent.append(value)
            self.producer.poll(0)
            i += 1

    def stop(self) -> list[bytes]:
        self._stop_requested.set()
        self.join(10)
        assert self.producer.flush(20) == 0
        return list(self.sent)


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    with WireClient(bootstrap) as client:
        body = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [group], "include_authorized_operations": False,
        })
    return dict(body["groups"][0])


def heartbeat(client: WireClient, version: int = 1, **fields: Any) -> dict[str, Any]:
    body = {
        "group_id": "g", "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": [], **fields,
    }
    return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, body)


def stable_with(bootstrap: str, group: str, members: list[ConsumerProtocolMember],
                partitions: int) -> bool:
    described = describe(bootstrap, group)
    if described["group_state"] != "Stable" or len(described["members"]) != len(members):
        return False
    owned = [p for m in members for p in m.assignment]
    sizes = [len(m.assignment) for m in members]
    return sorted(owned) == list(range(partitions)) and max(sizes) - min(sizes) <= 1


def test_consumer_protocol_members_consume_every_record(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    values = [f"v{i}".encode() for i in range(30)]
    produce_values(broker.bootstrap, topic, values, 4)
    members = [ConsumerProtocolMember(broker.bootstrap, topic, group) for _ in range(2)]
    try:
        wait_all_received(members, values)
        assert sorted(v for m in members for v in m.received()) == sorted(values)
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 4), 30)
        described = describe(broker.bootstrap, group)
        assert described["assignor_name"] == "uniform"
        epochs = {m["member_epoch"] for m in described["members"]}
        assert epochs == {described["assignment_epoch"]}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups().result(20)
        types = {g.group_id: g.type.name for g in listed.valid}
        assert types[group] == "CONSUMER"
    finally:
        for m in members:
            m.stop()


def test_three_six_two_members_under_load(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 12)
    ownership = Ownership()
    load = LoadProducer(broker.bootstrap, topic, 12)
    load.start()
    members = [ConsumerProtocolMember(broker.bootstrap, topic, group, ownership)
               for _ in range(3)]
    everyone = list(members)
    try:
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 12), 60)
        ownership.next_phase()
        joining = [ConsumerProtocolMember(broker.bootstrap, topic, group, ownership)
                   for _ in range(3)]
        members += joining
        everyone += joining
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 12), 60)
        ownership.next_phase()
        for m in members[2:]:
            m.stop()
        members = members[:2]
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 12), 60)
        sent = load.stop()
        wait_all_received(everyone, sent, 60)
    finally:
        if load.is_alive():
            load.stop()
        for m in everyone:
            if m.is_alive():
                m.stop()
    assert ownership.violations == []
    assert ownership.taken_back == {}, ownership.history_of(ownership.taken_back)


def test_classic_groups_beside_consumer_groups(broker_factory: Any) -> None:
    from kafka import KafkaConsumer

    broker = broker_factory(**BROKER, **{"group.initial.rebalance.delay.ms": "0"})
    topic, group, classic_group = new_topic(), new_group(), new_group()
    create_topic(broker.bootstrap, topic, 3)
    values = [f"v{i}".encode() for i in range(30)]
    produce_values(broker.bootstrap, topic, values, 3)
    modern = ConsumerProtocolMember(broker.bootstrap, topic, group)
    classic = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=classic_group,
        auto_offset_reset="earliest", consumer_timeout_ms=500,
    )
    got: list[bytes] = []
    try:
        wait_all_received([modern], values)

        def classic_done() -> bool:
            got.extend(record.value for record in classic)
            return set(got) >= set(values)

        wait_for(classic_done, 60)
        with WireClient(broker.bootstrap) as client:
            join = client.request(ApiKey.JOIN_GROUP, 5, {
                "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                "member_id": "", "group_instance_id": None, "protocol_type": "connect",
                "protocols": [{"name": "default", "metadata": b""}],
            })
            # Classic members of the consumer protocol type may join (an upgrade in
            # progress); other protocol types may not.
            assert join["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
            listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                            "types_filter": []})
        types = {g["group_id"]: g["group_type"] for g in listed["groups"]}
        assert types[group] == "consumer" and types[classic_group] == "classic"
    finally:
        classic.close()
        modern.stop()


def test_bad_heartbeats_get_kafkas_error_codes(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    create_topic(broker.bootstrap, "t", 2)
    with WireClient(broker.bootstrap) as client:

        def coordinator_ready() -> bool:
            found = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            return found["error_code"] == E.NONE and heartbeat(client, group_id="probe")[
                "error_code"] == E.NONE

        wait_for(coordinator_ready, 30)
        joined = heartbeat(client, instance_id="static-1")
        assert joined["error_code"] == E.NONE and joined["member_epoch"] == 1
        member = joined["member_id"]
        owned = joined["assignment"]["topic_partitions"]
        codes = {
            "fenced": heartbeat(client, member_id=member, member_epoch=7, instance_id=None,
                                topic_partitions=owned),
            "unknown": heartbeat(client, member_epoch=1, topic_partitions=owned),
            "assignor": heartbeat(client, server_assignor="sticky"),
            "regex": heartbeat(client, subscribed_topic_names=None, subscribed_topic_regex="t["),
            "instance": heartbeat(client, instance_id="static-1"),
            "no member id": heartbeat(client, member_id=""),
        }
        assert {k: v["error_code"] for k, v in codes.items()} == {
            "fenced": E.FENCED_MEMBER_EPOCH,
            "unknown": E.UNKNOWN_MEMBER_ID,
            "assignor": E.UNSUPPORTED_ASSIGNOR,
            "regex": E.INVALID_REGULAR_EXPRESSION,
            "instance": E.UNRELEASED_INSTANCE_ID,
            "no member id": E.INVALID_REQUEST,
        }
        commit = client.request(ApiKey.OFFSET_COMMIT, 9, {
            "group_id": "g", "generation_id_or_member_epoch": 5, "member_id": member,
            "group_instance_id": None, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                              "committed_leader_epoch": -1,
                                              "committed_metadata": ""}]}],
        })
        assert commit["topics"][0]["partitions"][0]["error_code"] == E.STALE_MEMBER_EPOCH
        still = heartbeat(client, member_id=member, member_epoch=1, instance_id=None,
                          subscribed_topic_names=None, rebalance_timeout_ms=-1,
                          topic_partitions=owned)
        assert still["error_code"] == E.NONE and still["member_epoch"] == 1
    missing = describe(broker.bootstrap, "no-such-group")
    assert missing["error_code"] == E.GROUP_ID_NOT_FOUND


def test_group_resumes_after_a_broker_restart(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    first = [f"a{i}".encode() for i in range(20)]
    produce_values(broker.bootstrap, topic, first, 4)
    members = [ConsumerProtocolMember(broker.bootstrap, topic, group) for _ in range(3)]
    try:
        wait_all_received(members, first)
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 4), 30)
        # A third member that joined and left raises the group epoch above what the two
        # remaining members could rebuild from nothing (at most one epoch each).
        gone = members.pop()
        gone.stop()
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 4), 30)
        before = describe(broker.bootstrap, group)
        assert before["group_epoch"] > len(members)
        broker.restart()
        after = wait_for(lambda: (d := describe(broker.bootstrap, group))["error_code"] == 0
                         and d, 30)
        # Restored from __consumer_offsets: the epochs go on from where they were. A member
        # whose session lapsed during a slow restart may have rejoined since, which only
        # raises them.
        assert after["group_epoch"] >= before["group_epoch"]
        epochs = {m["member_id"]: m["member_epoch"] for m in before["members"]}
        assert all(m["member_epoch"] >= epochs.get(m["member_id"], 0) for m in after["members"])
        second = [f"b{i}".encode() for i in range(20)]
        produce_values(broker.bootstrap, topic, second, 4)
        wait_all_received(members, second)
    finally:
        for m in members:
            m.stop()


def test_classic_group_upgraded_member_by_member(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER, **{"group.initial.rebalance.delay.ms": "0",
                                         "group.min.session.timeout.ms": "1000"})
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    ownership = Ownership()
    classic = {"group.protocol": "classic", "session.timeout.ms": 6000,
               "heartbeat.interval.ms": 500}

    def member(**config: Any) -> ConsumerProtocolMember:
        return ConsumerProtocolMember(broker.bootstrap, topic, group, ownership, **config)

    batches = [[f"{name}{i}".encode() for i in range(40)] for name in "abc"]
    first, second = member(**classic), member(**classic)
    everyone = [first, second]
    try:
        produce_values(broker.bootstrap, topic, batches[0], 4)
        wait_all_received(everyone, batches[0])
        wait_for(lambda: sum(committed_offsets(broker.bootstrap, group, topic, 4)) == 40, 30)
        first.stop()
        wait_for(lambda: second.assignment == {0, 1, 2, 3}, 30)
        upgraded = member()
        everyone.append(upgraded)
        wait_for(lambda: len(second.assignment) == 2 and len(upgraded.assignment) == 2, 60)
        assert describe(broker.bootstrap, group)["group_state"] == "Stable"
        produce_values(broker.bootstrap, topic, batches[1], 4)
        wait_all_received(everyone, batches[0] + batches[1])
        second.stop()
        last = member()
        everyone.append(last)
        wait_for(lambda: stable_with(broker.bootstrap, group, [upgraded, last], 4), 60)
        produce_values(broker.bootstrap, topic, batches[2], 4)
        wait_all_received(everyone, [v for batch in batches for v in batch])
        wait_for(lambda: sum(committed_offsets(broker.bootstrap, group, topic, 4)) == 120, 30)
        described = describe(broker.bootstrap, group)
        assert {m["client_id"] for m in described["members"]} == {
            upgraded.member_name, last.member_name
        }
    finally:
        for m in everyone:
            if m.is_alive():
                m.stop()
    assert ownership.violations == []


def logbus_cli(bootstrap: str, *args: str) -> list[list[str]]:
    """A `logbus` command's table output, as rows of cells (the header first)."""
    done = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", *args, "--bootstrap-server", bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def test_groups_cli_shows_the_type_epochs_and_target_assignment(broker_factory: Any) -> None:
    broker = broker_factory(**BROKER)
    topic, group = new_topic(), new_group()
    create_topic(broker.bootstrap, topic, 4)
    members = [ConsumerProtocolMember(broker.bootstrap, topic, group) for _ in range(2)]
    try:
        wait_for(lambda: stable_with(broker.bootstrap, group, members, 4), 30)
        listed = logbus_cli(broker.bootstrap, "groups", "list", "--state", "--type")
        assert listed[0] == ["GROUP", "STATE", "TYPE"]
        assert [group, "Stable", "Consumer"] in listed
        # kafka-consumer-groups 4's columns: the epochs with --verbose only
        state = logbus_cli(broker.bootstrap, "groups", "describe", group, "--state")
        assert "GROUP-EPOCH" not in state[0] and state[1][-1] == "2"
        state = logbus_cli(broker.bootstrap, "groups", "describe", group, "--state",
                           "--verbose")
        assert state[0][-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert state[1][-1] == "2" and state[1][-2] == state[1][-3] == "2"
        rows = logbus_cli(broker.bootstrap, "groups", "describe", group, "--members",
                          "--verbose")
        header = rows[0]
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                          "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                          "TARGET-ASSIGNMENT"]
        owned: list[str] = []
        for row in rows[1:]:
            cells = dict(zip(header, row, strict=True))
            assert cells["CURRENT-EPOCH"] == cells["TARGET-EPOCH"] == "2"
            assert cells["CURRENT-ASSIGNMENT"] == cells["TARGET-ASSIGNMENT"]
            assert cells["#PARTITIONS"] == "2"
            topic_name, partitions = cells["CURRENT-ASSIGNMENT"].split(":")
            assert topic_name == topic
            owned += partitions.split(",")
        assert sorted(owned) == ["0", "1", "2", "3"]
        plain = logbus_cli(broker.bootstrap, "groups", "describe", group, "--members")
        assert plain[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        only_classic = logbus_cli(broker.bootstrap, "groups", "list", "--type", "classic")
        assert only_classic == [["GROUP", "TYPE"]]
    finally:
        for m in members:
            m.stop()
