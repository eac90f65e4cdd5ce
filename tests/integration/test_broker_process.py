"""The broker as users run it: `logbus server start` in its own process (with uvloop)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_large_fetches_are_served_by_the_cli_broker(
    broker_process: Any, monkeypatch: pytest.MonkeyPatch, event_loop: str
) -> None:
    """Under uvloop large slices are read and written; LOGBUS_EVENT_LOOP=asyncio sends them
    with sendfile. Either way the bytes arrive intact."""
    monkeypatch.setenv("LOGBUS_EVENT_LOOP", event_loop)
    proc = broker_process()
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    values = [bytes([i]) * 900_000 for i in range(4)]
    for value in values:
        producer.produce("big", value=value)
    assert producer.flush(20) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": proc.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 3_000_000,
        }
    )
    consumer.assign([TopicPartition("big", 0, 0)])
    got = []
    for _ in range(100):
        if len(got) == len(values):
            break
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == values


def test_sigterm_shuts_down_cleanly(broker_process: Any) -> None:
    proc = broker_process()
    producer = Producer({"bootstrap.servers": proc.bootstrap})
    producer.produce("clean", value=b"x")
    assert producer.flush(10) == 0
    assert proc.terminate() == 0
    assert (proc.data_dir / ".kafka_cleanshutdown").exists()
    assert (proc.data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()[2:] == [
        "clean 0 1"
    ]


def test_recovery_uses_each_topics_own_settings(broker_process: Any) -> None:
    """A batch larger than the broker default but allowed by its topic survives an unclean
    restart: recovery validates it against the topic's max.message.bytes."""
    from confluent_kafka.admin import AdminClient, NewTopic

    proc = broker_process()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("roomy", 1, 1, config={"max.message.bytes": "3000000"})])[
        "roomy"].result(10)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "message.max.bytes": 4_000_000})
    big = b"b" * 2_000_000
    producer.produce("roomy", value=big)
    producer.produce("roomy", value=b"after")
    assert producer.flush(20) == 0
    proc.kill()
    proc.start()
    consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.max.bytes": 5_000_000,
                         "max.partition.fetch.bytes": 5_000_000})
    consumer.assign([TopicPartition("roomy", 0, 0)])
    got = []
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
        if len(got) == 2:
            break
    consumer.close()
    assert got == [big, b"after"]


def _start_with(tmp_path: Any, *args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "server", "start",
         "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", *args],
        capture_output=True, text=True, timeout=30)


def test_invalid_settings_stop_start_up_naming_the_setting(tmp_path: Any) -> None:
    unknown = _start_with(tmp_path, "--override", "log.segmnet.bytes=1000")
    assert unknown.returncode == 1
    assert "log.segmnet.bytes" in unknown.stderr
    invalid = _start_with(tmp_path, "--override", "num.partitions=many")
    assert invalid.returncode == 1
    assert "num.partitions" in invalid.stderr and "many" in invalid.stderr
    properties = tmp_path / "server.properties"
    properties.write_text("# a Kafka-style file\nmessage.max.bytes = -5\n")
    from_file = _start_with(tmp_path, str(properties))
    assert from_file.returncode == 1 and "message.max.bytes" in from_file.stderr
    missing = _start_with(tmp_path, str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and "nope.properties" in missing.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_flush_policy_advances_the_recovery_point(broker_factory: Any) -> None:
    """With log.flush.interval.messages=1 every append is fsynced, so the recovery point
    (written to its checkpoint file every second in these tests) follows the log end."""
    import time

    eager = broker_factory(**{"log.flush.interval.messages": "1"})
    lazy = broker_factory()
    for running in (eager, lazy):
        producer = Producer({"bootstrap.servers": running.bootstrap})
        for i in range(5):
            producer.produce("flushed", value=b"%d" % i)
        assert producer.flush(10) == 0

    def recovery_point(running: Any) -> int:
        checkpoint = running.data_dir / "recovery-point-offset-checkpoint"
        if not checkpoint.exists():
            return 0
        lines = checkpoint.read_text().split("\n")
        points = {ln.rsplit(" ", 1)[0]: int(ln.rsplit(" ", 1)[1]) for ln in lines[2:] if ln}
        return points.get("flushed 0", 0)

    deadline = time.monotonic() + 30
    while recovery_point(eager) < 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert recovery_point(eager) == 5
    assert recovery_point(lazy) == 0
