"""`logbus topics describe`'s partition filters and lines, on hand-made metadata values."""

from __future__ import annotations

from uuid import UUID

import pytest

from logbus.cli.main import build_parser
from logbus.cli.topics import (
    PartitionFilter,
    describe_lines,
    filtered_partition_lines,
    partition_line,
)
from logbus.client.metadata import PartitionInfo, TopicInfo

HEALTHY = PartitionInfo(0, leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 2, 3))
UNDER = PartitionInfo(1, leader=2, leader_epoch=2, replicas=(2, 3, 1), isr=(2, 1))
AT_TWO = PartitionInfo(2, leader=3, leader_epoch=0, replicas=(3, 1, 2), isr=(3, 1))
OFFLINE = PartitionInfo(
    3, leader=-1, leader_epoch=7, replicas=(1, 3, 2), isr=(1,), offline_replicas=(3, 2)
)
DEAD_LEADER = PartitionInfo(4, leader=2, leader_epoch=1, replicas=(2,), isr=(2,))
TOPIC = TopicInfo(
    "orders",
    UUID(int=7),
    False,
    {p.partition: p for p in (DEAD_LEADER, OFFLINE, AT_TWO, UNDER, HEALTHY)},
)
LIVE = {1, 3}


def shown(flt: PartitionFilter, min_isr: int | None = 2) -> list[int]:
    lines = filtered_partition_lines(TOPIC, flt, LIVE, min_isr)
    return [int(line.split("\tPartition: ")[1].split("\t")[0]) for line in lines]


def test_no_filter_shows_every_partition_in_order() -> None:
    assert shown(PartitionFilter()) == [0, 1, 2, 3, 4]


def test_under_replicated_is_an_isr_smaller_than_the_replicas() -> None:
    assert shown(PartitionFilter(under_replicated=True)) == [1, 2, 3]


def test_unavailable_is_no_leader_or_a_leader_that_is_not_live() -> None:
    assert shown(PartitionFilter(unavailable=True)) == [1, 3, 4]


def test_under_min_isr_counts_the_isr_against_the_topics_minimum() -> None:
    assert shown(PartitionFilter(under_min_isr=True), min_isr=2) == [3, 4]
    assert shown(PartitionFilter(under_min_isr=True), min_isr=3) == [1, 2, 3, 4]
    # without the config only leaderless partitions are known to be under it
    assert shown(PartitionFilter(under_min_isr=True), min_isr=None) == [3]


def test_at_min_isr() -> None:
    assert shown(PartitionFilter(at_min_isr=True), min_isr=2) == [1, 2]
    assert shown(PartitionFilter(at_min_isr=True), min_isr=None) == []


def test_filters_combine_as_a_union() -> None:
    assert shown(PartitionFilter(under_replicated=True, unavailable=True)) == [1, 2, 3, 4]


def test_lines_look_like_kafka_topics() -> None:
    assert partition_line("orders", OFFLINE) == (
        "\tTopic: orders\tPartition: 3\tLeader: none\tReplicas: 1,3,2\tIsr: 1\tOffline: 3,2"
    )
    lines = describe_lines(TOPIC, {})
    assert lines[0].endswith("PartitionCount: 5\tReplicationFactor: 3\tConfigs: ")
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["topics", "describe", "--topic", "t"], ("t", False, False)),
        (["topics", "describe", "--under-replicated-partitions"], (None, True, False)),
        (["topics", "describe", "t", "--unavailable-partitions"], (None, False, True)),
    ],
)
def test_describe_arguments(argv: list[str], expected: tuple[str | None, bool, bool]) -> None:
    args = build_parser().parse_args(argv)
    assert (
        args.topic_option,
        args.under_replicated_partitions,
        args.unavailable_partitions,
    ) == expected
