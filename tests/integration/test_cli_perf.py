"""`logbus perf` and `logbus get-offsets` as subprocesses against a real broker, checked
with third-party clients (kcat, confluent-kafka)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTP

import logbus

CLI = [sys.executable, "-m", "logbus.cli.main"]
FINAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)
WINDOW = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency\.$"
)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def create(broker: Any, topic: str, partitions: int) -> None:
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, partitions, 1)])


def kcat_count(bootstrap: str, topic: str) -> int:
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
         "-f", "%p:%o\\n"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    return len(out.splitlines())


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return {
            p: consumer.get_watermark_offsets(ConfluentTP(topic, p), timeout=10)
            for p in range(partitions)
        }
    finally:
        consumer.close()


def produce_perf(broker: Any, topic: str, n: int, *extra: str) -> list[str]:
    return ok(run_cli(
        "perf", "produce", "--topic", topic, "--num-records", str(n), "--bootstrap-server",
        broker.bootstrap, *extra,
    )).splitlines()


def test_perf_produce_sends_every_record_and_reports_consistent_numbers(broker: Any) -> None:
    create(broker, "perf", 3)
    n, size = 5000, 200
    lines = produce_perf(broker, "perf", n, "--record-size", str(size), "--throughput", "-1",
                         "--producer-props", "acks=1", "linger.ms=5")
    final = FINAL.match(lines[-1])
    assert final, lines
    count, rate, mb_s, avg, peak, p50, p95, p99, p999 = final.groups()
    assert int(count) == n
    # records/sec and MB/sec describe the same run: MB = records x size / 2**20.
    assert float(mb_s) == pytest.approx(float(rate) * size / 2**20, rel=0.02, abs=0.01)
    assert float(avg) <= float(peak)
    assert int(p50) <= int(p95) <= int(p99) <= int(p999) <= float(peak)
    for line in lines[:-1]:
        assert WINDOW.match(line), line
    if shutil.which("kcat"):
        assert kcat_count(broker.bootstrap, "perf") == n
    assert sum(hi - lo for lo, hi in watermarks(broker.bootstrap, "perf", 3).values()) == n


def test_perf_produce_throttles_and_reads_payload_files(broker: Any, tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n")
    lines = produce_perf(broker, "throttled", 600, "--payload-file", str(payloads),
                         "--throughput", "1000")
    final = FINAL.match(lines[-1])
    assert final and int(final.group(1)) == 600
    # Throttled to 1000 records/s: never faster than that (it may be slower).
    assert float(final.group(2)) <= 1000 * 1.05
    values = set()
    with logbus.Consumer({"bootstrap.servers": broker.bootstrap},
                         auto_offset_reset="earliest") as consumer:
        consumer.assign([logbus.TopicPartition("throttled", 0)])
        got = 0
        while got < 600:
            records = consumer.poll(1.0)
            got += len(records)
            values.update(r.value for r in records)
    assert values <= {b"alpha", b"beta", b"gamma"} and len(values) > 1


def test_perf_produce_prints_the_producers_metrics(broker: Any) -> None:
    lines = produce_perf(broker, "metered", 300, "--record-size", "10", "--throughput", "-1",
                         "--print-metrics")
    table = {
        name.strip(): float(value)
        for name, value in (line.split(" : ") for line in lines if line.startswith("producer-"))
    }
    assert table["producer-metrics:record-send-total"] == 300
    assert table["producer-metrics:record-error-total"] == 0


def test_perf_consume_reads_what_perf_produce_sent(broker: Any) -> None:
    create(broker, "readme", 2)
    n, size = 2000, 100
    produce_perf(broker, "readme", n, "--record-size", str(size), "--throughput", "-1")
    out = ok(run_cli("perf", "consume", "--topic", "readme", "--messages", str(n),
                     "--group", "perf-g", "--bootstrap-server", broker.bootstrap,
                     "--print-metrics"))
    lines = out.splitlines()
    assert lines[0].startswith("start.time, end.time, data.consumed.in.MB, MB.sec")
    fields = [f.strip() for f in lines[1].split(",")]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert float(fields[2]) == pytest.approx(n * size / 2**20, abs=1e-4)
    assert int(fields[4]) == n
    rebalance_ms, fetch_ms = int(fields[6]), int(fields[7])
    assert rebalance_ms >= 0 and fetch_ms >= 0
    assert "consumer-metrics:records-consumed-total : 2000.000" in out.replace("  ", "")


def test_perf_consume_times_out_with_kafkas_warning(broker_factory: Any) -> None:
    # --timeout counts from the subscription, joining included (as in Kafka's tool): no
    # initial rebalance delay, and 5 s, so that a join on a busy machine fits.
    broker = broker_factory(group_initial_rebalance_delay_ms="0")
    create(broker, "short", 1)
    produce_perf(broker, "short", 10, "--record-size", "10", "--throughput", "-1")
    result = run_cli("perf", "consume", "--topic", "short", "--messages", "50", "--timeout",
                     "5000", "--hide-header", "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 0, result.stderr
    assert "WARNING: Exiting before consuming the expected number of messages" in result.stderr
    assert int(result.stdout.split(",")[4]) == 10


def test_end_to_end_latency(broker: Any) -> None:
    out = ok(run_cli("perf", "end-to-end-latency", broker.bootstrap, "e2e", "30", "all", "64"))
    lines = out.splitlines()
    assert re.fullmatch(r"0\t[\d.]+", lines[0])
    assert re.fullmatch(r"Avg latency: [\d.]+ ms", lines[-2])
    p = re.fullmatch(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)", lines[-1])
    assert p and int(p.group(1)) <= int(p.group(2)) <= int(p.group(3))
    assert watermarks(broker.bootstrap, "e2e", 1)[0][1] == 30


def test_get_offsets_matches_list_offsets(broker: Any) -> None:
    create(broker, "offs", 3)
    create(broker, "other", 1)
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for p, count in ((0, 5), (1, 0), (2, 12)):
            for _ in range(count):
                producer.send("offs", b"x", partition=p)
        producer.flush()
        middle = int(time.time() * 1000) + 1
        time.sleep(0.05)
        for _ in range(3):
            producer.send("offs", b"y", partition=0)
        producer.flush()
    base = ["get-offsets", "--bootstrap-server", broker.bootstrap]
    marks = watermarks(broker.bootstrap, "offs", 3)
    latest = ok(run_cli(*base, "--topic", "offs")).splitlines()
    assert latest == [f"offs:{p}:{marks[p][1]}" for p in range(3)] == [
        "offs:0:8", "offs:1:0", "offs:2:12"]
    assert ok(run_cli(*base, "--topic", "off.*", "--time", "-2", "--partitions", "0,2")
              ).splitlines() == ["offs:0:0", "offs:2:0"]
    # By time: the first record at or after it (confluent's offsets_for_times agrees);
    # partitions without one are left out, as GetOffsetShell leaves them out.
    consumer = ConfluentConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    try:
        found = consumer.offsets_for_times([ConfluentTP("offs", 0, middle)], timeout=10)
    finally:
        consumer.close()
    assert ok(run_cli(*base, "--topic", "offs", "--time", str(middle))).splitlines() == [
        f"offs:0:{found[0].offset}"] == ["offs:0:5"]
    every = ok(run_cli(*base)).splitlines()
    assert "other:0:0" in every and "offs:2:12" in every


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get-offsets", "--topic", "missing"], "Could not match any topic-partitions"),
        (["get-offsets", "--time", "soon"], "--time: expected -1, -2, -3"),
        (["get-offsets", "--partitions", "1,x"], "--partitions: expected comma-separated"),
        (["perf", "consume", "--topic", "missing", "--messages", "1"],
         "Topic 'missing' does not exist"),
        (["perf", "produce", "--topic", "t", "--num-records", "ten", "--record-size", "1",
          "--throughput", "-1"], "--num-records: expected a whole number, got 'ten'"),
        (["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
          "--throughput", "0"], "--throughput: must be -1 (unthrottled) or at least 1"),
        (["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
          "--throughput", "-1", "--producer-props", "lingr.ms=5"],
         "unknown producer config 'lingr.ms'"),
        (["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
          "--throughput", "-1", "--producer-props", "acks=2"], "acks="),
        (["perf", "produce", "--topic", "t", "--num-records", "1", "--payload-file",
          "/nonexistent/payloads", "--throughput", "-1"], "cannot read /nonexistent/payloads"),
        (["perf", "end-to-end-latency", "127.0.0.1:1", "t", "5", "0", "10"],
         "invalid choice: '0'"),
    ],
)
def test_bad_input_is_one_readable_line_and_status_1(
    broker: Any, args: list[str], message: str
) -> None:
    if args[0] == "get-offsets" or args[1] in ("consume", "produce"):
        args = [*args, "--bootstrap-server", broker.bootstrap]
    line = error_line(run_cli(*args))
    assert message in line, line


def test_perf_produce_to_a_missing_topic_without_auto_creation(broker_factory: Any) -> None:
    broker = broker_factory(auto_create_topics_enable="false")
    line = error_line(run_cli(
        "perf", "produce", "--topic", "absent", "--num-records", "10", "--record-size", "10",
        "--throughput", "-1", "--bootstrap-server", broker.bootstrap,
    ))
    assert line == "logbus: error: UNKNOWN_TOPIC_OR_PARTITION: Topic 'absent' does not exist"
