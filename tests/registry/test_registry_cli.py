"""`logbus schema-registry start` as a user runs it: a properties file in Confluent's
names plus overrides, the registry answering over HTTP, SIGTERM stopping it; a bad
setting refused before anything starts."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from brokers import RunningBroker
from kafka_wire import wait_for
from ports import free_port


def registry_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "logbus.cli.main", "schema-registry", "start", *args]


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/subjects", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_start_from_a_properties_file(broker: RunningBroker, tmp_path: Path) -> None:
    port = free_port()
    properties = tmp_path / "schema-registry.properties"
    properties.write_text(
        f"listeners=http://127.0.0.1:{port}\n"
        f"kafkastore.bootstrap.servers=PLAINTEXT://{broker.bootstrap}\n"
        "schema.compatibility.level=full\n"
    )
    with (tmp_path / "registry.log").open("wb") as log:
        proc = subprocess.Popen(
            registry_command(
                str(properties), "--override", "kafkastore.topic=_my_schemas",
                "--override", "kafkastore.topic.replication.factor=1",
            ),
            stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or answers(url), 60, what="the registry")
        assert proc.poll() is None, (tmp_path / "registry.log").read_text()
        assert httpx.get(f"{url}/config").json() == {"compatibilityLevel": "FULL"}
        response = httpx.post(f"{url}/subjects/x/versions", json={"schema": '"string"'})
        assert response.json() == {"id": 1}
    finally:
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(30)
    # uvicorn shuts down (closing the store's clients), then re-raises the signal
    output = (tmp_path / "registry.log").read_text()
    assert returncode in (0, -signal.SIGTERM) and "Traceback" not in output, output
    from logbus import Admin

    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        assert "_my_schemas" in admin.list_topics()


def test_a_bad_setting_is_refused() -> None:
    result = subprocess.run(
        registry_command(
            "--bootstrap-server", "127.0.0.1:1", "--override", "schema.compatibility.level=most"
        ),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "schema.compatibility.level" in result.stderr
