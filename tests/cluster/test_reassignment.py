"""Partition reassignment (KIP-455) on a ZooKeeper cluster of broker processes: 20
partitions moved from three brokers to four under an acks=all idempotent confluent-kafka
load with every broker bounced mid-move and the controller killed once (the move resumes
from what ZooKeeper holds), a broker decommissioned, a replication factor raised 1 -> 3 and lowered
again through kafka-python's admin client, a throttled move, bad input refused; the
checker reads everything back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cluster_processes
from checker import History
from cluster_processes import ProcessCluster
from fault_checks import read_and_check, wait_isr
from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KafkaPartition
from load import ProducerLoad

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

CLI = [sys.executable, "-m", "logbus.cli.main", "reassign-partitions"]


def reassign(cluster: ProcessCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--bootstrap-server", cluster.bootstrap, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def reassignment_file(tmp_path: Path, topic: str, targets: dict[int, list[int]]) -> Path:
    path = tmp_path / f"reassign-{topic}.json"
    partitions = [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(targets.items())
    ]
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return path


def replicas(cluster: ProcessCluster, topic: str) -> dict[int, list[int]]:
    parts = cluster.metadata(topic).partitions
    return {p: list(info.replicas) for p, info in parts.items()}


def topic_znode(cluster: ProcessCluster, topic: str) -> dict[str, Any]:
    found = cluster._zk_read(f"/brokers/topics/{topic}")
    assert found is not None
    value: dict[str, Any] = json.loads(found[0])
    return value


def wait_completed(cluster: ProcessCluster, topic: str, targets: dict[int, list[int]]) -> None:
    """Until no reassignment is in progress and every partition has its target replicas
    (in ZooKeeper and in the metadata)."""

    def done() -> bool:
        with logbus.Admin(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000) as admin:
            if admin.list_partition_reassignments():
                return False
        znode = topic_znode(cluster, topic)
        return (
            not znode.get("adding_replicas")
            and not znode.get("removing_replicas")
            and {int(p): r for p, r in znode["partitions"].items()} == targets
            and replicas(cluster, topic) == targets
        )

    cluster.wait_for(done, 180, f"the reassignment of {topic} to complete")


def wait_removed(cluster: ProcessCluster, topic: str, targets: dict[int, list[int]]) -> None:
    """Until each broker holds a directory for exactly the partitions assigned to it."""

    def hosted(broker: int) -> set[int]:
        prefix = f"{topic}-"
        return {
            int(d.name[len(prefix) :])
            for d in cluster.data_dir(broker).iterdir()
            if d.is_dir() and d.name.startswith(prefix) and d.name[len(prefix) :].isdigit()
        }

    def clean() -> bool:
        return all(
            hosted(b) == {p for p, r in targets.items() if b in r} for b in cluster.nodes
        )

    try:
        cluster.wait_for(clean, 60, f"the removed replicas of {topic} to be deleted")
    except AssertionError as exc:
        hosts = {b: sorted(hosted(b)) for b in cluster.nodes}
        raise AssertionError(f"{exc}: hosted {hosts}, assigned {targets}") from None


def test_partitions_move_to_a_new_broker_under_load_with_a_controller_failover(
    zk_connect: str, tmp_path: Path
) -> None:
    topic, partitions = "moving", 20
    with ProcessCluster(
        zk_connect, 4, tmp_path, start=False, min_insync_replicas="2"
    ) as cluster:
        for b in (0, 1, 2):
            cluster.start_broker(b)
        # listening comes before registration: wait until the controller knows all three
        cluster.wait_for(lambda: cluster.broker_ids() == [0, 1, 2], 60, "3 live brokers")
        cluster.create_topic(topic, partitions=partitions, replication_factor=3)
        wait_isr(cluster, topic, partitions)
        cluster.start_broker(3)
        cluster.wait_for(lambda: cluster.broker_ids() == [0, 1, 2, 3], 60, "broker 3 live")
        targets = {p: [(p + i) % 4 for i in range(3)] for p in range(partitions)}
        plan = reassignment_file(tmp_path, topic, targets)
        history = History()
        # 6.75 MB for broker 3 to copy (the 15 moves of 20 that add it), at a throttle of
        # 0.25 MB/s: no move can complete before broker 3 is stopped below.
        preload(cluster.bootstrap, history, topic, 600)
        with ProducerLoad(
            cluster.bootstrap,
            history,
            topic,
            client="confluent",
            producers=2,
            interval=0.001,
            **{"acks": "all", "enable.idempotence": True},
        ) as load:
            load.wait_acknowledged(500)
            executed = reassign(
                cluster, "--execute", "--reassignment-json-file", str(plan),
                "--throttle", "250000",
            )  # fmt: skip
            assert executed.returncode == 0, executed.stderr
            assert "Successfully started partition reassignments for moving-0," in (
                executed.stdout
            )
            # Every broker bounced mid-move, as Kafka's reassignment system test bounces
            # them, and the controller killed once. Broker 3, which every move but five
            # adds, is stopped first (still copying, at the throttle): the moves cannot
            # complete until it is back, so each fault below lands while they are in
            # progress.
            assert cluster.terminate(3) == 0
            with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
                assert len(admin.list_partition_reassignments()) >= 15
            controller = cluster.controller()
            assert controller is not None
            cluster.kill(controller)
            cluster.start_broker(controller)
            for bounced in sorted({0, 1, 2} - {controller}):
                # each back in the ISR before the next goes (as a rolling restart)
                wait_isr(cluster, topic, partitions)
                load.wait_acknowledged(load.acknowledged() + 100)
                assert cluster.terminate(bounced) == 0
                cluster.start_broker(bounced)
            with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
                assert len(admin.list_partition_reassignments()) >= 15  # still moving
            cluster.start_broker(3)
            cluster.wait_for(lambda: 3 in cluster.broker_ids(), 60, "broker 3 back")
            # the throttle raised by resubmitting the reassignment, as Kafka's tool says
            raised = reassign(
                cluster, "--execute", "--additional", "--reassignment-json-file", str(plan),
                "--throttle", "1000000000",
            )  # fmt: skip
            assert raised.returncode == 0, raised.stderr
            wait_completed(cluster, topic, targets)
            load.wait_acknowledged(load.acknowledged() + 500)
        assert not load.errors
        verified = reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert verified.returncode == 0, verified.stderr
        for p in range(partitions):
            assert f"Reassignment of partition {topic}-{p} is completed." in verified.stdout
        wait_isr(cluster, topic, partitions)
        wait_removed(cluster, topic, targets)
        result = read_and_check(cluster, history, topic, partitions)
        assert result.ok, result


def preload(bootstrap: str, history: History, topic: str, count: int) -> None:
    """`count` recorded sends with 15 KB keys (the checker compares values, which stay
    unique), spread over the partitions by key."""
    with logbus.Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        for _ in range(count):
            send = history.send("preload", topic, key=os.urandom(15_000))
            send.record_future(producer.send(topic, send.value, key=send.key))
        producer.flush()


def test_a_broker_is_decommissioned(zk_connect: str, tmp_path: Path) -> None:
    topic, partitions = "retiring", 6
    with ProcessCluster(zk_connect, 4, tmp_path, min_insync_replicas="1") as cluster:
        cluster.create_topic(topic, partitions=partitions, replication_factor=2)
        assert any(3 in r for r in replicas(cluster, topic).values())
        to_move = tmp_path / "topics.json"
        to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        generated = reassign(
            cluster, "--generate", "--topics-to-move-json-file", str(to_move),
            "--broker-list", "0,1,2",
        )  # fmt: skip
        assert generated.returncode == 0, generated.stderr
        lines = generated.stdout.splitlines()
        assert lines[0] == "Current partition replica assignment"
        assert lines[3] == "Proposed partition reassignment configuration"
        current = json.loads(lines[1])
        assert {(e["topic"], e["partition"]): e["replicas"] for e in current["partitions"]} == {
            (topic, p): r for p, r in replicas(cluster, topic).items()
        }
        proposal = json.loads(lines[4])
        targets = {e["partition"]: e["replicas"] for e in proposal["partitions"]}
        assert sorted(targets) == list(range(partitions))
        assert all(len(r) == 2 and 3 not in r for r in targets.values())
        plan = tmp_path / "plan.json"
        plan.write_text(lines[4])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        try:
            for i in range(200):
                producer.send(topic, f"v{i}".encode(), partition=i % partitions)
            producer.flush()
        finally:
            producer.close()
        executed = reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stderr
        wait_completed(cluster, topic, targets)
        wait_removed(cluster, topic, targets)
        records = logbus_read(cluster, topic)
        assert sorted(records) == sorted(f"v{i}".encode() for i in range(200))


def logbus_read(cluster: ProcessCluster, topic: str) -> list[bytes]:
    from load import read_all

    return [r.value for r in read_all(cluster.bootstrap, topic)]


def test_replication_factor_raised_and_lowered_by_a_third_party_admin(
    zk_connect: str, tmp_path: Path
) -> None:
    topic, partitions = "growing", 3
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        cluster.create_topic(topic, partitions=partitions, replication_factor=1)
        with logbus.Producer(bootstrap_servers=cluster.bootstrap, acks="all") as producer:
            for i in range(300):
                producer.send(topic, f"v{i}".encode(), partition=i % partitions)
            producer.flush()
        before = replicas(cluster, topic)
        raised = {p: [r[0], *[b for b in (0, 1, 2) if b != r[0]]] for p, r in before.items()}
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            results = admin.alter_partition_reassignments(
                {KafkaPartition(topic, p): r for p, r in raised.items()}
            )
            assert results == {KafkaPartition(topic, p): None for p in range(partitions)}
            wait_completed(cluster, topic, raised)
            wait_isr(cluster, topic, partitions, size=3)
            lowered = {p: [r[2]] for p, r in raised.items()}
            results = admin.alter_partition_reassignments(
                {KafkaPartition(topic, p): r for p, r in lowered.items()}
            )
            assert results == {KafkaPartition(topic, p): None for p in range(partitions)}
            wait_completed(cluster, topic, lowered)
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        wait_removed(cluster, topic, lowered)
        assert sorted(logbus_read(cluster, topic)) == sorted(f"v{i}".encode() for i in range(300))


def test_bad_reassignments_are_refused_and_change_nothing(
    zk_connect: str, tmp_path: Path
) -> None:
    topic = "fixed"
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        cluster.create_topic(topic, partitions=2, replication_factor=2)
        before = replicas(cluster, topic)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            codes = {
                name: admin.alter_partition_reassignments({tp: target})[tp].errno
                for name, tp, target in (
                    ("unknown broker", KafkaPartition(topic, 0), [0, 7]),
                    ("duplicate replicas", KafkaPartition(topic, 0), [1, 1]),
                    ("unknown topic", KafkaPartition("nope", 0), [0, 1]),
                    ("unknown partition", KafkaPartition(topic, 5), [0, 1]),
                    ("cancel with nothing running", KafkaPartition(topic, 1), None),
                )
            }
        finally:
            admin.close()
        assert codes == {
            "unknown broker": 39,  # INVALID_REPLICA_ASSIGNMENT
            "duplicate replicas": 39,
            "unknown topic": 3,  # UNKNOWN_TOPIC_OR_PARTITION
            "unknown partition": 3,
            "cancel with nothing running": 85,  # NO_REASSIGNMENT_IN_PROGRESS
        }

        written = iter(range(100))

        def plan(entries: object) -> str:
            path = tmp_path / f"bad-{next(written)}.json"
            path.write_text(json.dumps({"version": 1, "partitions": entries}))
            return str(path)

        one = {"topic": topic, "partition": 0}
        broken = tmp_path / "broken.json"
        broken.write_text('{"version": 1, "partitions": [')
        cases = {
            "malformed": (["--execute", "--reassignment-json-file", str(broken)],
                          "The reassignment JSON is not valid JSON"),
            "unknown broker": (["--execute", "--reassignment-json-file",
                                plan([{**one, "replicas": [0, 7]}])], "Unknown broker id(s) 7"),
            "duplicate replica": (["--execute", "--reassignment-json-file",
                                   plan([{**one, "replicas": [1, 1]}])],
                                  "may not contain duplicate entries: fixed-0 contains 1"),
            "unknown topic": (["--execute", "--reassignment-json-file",
                               plan([{"topic": "nope", "partition": 0, "replicas": [1]}])],
                              "nope do(es) not exist"),
            "unknown partition": (["--execute", "--reassignment-json-file",
                                   plan([{"topic": topic, "partition": 9, "replicas": [1]}])],
                                  "Unable to find partition: fixed-9"),
            "cancel with nothing running": (
                ["--cancel", "--reassignment-json-file", plan([{**one, "replicas": [1, 2]}])],
                "None of the specified partition reassignments are active."),
            "two actions": (["--execute", "--verify", "--reassignment-json-file", "x"],
                            "exactly one action"),
            "option of another action": (["--verify", "--throttle", "10",
                                          "--reassignment-json-file", "x"],
                                         'Option "--throttle" can\'t be used with action'),
        }  # fmt: skip
        for name, (args, words) in cases.items():
            done = reassign(cluster, *args)
            assert done.returncode != 0, name
            assert words in done.stderr, (name, done.stderr)
        assert replicas(cluster, topic) == before
        listed = reassign(cluster, "--list")
        assert listed.stdout.strip() == "No partition reassignments found."


def test_a_throttled_move_copies_at_the_throttle_and_verify_removes_it(
    zk_connect: str, tmp_path: Path
) -> None:
    topic, throttle, size = "throttled", 1_000_000, 16_000_000
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        cluster.create_topic(topic, partitions=1, replication_factor=1)
        source = replicas(cluster, topic)[0][0]
        target = next(b for b in (0, 1, 2) if b != source)
        # Kafka's default batch size: a follower's fetch (replica.fetch.max.bytes) then
        # ends in a partial batch of at most 16 KB, which it fetches again (the throttle
        # counts the bytes sent, as Kafka's).
        with logbus.Producer(
            bootstrap_servers=cluster.bootstrap, acks="all", batch_size=16384
        ) as producer:
            for _ in range(size // 10_000):
                producer.send(topic, os.urandom(10_000), partition=0)
            producer.flush()
        leader_bytes = log_bytes(cluster.data_dir(source) / f"{topic}-0")
        plan = reassignment_file(tmp_path, topic, {0: [source, target]})
        executed = reassign(
            cluster, "--execute", "--reassignment-json-file", str(plan),
            "--throttle", str(throttle),
        )  # fmt: skip
        assert executed.returncode == 0, executed.stderr
        assert f"The inter-broker throttle limit was set to {throttle} B/s" in executed.stdout
        assert cluster.dynamic_config("brokers", str(target)) == {
            "leader.replication.throttled.rate": str(throttle),
            "follower.replication.throttled.rate": str(throttle),
        }
        assert cluster.dynamic_config("topics", topic) == {
            "leader.replication.throttled.replicas": f"0:{source}",
            "follower.replication.throttled.replicas": f"0:{target}",
        }
        copy = cluster.data_dir(target) / f"{topic}-0"
        samples: list[tuple[float, int]] = []

        def copied() -> bool:
            samples.append((time.monotonic(), log_bytes(copy)))
            return samples[-1][1] >= leader_bytes

        deadline = time.monotonic() + 120
        while not copied():
            assert time.monotonic() < deadline, f"the copy did not finish: {samples[-1]}"
            time.sleep(0.05)
        # The rate once the copy runs (past its first quarter: the first fetches also
        # wait for the new replica's log and fetcher to start).
        started = next((t, n) for t, n in samples if n >= leader_bytes // 4)
        rate = (samples[-1][1] - started[1]) / (samples[-1][0] - started[0])
        assert 0.8 * throttle <= rate <= 1.2 * throttle, rate
        wait_completed(cluster, topic, {0: [source, target]})
        verified = reassign(cluster, "--verify", "--reassignment-json-file", str(plan))
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.splitlines() == [
            "Status of partition reassignment:",
            f"Reassignment of partition {topic}-0 is completed.",
            "",
            "Clearing broker-level throttles on brokers 0,1,2",
            f"Clearing topic-level throttles on topic {topic}",
        ]
        for b in (0, 1, 2):
            assert cluster.dynamic_config("brokers", str(b)) == {}
        assert cluster.dynamic_config("topics", topic) == {}


def log_bytes(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(f.stat().st_size for f in directory.glob("*.log") if f.is_file())
