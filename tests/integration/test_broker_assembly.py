"""The broker as an assembly of parts: a start that fails half-way stops what it had
built (listeners closed, logs and metadata store released) and raises; the parts of a
broker that never started are not there to be read, and stopping it does nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from brokers import START_STOP_TIMEOUT, RunningBroker
from kafka_wire import WireClient
from logbus.client.loop_thread import LoopThread
from logbus.server.broker import Broker
from logbus.server.config.broker_config import BrokerConfig
from ports import free_port


def _config(data_dir: Path, port: int, metrics_port: int) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(data_dir),
            "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        }
    )


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_start_that_fails_half_way_stops_what_it_built(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        # the metrics endpoint, the last part started, cannot bind: every part before it
        # (the store, the logs, the listener, the coordinators, the controller) was built
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = taken.getsockname()[1]
        loop = LoopThread("failed-broker")
        try:
            broker = Broker(_config(tmp_path / "data", port, taken_port))
            with pytest.raises(OSError):
                loop.run(broker.start(), START_STOP_TIMEOUT)
            assert _refused(port)  # its listener is closed again
            with pytest.raises(RuntimeError, match="broker 0 has not started"):
                _ = broker.log_manager
            loop.run(broker.stop(), START_STOP_TIMEOUT)  # nothing to stop
        finally:
            loop.close()
    # the data directory and the port are free for a broker that starts
    again = RunningBroker(tmp_path / "data", port=port).start()
    try:
        with WireClient(again.bootstrap) as client:
            assert client.create_topic("after", 1)[0] == 0
        assert again.broker is not None
        assert "after-0" in {p.name for p in (tmp_path / "data").iterdir()}
    finally:
        again.stop()


def test_stop_twice_stops_once(tmp_path: Path) -> None:
    running = RunningBroker(tmp_path / "data").start()
    broker, loop = running.broker, running.loop
    assert broker is not None and loop is not None
    loop.run(broker.stop(), START_STOP_TIMEOUT)
    loop.run(broker.stop(), START_STOP_TIMEOUT)  # a second stop does nothing
    # the parts of a stopped broker are still there to be read
    assert broker.log_manager.log_dirs
    loop.close()
    running.broker = running.loop = None
