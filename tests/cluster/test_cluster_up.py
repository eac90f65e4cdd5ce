"""`logbus cluster up` as a user runs it: a subprocess that starts N `logbus server start`
processes (KRaft nodes by default; with `--mode zookeeper`, brokers and a ZooKeeper from
Debian's package), then stops them in order on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from cluster_processes import free_port, listening
from command_processes import CLI, ClusterUp

import logbus
from logbus.cli.zookeeper_process import four_letter_word
from logbus.common.properties import load_properties
from ports import free_port_range

# the real ZooKeeper of the session, and a chroot of it per test
cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


@pytest.fixture
def cluster_up(tmp_path: Path) -> Iterator[Any]:
    started: list[ClusterUp] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ClusterUp:
        run = ClusterUp(tmp_path / "data", *args, env=env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.close()


def ports_args(brokers: int) -> tuple[list[str], int, int]:
    """ZooKeeper mode's arguments on free ports: (arguments, base port, ZooKeeper port)."""
    base = free_port_range(brokers)
    zk_port = free_port()
    metrics_base = free_port_range(brokers)
    return (
        ["--mode", "zookeeper", "--brokers", str(brokers), "--base-port", str(base),
         "--zookeeper-port", str(zk_port), "--metrics-base-port", str(metrics_base)],
        base,
        zk_port,
    )


def kraft_args(brokers: int) -> tuple[list[str], int, int]:
    """KRaft mode's (the default's) arguments on free ports: (arguments, base port,
    controller base port)."""
    base = free_port_range(brokers)
    controller_base = free_port_range(brokers)
    metrics_base = free_port_range(brokers)
    return (
        ["--brokers", str(brokers), "--base-port", str(base),
         "--controller-base-port", str(controller_base), "--metrics-base-port", str(metrics_base)],
        base,
        controller_base,
    )


def wait_closed(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while listening(port):
        assert time.monotonic() < deadline, f"port {port} still listening"
        time.sleep(0.1)


def test_up_writes_configs_starts_everything_and_ctrl_c_stops_it_cleanly(
    cluster_up: Any, tmp_path: Path
) -> None:
    args, base, zk_port = ports_args(2)
    run = cluster_up(*args, "--racks", "east,west", "--config", "num.partitions=4")
    run.wait_for_line("Cluster up.")
    data = tmp_path / "data"

    assert four_letter_word("127.0.0.1", zk_port, b"ruok") == b"imok"
    assert (data / "zookeeper" / "zoo.cfg").is_file()
    for broker_id in (0, 1):
        props = load_properties(data / f"broker-{broker_id}.properties")
        assert props["broker.id"] == str(broker_id)
        assert props["listeners"] == f"PLAINTEXT://localhost:{base + broker_id}"
        assert props["log.dirs"] == str(data / f"broker-{broker_id}")
        assert props["zookeeper.connect"] == f"127.0.0.1:{zk_port}"
        assert props["broker.rack"] == ("east", "west")[broker_id]
        assert props["num.partitions"] == "4"
        assert props["default.replication.factor"] == "2"
        metrics_port = int(props["metrics.listener"].rsplit(":", 1)[1])
        deadline = time.monotonic() + 30  # served once the broker has fully started
        while not listening(metrics_port):
            assert time.monotonic() < deadline, "no metrics endpoint"
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://localhost:{metrics_port}/metrics") as response:
            assert b"kafka_server_replicamanager_partitioncount" in response.read()
        assert listening(base + broker_id)
        assert (data / f"broker-{broker_id}" / "meta.properties").is_file()
    summary = run.wait_for_line("broker 1: ")
    assert f"localhost:{base + 1}" in summary and "broker-1.log" in summary
    assert "metrics http://localhost:" in summary
    # the brokers' output, prefixed, on stdout and in their log files
    run.wait_for_line("[broker-0] ")
    assert "started" in (data / "broker-1.log").read_text()

    run.proc.send_signal(signal.SIGINT)
    status, stderr = run.finish()
    assert status == 0, stderr
    assert "cluster stopped" in run.lines
    for broker_id in (0, 1):
        assert not listening(base + broker_id)
        assert (data / f"broker-{broker_id}" / ".kafka_cleanshutdown").is_file()
    assert not listening(zk_port)


def test_sigterm_stops_the_cluster_and_it_starts_again_on_the_same_data(cluster_up: Any) -> None:
    args, base, _ = ports_args(1)
    first = cluster_up(*args, "--quiet")
    first.wait_for_line("Cluster up.")
    assert not any(line.startswith("[broker-0]") for line in first.lines)
    with logbus.Producer(bootstrap_servers=f"localhost:{base}") as producer:
        producer.send("kept", b"v1").result(30)
    first.proc.send_signal(signal.SIGTERM)
    assert first.finish()[0] == 0

    again = cluster_up(*args)
    again.wait_for_line("Cluster up.")
    with logbus.Consumer(
        bootstrap_servers=f"localhost:{base}", auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([logbus.TopicPartition("kept", 0)])
        deadline = time.monotonic() + 30
        values: list[bytes] = []
        while not values and time.monotonic() < deadline:
            values = [r.value for r in consumer.poll(0.5)]
    assert values == [b"v1"]


def test_a_port_in_use_is_refused_before_anything_starts(cluster_up: Any, tmp_path: Path) -> None:
    args, base, zk_port = ports_args(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        run = cluster_up(*args)
        status, stderr = run.finish()
    assert status == 1
    assert f"port already in use: {base + 1} (broker 1)" in stderr
    assert "--base-port" in stderr
    assert not listening(zk_port) and not listening(base)
    assert not (tmp_path / "data" / "zookeeper" / "zookeeper.log").exists()


def test_a_broker_that_cannot_start_stops_the_cluster(cluster_up: Any) -> None:
    args, base, zk_port = ports_args(2)
    run = cluster_up(*args, "--config", "num.partitions=many")
    status, stderr = run.finish()
    assert status == 1
    assert "exited while starting" in stderr
    assert "num.partitions" in stderr  # the broker's own message, from its log
    assert not listening(zk_port) and not listening(base) and not listening(base + 1)


def test_without_java_it_says_how_to_install_zookeeper(cluster_up: Any) -> None:
    args, _, _ = ports_args(1)
    run = cluster_up(*args, env={**os.environ, "PATH": "/nonexistent"})
    status, stderr = run.finish()
    assert status == 1
    assert "apt-get install zookeeper" in stderr
    assert stderr.count("\n") == 1


def test_an_unreachable_zookeeper_is_reported(cluster_up: Any) -> None:
    args, base, _ = ports_args(1)
    nowhere = f"127.0.0.1:{free_port()}"
    run = cluster_up(*args, "--zookeeper", nowhere)
    status, stderr = run.finish()
    assert status == 1
    assert f"cannot reach ZooKeeper at {nowhere}" in stderr
    assert not listening(base)


def test_a_given_zookeeper_is_used_and_not_stopped(
    cluster_up: Any, cluster_zookeeper: Any, zk_connect: str, tmp_path: Path
) -> None:
    args, _, zk_port = ports_args(1)
    run = cluster_up(*args, "--zookeeper", zk_connect)
    run.wait_for_line("Cluster up.")
    props = load_properties(tmp_path / "data" / "broker-0.properties")
    assert props["zookeeper.connect"] == zk_connect
    assert not (tmp_path / "data" / "zookeeper").exists()
    assert not listening(zk_port)
    run.proc.send_signal(signal.SIGINT)
    assert run.finish()[0] == 0
    host, port = cluster_zookeeper.connect.split(":")
    assert four_letter_word(host, int(port), b"ruok") == b"imok"  # still serving


def test_kill_9_of_cluster_up_leaves_no_process_behind(cluster_up: Any) -> None:
    args, base, zk_port = ports_args(2)
    run = cluster_up(*args)
    run.wait_for_line("Cluster up.")
    run.proc.kill()
    run.finish()
    for port in (base, base + 1, zk_port):
        wait_closed(port)


# --- needs the replicated cluster (zookeeper.connect wired into the broker) -----------------


def test_up_forms_one_cluster_that_topics_describe_shows(cluster_up: Any) -> None:
    args, base, _ = ports_args(3)
    run = cluster_up(*args)
    run.wait_for_line("Cluster up.")
    bootstrap = f"localhost:{base},localhost:{base + 1},localhost:{base + 2}"
    with logbus.Admin(bootstrap_servers=bootstrap) as admin:
        deadline = time.monotonic() + 60
        while len(admin.describe_cluster().nodes) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster = admin.describe_cluster()
        assert sorted(node.node_id for node in cluster.nodes) == [0, 1, 2]
        assert cluster.controller is not None
        admin.create_topics([logbus.NewTopic("replicated", 2, -1)])  # default.replication.factor=3
    described = subprocess.run(
        [*CLI, "topics", "describe", "--topic", "replicated", "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert "\tReplicationFactor: 3\t" in described[0]
    for line in described[1:]:
        fields = dict(f.split(": ", 1) for f in line.strip("\t").split("\t"))
        assert sorted(fields["Replicas"].split(",")) == ["0", "1", "2"]
        assert fields["Leader"] in {"0", "1", "2"}
    under = subprocess.run(
        [
            *CLI,
            "topics",
            "describe",
            "--under-replicated-partitions",
            "--bootstrap-server",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # all replicas join the ISR once they have fetched (nothing to fetch yet)
    assert under.stdout == ""


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def test_a_broker_that_dies_is_reported_and_the_last_one_ends_the_cluster(
    cluster_up: Any,
) -> None:
    args, base, zk_port = ports_args(2)
    run = cluster_up(*args)
    run.wait_for_line("Cluster up.")
    by_port = {}
    for child in children(run.proc.pid):
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"server" in cmdline:
            config = cmdline[-2] if cmdline[-1] == b"" else cmdline[-1]
            by_port[load_properties(config.decode())["listeners"].rsplit(":", 1)[1]] = child
    assert sorted(by_port) == [str(base), str(base + 1)]

    os.kill(by_port[str(base + 1)], signal.SIGKILL)
    run.wait_for_line("broker 1 exited unexpectedly")
    assert listening(base) and listening(zk_port)  # the others keep running

    os.kill(by_port[str(base)], signal.SIGKILL)
    status, _ = run.finish()
    assert status == 1
    assert "every broker has exited" in run.lines
    wait_closed(zk_port)


def test_up_starts_the_schema_registry_and_the_rest_proxy_beside_the_brokers(
    cluster_up: Any,
) -> None:
    import httpx

    args, base, _ = ports_args(3)
    registry_port, proxy_port = free_port(), free_port()
    run = cluster_up(
        *args, "--schema-registry", "--schema-registry-port", str(registry_port),
        "--rest-proxy", "--rest-proxy-port", str(proxy_port),
    )
    run.wait_for_line("Cluster up.")
    assert run.wait_for_line("schema registry: ").startswith(
        f"schema registry: http://localhost:{registry_port}"
    )
    registry, proxy = f"http://127.0.0.1:{registry_port}", f"http://127.0.0.1:{proxy_port}"
    schema = json.dumps({"type": "record", "name": "P",
                         "fields": [{"name": "n", "type": "int"}]})
    # the proxy registers the schema in the registry and produces to a replicated topic
    with logbus.Admin(bootstrap_servers=f"localhost:{base}") as admin:
        admin.create_topics([logbus.NewTopic("points", 1, 3)])
    response = httpx.post(
        f"{proxy}/topics/points",
        content=json.dumps({"value_schema": schema, "records": [{"value": {"n": 7}}]}),
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"}, timeout=60,
    )
    assert response.status_code == 200, response.text
    schema_id = response.json()["value_schema_id"]
    assert httpx.get(f"{registry}/subjects/points-value/versions/1").json()["id"] == schema_id
    with logbus.Admin(bootstrap_servers=f"localhost:{base}") as admin:
        store = admin.describe_topics(["_schemas"])["_schemas"]
        assert store.replication_factor == 3
    run.proc.send_signal(signal.SIGINT)
    status, _ = run.finish()
    assert status == 0
    assert not listening(registry_port) and not listening(proxy_port)


def test_restart_broker_restarts_one_broker_from_its_properties_file(
    cluster_up: Any, tmp_path: Path
) -> None:
    args, base, _ = ports_args(2)
    run = cluster_up(*args, "--quiet")
    run.wait_for_line("Cluster up.")
    data = tmp_path / "data"
    pid_file = data / "broker-1.pid"
    old_pid = int(pid_file.read_text())
    assert old_pid in children(run.proc.pid)

    def restart(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, "cluster", "restart-broker", *extra, "--data-dir", str(data)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    # an edit of the properties file takes effect at the restart
    with (data / "broker-1.properties").open("a") as props:
        props.write("log.dirs=" + ",".join(str(data / d) for d in ("broker-1", "disk2")) + "\n")
    done = restart("1")
    assert done.returncode == 0, done.stderr
    new_pid = int(pid_file.read_text())
    assert done.stdout == f"broker 1 restarted (pid {new_pid})\n"
    assert new_pid != old_pid and new_pid in children(run.proc.pid)
    assert listening(base + 1)
    run.wait_for_line("broker 1 stopped (status 0) and restarted")
    assert (data / "disk2" / "meta.properties").is_file()
    assert not (data / "broker-1.restart").exists()

    missing = restart("7")
    assert missing.returncode == 1
    assert "broker 7 is not running under `logbus cluster up" in missing.stderr

    run.proc.send_signal(signal.SIGINT)
    status, _ = run.finish()
    assert status == 0
    assert not pid_file.exists()


# --- KRaft mode, the default ----------------------------------------------------------------


def confluent_round_trip(bootstrap: str, topic: str, values: list[bytes] | None) -> list[bytes]:
    """With confluent-kafka: once every node is listed, create `topic` (2 partitions, 3
    replicas) and produce `values` with acks=all (unless None); then read it all back."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < 3:
        assert time.monotonic() < deadline, "not every node is listed"
        time.sleep(0.2)
    if values is not None:
        for future in admin.create_topics([NewTopic(topic, 2, 3)]).values():
            future.result(60)
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        assert all(sorted(p.replicas) == [0, 1, 2] for p in partitions.values())
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
        )
        for value in values:
            producer.produce(topic, value)
        assert producer.flush(60) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{time.monotonic()}",
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return sorted(got)


def test_kraft_by_default_combined_nodes_serve_confluent_kafka_and_keep_data_across_runs(
    cluster_up: Any, tmp_path: Path
) -> None:
    args, base, controller_base = kraft_args(3)
    data = tmp_path / "data"
    first = cluster_up(*args, "--quiet")
    first.wait_for_line("Cluster up.")
    formatted = first.wait_for_line("formatted the storage of a new KRaft cluster")
    cluster_id = formatted.rsplit(" ", 1)[1]
    voters = ",".join(f"{n}@localhost:{controller_base + n}" for n in range(3))
    assert f"KRaft mode, controller.quorum.voters={voters}" in first.lines
    assert not (data / "zookeeper").exists()
    for node in range(3):
        props = load_properties(data / f"broker-{node}.properties")
        assert props["process.roles"] == "broker,controller"
        assert props["node.id"] == str(node)
        assert props["listeners"] == (
            f"PLAINTEXT://localhost:{base + node},CONTROLLER://localhost:{controller_base + node}"
        )
        assert props["controller.quorum.voters"] == voters
        meta = load_properties(data / f"broker-{node}" / "meta.properties")
        assert (meta["version"], meta["cluster.id"]) == ("1", cluster_id)
    summary = first.wait_for_line("broker 2: ")
    assert f"controller localhost:{controller_base + 2}" in summary
    bootstrap = ",".join(f"localhost:{base + n}" for n in range(3))
    values = [f"v{i}".encode() for i in range(10)]
    assert confluent_round_trip(bootstrap, "kept", values) == values
    metrics = load_properties(data / "broker-0.properties")["metrics.listener"]
    metrics_port = int(metrics.rsplit(":", 1)[1])
    with urllib.request.urlopen(f"http://localhost:{metrics_port}/metrics") as response:
        assert b"kafka_server_replicamanager_partitioncount" in response.read()
    first.proc.send_signal(signal.SIGINT)
    status, stderr = first.finish()
    assert status == 0, stderr
    assert "cluster stopped" in first.lines
    assert not any(listening(port) for port in (base, base + 2, controller_base + 1))

    again = cluster_up(*args, "--quiet")
    again.wait_for_line("Cluster up.")
    assert f"KRaft cluster {cluster_id}: storage already formatted, kept" in again.lines
    assert confluent_round_trip(bootstrap, "kept", None) == values
    again.proc.send_signal(signal.SIGTERM)
    assert again.finish()[0] == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--mode", "kraft", "--zookeeper", "127.0.0.1:2181"],
         "--mode kraft and --zookeeper cannot be used together"),
        (["--mode", "raft"], "argument --mode: invalid choice: 'raft'"),
    ],
)  # fmt: skip
def test_bad_modes_are_refused_naming_the_flag(
    cluster_up: Any, tmp_path: Path, bad: list[str], message: str
) -> None:
    args, base, _ = kraft_args(1)
    run = cluster_up(*args, *bad)
    status, stderr = run.finish()
    assert status != 0
    assert message in stderr
    assert not listening(base)
    assert not (tmp_path / "data" / "broker-0").exists()


def test_kraft_mode_refuses_a_zookeeper_mode_clusters_data(cluster_up: Any, tmp_path: Path) -> None:
    old = tmp_path / "data" / "broker-0"
    old.mkdir(parents=True)
    (old / "meta.properties").write_text("version=0\nbroker.id=0\ncluster.id=abc\n")
    args, base, _ = kraft_args(1)
    status, stderr = cluster_up(*args).finish()
    assert status == 1
    assert "holds a ZooKeeper-mode broker's data" in stderr and "--mode zookeeper" in stderr
    assert (old / "meta.properties").read_text().startswith("version=0")
    assert not listening(base)


def test_kraft_two_nodes_one_voter_and_restart_broker(cluster_up: Any, tmp_path: Path) -> None:
    """Two nodes: one voter (an odd quorum), node 1 a broker only; `cluster
    restart-broker` restarts it in KRaft mode too."""
    args, base, controller_base = kraft_args(2)
    run = cluster_up(*args, "--quiet")
    run.wait_for_line("Cluster up.")
    data = tmp_path / "data"
    assert f"KRaft mode, controller.quorum.voters=0@localhost:{controller_base}" in run.lines
    node_1 = load_properties(data / "broker-1.properties")
    assert node_1["process.roles"] == "broker"
    assert node_1["listeners"] == f"PLAINTEXT://localhost:{base + 1}"
    old_pid = int((data / "broker-1.pid").read_text())
    done = subprocess.run(
        [*CLI, "cluster", "restart-broker", "1", "--data-dir", str(data)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int((data / "broker-1.pid").read_text()) != old_pid
    run.wait_for_line("broker 1 stopped (status 0) and restarted")
    with logbus.Admin(bootstrap_servers=f"localhost:{base}") as admin:
        deadline = time.monotonic() + 60
        while len(admin.describe_cluster().nodes) < 2:
            assert time.monotonic() < deadline, "broker 1 did not register again"
            time.sleep(0.2)
    run.proc.send_signal(signal.SIGINT)
    assert run.finish()[0] == 0
