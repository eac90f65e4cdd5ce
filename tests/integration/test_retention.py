"""Retention and DeleteRecords against a real broker: retention.ms by each segment's largest
timestamp (with record timestamps, and with real time bounded to a few seconds),
retention.bytes, the `.deleted` rename and delayed unlink while a read is in flight,
DeleteRecords (every version and every bad input), the log start offset checkpoint across
a restart and a kill -9, and a broker killed while it deletes segments."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_wire import EARLIEST, LATEST, WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch

HOUR_MS = 3600_000
TOPIC = 2
SET = 0


def now_ms() -> int:
    return int(time.time() * 1000)


def stamped(value: bytes, timestamp: int) -> bytes:
    return build_batch([NewRecord(None, value, (), timestamp)])


def produce(client: WireClient, topic: str, records: bytes) -> int:
    result = client.produce(topic, 0, records)
    assert result["error_code"] == ErrorCode.NONE, result
    return int(result["base_offset"])


def set_topic_configs(client: WireClient, topic: str, **configs: str) -> None:
    body = {
        "resources": [
            {
                "resource_type": TOPIC,
                "resource_name": topic,
                "configs": [
                    {"name": k.replace("_", "."), "config_operation": SET, "value": v}
                    for k, v in configs.items()
                ],
            }
        ],
        "validate_only": False,
    }
    [result] = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    assert result["error_code"] == ErrorCode.NONE, result["error_message"]


def delete_records(
    client: WireClient, topic: str, partition: int, offset: int, version: int = 2
) -> tuple[int, int]:
    """(error code, low watermark) of one DeleteRecords partition."""
    body = {
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}
        ],
        "timeout_ms": 5000,
    }
    response = client.request(ApiKey.DELETE_RECORDS, version, body)
    [part] = response["topics"][0]["partitions"]
    return part["error_code"], part["low_watermark"]


def earliest(client: WireClient, topic: str) -> int:
    error, offset, _ = client.list_offset(topic, 0, EARLIEST)
    assert error == ErrorCode.NONE
    return offset


def latest(client: WireClient, topic: str) -> int:
    error, offset, _ = client.list_offset(topic, 0, LATEST)
    assert error == ErrorCode.NONE
    return offset


def values_from(client: WireClient, topic: str, start: int) -> dict[int, bytes | None]:
    return {r.offset: r.value for r in client.read_all(topic, 0, start)}


def partition_dir(data_dir: Path, topic: str) -> Path:
    return data_dir / f"{topic}-0"


def files(directory: Path, suffix: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(suffix))


@pytest.fixture
def fast_retention(broker_factory: Any) -> Any:
    """A broker checking retention every 100 ms."""
    return broker_factory(log_retention_check_interval_ms="100")


# --- retention.ms -----------------------------------------------------------------------


def test_retention_ms_goes_by_each_segments_largest_timestamp(fast_retention: Any) -> None:
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "by-time"
        configs = {"retention.ms": "600000", "segment.ms": "60000"}
        assert client.create_topic(topic, 1, configs)[0] == ErrorCode.NONE
        old = now_ms() - 2 * HOUR_MS
        for i in range(3):
            produce(client, topic, stamped(b"old%d" % i, old))
        # Two hours later than the segment's first batch: a new segment is rolled.
        assert produce(client, topic, stamped(b"new", now_ms())) == 3
        # An old record in a segment whose largest timestamp is recent is kept.
        assert produce(client, topic, stamped(b"old-but-late", old)) == 4

        wait_for(lambda: earliest(client, topic) == 3)
        assert values_from(client, topic, 3) == {3: b"new", 4: b"old-but-late"}
        fetched = client.fetch(topic, 0, 0)
        assert fetched["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetched["log_start_offset"] == 3
        assert latest(client, topic) == 5


def test_retention_ms_in_real_time(fast_retention: Any) -> None:
    """Records written now expire after retention.ms of real time (1 s here); the active
    segment is never deleted while in use: a new one is rolled first, as in Kafka."""
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "real-time"
        assert client.create_topic(topic, 1, {"retention.ms": "1000"})[0] == ErrorCode.NONE
        for i in range(4):
            produce(client, topic, stamped(b"v%d" % i, now_ms()))
        wait_for(lambda: earliest(client, topic) == 4, timeout=30)
        log = broker.broker.replica_manager.partition(topic, 0).log
        assert [s.base_offset for s in log.segments] == [4]
        assert client.fetch(topic, 0, 0)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        # The log goes on at the same offsets.
        assert produce(client, topic, stamped(b"later", now_ms())) == 4
        assert values_from(client, topic, 4)[4] == b"later"


def test_retention_minus_one_keeps_everything(fast_retention: Any) -> None:
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "forever"
        configs = {"retention.ms": "-1", "segment.ms": "1000"}
        assert client.create_topic(topic, 1, configs)[0] == ErrorCode.NONE
        produce(client, topic, stamped(b"ancient", 0))
        produce(client, topic, stamped(b"now", now_ms()))
        log = broker.broker.replica_manager.partition(topic, 0).log
        assert len(log.segments) == 2
        # Retention checks run every 100 ms; give them a few dozen chances.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert earliest(client, topic) == 0
            time.sleep(0.1)
        assert values_from(client, topic, 0) == {0: b"ancient", 1: b"now"}


# --- retention.bytes --------------------------------------------------------------------


def test_retention_bytes_keeps_the_newest_segments(fast_retention: Any) -> None:
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "by-size"
        configs = {"segment.bytes": "1000", "retention.bytes": "2500"}
        assert client.create_topic(topic, 1, configs)[0] == ErrorCode.NONE
        for i in range(30):
            produce(client, topic, stamped(b"%03d" % i + b"x" * 200, now_ms()))
        log = broker.broker.replica_manager.partition(topic, 0).log

        def trimmed() -> bool:
            segments = log.segments
            total = sum(s.size for s in segments)
            # Kafka's rule: delete the oldest while what is left still holds retention.bytes.
            return total - segments[0].size < 2500 and segments[0].base_offset > 0

        wait_for(trimmed)
        start = earliest(client, topic)
        assert start == log.segments[0].base_offset > 0
        kept = values_from(client, topic, start)
        assert sorted(kept) == list(range(start, 30))
        assert all(kept[o] == b"%03d" % o + b"x" * 200 for o in kept)


def test_retention_changes_take_effect_without_restart(fast_retention: Any) -> None:
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "tightened"
        assert client.create_topic(topic, 1, {"segment.bytes": "1000"})[0] == ErrorCode.NONE
        for i in range(20):
            produce(client, topic, stamped(b"%03d" % i + b"y" * 200, now_ms()))
        assert earliest(client, topic) == 0
        set_topic_configs(client, topic, retention_bytes="1500")
        wait_for(lambda: earliest(client, topic) > 0)
        set_topic_configs(client, topic, retention_ms="1")
        wait_for(lambda: earliest(client, topic) == 20)


# --- .deleted files and in-flight reads --------------------------------------------------


def test_deleted_segments_stay_readable_until_the_delay_passes(fast_retention: Any) -> None:
    broker = fast_retention
    with WireClient(broker.bootstrap) as client:
        topic = "in-flight"
        configs = {"segment.ms": "60000", "file.delete.delay.ms": "1500"}
        assert client.create_topic(topic, 1, configs)[0] == ErrorCode.NONE
        old = now_ms() - 2 * HOUR_MS
        produce(client, topic, stamped(b"first", old))
        produce(client, topic, stamped(b"second", now_ms()))
        log = broker.broker.replica_manager.partition(topic, 0).log
        directory = partition_dir(broker.data_dir, topic)
        first_log = f"{0:020d}.log"
        # A fetch holds a slice of the first segment's file, as a response being sent does.
        in_flight = broker.loop.run(_read(log, 0))
        expected = in_flight.read()
        assert b"first" in expected

        set_topic_configs(client, topic, retention_ms="3600000")
        # The broker renames the segment's files one after the other on its own thread:
        # wait for all three, not for the first rename only.
        renamed = {f"{first_log}.deleted", f"{0:020d}.index.deleted",
                   f"{0:020d}.timeindex.deleted"}
        wait_for(lambda: renamed <= set(files(directory, ".deleted")))
        assert first_log not in files(directory, ".log")
        # The renamed file still serves the read in flight.
        assert in_flight.read() == expected
        fetched = client.fetch(topic, 0, 0)
        assert fetched["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        # After file.delete.delay.ms the files are gone.
        wait_for(lambda: not files(directory, ".deleted"), timeout=15)
        assert values_from(client, topic, 1) == {1: b"second"}


async def _read(log: Any, offset: int) -> Any:
    info = log.read(offset, 1 << 20, max_offset=log.high_watermark)
    return info.records


# --- DeleteRecords -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records(broker_factory: Any, version: int) -> None:
    broker = broker_factory(log_retention_check_interval_ms="100")
    with WireClient(broker.bootstrap) as client:
        topic = "trimmed"
        assert client.create_topic(topic, 1, {"segment.bytes": "1000"})[0] == ErrorCode.NONE
        for i in range(12):
            produce(client, topic, stamped(b"%02d" % i + b"z" * 200, now_ms()))
        log = broker.broker.replica_manager.partition(topic, 0).log
        segments_before = len(log.segments)
        assert segments_before >= 3

        assert delete_records(client, topic, 0, 5, version) == (ErrorCode.NONE, 5)
        assert earliest(client, topic) == 5
        fetched = client.fetch(topic, 0, 4)
        assert (fetched["error_code"], fetched["log_start_offset"]) == (
            ErrorCode.OFFSET_OUT_OF_RANGE,
            5,
        )
        assert sorted(values_from(client, topic, 5)) == list(range(5, 12))
        # Whole segments below the new start are deleted by the retention check.
        wait_for(lambda: log.segments[0].base_offset > 0)
        assert log.segments[0].base_offset <= 5
        # A lower offset changes nothing; -1 means the high watermark.
        assert delete_records(client, topic, 0, 2, version) == (ErrorCode.NONE, 5)
        assert delete_records(client, topic, 0, -1, version) == (ErrorCode.NONE, 12)
        assert earliest(client, topic) == latest(client, topic) == 12
        assert produce(client, topic, stamped(b"next", now_ms())) == 12


def test_delete_records_bad_input(broker: Any) -> None:
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("d", 2)[0] == ErrorCode.NONE
        assert client.create_topic("compacted", 1, {"cleanup.policy": "compact"})[0] == 0
        for _ in range(3):
            produce(client, "d", stamped(b"v", now_ms()))
        produce(client, "compacted", build_batch([NewRecord(b"k", b"v")]))
        assert delete_records(client, "d", 0, 4) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert delete_records(client, "d", 0, -2) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert delete_records(client, "d", 7, 0) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert delete_records(client, "nope", 0, 0) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            -1,
        )
        assert delete_records(client, "compacted", 0, 1) == (ErrorCode.POLICY_VIOLATION, -1)
        # An empty partition: -1 is offset 0.
        assert delete_records(client, "d", 1, -1) == (ErrorCode.NONE, 0)
        assert earliest(client, "d") == 0
        assert delete_records(client, "d", 0, 3) == (ErrorCode.NONE, 3)


def test_log_start_offset_is_checkpointed_at_once_and_survives_restart(
    broker_factory: Any,
) -> None:
    # Periodic checkpoints every 10 minutes: only DeleteRecords' own write can be seen.
    broker = broker_factory(log_flush_offset_checkpoint_interval_ms="600000")
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("kept", 1)[0] == ErrorCode.NONE
        for i in range(6):
            produce(client, "kept", stamped(b"%d" % i, now_ms()))
        assert delete_records(client, "kept", 0, 4) == (ErrorCode.NONE, 4)
    checkpoint = (broker.data_dir / "log-start-offset-checkpoint").read_text().splitlines()
    assert checkpoint[:2] == ["0", "1"]
    assert "kept 0 4" in checkpoint[2:]
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        assert earliest(client, "kept") == 4
        assert client.fetch("kept", 0, 0)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert values_from(client, "kept", 4) == {4: b"4", 5: b"5"}


# --- kill -9 -----------------------------------------------------------------------------


def test_delete_records_survives_kill_9(broker_process: Any) -> None:
    proc = broker_process()
    with WireClient(proc.bootstrap) as client:
        assert client.create_topic("k", 1)[0] == ErrorCode.NONE
        for i in range(8):
            produce(client, "k", stamped(b"%d" % i, now_ms()))
        assert delete_records(client, "k", 0, 6) == (ErrorCode.NONE, 6)
    proc.kill()
    proc.start()
    with WireClient(proc.bootstrap) as client:
        assert earliest(client, "k") == 6
        assert client.fetch("k", 0, 3)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert values_from(client, "k", 6) == {6: b"6", 7: b"7"}


def test_kill_9_while_deleting_segments_loses_no_retained_record(broker_process: Any) -> None:
    """Killed with segments renamed to .deleted but not yet unlinked, the broker restarts
    with a valid log holding every record retention kept."""
    proc = broker_process(
        "--override",
        "log.retention.check.interval.ms=100",
        "--override",
        "log.segment.delete.delay.ms=600000",
    )
    topic = "dying"
    with WireClient(proc.bootstrap) as client:
        assert client.create_topic(topic, 1, {"segment.bytes": "1000"})[0] == ErrorCode.NONE
        for i in range(30):
            produce(client, topic, stamped(b"%03d" % i + b"w" * 200, now_ms()))
        set_topic_configs(client, topic, retention_bytes="3000")
        directory = partition_dir(proc.data_dir, topic)
        wait_for(lambda: files(directory, ".log.deleted"))
        kept_from = earliest(client, topic)
        assert kept_from > 0
    proc.kill()
    proc.start()
    with WireClient(proc.bootstrap) as client:
        assert not files(directory, ".deleted")
        start = earliest(client, topic)
        assert start <= kept_from
        assert latest(client, topic) == 30
        stored = values_from(client, topic, start)
        assert sorted(stored) == list(range(start, 30))
        assert all(stored[o] == b"%03d" % o + b"w" * 200 for o in stored)


def test_a_crash_between_renames_leaves_a_valid_log(broker_process: Any) -> None:
    """A kill between renaming a segment's .log and its indexes leaves orphan indexes; the
    next start drops them and the log starts at the next segment."""
    proc = broker_process()
    topic = "half-renamed"
    with WireClient(proc.bootstrap) as client:
        assert client.create_topic(topic, 1, {"segment.bytes": "1000"})[0] == ErrorCode.NONE
        for i in range(12):
            produce(client, topic, stamped(b"%02d" % i + b"q" * 200, now_ms()))
    proc.kill()
    directory = partition_dir(proc.data_dir, topic)
    logs = files(directory, ".log")
    assert len(logs) >= 3
    second_base = int(logs[1].split(".")[0])
    (directory / logs[0]).rename(directory / f"{logs[0]}.deleted")
    proc.start()
    with WireClient(proc.bootstrap) as client:
        assert earliest(client, topic) == second_base
        assert sorted(values_from(client, topic, second_base)) == list(range(second_base, 12))
    assert not files(directory, ".deleted")
    assert f"{0:020d}.index" not in os.listdir(directory)
