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
import base64
import datetime as dt
import http.client
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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

    def __init__(self, work: Path) -> None:
        self.work = work
        self.broker_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.broker_port}"
        self.registry = f"http://127.0.0.1:{free_port()}"
        self.proxy = f"http://127.0.0.1:{free_port()}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, args: list[str]) -> None:
        with (self.work / f"{name}.log").open("wb") as log:
            self.procs.append(subprocess.Popen([*CLI, *args], stdout=log, stderr=log))

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
        for proc in reversed(self.procs):
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

    per_thread = lookups // 4

    host, port = services.registry.removeprefix("http://").split(":")

    def look_up(index: int) -> None:
        # the standard library's client: lighter than httpx, so the client's own cost
        # weighs less on what is measured
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            for n in range(per_thread):
                schema_id = ids[(index * per_thread + n) % len(ids)]
                connection.request("GET", f"/schemas/ids/{schema_id}")
                response = connection.getresponse()
                response.read()
                assert response.status == 200
        finally:
            connection.close()

    lookup_s = in_threads(4, look_up)
    return [
        {"name": "register subjects", "count": subjects, "seconds": register_s,
         "per_s": subjects / register_s},
        {"name": "id lookups", "count": per_thread * 4, "seconds": lookup_s,
         "per_s": per_thread * 4 / lookup_s, "target_per_s": 5000},
    ]


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
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="logbus-http-bench-"))
    services = Services(work)
    try:
        services.start()
        results = bench_registry(services, args.subjects, args.lookups)
        results += bench_proxy(services, args.records)
    finally:
        services.stop()
        shutil.rmtree(work, ignore_errors=True)
    report = {"date": dt.date.today().isoformat(), "commit": commit(), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"http-{report['date']}-{report['commit']}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
