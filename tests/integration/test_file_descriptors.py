"""A broker process serves 10,000 partitions within a 20,000 file descriptor limit (issue
13): only the active segment keeps its log file open; indexes and older segments are
opened on use and closed when idle. Creating, producing to every partition, restarting
and reading everything back stays well below the limit."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest
from admin_helpers import create_topics

from brokers import BrokerProcess
from kafka_wire import PRODUCE_V, WireClient
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import iter_record_set
from ports import free_port

DESCRIPTOR_LIMIT = 20_000
TOPICS = {f"fd{i}": 2_000 for i in range(5)}  # 10,000 partitions, 2,000 per request


def start_broker(data_dir: Path, port: int) -> BrokerProcess:
    """`logbus server start` with at most DESCRIPTOR_LIMIT open files: the child inherits
    the soft limit this process has while it starts it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = DESCRIPTOR_LIMIT if hard == resource.RLIM_INFINITY else min(DESCRIPTOR_LIMIT, hard)
    assert limit == DESCRIPTOR_LIMIT, f"the hard limit {hard} is below {DESCRIPTOR_LIMIT}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        return BrokerProcess(data_dir, port).start(timeout=600)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_descriptors(proc: BrokerProcess) -> int:
    assert proc.proc is not None
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


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
        parts = client.fetch_partitions(topic, dict.fromkeys(range(count), 0), 1 << 20)
        for part in parts:
            assert part["error_code"] == ErrorCode.NONE
            found[(topic, part["partition_index"])] = [
                record.value or b""
                for _header, records in iter_record_set(part["records"])
                for record in records
            ]
    return found


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ten_thousand_partitions_within_twenty_thousand_descriptors(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = start_broker(data_dir, free_port())
    try:
        with WireClient(proc.bootstrap, timeout=600) as client:
            for topic, count in TOPICS.items():
                (result,) = create_topics(client, {topic: count})
                assert result["error_code"] == ErrorCode.NONE, result["error_message"]
            produce_everywhere(client, 0)
        created = open_descriptors(proc)
        assert created < DESCRIPTOR_LIMIT * 3 // 4, created

        assert proc.proc is not None
        proc.proc.terminate()  # a clean shutdown of 10,000 logs takes a while
        assert proc.proc.wait(600) == 0
        proc = start_broker(data_dir, proc.port)
        restarted = open_descriptors(proc)
        with WireClient(proc.bootstrap, timeout=600) as client:
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
        log = (tmp_path / f"broker-{proc.port}.log").read_text()
        assert "Too many open files" not in log
    finally:
        proc.kill()
