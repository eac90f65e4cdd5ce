"""`logbus cluster up`'s generated broker configuration, read back by the broker's own
properties parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from logbus.cli.cluster import broker_properties, kraft_properties, properties_text
from logbus.cli.cluster_kraft import voter_count
from logbus.cli.main import build_parser
from logbus.common.properties import parse_properties
from logbus.server.config.broker_config import BrokerConfig


def test_each_broker_gets_its_id_port_dir_and_the_shared_zookeeper() -> None:
    props = broker_properties(2, 5, 9094, Path("/d/broker-2"), "zk:2181/x", rack="b")
    assert props == {
        "broker.id": "2",
        "listeners": "PLAINTEXT://localhost:9094",
        "log.dirs": "/d/broker-2",
        "zookeeper.connect": "zk:2181/x",
        "offsets.topic.replication.factor": "3",
        "default.replication.factor": "3",
        "broker.rack": "b",
    }
    BrokerConfig.from_properties(props)  # a configuration the broker accepts


def test_small_clusters_replicate_to_every_broker_and_extra_settings_win() -> None:
    props = broker_properties(0, 2, 9092, Path("/d"), "zk:2181", extra={"num.partitions": "6"})
    assert props["default.replication.factor"] == "2"
    assert props["num.partitions"] == "6"
    assert "broker.rack" not in props
    over = broker_properties(0, 1, 9092, Path("/d"), "zk:2181", extra={"broker.id": "7"})
    assert over["broker.id"] == "7"


@pytest.mark.parametrize(
    "value",
    ["PLAINTEXT://localhost:9092", r"C:\data\logs", "  leading spaces", "a=b:c#d!e", "é"],
)
def test_properties_text_reads_back_the_same_values(value: str) -> None:
    text = properties_text({"some.key": value, "other": "x"})
    assert parse_properties(text, "test") == {"some.key": value, "other": "x"}


def test_cluster_up_arguments() -> None:
    args = build_parser().parse_args(
        ["cluster", "up", "--brokers", "5", "--config", "a=b", "--config", "c=d=e"]
    )
    assert (args.brokers, args.base_port, args.zookeeper, args.zookeeper_port) == (
        5,
        9092,
        None,
        2181,
    )
    assert args.config == [("a", "b"), ("c", "d=e")]
    assert args.data_dir == Path("data")
    assert (args.mode, args.controller_base_port) == (None, 19092)  # None: kraft
    for bad in (
        ["--brokers", "0"], ["--base-port", "70000"], ["--mode", "raft"],
        ["--controller-base-port", "0"],
    ):  # fmt: skip
        with pytest.raises(SystemExit):
            build_parser().parse_args(["cluster", "up", *bad])


def test_kraft_nodes_are_combined_voters_and_the_rest_brokers() -> None:
    assert [voter_count(n) for n in range(1, 9)] == [1, 1, 3, 3, 5, 5, 5, 5]
    props = kraft_properties(1, 3, 9093, 19092, Path("/d/broker-1"), rack="b")
    assert props == {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": "PLAINTEXT://localhost:9093,CONTROLLER://localhost:19093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "0@localhost:19092,1@localhost:19093,2@localhost:19094",
        "log.dirs": "/d/broker-1",
        "offsets.topic.replication.factor": "3",
        "default.replication.factor": "3",
        "broker.rack": "b",
    }
    BrokerConfig.from_properties(props)  # a configuration the node accepts
    broker_only = kraft_properties(5, 6, 9097, 19092, Path("/d/broker-5"), metrics_port=9409)
    assert broker_only["process.roles"] == "broker"
    assert broker_only["listeners"] == "PLAINTEXT://localhost:9097"
    assert broker_only["controller.quorum.voters"].count("@") == 5
    assert broker_only["metrics.listener"] == "http://localhost:9409"
    BrokerConfig.from_properties(broker_only)
