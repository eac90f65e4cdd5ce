"""The blocking Consumer's close(timeout): the commit and LeaveGroup it owes the group are
bounded by the timeout, as in Kafka's close(Duration); a coordinator that has gone away
does not hold the application."""

from __future__ import annotations

import threading
from typing import Any

from consumer_data import make_topic, new_name, write

from logbus import Consumer


def test_close_gives_up_on_a_vanished_coordinator_after_its_timeout(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=1)
    write(broker.bootstrap, topic, 0, [b"a", b"b", b"c"])
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id=new_name("g"),
        auto_offset_reset="earliest",
        default_api_timeout_ms=300_000,  # commit retries would outlast the test
        reconnect_backoff_max_ms=200,
    )
    closed = threading.Event()
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        while len(got) < 3:
            got += [r.value for r in consumer.poll(timeout=10.0)]
        broker.stop()  # the commit owed at close can no longer succeed

        def close() -> None:
            consumer.close(timeout=1.0)
            closed.set()

        closer = threading.Thread(target=close, daemon=True)
        closer.start()
        closer.join(60)
        assert closed.is_set(), "close(timeout=1.0) still waiting for the coordinator"
    finally:
        if not closed.is_set():
            broker.start()  # let the stuck close finish so nothing leaks
            consumer.close()
