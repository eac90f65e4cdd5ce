"""The HTTP services: the schema registry and the REST proxy (issue 23).

    python -m bench.http_bench [--records N] [--lookups N] [--subjects N] [--out DIR]

Starts a `logbus server start` subprocess, then `logbus schema-registry start` and
`logbus rest-proxy start` subprocesses beside it, all on loopback with data in a temp
directory, and measures, one run each:

- registry id lookups: `GET /schemas/ids/{id}` (the serializers' hot path, which their
  clients cache; not cached here), over 4 keep-alive connections in threads (the
  standard library's HTTP client);
- registering `--subjects` subjects (one schema each), one request at a time;
- proxy produce: v2 JSON produce (`application/vnd.kafka.json.v2+json`) of records with
  1 KiB string values in requests of 100 records, 4 requests in flight, to a topic of 6
  partitions; beside it, in the same run, P1's load: librdkafka producing the same
  number of 1 KiB values (6 partitions, acks=1, linger.ms=5, batch.size=1 MB);
- proxy consume: a binary-format consumer instance assigned the produced topic's
  partitions, reading from offset 0 (records requests until every record came); beside
  it C1's load: a librdkafka consumer reading P1's topic from offset 0.

MB is 10^6 bytes of record values. Writes `bench/results/http-<date>-<commit>.json` and a
Markdown table beside it. Targets: lookups >= 5,000 requests/s; proxy produce >= 0.25x
P1's MB/s; proxy consume >= 0.25x C1's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import json
import multiprocessing
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.profile import Profiler, summarize

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_BYTES = 1024
BATCH = 100
PARTITIONS = 6
CLI = [sys.executable, "-m", "logbus.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout:g} s")
        time.sleep(0.1)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


class Services:
    """The broker, registry and proxy processes of one run."""

    def __init__(self, work: Path, *, profile: bool = False) -> None:
        self.work = work
        self.profile = profile
        self.broker_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.broker_port}"
        self.registry = f"http://127.0.0.1:{free_port()}"
        self.proxy = f"http://127.0.0.1:{free_port()}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, args: list[str]) -> None:
        with (self.work / f"{name}.log").open("wb") as log:
            self.procs[name] = subprocess.Popen([*CLI, *args], stdout=log, stderr=log)

    def pid_of(self, name: str) -> int:
        return self.procs[name].pid

    def start(self) -> None:
        self._spawn("broker", [
            "server", "start", "--override", f"listeners=PLAINTEXT://{self.bootstrap}",
            "--override", f"log.dirs={self.work / 'data'}",
            "--override", "group.initial.rebalance.delay.ms=0",
        ])
        wait_until(lambda: _listening(self.broker_port), "the broker")
        self._spawn("registry", ["schema-registry", "start", "--bootstrap-server",
                                 self.bootstrap, "--listeners", self.registry])
        self._spawn("proxy", ["rest-proxy", "start", "--bootstrap-server", self.bootstrap,
                              "--listeners", self.proxy])
        wait_until(lambda: answers(f"{self.registry}/subjects"), "the registry")
        wait_until(lambda: answers(f"{self.proxy}/topics"), "the proxy")

    def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def in_threads(count: int, work: Callable[[int], None]) -> float:
    """Seconds `count` threads take running work(index)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(work, range(count)))
    return time.perf_counter() - start


def bench_registry(services: Services, subjects: int, lookups: int) -> list[dict[str, Any]]:
    schema = '{"type":"record","name":"R%d","fields":[{"name":"a","type":"int"}]}'
    with httpx.Client(base_url=services.registry, timeout=60) as client:
        # the first registration waits for the registries' group to elect a primary
        client.post("/subjects/warm/versions", json={"schema": schema % 0}).raise_for_status()
        start = time.perf_counter()
        ids = []
        for i in range(subjects):
            response = client.post(f"/subjects/s{i}/versions", json={"schema": schema % i})
            response.raise_for_status()
            ids.append(response.json()["id"])
        register_s = time.perf_counter() - start

    host, port = services.registry.removeprefix("http://").split(":")
    profile = services.work / "registry-lookups.raw" if services.profile else None
    with _profiled(services.pid_of("registry"), profile):
        count, lookup_s = lookup_load(host, int(port), ids, lookups)
    if profile is not None:
        print(summarize(profile))
    return [
        {"name": "register subjects", "count": subjects, "seconds": register_s,
         "per_s": subjects / register_s},
        {"name": "id lookups", "count": count, "seconds": lookup_s,
         "per_s": count / lookup_s, "target_per_s": 5000,
         "load": f"{LOOKUP_PROCESSES} processes x {LOOKUP_CONNECTIONS} keep-alive connections"},
    ]


@contextlib.contextmanager
def _profiled(pid: int, raw_path: Path | None) -> Iterator[None]:
    if raw_path is None:
        yield
        return
    with Profiler(pid, raw_path):
        yield


# The lookup load: several processes (the generator must not be what saturates first on
# 2 cores), each an event loop of asyncio protocols, one a keep-alive connection with
# one request in flight (no pipelining, as the serializers' clients do), parsing only the
# status line and Content-Length of each answer.
LOOKUP_PROCESSES = 2
LOOKUP_CONNECTIONS = 8


class _LookupConnection(asyncio.Protocol):
    """Sends its requests one after another on one connection; `done` gets the count
    answered 200 once the last answer came."""

    def __init__(self, requests: list[bytes], done: asyncio.Future[int]) -> None:
        self.requests = requests
        self.done = done
        self.sent = 0
        self.ok = 0
        self.buffer = b""
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses)
        self.transport = transport

    def start(self) -> None:
        self._send_next()

    def _send_next(self) -> None:
        assert self.transport is not None
        if self.sent == len(self.requests):
            self.transport.close()
            self.done.set_result(self.ok)
            return
        self.transport.write(self.requests[self.sent])
        self.sent += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].lower()
            length_at = head.find(b"content-length:")
            length = int(head[length_at + 15:].split(b"\r\n", 1)[0]) if length_at >= 0 else 0
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            # an answer of 200 with a schema in it
            self.ok += head[9:12] == b"200" and b'"schema":' in self.buffer[head_end:end]
            self.buffer = self.buffer[end:]
            self._send_next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("the registry closed a connection"))


async def _lookup_process(
    host: str, port: int, paths: list[str], connections: int, start: Any
) -> tuple[int, float, float]:
    loop = asyncio.get_running_loop()
    per_connection = [paths[i::connections] for i in range(connections)]
    protocols = []
    for chunk in per_connection:
        requests = [f"GET {p} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() for p in chunk]
        done: asyncio.Future[int] = loop.create_future()
        _, protocol = await loop.create_connection(
            lambda r=requests, d=done: _LookupConnection(r, d), host, port
        )
        protocols.append(protocol)
    await loop.run_in_executor(None, start.wait)  # every process connected: go
    began = time.monotonic()
    for protocol in protocols:
        protocol.start()
    ok = sum(await asyncio.gather(*(p.done for p in protocols)))
    return ok, began, time.monotonic()


def _lookup_worker(host: str, port: int, paths: list[str], connections: int, start: Any,
                   results: Any) -> None:
    try:
        import uvloop
        runner: Callable[..., Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    results.put(runner(_lookup_process(host, port, paths, connections, start)))


def lookup_load(host: str, port: int, ids: list[int], lookups: int) -> tuple[int, float]:
    """`lookups` GETs of /schemas/ids/{id} (cycling over `ids`) from LOOKUP_PROCESSES
    processes: how many were answered 200, and the seconds from the first process's start
    to the last one's end."""
    paths = [f"/schemas/ids/{ids[n % len(ids)]}" for n in range(lookups)]
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(LOOKUP_PROCESSES + 1)
    results = context.Queue()
    workers = [
        context.Process(target=_lookup_worker, args=(
            host, port, paths[i::LOOKUP_PROCESSES], LOOKUP_CONNECTIONS, start, results,
        ))
        for i in range(LOOKUP_PROCESSES)
    ]
    for worker in workers:
        worker.start()
    start.wait(120)
    outcomes = []
    while len(outcomes) < len(workers):
        try:
            outcomes.append(results.get(timeout=5))
        except queue.Empty:
            if not all(worker.is_alive() for worker in workers):
                raise RuntimeError("a lookup process failed (its error is above)") from None
    for worker in workers:
        worker.join(60)
    ok = sum(o[0] for o in outcomes)
    if ok != lookups:
        raise RuntimeError(f"{lookups - ok} of {lookups} lookups were not answered 200")
    return ok, max(o[2] for o in outcomes) - min(o[1] for o in outcomes)


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(60)


def proxy_produce(services: Services, records: int) -> float:
    value = "x" * VALUE_BYTES
    body = json.dumps({"records": [{"value": value}] * BATCH})
    batches = records // BATCH
    counter = iter(range(batches))
    lock = threading.Lock()

    def send(_: int) -> None:
        with httpx.Client(base_url=services.proxy, timeout=120) as client:
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                response = client.post(
                    "/topics/proxied", content=body,
                    headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                )
                response.raise_for_status()

    return in_threads(4, send)


def librdkafka_produce(bootstrap: str, records: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1_000_000})
    value = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce("direct", value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - start


def proxy_consume(services: Services, records: int) -> float:
    with httpx.Client(base_url=services.proxy, timeout=120) as client:
        client.post("/consumers/bench", json={"name": "c", "format": "binary",
                                              "auto.offset.reset": "earliest"},
                    headers={"Content-Type": "application/vnd.kafka.v2+json"})
        base = "/consumers/bench/instances/c"
        # assigned partitions, as C1's consumer has them
        partitions = [{"topic": "proxied", "partition": p} for p in range(PARTITIONS)]
        for path in ("assignments", "positions/beginning"):
            client.post(f"{base}/{path}", json={"partitions": partitions},
                        headers={"Content-Type": "application/vnd.kafka.v2+json"})
        seen = 0
        start = time.perf_counter()
        while seen < records:
            response = client.get(f"{base}/records?timeout=1000",
                                  headers={"Accept": "application/vnd.kafka.binary.v2+json"})
            response.raise_for_status()
            batch = response.json()
            if batch:
                assert len(base64.b64decode(batch[0]["value"])) == VALUE_BYTES + 2
            seen += len(batch)
        seconds = time.perf_counter() - start
        client.delete(base)
    return seconds


def librdkafka_consume(bootstrap: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "c1",
                         "fetch.max.bytes": 64 * 1024 * 1024, "enable.auto.commit": False})
    consumer.assign([TopicPartition("direct", p, 0) for p in range(PARTITIONS)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        batch = consumer.consume(min(10_000, records - seen), 1.0)
        seen += len([m for m in batch if m.error() is None])
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def bench_proxy(services: Services, records: int) -> list[dict[str, Any]]:
    create_topics(services.bootstrap, "proxied", "direct")
    megabytes = records * VALUE_BYTES / 1e6
    timed = [
        ("proxy produce (v2 JSON, 100 a request)", proxy_produce(services, records)),
        ("P1 load (librdkafka produce)", librdkafka_produce(services.bootstrap, records)),
        ("proxy consume (v2 binary)", proxy_consume(services, records)),
        ("C1 load (librdkafka consume)", librdkafka_consume(services.bootstrap, records)),
    ]
    rows: list[dict[str, Any]] = [
        {"name": name, "count": records, "seconds": seconds, "per_s": records / seconds,
         "mb_per_s": megabytes / seconds}
        for name, seconds in timed
    ]
    rows[0]["ratio_to_reference"] = rows[0]["mb_per_s"] / rows[1]["mb_per_s"]
    rows[2]["ratio_to_reference"] = rows[2]["mb_per_s"] / rows[3]["mb_per_s"]
    rows[0]["target_ratio"] = rows[2]["target_ratio"] = 0.25
    return rows


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# HTTP services ({report['date']}, {report['commit']})", "",
        f"Load average (1 min) before and after: {report['load_average'][0]}, "
        f"{report['load_average'][1]}.", "",
        "| what | count | seconds | per s | MB/s | ratio (target) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["results"]:
        mb = f"{row['mb_per_s']:.1f}" if "mb_per_s" in row else "-"
        if "ratio_to_reference" in row:
            ratio = f"{row['ratio_to_reference']:.2f}x (>= {row['target_ratio']}x)"
        elif "target_per_s" in row:
            ratio = f">= {row['target_per_s']:,}/s"
        else:
            ratio = "-"
        lines.append(f"| {row['name']} | {row['count']:,} | {row['seconds']:.2f} | "
                     f"{row['per_s']:,.0f} | {mb} | {ratio} |")
    return "\n".join(lines) + "\n"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--subjects", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--registry-only", action="store_true",
                        help="measure the registry only (no proxy runs)")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy the registry during the lookups and print where its "
                             "time went")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="logbus-http-bench-"))
    services = Services(work, profile=args.profile)
    load_before = os.getloadavg()
    try:
        services.start()
        results = bench_registry(services, args.subjects, args.lookups)
        if not args.registry_only:
            results += bench_proxy(services, args.records)
    finally:
        services.stop()
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "date": dt.date.today().isoformat(), "commit": commit(), "results": results,
        # the machine's 1-minute load average before and after the run: on shared cores
        # every figure depends on it
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"http-{report['date']}-{report['commit']}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
