"""A broker killed with SIGKILL in the middle of a log cleaning pass restarts with a valid
log and every record a finished pass would have kept."""

from __future__ import annotations

from typing import Any

from kafka_wire import WireClient, wait_for
from logbus.records.builder import build_batch

TOPIC = "compacted"
KEYS = 10


def test_kill_9_during_cleaning_keeps_every_retained_record(broker_process: Any) -> None:
    # A slow cleaner (4 kB/s) makes the pass long enough to be caught with `.cleaned`
    # files on disk.
    proc = broker_process(
        "--override",
        "log.cleaner.backoff.ms=50",
        "--override",
        "log.cleaner.io.max.bytes.per.second=4000",
    )
    written: dict[int, tuple[bytes, bytes | None]] = {}
    with WireClient(proc.bootstrap) as client:
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0.01",
        }
        assert client.create_topic(TOPIC, 1, configs) == (0, None)
        for r in range(12):
            pairs: list[tuple[bytes, bytes | None]] = [
                (b"key-%d" % k, b"value-%d-%d-" % (k, r) + b"x" * 60) for k in range(KEYS)
            ]
            if r == 11:
                pairs[3] = (b"key-3", None)  # a tombstone
            for first in range(0, KEYS, 2):
                result = client.produce(TOPIC, 0, build_batch(pairs[first : first + 2]))
                assert result["error_code"] == 0
                for i, pair in enumerate(pairs[first : first + 2]):
                    written[result["base_offset"] + i] = pair
    partition_dir = proc.data_dir / f"{TOPIC}-0"
    wait_for(lambda: any(partition_dir.glob("*.cleaned")), timeout=60, interval=0.01)
    proc.kill()
    # The throttled pass was still writing its cleaned segment when the broker died.
    assert any(partition_dir.glob("*.cleaned"))

    proc.start()
    assert not any(partition_dir.glob("*.cleaned"))
    with WireClient(proc.bootstrap) as client:
        stored = client.read_all(TOPIC, 0)
        end = client.list_offset(TOPIC, 0, -1)[1]
    assert end == max(written) + 1
    offsets = [r.offset for r in stored]
    assert offsets == sorted(set(offsets))
    for record in stored:  # nothing invented, nothing moved
        assert (record.key, record.value) == written[record.offset]
    latest: dict[bytes, int] = {}
    for offset, (key, _value) in sorted(written.items()):
        latest[key] = offset
    assert set(latest.values()) <= set(offsets)  # the latest of every key, tombstone too
