"""`logbus topics describe` with its partition filters, as a subprocess against a real
broker (one broker: it is every partition's only replica and its ISR)."""

from __future__ import annotations

from typing import Any

from cli_runs import logbus, ok


def test_describe_by_topic_option_shows_replicas_and_isr(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "orders", "--partitions", "2"))
    lines = ok(logbus(broker, "topics", "describe", "--topic", "orders")).splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(2)
    ]


def test_a_healthy_broker_has_no_under_replicated_or_unavailable_partitions(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "orders", "--partitions", "3"))
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert ok(logbus(broker, "topics", "describe", flag)) == ""
        assert ok(logbus(broker, "topics", "describe", "--topic", "orders", flag)) == ""


def test_min_isr_filters_read_the_topics_config(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "strict", "--config", "min.insync.replicas=2"))
    ok(logbus(broker, "topics", "create", "relaxed", "--partitions", "2"))
    under = ok(logbus(broker, "topics", "describe", "--under-min-isr-partitions"))
    assert under.splitlines() == ["\tTopic: strict\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"]
    at = ok(logbus(broker, "topics", "describe", "--at-min-isr-partitions", "--exclude-internal"))
    assert at.splitlines() == [
        f"\tTopic: relaxed\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(2)
    ]


def test_topic_given_twice_differently_is_refused(broker: Any) -> None:
    result = logbus(broker, "topics", "describe", "a", "--topic", "b")
    assert result.returncode == 1
    assert "either as an argument or with --topic" in result.stderr
