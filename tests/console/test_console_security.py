"""The console on a SASL listener, with the client settings `--command-config` gives it:
it works with the right password and shows a readable refusal with a wrong one."""

from __future__ import annotations

from typing import Any

import httpx
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    snap_fixture,
)

from ports import free_port

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def test_console_over_sasl_plain(broker_process: Any, console_factory: Any) -> None:
    plain, sasl = free_port(), free_port()
    broker_process(
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        port=plain,
    )
    settings = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
    }
    good = console_factory(f"127.0.0.1:{sasl}", **settings, **{"sasl.password": "alice-secret"})
    bad = console_factory(f"127.0.0.1:{sasl}", **settings, **{"sasl.password": "wrong"})
    with httpx.Client(timeout=30) as http:
        page = http.get(good.url + "/")
        assert page.status_code == 200, page.text
        # Brokers are listed with the addresses of the listener the console connected to.
        assert f"<td>127.0.0.1:{sasl}</td>" in page.text
        refused = http.get(bad.url + "/topics")
        assert refused.status_code == 403, refused.text
        assert "SASL_AUTHENTICATION_FAILED" in refused.text
        assert "Traceback" not in refused.text
        # The console with the right password is not disturbed by the other one.
        assert http.get(good.url + "/topics").status_code == 200
