"""The registry's state rebuilt from `_schemas` records (Confluent's format), pure: the
records a registry writes read back to what it wrote; Confluent's own key types
(DELETE_SUBJECT, CLEAR_SUBJECT), tombstones and unreadable records."""

from __future__ import annotations

import json

from logbus.registry.compatibility import check
from logbus.registry.schema_types import parse_schema
from logbus.registry.state import (
    Reference,
    RegistryState,
    SchemaVersion,
    config_record,
    mode_record,
    schema_record,
    schema_tombstone,
)


def version(subject: str, number: int, schema_id: int, **changes: object) -> SchemaVersion:
    fields: dict[str, object] = {
        "subject": subject, "version": number, "schema_id": schema_id,
        "schema_type": "AVRO", "schema": f'"s{schema_id}"', **changes,
    }
    return SchemaVersion(**fields)  # type: ignore[arg-type]


def test_written_records_read_back() -> None:
    state = RegistryState()
    first = version("a", 1, 1)
    second = version("a", 2, 2, schema_type="JSON", references=(Reference("r", "b", 1),))
    for record in (schema_record(first), schema_record(second), config_record("a", "FULL"),
                   config_record(None, "NONE"), mode_record(None, "READONLY")):
        state.apply(*record)
    assert state.live_versions("a") == [first, second]
    assert state.schema_by_id(2) == second and state.max_id == 2
    assert state.configs == {"a": "FULL", None: "NONE"}
    assert state.modes == {None: "READONLY"}
    assert state.referenced_by("b", 1) == [2]
    state.apply(*config_record("a", None))
    assert state.configs == {None: "NONE"}


def test_keys_have_confluents_field_order() -> None:
    key, value = schema_record(version("t-value", 3, 9))
    assert key == b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}'
    assert value is not None and json.loads(value)["deleted"] is False
    assert config_record(None, "FULL")[0] == b'{"keytype":"CONFIG","subject":null,"magic":0}'


def test_soft_delete_tombstones_and_confluents_subject_records() -> None:
    state = RegistryState()
    for n in (1, 2, 3):
        state.apply(*schema_record(version("a", n, n)))
    state.apply(
        b'{"keytype":"DELETE_SUBJECT","subject":"a","magic":0}', b'{"subject":"a","version":2}'
    )
    assert [v.version for v in state.live_versions("a")] == [3]
    assert state.subject_names() == ["a"]
    state.apply(
        b'{"keytype":"CLEAR_SUBJECT","subject":"a","magic":0}', b'{"subject":"a"}'
    )
    assert [v.version for v in state.live_versions("a", deleted=True)] == [3]
    assert state.schema_by_id(1) is None
    state.apply(*schema_tombstone("a", 3))
    assert state.subjects == {} and state.by_id == {}
    assert state.max_id == 3  # ids are never given twice


def test_unreadable_records_are_skipped() -> None:
    state = RegistryState()
    state.apply(b"not json", b"{}")
    state.apply(b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":1}', b'{"id": "x"}')
    state.apply(b'{"keytype":"NOOP","magic":0}', None)
    state.apply(None, b"{}")
    assert state.subjects == {}
    assert state.by_id == {}


def test_full_checks_both_directions() -> None:
    old = parse_schema("AVRO", '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')
    added = parse_schema(
        "AVRO",
        '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
        '{"name":"b","type":"int"}]}',
    )
    assert check("FORWARD", added, [old]) == []
    assert check("BACKWARD", added, [old]) != []
    assert check("FULL", added, [old]) != []
    assert check("NONE", added, [old]) == []
