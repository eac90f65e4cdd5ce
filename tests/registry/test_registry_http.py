"""The registry's REST API over plain HTTP: paths and bodies as Confluent's docs give
them, and bad input (malformed JSON, wrong content types, oversized bodies, invalid
schemas, versions, levels and modes, unknown paths) answered with Confluent's status
codes and `{"error_code", "message"}` bodies, nothing stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    JSON_TYPE,
    RegistryServer,
    registry_factory_fixture,
    registry_fixture,
)

RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture(name="http")
def http_fixture(registry: RegistryServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=registry.url, headers={"Content-Type": JSON_TYPE}) as client:
        yield client


def error_of(response: httpx.Response) -> tuple[int, int]:
    assert response.headers["content-type"].startswith(JSON_TYPE)
    body = response.json()
    assert isinstance(body["message"], str) and body["message"]
    return response.status_code, body["error_code"]


def test_register_read_and_list(http: httpx.Client) -> None:
    response = http.post("/subjects/a-value/versions", json={"schema": RECORD})
    assert response.status_code == 200 and response.json() == {"id": 1}
    assert response.headers["content-type"].startswith(JSON_TYPE)
    assert http.get("/subjects").json() == ["a-value"]
    assert http.get("/subjects/a-value/versions").json() == [1]
    assert http.get("/subjects/a-value/versions/latest").json() == {
        "subject": "a-value", "version": 1, "id": 1, "schema": RECORD.replace(" ", ""),
    }
    assert json.loads(http.get("/subjects/a-value/versions/1/schema").text) == json.loads(RECORD)
    assert http.get("/schemas/ids/1").json() == {"schema": RECORD.replace(" ", "")}
    assert json.loads(http.get("/schemas/ids/1/schema").text) == json.loads(RECORD)
    assert http.get("/schemas/ids/1/versions").json() == [{"subject": "a-value", "version": 1}]
    assert http.get("/schemas/types").json() == ["JSON", "PROTOBUF", "AVRO"]
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.put("/config", json={"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert http.get("/config").json() == {"compatibilityLevel": "FULL"}
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    verbose = http.post(
        "/compatibility/subjects/a-value/versions/latest?verbose=true",
        json={"schema": '"string"'},
    ).json()
    assert verbose["is_compatible"] is False and verbose["messages"]


def test_protobuf_schemas_are_kept_with_their_type(http: httpx.Client) -> None:
    proto = 'syntax = "proto3";\nmessage Ping { int64 at = 1; }\n'
    response = http.post(
        "/subjects/p-value/versions", json={"schema": proto, "schemaType": "PROTOBUF"}
    )
    schema_id = response.json()["id"]
    assert http.get(f"/schemas/ids/{schema_id}").json() == {
        "schemaType": "PROTOBUF", "schema": proto,
    }


def test_references_resolve_named_types_of_other_subjects(http: httpx.Client) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "ex",
                          "fields": [{"name": "city", "type": "string"}]})
    http.post("/subjects/address/versions", json={"schema": address}).raise_for_status()
    person = json.dumps({"type": "record", "name": "Person", "namespace": "ex",
                         "fields": [{"name": "home", "type": "ex.Address"}]})
    refs = [{"name": "ex.Address", "subject": "address", "version": 1}]
    response = http.post("/subjects/person/versions", json={"schema": person, "references": refs})
    schema_id = response.json()["id"]
    assert http.get(f"/schemas/ids/{schema_id}").json()["references"] == refs
    assert http.get("/subjects/address/versions/1/referencedby").json() == [schema_id]
    # a referenced schema cannot be deleted
    assert error_of(http.delete("/subjects/address/versions/1")) == (422, 42206)
    # without the reference the named type is unknown
    without = http.post("/subjects/person2/versions", json={"schema": person})
    assert error_of(without) == (422, 42201)


BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int, int]] = [
    # (method, path, request options, status, error_code)
    ("POST", "/subjects/s/versions", {"content": b"{not json"}, 400, 400),
    ("POST", "/subjects/s/versions", {"json": ["a list"]}, 400, 400),
    ("POST", "/subjects/s/versions", {"json": {}}, 422, 42201),
    ("POST", "/subjects/s/versions", {"json": {"schema": "{\"type\": \"nope\"}"}}, 422, 42201),
    (
        "POST", "/subjects/s/versions",
        {"json": {"schema": '{"type": "record", "name": "R"}'}}, 422, 42201,
    ),
    (
        "POST", "/subjects/s/versions",
        {"json": {"schema": '{"type": 12}', "schemaType": "JSON"}}, 422, 42201,
    ),
    (
        "POST", "/subjects/s/versions",
        {"json": {"schema": "nothing here", "schemaType": "PROTOBUF"}}, 422, 42201,
    ),
    ("POST", "/subjects/s/versions", {"json": {"schema": '"int"', "schemaType": "XML"}},
     422, 42201),
    (
        "POST", "/subjects/s/versions",
        {"content": json.dumps({"schema": '"int"'}), "headers": {"Content-Type": "text/plain"}},
        415, 415,
    ),
    (
        "POST", "/subjects/s/versions",
        {"content": json.dumps({"schema": "x" * (17 * 1024 * 1024)})}, 413, 413,
    ),
    ("GET", "/subjects/s/versions", {}, 404, 40401),
    ("GET", "/subjects/s/versions/0", {}, 422, 42202),
    ("GET", "/subjects/s/versions/first", {}, 422, 42202),
    ("GET", "/schemas/ids/42", {}, 404, 40403),
    ("GET", "/schemas/ids/forty-two", {}, 404, 404),
    ("PUT", "/config", {"json": {"compatibility": "SOMETIMES"}}, 422, 42203),
    ("PUT", "/config/s", {"json": {}}, 422, 42203),
    ("GET", "/config/s", {}, 404, 40408),
    ("PUT", "/mode", {"json": {"mode": "WRITEONLY"}}, 422, 42204),
    ("GET", "/mode/s", {}, 404, 40409),
    ("POST", "/subjects/s/versions", {"json": {"schema": '"int"', "id": 5}}, 422, 42205),
    ("GET", "/no/such/path", {}, 404, 404),
    ("DELETE", "/schemas/types", {}, 405, 405),
]


@pytest.mark.parametrize(
    ("method", "path", "options", "status", "code"),
    BAD_REQUESTS,
    ids=[f"{m} {p} -> {c}" for m, p, _, _, c in BAD_REQUESTS],
)
def test_bad_input_gets_confluents_codes_and_stores_nothing(
    http: httpx.Client, method: str, path: str, options: dict[str, Any], status: int, code: int
) -> None:
    assert error_of(http.request(method, path, **options)) == (status, code)
    assert http.get("/subjects", params={"deleted": "true"}).json() == []
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.get("/mode").json() == {"mode": "READWRITE"}


def test_import_mode_keeps_given_ids_and_versions(http: httpx.Client) -> None:
    assert http.put("/mode", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    response = http.post(
        "/subjects/imported/versions", json={"schema": RECORD, "id": 100, "version": 3}
    )
    assert response.json() == {"id": 100}
    assert http.get("/subjects/imported/versions").json() == [3]
    # another schema may not take an id that is already given
    clash = http.post(
        "/subjects/other/versions", json={"schema": '"string"', "id": 100, "version": 1}
    )
    assert error_of(clash) == (422, 42205)
    http.put("/mode", json={"mode": "READWRITE"}).raise_for_status()
    assert http.post("/subjects/next/versions", json={"schema": '"long"'}).json() == {"id": 101}
    # IMPORT on a registry that has subjects needs force
    assert error_of(http.put("/mode", json={"mode": "IMPORT"})) == (422, 42205)
    assert http.put("/mode?force=true", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
