"""`logbus share-groups` (kafka-share-groups) as a subprocess against a real broker with a
share group set up over the wire: list, describe, delete, and reset-offsets moving an empty
group's start offset so its next member reads the records again."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cli_runs import failed, ok, run_cli
from share_wire import (
    ACCEPT,
    acquired,
    heartbeat,
    join,
    share_ack,
    share_fetch,
    share_group,
)

from kafka_wire import WireClient, create_topic

pytestmark = pytest.mark.timeout(120)


def logbus(broker: Any, *args: str) -> Any:
    return run_cli(*args, "--bootstrap-server", broker.bootstrap)


def test_list_describe_reset_and_delete(broker: Any) -> None:
    topic = create_topic(broker.bootstrap, f"share-{uuid.uuid4().hex[:8]}")
    group = f"sg-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        _, _, topic_id, _ = share_group(client, topic, group)
        assert acquired(share_fetch(client, group, "member-a", 0, topic_id)) == [(0, 9, 1)]
        share_ack(client, group, "member-a", 1, topic_id, [(0, 9, [ACCEPT])])

        assert group in ok(logbus(broker, "share-groups", "--list")).split()
        assert f"{group}  Stable" in ok(logbus(broker, "share-groups", "list", "--state"))
        members = ok(logbus(broker, "share-groups", "describe", group, "--members",
                                     "--verbose"))
        assert "member-a" in members and f"{topic}:0" in members
        assert "Stable" in ok(logbus(broker, "share-groups", "--describe", "--group", group,
                                     "--state"))
        busy = failed(logbus(broker, "share-groups", "--delete", "--group", group))
        assert "not empty" in busy
        refused = failed(logbus(broker, "share-groups", "reset-offsets", group, "--topic",
                                topic, "--to-earliest", "--execute"))
        assert "not empty" in refused

        heartbeat(client, group, "member-a", -1, None)  # the member leaves
        share_fetch(client, group, "member-a", -1, topic_id)
        plan = ok(logbus(broker, "share-groups", "reset-offsets", group, "--topic", topic,
                         "--to-earliest"))
        assert plan.split()[-4:] == [group, topic, "0", "0"]  # a dry run: nothing written
        ok(logbus(broker, "share-groups", "reset-offsets", group, "--topic", topic,
                  "--to-earliest", "--execute"))
        join(client, group, "member-b", topic)
        # the accepted records are delivered again, from the reset start offset
        assert acquired(share_fetch(client, group, "member-b", 0, topic_id)) == [(0, 9, 1)]
        share_fetch(client, group, "member-b", -1, topic_id)
        heartbeat(client, group, "member-b", -1, None)

    deleted = ok(logbus(broker, "share-groups", "delete", group))
    assert "successful" in deleted
    gone = failed(logbus(broker, "share-groups", "describe", group))
    assert "does not exist" in gone
