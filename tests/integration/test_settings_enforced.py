"""Broker settings that were accepted and ignored, now enforced or refused, against a real
broker."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from broker_cli import start_broker

from kafka_wire import WireClient
from logbus.protocol import ErrorCode
from logbus.records.batch import split_batches
from logbus.records.builder import NewRecord, build_batch

pytestmark = pytest.mark.timeout(60)


def test_fetch_max_bytes_caps_every_fetch_response(broker_factory: Any) -> None:
    broker = broker_factory(fetch_max_bytes="2048")
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("capped", 1)[0] == ErrorCode.NONE
        for _ in range(10):
            batch = build_batch([NewRecord(None, os.urandom(900))])
            assert client.produce("capped", 0, batch)["error_code"] == ErrorCode.NONE
        part = client.fetch("capped", 0, 0, max_bytes=1 << 20)
        assert part["error_code"] == ErrorCode.NONE
        assert 0 < len(part["records"]) <= 2048
        assert len(list(split_batches(part["records"]))) < 10
        # everything is still readable, a response at a time
        assert len(client.read_all("capped", 0)) == 10


@pytest.mark.parametrize(
    "override",
    ["offsets.topic.compression.codec=1", "log.message.downconversion.enable=false"],
)
def test_a_value_logbus_cannot_honour_refuses_to_start(tmp_path: Path, override: str) -> None:
    result = start_broker(tmp_path, override)
    assert result.returncode != 0
    assert "invalid configuration" in result.stderr and "Not supported" in result.stderr
    assert "Traceback" not in result.stderr
