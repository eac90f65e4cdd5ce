"""The proxy's JSON writer (`restproxy.json_codec`), driven with values only: a column of
strings written by the standard library's C helper gives orjson's bytes (compact UTF-8,
as Confluent's proxy writes), every value reads back as it was, and what orjson refuses
(integers past 64 bits, lone surrogates) is written by the standard library."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from logbus.restproxy.json_codec import dumps, dumps_each

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def without_surrogates(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@given(st.lists(st.text().filter(without_surrogates), max_size=8))
def test_strings_are_written_as_orjson_writes_them(texts: list[str]) -> None:
    assert dumps_each(list(texts)) == [orjson.dumps(t) for t in texts]


@given(st.lists(JSON_VALUES, max_size=6))
def test_every_value_reads_back(values: list[Any]) -> None:
    written = dumps_each(values)
    assert [None if w is None else json.loads(w) for w in written] == values


def test_what_orjson_refuses() -> None:
    big = 123456789012345678901234567890
    assert dumps({"n": big}) == b'{"n":123456789012345678901234567890}'
    assert dumps_each(["a\ud800b", "é", None]) == [b'"a\\ud800b"', '"é"'.encode(), None]
