"""A broker killed with SIGKILL in the middle of a log cleaning pass restarts with a valid
log and every record a finished pass would have kept."""

from __future__ import annotations

from typing import Any

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import build_batch

TOPIC = "compacted"
KEYS = 10


def test_kill_9_during_cleaning_keeps_every_retained_record(broker_process: Any) -> None:
    # A throttled cleaner (40 kB/s over ~100 kB) makes the pass last seconds, so it is
    # caught with `.cleaned` files on disk.
    proc = broker_process(
        "--override",
        "log.cleaner.backoff.ms=50",
        "--override",
        "log.cleaner.io.max.bytes.per.second=40000",
    )
    written: dict[int, tuple[bytes, bytes | None]] = {}
    with WireClient(proc.bootstrap) as client:
        # Nothing is cleanable until every record is written (a pass over part of the
        # data could finish before the test looks, leaving nothing to catch).
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "3600000",
        }
        assert client.create_topic(TOPIC, 1, configs) == (0, None)
        for r in range(12):
            pairs: list[tuple[bytes, bytes | None]] = [
                (b"key-%d" % k, b"value-%d-%d-" % (k, r) + b"x" * 800) for k in range(KEYS)
            ]
            if r == 11:
                pairs[3] = (b"key-3", None)  # a tombstone
            for first in range(0, KEYS, 2):
                result = client.produce(TOPIC, 0, build_batch(pairs[first : first + 2]))
                assert result["error_code"] == 0
                for i, pair in enumerate(pairs[first : first + 2]):
                    written[result["base_offset"] + i] = pair
        body = {
            "resources": [
                {
                    "resource_type": 2,  # TOPIC
                    "resource_name": TOPIC,
                    "configs": [
                        {"name": "min.compaction.lag.ms", "config_operation": 0, "value": "0"}
                    ],
                }
            ],
            "validate_only": False,
        }
        response = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
        assert response["responses"][0]["error_code"] == ErrorCode.NONE
    partition_dir = proc.data_dir / f"{TOPIC}-0"
    wait_for(lambda: any(partition_dir.glob("*.cleaned")), timeout=60, interval=0.01)
    proc.kill()  # while the throttled pass writes its cleaned segments

    # Restart without the cleaner, so that what is on disk is what the loader made of the
    # crash (a running cleaner would start writing a new `.cleaned` file at once).
    proc.extra += ["--override", "log.cleaner.enable=false"]
    proc.start()
    assert not any(partition_dir.glob("*.cleaned"))
    assert not any(partition_dir.glob("*.swap"))
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
