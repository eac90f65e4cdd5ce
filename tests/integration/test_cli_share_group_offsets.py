"""A share group's offsets through `logbus share-groups` (kafka-share-groups' `--describe
--offsets`, `--reset-offsets`, `--delete-offsets`) and the admin client, against a real
broker whose share group is confluent-kafka's ShareConsumer: the start offset its
acknowledgements moved, a reset its next consumer reads from, a deletion after which it
starts again where `share.auto.offset.reset` says; refused while a consumer is in the group
or for a group that does not exist, with nothing changed."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cli_runs import failed, logbus, ok
from confluent_kafka import ShareConsumer

from kafka_wire import WireClient, create_topic, wait_for
from logbus import Admin
from logbus.client.admin.types import AlterConfigOp, ConfigResource, ResourceType
from logbus.client.types import TopicPartition
from logbus.protocol import ApiKey
from logbus.records.builder import build_plain_batch

pytestmark = pytest.mark.timeout(180)
VALUES = [b"v%d" % i for i in range(20)]


def earliest_group(admin: Admin) -> str:
    group = f"so-{uuid.uuid4().hex[:8]}"
    admin.incremental_alter_configs({
        ConfigResource(ResourceType.GROUP, group): [
            AlterConfigOp("share.auto.offset.reset", "earliest")
        ]
    })
    return group


def consume(bootstrap: str, group: str, topic: str, want: int) -> list[bytes]:
    """The values a new ShareConsumer gets (each accepted, implicitly) until `want` came;
    then it leaves the group."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        def enough() -> bool:
            got.extend(m.value() for m in consumer.poll(0.5) or [] if m.error() is None)
            return len(got) >= want

        wait_for(enough, 60, what=f"{want} records")
        consumer.poll(0.1)  # the acknowledgements of the last records leave with this poll
    finally:
        consumer.close()
    return got


def has_members(broker: Any, group: str) -> bool:
    body = {"group_ids": [group], "include_authorized_operations": False}
    with WireClient(broker.bootstrap) as client:
        described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, body)["groups"][0]
    return bool(described["members"])


def offsets_table(broker: Any, group: str, *extra: str) -> list[list[str]]:
    out = ok(logbus(broker, "share-groups", "--describe", "--group", group, "--offsets",
                    *extra))
    return [line.split() for line in out.splitlines()[1:] if line.strip()]


def test_describe_reset_and_delete_offsets_of_a_share_consumers_group(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    with WireClient(broker.bootstrap) as client:
        client.produce(topic, 0, build_plain_batch(VALUES, timestamp=1_700_000_000_000))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        group = earliest_group(admin)
        assert sorted(consume(broker.bootstrap, group, topic, 20)) == sorted(VALUES)
        tp = TopicPartition(topic, 0)
        # the consumer's acknowledgements moved the start offset past every record
        wait_for(
            lambda: (found := admin.describe_share_group_offsets(group).get(tp)) is not None
            and found.start_offset == 20,
            what="the start offset after the acknowledgements",
        )
        assert offsets_table(broker, group) == [[group, topic, "0", "20"]]
        verbose = offsets_table(broker, group, "--verbose")
        assert verbose[0][:3] == [group, topic, "0"] and verbose[0][4] == "20"

        # while a consumer is in the group nothing moves
        member = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        member.subscribe([topic])
        try:
            wait_for(lambda: member.poll(0.2) is not None and has_members(broker, group),
                     what="a member")
            refused = failed(logbus(broker, "share-groups", "--reset-offsets", "--group", group,
                                    "--topic", topic, "--to-earliest", "--execute"))
            assert "not empty" in refused
            busy = failed(logbus(broker, "share-groups", "--delete-offsets", "--group", group,
                                 "--topic", topic))
            assert "not empty" in busy
        finally:
            member.close()
        assert admin.describe_share_group_offsets(group)[tp].start_offset == 20  # type: ignore[union-attr]

        # dry run first: nothing written
        plan = ok(logbus(broker, "share-groups", "--reset-offsets", "--group", group,
                         "--topic", f"{topic}:0", "--to-offset", "5"))
        assert plan.splitlines()[-1].split() == [group, topic, "0", "5"]
        by_time = ok(logbus(broker, "share-groups", "reset-offsets", group, "--all-topics",
                            "--to-datetime", "2000-01-01T00:00:00.000"))
        assert by_time.splitlines()[-1].split() == [group, topic, "0", "0"]
        assert admin.describe_share_group_offsets(group)[tp].start_offset == 20  # type: ignore[union-attr]
        ok(logbus(broker, "share-groups", "--reset-offsets", "--group", group, "--all-topics",
                  "--to-offset", "5", "--execute"))
        assert admin.describe_share_group_offsets(group)[tp].start_offset == 5  # type: ignore[union-attr]
        assert sorted(consume(broker.bootstrap, group, topic, 15)) == sorted(VALUES[5:])

        missing = f"missing-{uuid.uuid4().hex[:8]}"
        result = logbus(broker, "share-groups", "--delete-offsets", "--group", group,
                        "--topic", topic, "--topic", missing)
        assert result.returncode == 1, result.stderr
        rows = dict(line.split(None, 1) for line in result.stdout.splitlines()[1:])
        assert rows[topic] == "Successful"
        assert "UNKNOWN_TOPIC_OR_PARTITION" in rows[missing]
        assert admin.describe_share_group_offsets(group) == {}
        assert admin.describe_share_group_offsets(group, [tp]) == {tp: None}
        # without a start offset the group starts again at the earliest record
        assert sorted(consume(broker.bootstrap, group, topic, 20)) == sorted(VALUES)


def test_a_share_group_that_does_not_exist(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"so-{uuid.uuid4().hex[:8]}")
    group = f"nobody-{uuid.uuid4().hex[:8]}"
    for args in (
        ["--describe", "--group", group, "--offsets"],
        ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"],
        ["--delete-offsets", "--group", group, "--topic", topic],
    ):
        assert "does not exist" in failed(logbus(broker, "share-groups", *args)), args
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.describe_share_group_offsets(group) == {}
