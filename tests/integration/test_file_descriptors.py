"""A broker process serves 10,000 partitions within a 20,000 file descriptor limit (issue
13): only the active segment keeps its log file open; indexes and older segments are
opened on use and closed when idle. Creating, producing to every partition, restarting
and reading everything back stays well below the limit."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_admin_limits import create_topics

from kafka_wire import FETCH_V, PRODUCE_V, WireClient
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import iter_record_set

DESCRIPTOR_LIMIT = 20_000
TOPICS = {f"fd{i}": 2_000 for i in range(5)}  # 10,000 partitions, 2,000 per request


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTOR_LIMIT, DESCRIPTOR_LIMIT))


def start_broker(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "logbus.cli.main",
        "server",
        "start",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data_dir}",
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=out, preexec_fn=_limit_descriptors)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("broker did not start listening")


def open_descriptors(proc: subprocess.Popen[bytes]) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


def value_of(topic: str, partition: int, round_: int) -> bytes:
    return f"{topic}/{partition}/{round_}".encode()


def produce_everywhere(client: WireClient, round_: int) -> None:
    """One record in every partition: one Produce request per topic."""
    for topic, count in TOPICS.items():
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 60_000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [
                        {
                            "index": p,
                            "records": build_batch([NewRecord(None, value_of(topic, p, round_))]),
                        }
                        for p in range(count)
                    ],
                }
            ],
        }
        response = client.request(ApiKey.PRODUCE, PRODUCE_V, body)
        errors = {
            ErrorCode(part["error_code"]).name
            for part in response["responses"][0]["partition_responses"]
        }
        assert errors == {"NONE"}, (topic, errors)


def read_everywhere(client: WireClient) -> dict[tuple[str, int], list[bytes]]:
    """Every record of every partition: one Fetch request per topic."""
    found: dict[tuple[str, int], list[bytes]] = {}
    for topic, count in TOPICS.items():
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 64 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                        for p in range(count)
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        response = client.request(ApiKey.FETCH, FETCH_V, body)
        for part in response["responses"][0]["partitions"]:
            assert part["error_code"] == ErrorCode.NONE
            values = [
                record.value or b""
                for _header, records in iter_record_set(bytes(part["records"] or b""))
                for record in records
            ]
            found[(topic, part["partition_index"])] = values
    return found


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_ten_thousand_partitions_within_twenty_thousand_descriptors(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = _free_port()
    log = tmp_path / "broker.log"
    proc = start_broker(data_dir, port, log)
    try:
        with WireClient(f"127.0.0.1:{port}", timeout=600) as client:
            for topic, count in TOPICS.items():
                (result,) = create_topics(client, {topic: count})
                assert result["error_code"] == ErrorCode.NONE, result["error_message"]
            produce_everywhere(client, 0)
        created = open_descriptors(proc)
        assert created < DESCRIPTOR_LIMIT * 3 // 4, created

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(300) == 0
        proc = start_broker(data_dir, port, log)
        restarted = open_descriptors(proc)
        with WireClient(f"127.0.0.1:{port}", timeout=600) as client:
            produce_everywhere(client, 1)
            found = read_everywhere(client)
        assert len(found) == sum(TOPICS.values())
        wrong = {
            tp: values
            for tp, values in found.items()
            if values != [value_of(*tp, 0), value_of(*tp, 1)]
        }
        assert not wrong, list(wrong.items())[:5]
        after_reads = open_descriptors(proc)
        assert max(restarted, after_reads) < DESCRIPTOR_LIMIT * 3 // 4, (restarted, after_reads)
        assert "Too many open files" not in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
