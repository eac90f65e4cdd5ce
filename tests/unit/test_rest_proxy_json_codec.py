"""The proxy's JSON writer (`restproxy.json_codec`), driven with values only: every value
the standard library's reader gives reads back as it was, compact and in UTF-8 (as
Confluent's proxy writes), and what orjson refuses (integers past 64 bits, lone
surrogates) is written by the standard library."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from logbus.restproxy.json_codec import dumps

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_every_value_reads_back(value: Any) -> None:
    assert json.loads(dumps(value).decode("utf-8")) == value


def test_compact_and_utf8() -> None:
    assert dumps({"name": "café ☕", "n": [1, 1.5]}) == '{"name":"café ☕","n":[1,1.5]}'.encode()


def test_what_orjson_refuses() -> None:
    big = 123456789012345678901234567890
    assert dumps({"n": big}) == b'{"n":123456789012345678901234567890}'
    assert dumps("a\ud800b") == b'"a\\ud800b"'
    assert dumps("é\n") == '"é\\n"'.encode()
