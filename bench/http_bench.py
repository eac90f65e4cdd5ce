"""The HTTP services: the schema registry and the REST proxy (issue 23).

    python -m bench.http_bench [--records N] [--p1-records N] [--runs N] [--lookups N]
                               [--subjects N] [--out DIR] [--registry-only | --proxy-only]

Starts a `logbus server start` subprocess, then `logbus schema-registry start` and
`logbus rest-proxy start` subprocesses beside it, all on loopback with data in a temp
directory, and measures:

- registry id lookups: `GET /schemas/ids/{id}` (the serializers' hot path, which their
  clients cache; not cached here), from 2 processes of 8 keep-alive connections; one run;
- registering `--subjects` subjects (one schema each), one request at a time; one run;
- proxy produce: v2 JSON produce (`application/vnd.kafka.json.v2+json`) of `--records`
  records with 1 KiB string values in requests of 100 records to a topic of 6
  partitions, from 2 processes of 4 keep-alive connections, every answer checked (each
  record given a partition and an offset, no error) and the topic's end offsets counted
  at the end; in turn with P1's load (`bench.load_kafka.produce`: librdkafka producing
  `--p1-records` 1 KiB values to another topic of 6 partitions, acks=1, linger.ms=5,
  1 MB batches), `--runs` runs of each, reported as the median with min-max, with the
  CPU seconds per GB the proxy and the broker spent;
- proxy consume: a binary-format consumer instance assigned the produced topic's
  partitions, reading `--records` from offset 0; beside it C1's load: a librdkafka
  consumer reading P1's topic from offset 0; one run each.

MB is 10^6 bytes of record values. Writes `bench/results/http-<date>-<commit>.json` and a
Markdown table beside it. Targets: lookups >= 5,000 requests/s; proxy produce >= 0.25x
P1's MB/s (the medians); proxy consume >= 0.25x C1's.
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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import load_kafka
from bench.profile import Profiler, summarize
from bench.progress import Progress
from bench.systems import ResourceSampler

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_BYTES = 1024
BATCH = 100
PARTITIONS = 6
PROXIED = "proxied"  # the proxy's topic
DIRECT = "direct"  # P1's topic
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

    profile = services.work / "registry-lookups.raw" if services.profile else None
    with _profiled(services.pid_of("registry"), profile):
        count, lookup_s = lookup_load(services.registry, ids, lookups)
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


# The HTTP loads (lookups, proxy produce): several processes (the generator must not be
# what saturates first on 2 cores), each an event loop of asyncio protocols, one a
# keep-alive connection with one request in flight (no pipelining, as the serializers'
# clients and Confluent's REST clients do), parsing only the status line and
# Content-Length of each answer and handing the answer's body to a check.
LOOKUP_PROCESSES = 2
LOOKUP_CONNECTIONS = 8
PRODUCE_PROCESSES = 2
PRODUCE_CONNECTIONS = 4


def schema_found(status: bytes, body: bytes) -> int:
    """1 for an id lookup answered 200 with a schema in it."""
    return int(status == b"200" and b'"schema":' in body)


def records_written(status: bytes, body: bytes) -> int:
    """The records of a produce answer that name a partition and an offset and no error
    (0 unless it is a 200)."""
    if status != b"200":
        return 0
    offsets = json.loads(body)["offsets"]
    return sum(
        isinstance(o["partition"], int) and isinstance(o["offset"], int)
        and o["error_code"] is None
        for o in offsets
    )


class _HttpConnection(asyncio.Protocol):
    """Sends `count` requests one after another on one connection (cycling over
    `requests`); `done` gets the sum of `check(status, body)` over the answers once the
    last answer came."""

    def __init__(self, requests: list[bytes], count: int, check: Callable[[bytes, bytes], int],
                 done: asyncio.Future[int]) -> None:
        self.requests = requests
        self.count = count
        self.check = check
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
        if self.sent == self.count:
            self.transport.close()
            self.done.set_result(self.ok)
            return
        self.transport.write(self.requests[self.sent % len(self.requests)])
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
            self.ok += self.check(head[9:12], self.buffer[head_end + 4:end])
            self.buffer = self.buffer[end:]
            self._send_next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("the server closed a connection"))


# One connection's share of a load: the requests it cycles over, and how many it sends.
ConnectionLoad = tuple[list[bytes], int]


async def _load_process(
    host: str, port: int, loads: list[ConnectionLoad], check: Callable[[bytes, bytes], int],
    start: Any,
) -> tuple[int, float, float]:
    loop = asyncio.get_running_loop()
    protocols = []
    for requests, count in loads:
        done: asyncio.Future[int] = loop.create_future()
        _, protocol = await loop.create_connection(
            lambda r=requests, n=count, d=done: _HttpConnection(r, n, check, d), host, port
        )
        protocols.append(protocol)
    await loop.run_in_executor(None, start.wait)  # every process connected: go
    began = time.monotonic()
    for protocol in protocols:
        protocol.start()
    ok = sum(await asyncio.gather(*(p.done for p in protocols)))
    return ok, began, time.monotonic()


def _load_worker(host: str, port: int, loads: list[ConnectionLoad],
                 check: Callable[[bytes, bytes], int], start: Any, results: Any) -> None:
    try:
        import uvloop
        runner: Callable[..., Any] = uvloop.run
    except ImportError:
        runner = asyncio.run
    results.put(runner(_load_process(host, port, loads, check, start)))


def http_load(
    url: str, per_process: list[list[ConnectionLoad]], check: Callable[[bytes, bytes], int]
) -> tuple[int, float]:
    """One process per item of `per_process`, each with those connections: the sum of
    `check` over every answer, and the seconds from the first process's start to the last
    one's end."""
    host, port = url.removeprefix("http://").split(":")
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(len(per_process) + 1)
    results = context.Queue()
    workers = [
        context.Process(target=_load_worker, args=(host, int(port), loads, check, start,
                                                    results))
        for loads in per_process
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
                raise RuntimeError("a load process failed (its error is above)") from None
    for worker in workers:
        worker.join(60)
    ok = sum(o[0] for o in outcomes)
    return ok, max(o[2] for o in outcomes) - min(o[1] for o in outcomes)


def lookup_load(url: str, ids: list[int], lookups: int) -> tuple[int, float]:
    """`lookups` GETs of /schemas/ids/{id} (cycling over `ids`) from LOOKUP_PROCESSES
    processes of LOOKUP_CONNECTIONS connections: how many were answered 200, and the
    seconds they took."""
    host = url.removeprefix("http://")
    requests = [f"GET /schemas/ids/{ids[n % len(ids)]} HTTP/1.1\r\nHost: {host}\r\n\r\n"
                .encode() for n in range(lookups)]
    per_connection = LOOKUP_PROCESSES * LOOKUP_CONNECTIONS
    shares = [requests[i::per_connection] for i in range(per_connection)]
    ok, seconds = http_load(url, [
        [(share, len(share)) for share in shares[p::LOOKUP_PROCESSES]]
        for p in range(LOOKUP_PROCESSES)
    ], schema_found)
    if ok != lookups:
        raise RuntimeError(f"{lookups - ok} of {lookups} lookups were not answered 200")
    return ok, seconds


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(60)


def proxy_produce(services: Services, records: int) -> float:
    """`records` 1 KiB string values through the proxy in v2 JSON requests of BATCH
    records, over PRODUCE_PROCESSES x PRODUCE_CONNECTIONS keep-alive connections; every
    answer must give each record a partition and an offset and no error."""
    host = services.proxy.removeprefix("http://")
    body = json.dumps({"records": [{"value": "x" * VALUE_BYTES}] * BATCH}).encode()
    request = (
        f"POST /topics/{PROXIED} HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/vnd.kafka.json.v2+json\r\n"
        f"Accept: application/vnd.kafka.v2+json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    connections = PRODUCE_PROCESSES * PRODUCE_CONNECTIONS
    requests = records // BATCH
    counts = [requests // connections + (i < requests % connections)
              for i in range(connections)]
    profile = services.work / "proxy-produce.raw" if services.profile else None
    with _profiled(services.pid_of("proxy"), profile):
        written, seconds = http_load(services.proxy, [
            [([request], n) for n in counts[p::PRODUCE_PROCESSES]]
            for p in range(PRODUCE_PROCESSES)
        ], records_written)
    if profile is not None:
        print(summarize(profile))
    if written != requests * BATCH:
        raise RuntimeError(f"{requests * BATCH - written} of {requests * BATCH} records "
                           "were not answered with a partition and an offset")
    return seconds


def librdkafka_produce(bootstrap: str, records: int) -> float:
    """P1's load (bench.load_kafka): `records` 1 KiB values, timed to the last
    acknowledgement."""
    with Progress(live=False) as progress:
        metrics = load_kafka.produce(bootstrap, DIRECT, VALUE_BYTES, records * VALUE_BYTES,
                                     progress)
    return metrics["seconds"]


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of the topic's partitions' end offsets: how many records it holds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


def proxy_consume(services: Services, records: int) -> float:
    with httpx.Client(base_url=services.proxy, timeout=120) as client:
        client.post("/consumers/bench", json={"name": "c", "format": "binary",
                                              "auto.offset.reset": "earliest"},
                    headers={"Content-Type": "application/vnd.kafka.v2+json"})
        base = "/consumers/bench/instances/c"
        # assigned partitions, as C1's consumer has them
        partitions = [{"topic": PROXIED, "partition": p} for p in range(PARTITIONS)]
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
    consumer.assign([TopicPartition(DIRECT, p, 0) for p in range(PARTITIONS)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        batch = consumer.consume(min(10_000, records - seen), 1.0)
        seen += len([m for m in batch if m.error() is None])
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def produce_rows(services: Services, records: int, p1_records: int,
                 runs: int) -> list[dict[str, Any]]:
    """Proxy produce and P1, run after run in turn (so both meet the same machine load):
    the median of `runs` with min-max, and the CPU seconds the proxy and the broker spent
    per GB (on shared cores, steadier than the rates)."""
    proxy_s: list[float] = []
    p1_s: list[float] = []
    cpu: dict[str, list[float]] = {"proxy": [], "broker": [], "p1 broker": []}
    for _ in range(runs):
        with (ResourceSampler(services.pid_of("proxy")) as proxy_cpu,
              ResourceSampler(services.pid_of("broker")) as broker_cpu):
            proxy_s.append(proxy_produce(services, records))
        cpu["proxy"].append(proxy_cpu.usage.cpu_seconds)
        cpu["broker"].append(broker_cpu.usage.cpu_seconds)
        with ResourceSampler(services.pid_of("broker")) as broker_cpu:
            p1_s.append(librdkafka_produce(services.bootstrap, p1_records))
        cpu["p1 broker"].append(broker_cpu.usage.cpu_seconds)
    stored = end_offsets(services.bootstrap, PROXIED)
    if stored != runs * records:
        raise RuntimeError(f"{PROXIED} holds {stored} records, not {runs * records}")
    proxy_gb = records * VALUE_BYTES / 1e9
    p1_gb = p1_records * VALUE_BYTES / 1e9
    rows = [
        timed_row("proxy produce (v2 JSON, 100 a request)", records, proxy_s,
                  load=f"{PRODUCE_PROCESSES} processes x {PRODUCE_CONNECTIONS} keep-alive "
                       "connections, one request in flight each",
                  cpu_s_per_gb={"proxy": summary([c / proxy_gb for c in cpu["proxy"]]),
                                "broker": summary([c / proxy_gb for c in cpu["broker"]])}),
        timed_row("P1 load (librdkafka produce)", p1_records, p1_s,
                  cpu_s_per_gb={"broker": summary([c / p1_gb for c in cpu["p1 broker"]])}),
    ]
    rows[0]["ratio_to_reference"] = rows[0]["mb_per_s"]["median"] / rows[1]["mb_per_s"]["median"]
    rows[0]["target_ratio"] = 0.25
    return rows


def timed_row(name: str, count: int, seconds: list[float], **extra: Any) -> dict[str, Any]:
    megabytes = count * VALUE_BYTES / 1e6
    return {
        "name": name, "count": count, "runs": len(seconds), "seconds": summary(seconds),
        "per_s": summary([count / s for s in seconds]),
        "mb_per_s": summary([megabytes / s for s in seconds]), **extra,
    }


def bench_proxy(services: Services, records: int, p1_records: int,
                runs: int) -> list[dict[str, Any]]:
    create_topics(services.bootstrap, PROXIED, DIRECT)
    rows = produce_rows(services, records, p1_records, runs)
    consume = [
        timed_row("proxy consume (v2 binary)", records, [proxy_consume(services, records)]),
        timed_row("C1 load (librdkafka consume)", records,
                  [librdkafka_consume(services.bootstrap, records)]),
    ]
    consume[0]["ratio_to_reference"] = (
        consume[0]["mb_per_s"]["median"] / consume[1]["mb_per_s"]["median"]
    )
    consume[0]["target_ratio"] = 0.25
    return rows + consume


def _figure(value: Any, fmt: str) -> str:
    """A figure, or a median with its min-max for a measurement of several runs."""
    if not isinstance(value, dict):
        return format(value, fmt)
    median = format(value["median"], fmt)
    if len(value["values"]) == 1:
        return median
    return f"{median} ({format(value['min'], fmt)}-{format(value['max'], fmt)})"


def _cpu(row: dict[str, Any]) -> str:
    spent = row.get("cpu_s_per_gb")
    if not spent:
        return "-"
    return ", ".join(f"{name} {_figure(value, '.1f')}" for name, value in spent.items())


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# HTTP services ({report['date']}, {report['commit']})", "",
        f"Load average (1 min) before and after: {report['load_average'][0]}, "
        f"{report['load_average'][1]}. Several runs: median (min-max).", "",
        "| what | count | runs | seconds | per s | MB/s | ratio (target) | CPU s per GB | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["results"]:
        mb = _figure(row["mb_per_s"], ".1f") if "mb_per_s" in row else "-"
        if "ratio_to_reference" in row:
            ratio = f"{row['ratio_to_reference']:.2f}x (>= {row['target_ratio']}x)"
        elif "target_per_s" in row:
            ratio = f">= {row['target_per_s']:,}/s"
        else:
            ratio = "-"
        lines.append(
            f"| {row['name']} | {row['count']:,} | {row.get('runs', 1)} | "
            f"{_figure(row['seconds'], '.2f')} | {_figure(row['per_s'], ',.0f')} | {mb} | "
            f"{ratio} | {_cpu(row)} | {row.get('load', '-')} |"
        )
    return "\n".join(lines) + "\n"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000,
                        help="records the proxy produces (and consumes) per run")
    parser.add_argument("--p1-records", type=int, default=2_000_000,
                        help="records P1's librdkafka load produces per run")
    parser.add_argument("--runs", type=int, default=3,
                        help="runs of proxy produce and of P1, in turn (median, min-max)")
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--subjects", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--registry-only", action="store_true",
                        help="measure the registry only (no proxy runs)")
    parser.add_argument("--proxy-only", action="store_true",
                        help="measure the proxy only (no registry runs)")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy the registry during the lookups and the proxy during "
                             "its produce runs, and print where their time went")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="logbus-http-bench-"))
    services = Services(work, profile=args.profile)
    load_before = os.getloadavg()
    try:
        services.start()
        results = [] if args.proxy_only else bench_registry(services, args.subjects,
                                                            args.lookups)
        if not args.registry_only:
            results += bench_proxy(services, args.records, args.p1_records, args.runs)
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
