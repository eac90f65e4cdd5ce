"""The v3 produce body's splitter (`restproxy.v3.records.JsonSplitter`), driven with text
only: concatenated JSON cut at every point gives the same values as whole; a value cut
off waits for the rest; text that is not JSON ends the stream with one error."""

from __future__ import annotations

import json
from typing import Any

from logbus.restproxy.v3.records import JsonSplitter, JsonStreamError

RECORDS: list[Any] = [
    {"value": {"type": "STRING", "data": "a \"quoted\" } brace"}},
    {"key": {"type": "JSON", "data": [1, 2.5, None, True]}, "partition_id": 0},
    {"value": {"type": "JSON", "data": {"nested": {"deep": ["}", "{"]}}}},
    {},
    "not an object, still a value",
    12345,
]
TEXT = "\n".join(json.dumps(r) for r in RECORDS) + "\n"


def split(pieces: list[str], splitter: JsonSplitter | None = None) -> list[Any]:
    splitter = splitter or JsonSplitter()
    values: list[Any] = []
    for piece in pieces:
        values.extend(splitter.feed(piece))
    return values + splitter.end()


def test_every_cut_gives_the_same_values() -> None:
    for cut in range(len(TEXT) + 1):
        assert split([TEXT[:cut], TEXT[cut:]]) == RECORDS, cut


def test_one_character_at_a_time() -> None:
    assert split(list(TEXT)) == RECORDS


def test_a_record_is_given_as_soon_as_it_is_complete() -> None:
    splitter = JsonSplitter()
    first, second = json.dumps(RECORDS[0]), json.dumps(RECORDS[1])
    assert splitter.feed(first[:10]) == []
    assert splitter.feed(first[10:]) == [RECORDS[0]]
    assert splitter.feed(" " + second[:-1]) == []
    assert splitter.feed(second[-1:]) == [RECORDS[1]]
    assert splitter.end() == []


def test_malformed_text_ends_the_stream_with_one_error() -> None:
    good = json.dumps(RECORDS[0])
    values = split([good + ' {"value": ]} ' + good])
    assert values[0] == RECORDS[0]
    (error,) = values[1:]
    assert isinstance(error, JsonStreamError) and error.error_code == 400
    assert "Error processing JSON" in error.message


def test_text_cut_off_at_the_end_is_an_error() -> None:
    values = split([json.dumps(RECORDS[0]), ' {"value": {"type": "STR'])
    assert values[0] == RECORDS[0]
    assert isinstance(values[1], JsonStreamError) and values[1].error_code == 400


def test_a_value_past_the_limit_is_refused() -> None:
    splitter = JsonSplitter(max_value_chars=100)
    big = '{"value": {"type": "STRING", "data": "' + "x" * 200
    values = split([big[:50], big[50:]], splitter)
    assert isinstance(values[0], JsonStreamError) and values[0].error_code == 413
    assert splitter.feed('"}}') == []


def test_nothing_but_whitespace_is_no_value() -> None:
    assert split([" \n", "\t\r\n "]) == []
