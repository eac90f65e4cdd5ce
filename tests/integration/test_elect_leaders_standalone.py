"""ElectLeaders on a stand-alone broker: every partition has one replica, which leads it,
so each election is ELECTION_NOT_NEEDED (unknown partitions UNKNOWN_TOPIC_OR_PARTITION),
through the asyncio and the blocking Admin, confluent-kafka's admin and the CLI."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from admin_helpers import name, run
from confluent_kafka import ElectionType as ConfluentElection
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient

import logbus
from logbus.aio import Admin, NewTopic, TopicPartition
from logbus.protocol import ErrorCode


def test_every_election_is_not_needed(broker: Any) -> None:
    topic = name("solo")

    async def action(admin: Admin) -> None:
        await admin.create_topics([NewTopic(topic, num_partitions=2)])
        wanted = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 7)]
        for kind in ("PREFERRED", "unclean"):
            results = await admin.elect_leaders(kind, wanted)
            codes = {tp: e.code if e is not None else None for tp, e in results.items()}
            assert codes == {
                TopicPartition(topic, 0): ErrorCode.ELECTION_NOT_NEEDED,
                TopicPartition(topic, 1): ErrorCode.ELECTION_NOT_NEEDED,
                TopicPartition(topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }
        every = await admin.elect_leaders("PREFERRED")
        assert {TopicPartition(topic, 0), TopicPartition(topic, 1)} <= set(every)
        assert {e.code for e in every.values() if e is not None} == {ErrorCode.ELECTION_NOT_NEEDED}

    run(broker, action)

    with logbus.Admin(bootstrap_servers=broker.bootstrap) as admin:
        results = admin.elect_leaders("PREFERRED", [TopicPartition(topic, 1)])
        error = results[TopicPartition(topic, 1)]
        assert error is not None and error.code == ErrorCode.ELECTION_NOT_NEEDED

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    done = confluent.elect_leaders(
        ConfluentElection.PREFERRED, [ConfluentPartition(topic, 0)]
    ).result(30)
    assert [e.code() for e in done.values()] == [ConfluentError.ELECTION_NOT_NEEDED]

    cli = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "leader-election", "--bootstrap-server",
         broker.bootstrap, "--election-type", "PREFERRED", "--topic", topic, "--partition", "0"],
        capture_output=True, text=True, encoding="utf-8", timeout=60, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines() == [f"Valid replica already elected for partitions {topic}-0"]


def test_bad_cli_input_is_refused_with_a_message(broker: Any, tmp_path: Any) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "logbus.cli.main", "leader-election",
             "--bootstrap-server", broker.bootstrap, *args],
            capture_output=True, text=True, encoding="utf-8", timeout=60, check=False,
        )  # fmt: skip

    bad_json = tmp_path / "bad.json"
    bad_json.write_text(
        '{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}'
    )
    cases = {
        ("--all-topic-partitions",): "--election-type is required",
        ("--election-type", "FASTEST", "--all-topic-partitions"): "unknown election type",
        ("--election-type", "PREFERRED"): "exactly one of",
        (
            "--election-type",
            "PREFERRED",
            "--all-topic-partitions",
            "--topic",
            "a",
        ): "exactly one of",
        ("--election-type", "PREFERRED", "--topic", "a"): "--partition is required",
        ("--election-type", "PREFERRED", "--topic", "a", "--partition", "x"): "not a partition id",
        ("--election-type", "PREFERRED", "--path-to-json-file", str(tmp_path / "none.json")): (
            "No such file"
        ),
        ("--election-type", "PREFERRED", "--path-to-json-file", str(bad_json)): (
            "duplicate partitions: a-0"
        ),
    }
    for args, message in cases.items():
        result = cli(*args)
        assert result.returncode == 1, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert result.stderr.startswith("logbus: error: ")


def test_controlled_shutdown_changes_nothing_on_a_stand_alone_broker(broker: Any) -> None:
    """Nothing can move; the broker keeps leading new topics afterwards."""
    from logbus.client.connection import Connection
    from logbus.client.requests.leader_elections import controlled_shutdown

    topic = name("after")

    async def action(admin: Admin) -> None:
        host, port = broker.bootstrap.split(":")
        conn = await Connection.connect(host, int(port))
        try:
            result = await controlled_shutdown(conn, 0, -1)
        finally:
            await conn.close()
        assert (result.error, result.remaining) == (ErrorCode.NONE, [])
        await admin.create_topics([NewTopic(topic, num_partitions=1)])
        info = (await admin.describe_topics([topic]))[topic]
        assert info.partitions[0].leader == 0

    run(broker, action)
