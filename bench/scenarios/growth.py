"""S1: cost as the work grows (issue 21). The same broker work, spread wider:

- produce P1's 1 KiB load over 6 partitions and over 1,000 (the same bytes; librdkafka,
  P1's settings), on the shared broker; target: 1,000 partitions >= 0.7x 6;
- 1,000 idle client connections (each made, ApiVersions and Metadata answered, then
  silent): the broker's memory for them and its CPU while they sit idle, then the 6
  partition load again with them open; target: >= 0.9x without them;
- one broker hosting 10,000 partitions (10 topics of 1,000, a record in each): the time
  from starting the process to serving (a produce to the last partition of every topic
  acknowledged) after a clean shutdown and after kill -9 (every partition with a record
  past its recovery point, so each log is recovered), its resident memory when serving
  and the memory per partition above an empty broker's; targets: <= 10 s, <= 30 s,
  <= 500 MB. This broker is a second one, started by the scenario's first run (topic
  creation and the first records are not measured) and stopped with the others; the
  case runs once whatever --runs says (creating 10,000 partitions and shutting them down
  cleanly take minutes on 2 cores).

The figures go into their own plot (`-growth.png`, bench/report.py)."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.common import KIB, PARTITIONS, with_resources
from bench.scenarios.produce import THROUGHPUT
from bench.systems import LogbusBroker, ResourceSampler, Server, wait_listening

HOSTED_TOPIC_PARTITIONS = 1000  # the 10,000 partitions come as topics of this many
# what the issue allows
RESTART_BUDGET_S = 10.0
KILL_RESTART_BUDGET_S = 30.0
RSS_BUDGET_MB = 500.0
IDLE_SECONDS = 5.0
START_TIMEOUT_S = 300.0
# The hosted partitions' broker: reached through ctx.own_server, recorded in ctx.datasets.
HOSTED = "growth/hosted"

METRICS: dict[str, tuple[str, bool]] = {
    **THROUGHPUT,
    "shutdown_s": ("clean shutdown, s", False),
    "restart_s": ("clean restart to serving, s", False),
    "kill_restart_s": ("kill -9 to serving, s", False),
    "serving_rss_mb": ("RSS serving, MB", False),
    "kb_per_partition": ("KB per partition", False),
    "idle_rss_mb": ("RSS for the idle connections, MB", False),
    "kb_per_connection": ("KB per connection", False),
    "idle_cpu_pct": ("broker CPU while idle, %", False),
    "restart_budget_s": ("restart budget, s", False),
    "kill_restart_budget_s": ("kill -9 budget, s", False),
    "rss_budget_mb": ("RSS budget, MB", False),
}


# -- produce over more partitions ---------------------------------------------------------


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """CreateTopics, waited for as long as thousands of partitions take on 2 loaded cores
    (each new log costs fsyncs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)],
                                  operation_timeout=START_TIMEOUT_S,
                                  request_timeout=START_TIMEOUT_S)
    for future in futures.values():
        future.result(START_TIMEOUT_S)


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=START_TIMEOUT_S,
                                      request_timeout=START_TIMEOUT_S).values():
        future.result(START_TIMEOUT_S)


def _wait_removed(broker: LogbusBroker, topic: str) -> None:
    """Until the deleted topic's directories are gone: removing 1,000 of them must not
    run under the next measured run."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while any(p.name.startswith(f"{topic}-") for p in broker.data_dir.iterdir()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the directories of {topic} were not removed")
        time.sleep(0.2)


def _produce(ctx: Context, partitions: int) -> Metrics:
    server = ctx.logbus()
    topic = load_kafka.unique_name(f"S1-{partitions}")
    _create_topic(server.bootstrap, topic, partitions)
    # CreateTopics is answered before the broker has made every log (as Kafka's, whose
    # logs come with LeaderAndIsr): a record to each partition first, so that making 1,000
    # logs (fsyncs each) does not run under the measured load.
    _one_record_each(server.bootstrap, [(topic, partitions)])

    def run() -> Metrics:
        metrics = load_kafka.produce(server.bootstrap, topic, KIB, ctx.scale.produce_bytes,
                                     ctx.progress)
        metrics["bytes"] = float(KIB)
        return metrics

    try:
        metrics = with_resources(server, run)
        metrics.pop("written")
        return metrics
    finally:
        _delete_topic(server.bootstrap, topic)
        _wait_removed(server, topic)


def _produce_run(partitions: int) -> Any:
    return lambda ctx: _produce(ctx, partitions)


# -- idle connections ---------------------------------------------------------------------

_SIZE = struct.Struct(">i")
_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
_METADATA_V1_ALL = struct.pack(">hhih", 3, 1, 2, 5) + b"bench" + struct.pack(">i", -1)


def _ask(sock: socket.socket, request: bytes) -> None:
    sock.sendall(_SIZE.pack(len(request)) + request)
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the broker closed an idle connection")
        head += chunk
    (left,) = _SIZE.unpack(head)
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("the broker closed an idle connection")
        left -= len(chunk)


def _open_idle(bootstrap: str, count: int) -> list[socket.socket]:
    """`count` connections, each answered an ApiVersions and a Metadata, as a client's."""
    host, _, port = bootstrap.rpartition(":")
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, int(port)))
            socks.append(sock)
            _ask(sock, _API_VERSIONS_V0)
            _ask(sock, _METADATA_V1_ALL)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def _rss(server: Server) -> int:
    return ResourceSampler(server.pid)._rss()


def _idle_connections(ctx: Context) -> Metrics:
    server = ctx.logbus()
    count = ctx.scale.idle_connections
    before = _rss(server)
    ctx.progress.note(f"S1: opening {count:,} idle connections")
    socks = _open_idle(server.bootstrap, count)
    try:
        time.sleep(1.0)
        grown = _rss(server) - before
        with server.sampler() as idle:
            time.sleep(IDLE_SECONDS)
        metrics = _produce(ctx, PARTITIONS)
        metrics["idle_rss_mb"] = grown / 1e6
        metrics["kb_per_connection"] = grown / count / 1e3
        metrics["idle_cpu_pct"] = 100 * idle.usage.cpu_seconds / IDLE_SECONDS
        return metrics
    finally:
        for sock in socks:
            sock.close()


# -- a broker hosting many partitions -----------------------------------------------------


def _hosted_topics(ctx: Context) -> list[tuple[str, int]]:
    """(topic, partitions) for the hosted partitions of this scale."""
    total = ctx.scale.hosted_partitions
    per = min(HOSTED_TOPIC_PARTITIONS, total)
    return [(f"S1-hosted-{i}", min(per, total - i * per)) for i in range((total + per - 1) // per)]


def _one_record_each(bootstrap: str, topics: list[tuple[str, int]]) -> None:
    producer = Producer(load_kafka.producer_config(
        bootstrap, **{"linger.ms": 50, "message.timeout.ms": 600_000}))
    errors = load_kafka.DeliveryErrors()
    for topic, partitions in topics:
        for partition in range(partitions):
            while True:
                try:
                    producer.produce(topic, b"x" * 100, partition=partition, on_delivery=errors)
                    break
                except BufferError:
                    producer.poll(0.01)
    if producer.flush(600):
        raise RuntimeError("records to the hosted partitions not acknowledged in 600 s")
    errors.check()


def _hosted_broker(ctx: Context) -> LogbusBroker:
    broker = ctx.own_server("logbus-hosted", lambda workdir: LogbusBroker(workdir))
    assert isinstance(broker, LogbusBroker)
    if HOSTED not in ctx.datasets:
        empty_rss = _rss(broker)
        topics = _hosted_topics(ctx)
        total = sum(n for _t, n in topics)
        ctx.progress.note(f"S1: creating {total:,} partitions on a broker of their own")
        for topic, partitions in topics:
            _create_topic(broker.bootstrap, topic, partitions)
        _one_record_each(broker.bootstrap, topics)
        ctx.datasets[HOSTED] = {"topics": topics, "empty_rss": empty_rss}
    return broker


def _start_timed(broker: LogbusBroker, topics: list[tuple[str, int]]) -> float:
    """Start the broker's process; seconds until a produce to the last partition of every
    topic is acknowledged."""
    assert broker.proc is None or broker.proc.poll() is not None
    with open(broker.log, "ab") as log:
        start = time.perf_counter()
        broker.proc = subprocess.Popen(broker.command(), stdout=log, stderr=log,
                                       env=broker.env(), cwd=broker.workdir)
    wait_listening(broker.proc, broker.port, broker.name, broker.log, timeout=START_TIMEOUT_S)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0,
        "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
        "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
        "topic.metadata.refresh.fast.interval.ms": 50,
        "message.timeout.ms": int(START_TIMEOUT_S * 1000), "log_level": 0,
    })
    errors = load_kafka.DeliveryErrors()
    for topic, partitions in topics:
        producer.produce(topic, b"serving?", partition=partitions - 1, on_delivery=errors)
    if producer.flush(START_TIMEOUT_S):
        raise RuntimeError(f"the broker was not serving {START_TIMEOUT_S:.0f} s after its start")
    elapsed = time.perf_counter() - start
    errors.check()
    return elapsed


def _stop(broker: LogbusBroker, sig: signal.Signals) -> float:
    """Seconds from the signal to the process's exit (a clean shutdown closes every log:
    a flush and a producer snapshot each)."""
    assert broker.proc is not None
    start = time.perf_counter()
    broker.proc.send_signal(sig)
    broker.proc.wait(START_TIMEOUT_S)
    return time.perf_counter() - start


def _hosted_restarts(ctx: Context) -> Metrics:
    broker = _hosted_broker(ctx)
    hosted = ctx.datasets[HOSTED]
    topics = hosted["topics"]
    total = sum(n for _t, n in topics)
    ctx.progress.note(f"S1: clean restart of the broker hosting {total:,} partitions")
    shutdown = _stop(broker, signal.SIGTERM)
    restart = _start_timed(broker, topics)
    time.sleep(1.0)
    rss = _rss(broker)
    _one_record_each(broker.bootstrap, topics)  # past every recovery point
    ctx.progress.note(f"S1: kill -9 of the broker hosting {total:,} partitions")
    _stop(broker, signal.SIGKILL)
    kill_restart = _start_timed(broker, topics)
    return {
        "shutdown_s": shutdown,
        "restart_s": restart,
        "kill_restart_s": kill_restart,
        "serving_rss_mb": rss / 1e6,
        "kb_per_partition": (rss - hosted["empty_rss"]) / total / 1e3,
        "restart_budget_s": RESTART_BUDGET_S,
        "kill_restart_budget_s": KILL_RESTART_BUDGET_S,
        "rss_budget_mb": RSS_BUDGET_MB,
    }


def _cases(ctx: Context) -> list[Case]:
    scale = ctx.scale
    volume = f"{scale.produce_bytes >> 20} MiB per run"
    return [
        Case(f"1 KiB, {PARTITIONS} partitions", "logbus", _produce_run(PARTITIONS), note=volume),
        Case(f"1 KiB, {scale.many_partitions:,} partitions", "logbus",
             _produce_run(scale.many_partitions), note=volume),
        Case(f"1 KiB, {PARTITIONS} partitions, {scale.idle_connections:,} idle connections",
             "logbus", _idle_connections,
             note=f"{volume}; RSS and CPU: the connections alone, before the load"),
        # One run: creating the partitions and a clean shutdown take minutes on 2 cores.
        Case(f"{scale.hosted_partitions:,} partitions hosted", "logbus", _hosted_restarts,
             runs=1,
             note="one run; KB per partition: RSS above an empty broker's; serving: a "
             "produce to the last partition of each of its topics acknowledged"),
    ]


S1 = Scenario("S1", "Cost as the work grows", _cases, METRICS,
              "1 KiB values as P1 over 6 and over many partitions, with idle connections "
              "open; restarts and memory of a broker hosting many partitions")
