"""The Spark tests' helpers: topics made and filled with confluent-kafka, a `logbus`
reader, records read back (confluent-kafka, read_committed or not), the exactly-once
job (eos_job.py) run as a process of its own, and Spark's own processes for the cluster
tests (a standalone Master and Workers, a Spark Connect server, cluster_job.py as their
driver). The SparkSession is conftest.py's `spark` fixture."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import venv
import zipfile
from pathlib import Path
from typing import Any

import pyspark
from cluster_processes import ProcessCluster, free_port
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import logbus
from kafka_wire import wait_for


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
    )
    futures[name].result(30)


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int | None = None,
    keys: list[bytes | None] | None = None,
    headers: list[Any] | None = None,
    timestamps: list[int] | None = None,
    **config: Any,
) -> None:
    """Write records with confluent-kafka and wait until every one is acknowledged."""
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5}
        | {k.replace("_", "."): v for k, v in config.items()}
    )
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i, value in enumerate(values):
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if keys is not None:
            extra["key"] = keys[i]
        if headers is not None:
            extra["headers"] = headers[i]
        if timestamps is not None:
            extra["timestamp"] = timestamps[i]
        producer.produce(topic, value, on_delivery=report, **extra)
    assert producer.flush(30) == 0
    assert not errors, errors


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    """`spark.read.format("logbus")` with the bootstrap servers and `options` set."""
    builder = spark.read.format("logbus").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of `topic` read with confluent-kafka, waiting until `expected` arrived."""
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Any] = []
        deadline = time.monotonic() + 60
        while len(records) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append(msg)
        assert len(records) == expected
        # Nothing more than expected arrives either.
        assert consumer.poll(1.0) is None
        return records
    finally:
        consumer.close()


JOB = Path(__file__).with_name("eos_job.py")


def read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 of `topic` up to its end, read with `isolation`."""
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
        raise AssertionError(f"{topic} not read to its end in 60 s")
    finally:
        consumer.close()


class Job:
    """eos_job.py in a process group of its own (its JVM and Python workers with it)."""

    def __init__(self, bootstrap: str, tmp: Path, *extra: str) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        self.log = (tmp / f"job-{time.monotonic_ns()}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), "--bootstrap", bootstrap, "--source", "in",
             "--out", "out", "--checkpoint", str(tmp / "checkpoint"), "--prefix", "copy",
             *extra],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def wait(self, timeout: float = 300) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        try:
            self.kill()
        except ProcessLookupError:
            self.proc.wait(30)
        self.log.close()


def output(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp.glob("job-*.log"))


def transactional_cluster(zk_connect: str, tmp_path: Path) -> ProcessCluster:
    """Three broker processes on ZooKeeper for the Spark cluster tests: min.insync 2, the
    transaction and offsets topics small and replicated three times, groups formed at
    once. Use it in a `with` block."""
    return ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        min_insync_replicas="2",
        transaction_state_log_num_partitions="3",
        transaction_state_log_replication_factor="3",
        transaction_state_log_min_isr="2",
        offsets_topic_num_partitions="3",
        group_initial_rebalance_delay_ms="0",
    )


# --- Spark's own processes: a standalone cluster, a Spark Connect server, a driver -------

SPARK_HOME = Path(pyspark.__file__).parent
CLUSTER_JOB = Path(__file__).with_name("cluster_job.py")
# Spark's settings for a session on the standalone cluster or the Connect server: small
# executors (one core each, one per worker), loopback only, patient Python workers (they
# start slowly on a busy machine; the default wait is 15 s).
CLUSTER_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "512m",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.authenticate.socketTimeout": "120s",
}


def spark_env() -> dict[str, str]:
    """The environment of every Spark process the cluster tests start, as a worker machine
    would have it: Spark's home, loopback, this virtualenv's Python for Python workers
    (logbus is installed in it), and no PYTHONPATH nor the test process's Spark Connect
    markers: executors import logbus from their own Python, nothing comes from the driver."""
    left_out = {"PYTHONPATH", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"}
    return {k: v for k, v in os.environ.items() if k not in left_out} | {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }


class SparkProcess:
    """A Spark JVM (Master, Worker, Connect server) or a driver script, in a process group
    of its own (with the executors and Python workers it starts) and logging to a file."""

    def __init__(
        self, args: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.log_path = log
        with log.open("ab") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                args, env=spark_env() | (env or {}), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def logged(self, text: str) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"exited with {self.proc.returncode}:\n{self.log_tail()}")
        return text in self.log_path.read_text(errors="replace")

    def wait_logged(self, text: str, timeout: float = 300) -> None:
        try:
            wait_for(lambda: self.logged(text), timeout, 0.2, what=repr(text))
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.log_tail()}") from None

    def log_tail(self, chars: int = 4000) -> str:
        return f"--- {self.log_path.name}:\n" + self.log_path.read_text(errors="replace")[-chars:]

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


class StandaloneCluster:
    """Spark's standalone cluster manager from the installed PySpark: one Master and
    `workers` Workers (`spark-class org.apache.spark.deploy.master.Master` / `...Worker`),
    started together on loopback, each Worker offering one core and 1 GiB to executors.
    `url` is the master URL a driver or a Connect server gives as `--master`; `env` adds
    to the daemons' environment (`spark_env()`). Use it in a `with` block."""

    def __init__(self, tmp: Path, workers: int = 2, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.env = env or {}
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.worker_dirs = [tmp / f"worker-{n}" for n in range(workers)]
        self.processes: list[SparkProcess] = []

    def __enter__(self) -> StandaloneCluster:
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        try:
            master = self._start(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(self.port), "--webui-port", "0"],
                "master",
            )
            workers = [
                self._start(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host",
                     "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1",
                     "--memory", "1g", "--work-dir", str(work_dir), self.url],
                    work_dir.name,
                )
                for work_dir in self.worker_dirs
            ]
            master.wait_logged(f"Starting Spark master at {self.url}")
            for worker in workers:
                worker.wait_logged("Successfully registered with master")
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, args: list[str], name: str) -> SparkProcess:
        home = self.tmp / name
        home.mkdir(exist_ok=True)
        # the heap of the Master and Worker daemons themselves (the Connect server would
        # take it for its driver: spark-submit gives that class the daemons' setting)
        daemon = self.env | {"SPARK_DAEMON_MEMORY": "256m"}
        process = SparkProcess(args, self.tmp / f"{name}.log", home, daemon)
        self.processes.append(process)
        return process

    def executor_logs(self, app_id: str) -> list[Path]:
        """The stderr of every executor the Workers ran for application `app_id`."""
        return sorted(p for d in self.worker_dirs for p in d.glob(f"{app_id}/*/stderr"))

    def log_tails(self) -> str:
        return "\n".join(p.log_tail(2000) for p in self.processes)

    def close(self) -> None:
        for process in reversed(self.processes):
            process.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConnectServer:
    """A Spark Connect server (`spark-submit --class ...SparkConnectServer`, the jar ships
    in PySpark) on loopback, its driver on `master`; clients use `url`. Use it in a `with`
    block."""

    def __init__(self, tmp: Path, master: str) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        conf = CLUSTER_CONF | {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.pyspark.python": sys.executable,
        }
        self.args = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master", master, "--name", "logbus-connect-tests",
            *(arg for name, value in conf.items() for arg in ("--conf", f"{name}={value}")),
        ]
        self.process: SparkProcess | None = None

    def __enter__(self) -> ConnectServer:
        home = self.tmp / "connect-server"
        home.mkdir(exist_ok=True)
        self.process = SparkProcess(self.args, self.tmp / "connect-server.log", home)
        try:
            self.process.wait_logged("Spark Connect server started at")
        except BaseException:
            self.process.close()
            raise
        return self

    def log_tail(self) -> str:
        return self.process.log_tail() if self.process is not None else ""

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.close()


def run_cluster_job(
    tmp: Path, session: list[str], *args: str, timeout: float = 900,
    env: dict[str, str] | None = None,
) -> Any:
    """Run cluster_job.py as a driver of its own (`session`: `--master URL` or `--remote
    URL`; `env` over `spark_env()`) in `tmp`, and return the JSON report it prints last."""
    log = tmp / "cluster-job.log"
    job = SparkProcess([sys.executable, str(CLUSTER_JOB), *session, *args], log, tmp, env)
    try:
        returncode = job.proc.wait(timeout)
    finally:
        job.close()
    text = log.read_text(errors="replace")
    assert returncode == 0, job.log_tail(6000)
    return json.loads(text.strip().splitlines()[-1])


# --- workers whose Python lacks logbus, and logbus shipped to them ---------------------------


def python_without_logbus(tmp: Path) -> Path:
    """A virtualenv that sees this one's packages (a path entry to its site-packages, whose
    own .pth files, logbus's development install among them, are not read) but not logbus:
    the Python of worker machines that have logbus's dependencies and not logbus."""
    venv.create(tmp / "workers-venv", with_pip=False)
    [site_packages] = (tmp / "workers-venv" / "lib").glob("python*/site-packages")
    (site_packages / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = tmp / "workers-venv" / "bin" / "python"
    # Without the PYTHONPATH the session's SparkSession fixture sets for its executors.
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([python, "-c", "import numpy, pyarrow, pyspark; import logbus"],
                           capture_output=True, text=True, timeout=120, cwd=tmp, env=clean)
    assert "No module named 'logbus'" in probe.stderr, probe.stderr
    return python


def _package_files(compiled: bool) -> list[Path]:
    package = Path(logbus.__file__).parent
    return [
        file for file in sorted(package.rglob("*"))
        if file.is_file() and "__pycache__" not in file.parts
        and (compiled or file.suffix != ".so")
    ]


def logbus_zip(tmp: Path) -> Path:
    """The logbus package as a zip for --py-files (pure Python: the compiled record walker
    has a numpy fallback, and Python cannot import a compiled module from a zip)."""
    package = Path(logbus.__file__).parent
    path = tmp / "logbus.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in _package_files(compiled=False):
            archive.write(file, file.relative_to(package.parent))
    return path


def logbus_archive(tmp: Path) -> Path:
    """docs/spark.md's `logbus.tar.gz` for `spark.archives=logbus.tar.gz#logbus`: the
    files of the `logbus` package directory (its compiled helper too, built for the
    workers' Python) at the archive's top, as `tar -czf logbus.tar.gz -C <package dir> .`
    packs them."""
    package = Path(logbus.__file__).parent
    path = tmp / "logbus.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for file in _package_files(compiled=True):
            archive.add(file, str(file.relative_to(package)))
    return path
