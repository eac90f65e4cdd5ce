"""The console's schema registry pages against logbus's registry on a real broker, the
schemas registered by confluent-kafka's SchemaRegistryClient: subjects with their latest
versions, a subject's versions, types, ids, references and compatibility, the registry's
errors, a registry that went away, and a login required for them as for every page."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka.schema_registry import Schema, SchemaReference
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    sign_in,
    snap_fixture,
)
from playwright.sync_api import expect
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    RegistryServer,
    registry_factory_fixture,
    registry_fixture,
    sr_clients_fixture,
)

from logbus.console import AccessSettings
from logbus.console.users import read_users, set_user

ADDRESS = {"type": "record", "name": "Address", "namespace": "ex",
           "fields": [{"name": "city", "type": "string"}]}
ORDER_V1 = {"type": "record", "name": "Order", "namespace": "ex",
            "fields": [{"name": "id", "type": "long"}, {"name": "ship_to", "type": "ex.Address"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "note", "type": "string", "default": ""}]}
PING = 'syntax = "proto3";\nmessage Ping { int64 at = 1; }\n'


def _register(client: Any) -> dict[str, int]:
    ids = {"address": client.register_schema("address", Schema(json.dumps(ADDRESS), "AVRO"))}
    refs = [SchemaReference("ex.Address", "address", 1)]
    ids["orders-1"] = client.register_schema(
        "orders-value", Schema(json.dumps(ORDER_V1), "AVRO", refs)
    )
    ids["orders-2"] = client.register_schema(
        "orders-value", Schema(json.dumps(ORDER_V2), "AVRO", refs)
    )
    ids["ping"] = client.register_schema("team.ping-value", Schema(PING, "PROTOBUF"))
    client.set_compatibility("orders-value", "FULL")
    return ids


def test_subjects_and_versions_over_http(
    broker: Any, registry: RegistryServer, sr_clients: Any, console_factory: Any
) -> None:
    ids = _register(sr_clients(registry))
    console = console_factory(broker.bootstrap, schema_registry_url=registry.url)
    with httpx.Client(base_url=console.url, timeout=30) as http:
        listing = http.get("/schemas")
        assert listing.status_code == 200, listing.text
        assert 'href="/schemas"' in listing.text  # in the navigation
        assert 'id="global-compatibility">BACKWARD<' in listing.text
        assert 'id="registry-mode">READWRITE<' in listing.text
        row = listing.text.split('data-subject="orders-value"', 1)[1].split("</tr>", 1)[0]
        assert f"<td>2</td><td>{ids['orders-2']}</td><td>AVRO</td>" in row
        assert 'href="/schemas/team.ping-value"' in listing.text
        latest = http.get("/schemas/orders-value")
        assert latest.status_code == 200
        assert 'id="compatibility">FULL<' in latest.text
        assert f'id="schema-id">{ids["orders-2"]}<' in latest.text
        assert "&#34;note&#34;" in latest.text  # the schema, indented JSON
        assert '<a href="/schemas/address?version=1">address</a>' in latest.text
        first = http.get("/schemas/orders-value", params={"version": "1"})
        assert f'id="schema-id">{ids["orders-1"]}<' in first.text
        assert "&#34;note&#34;" not in first.text
        ping = http.get("/schemas/team.ping-value")
        assert ping.status_code == 200
        assert 'id="schema-type">PROTOBUF<' in ping.text and "message Ping" in ping.text
        assert http.get("/schemas/address").text.count('id="compatibility">BACKWARD<') == 1
        missing = http.get("/schemas/no-such-subject")
        assert missing.status_code == 404 and "40401" in missing.text
        assert "Traceback" not in missing.text
        assert http.get("/schemas/orders-value", params={"version": "7"}).status_code == 404
        assert http.get("/schemas/orders-value", params={"version": "x"}).status_code == 400
        registry.stop()
        gone = http.get("/schemas")
        assert gone.status_code == 503 and "could not be reached" in gone.text


def test_no_registry_no_schema_pages(broker: Any, console_factory: Any) -> None:
    console = console_factory(broker.bootstrap)
    with httpx.Client(base_url=console.url, timeout=30) as http:
        assert 'href="/schemas"' not in http.get("/").text
        page = http.get("/schemas")
        assert page.status_code == 404 and "--schema-registry-url" in page.text


def test_schema_pages_in_chromium_after_signing_in(
    broker: Any, registry: RegistryServer, sr_clients: Any, console_factory: Any,
    page: Any, snap: Callable[[Any, str], None], tmp_path: Path,
) -> None:
    ids = _register(sr_clients(registry))
    users = tmp_path / "users"
    set_user(users, "viewer", "viewer-secret")
    console = console_factory(
        broker.bootstrap, schema_registry_url=registry.url,
        access=AccessSettings(login="users-file", users=read_users(users), read_only=True),
    )
    with httpx.Client(base_url=console.url, timeout=30) as http:
        assert http.get("/schemas/orders-value").status_code == 303  # not signed in
    page.goto(console.url + "/schemas")
    page.locator("#login input[name=username]").fill("viewer")
    page.locator("#login input[name=password]").fill("viewer-secret")
    page.locator("#login button").click()
    expect(page.locator("h1")).to_have_text("Schemas")
    page.get_by_role("link", name="orders-value", exact=True).click()
    expect(page.locator("#schema-id")).to_have_text(str(ids["orders-2"]))
    expect(page.locator("#schema-text")).to_contain_text('"name": "note"')
    snap(page, "schema")
    page.locator("#versions").get_by_role("link", name="1", exact=True).click()
    expect(page.locator("#version")).to_have_text("1")
    expect(page.locator("#schema-id")).to_have_text(str(ids["orders-1"]))
    page.locator("#references").get_by_role("link", name="address").click()
    expect(page.locator("#subject")).to_have_text("address")
