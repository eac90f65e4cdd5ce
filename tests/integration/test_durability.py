"""Durability of a `logbus server start` process: kill -9 mid-stream loses no acknowledged
record; a damaged tail of the active segment (torn write, garbage, overwritten bytes) is
cut back to the last valid batch on restart; SIGTERM shuts down cleanly."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_wire import WireClient, create_topic, wait_for
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch

pytestmark = pytest.mark.timeout(90)

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
FIRST_SEGMENT = "00000000000000000000.log"


def segment_path(data_dir: Path, topic: str, partition: int = 0) -> Path:
    return data_dir / f"{topic}-{partition}" / FIRST_SEGMENT


class BackgroundProducer:
    """confluent-kafka producing `v<i>` values to partition 0 as fast as it can, in a thread,
    remembering which (offset, value) pairs the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, acks: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer: Any = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 3000,
                "retries": 0,
                "reconnect.backoff.max.ms": 200,
            }
        )
        self.acked: list[tuple[int, bytes]] = []
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.value()))
        else:
            self.failed += 1

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    self.topic, value=f"v{i}".encode(), partition=0, on_delivery=self._on_delivery
                )
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.0005 if i % 20 else 0.001)
        self.producer.flush(10)

    def __enter__(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive()
        # Destroy the client now, not at garbage collection: it would keep reconnecting.
        del self.producer


@pytest.mark.parametrize("acks", ["all", "1"])
def test_kill_9_loses_no_acknowledged_record(broker_process: Any, acks: str) -> None:
    proc = broker_process()
    topic = f"durable-{acks}"
    create_topic(proc.bootstrap, topic)
    with BackgroundProducer(proc.bootstrap, topic, acks) as producer:
        wait_for(lambda: len(producer.acked) >= 500, timeout=20)
        proc.kill()
        killed_with = len(producer.acked)
    acked = producer.acked
    assert len(acked) >= killed_with >= 500
    assert len({offset for offset, _ in acked}) == len(acked)
    # A killed broker leaves no clean-shutdown marker: the next start must recover.
    assert not (proc.data_dir / CLEAN_SHUTDOWN).exists()

    proc.start()
    with WireClient(proc.bootstrap) as client:
        stored = {r.offset: r.value for r in client.read_all(topic, 0)}
        end = client.list_offset(topic, 0, -1)[1]
    missing = [(o, v) for o, v in acked if stored.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:3]}"
    assert end == len(stored)
    assert sorted(stored) == list(range(end))  # no holes
    # The log keeps going after recovery, at the next offset.
    with WireClient(proc.bootstrap) as client:
        result = client.produce(topic, 0, build_batch([(None, b"after restart")]))
        assert (result["error_code"], result["base_offset"]) == (ErrorCode.NONE, end)


# -- damaged segment tails -------------------------------------------------------------------

BATCHES = 10
PER_BATCH = 5


def batch_values(b: int) -> list[bytes]:
    return [f"batch{b}-record{r}-".encode() + bytes([b]) * 40 for r in range(PER_BATCH)]


def write_batches(bootstrap: str, topic: str) -> list[int]:
    """Ten batches of five records, one produce each; returns each batch's size in bytes."""
    sizes = []
    with WireClient(bootstrap) as client:
        for b in range(BATCHES):
            batch = build_batch([NewRecord(f"k{b}".encode(), v) for v in batch_values(b)])
            result = client.produce(topic, 0, batch)
            assert (result["error_code"], result["base_offset"]) == (0, b * PER_BATCH)
            sizes.append(len(batch))
    return sizes


def crash_and_damage(proc: Any, topic: str, damage: Any) -> tuple[int, int]:
    """kill -9, damage the active segment, restart; (file size before, after restart)."""
    proc.kill()
    marker = proc.data_dir / CLEAN_SHUTDOWN
    if marker.exists():
        marker.unlink()
    segment = segment_path(proc.data_dir, topic)
    damage(segment)
    damaged_size = segment.stat().st_size
    proc.start()
    # the broker is listening; wait until it serves the partition
    with WireClient(proc.bootstrap) as client:
        wait_for(lambda: client.list_offset(topic, 0, -1)[0] == ErrorCode.NONE)
    return damaged_size, segment.stat().st_size


def check_recovered(proc: Any, topic: str, valid_batches: int, valid_bytes: int) -> None:
    end = valid_batches * PER_BATCH
    with WireClient(proc.bootstrap) as client:
        assert client.list_offset(topic, 0, -1)[:2] == (ErrorCode.NONE, end)
        records = client.read_all(topic, 0)
        want = [v for b in range(valid_batches) for v in batch_values(b)]
        assert [r.value for r in records] == want
        assert [r.offset for r in records] == list(range(end))
        # The damaged tail is gone from the file itself, not just hidden.
        assert segment_path(proc.data_dir, topic).stat().st_size == valid_bytes
        # New appends continue at the next offset and are readable after the valid data.
        result = client.produce(topic, 0, build_batch([(b"new", b"after recovery")]))
        assert (result["error_code"], result["base_offset"]) == (ErrorCode.NONE, end)
        records = client.read_all(topic, 0)
        assert [r.value for r in records] == [*want, b"after recovery"]
        fetched_from_end = client.read_all(topic, 0, end)
        assert [(r.offset, r.value) for r in fetched_from_end] == [(end, b"after recovery")]
    # And the result survives another crash.
    proc.kill()
    proc.start()
    with WireClient(proc.bootstrap) as client:
        assert [r.value for r in client.read_all(topic, 0)] == [*want, b"after recovery"]


def test_truncated_tail_is_cut_to_the_last_whole_batch(broker_process: Any) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "torn")
    sizes = write_batches(proc.bootstrap, "torn")

    def tear(segment: Path) -> None:
        assert segment.stat().st_size == sum(sizes)
        os.truncate(segment, sum(sizes) - 7)

    crash_and_damage(proc, "torn", tear)
    check_recovered(proc, "torn", BATCHES - 1, sum(sizes[:-1]))


def test_truncated_inside_the_batch_header(broker_process: Any) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "torn-header")
    sizes = write_batches(proc.bootstrap, "torn-header")
    crash_and_damage(
        proc, "torn-header", lambda segment: os.truncate(segment, sum(sizes[:-1]) + 30)
    )
    check_recovered(proc, "torn-header", BATCHES - 1, sum(sizes[:-1]))


@pytest.mark.parametrize(
    "garbage",
    [
        os.urandom(37),
        bytes(4096),  # a zero-filled tail, as after a crash on some file systems
        # a plausible batch start: next offset, a length running past the end of the file
        (BATCHES * PER_BATCH).to_bytes(8, "big") + (5000).to_bytes(4, "big") + bytes(20),
    ],
    ids=["random", "zeros", "header-past-eof"],
)
def test_garbage_appended_after_the_last_batch_is_cut(broker_process: Any, garbage: bytes) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "garbage")
    sizes = write_batches(proc.bootstrap, "garbage")

    def append(segment: Path) -> None:
        with segment.open("ab") as f:
            f.write(garbage)

    damaged, _ = crash_and_damage(proc, "garbage", append)
    assert damaged == sum(sizes) + len(garbage)
    check_recovered(proc, "garbage", BATCHES, sum(sizes))


def test_overwritten_last_batch_fails_its_crc_and_is_cut(broker_process: Any) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "overwritten")
    sizes = write_batches(proc.bootstrap, "overwritten")
    last = sum(sizes[:-1])

    def overwrite(segment: Path) -> None:
        with segment.open("r+b") as f:
            f.seek(last + 70)  # past the header, in the records: only the CRC notices
            f.write(b"\xde\xad\xbe\xef" * 4)

    crash_and_damage(proc, "overwritten", overwrite)
    check_recovered(proc, "overwritten", BATCHES - 1, last)


def test_corrupt_batch_in_the_middle_cuts_everything_after_it(broker_process: Any) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "middle")
    sizes = write_batches(proc.bootstrap, "middle")
    sixth = sum(sizes[:6])

    def overwrite(segment: Path) -> None:
        with segment.open("r+b") as f:
            f.seek(sixth + 65)
            f.write(b"\xff\xff")

    crash_and_damage(proc, "middle", overwrite)
    check_recovered(proc, "middle", 6, sixth)


# -- clean shutdown --------------------------------------------------------------------------


def test_sigterm_shuts_down_cleanly_and_the_marker_is_consumed(broker_process: Any) -> None:
    proc = broker_process()
    create_topic(proc.bootstrap, "clean")
    sizes = write_batches(proc.bootstrap, "clean")
    assert not (proc.data_dir / CLEAN_SHUTDOWN).exists()  # only written at shutdown
    started = time.monotonic()
    assert proc.terminate() == 0
    assert time.monotonic() - started < 15
    assert (proc.data_dir / CLEAN_SHUTDOWN).exists()
    assert segment_path(proc.data_dir, "clean").stat().st_size == sum(sizes)

    proc.start()
    with WireClient(proc.bootstrap) as client:
        records = client.read_all("clean", 0)
    assert [r.value for r in records] == [v for b in range(BATCHES) for v in batch_values(b)]
    # A running broker has no marker, so a crash from here on is recovered.
    assert not (proc.data_dir / CLEAN_SHUTDOWN).exists()
    proc.kill()
    assert not (proc.data_dir / CLEAN_SHUTDOWN).exists()
