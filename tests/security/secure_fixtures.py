"""The TLS and SASL tests' fixtures (`pki`, `secure_broker`, `raw`); test modules load
them with `pytest_plugins = ["secure_fixtures"]`."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from certs import CertificateAuthority
from security_support import Pki, RawConnection

from brokers import RunningBroker, collect_leaks


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(directory)
    stranger_ca = CertificateAuthority(directory, "stranger CA")
    return Pki(
        ca=ca,
        broker=ca.issue("broker", "localhost", server=True, key_password="broker-key-pw"),
        alice=ca.issue("alice", "alice", ou="eng"),
        expired=ca.issue("expired", "bob", ou="eng", expired=True),
        stranger_ca=stranger_ca,
        stranger=stranger_ca.issue("stranger", "mallory", ou="eng"),
        directory=directory,
    )


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[Any]:
    """Start brokers with these exact settings (names are not rewritten)."""
    started: list[RunningBroker] = []

    def make(settings: dict[str, str]) -> RunningBroker:
        running = RunningBroker(tmp_path / f"data{len(started)}", dict(settings))
        started.append(running)
        running.start()
        return running

    yield make
    for running in started:
        running.stop()
    collect_leaks()


@pytest.fixture
def raw() -> Iterator[Any]:
    opened: list[RawConnection] = []

    def connect(bootstrap: str, context: ssl.SSLContext | None = None) -> RawConnection:
        conn = RawConnection(bootstrap, context)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()
