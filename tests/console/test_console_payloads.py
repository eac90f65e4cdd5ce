"""How the message browser shows keys and values: the pure rules of logbus.console.payloads
and the lag chart's SVG."""

from __future__ import annotations

from logbus.console.lag import LagHistory, lag_chart
from logbus.console.payloads import DISPLAY_LIMIT, show


def test_text_json_hex_and_null() -> None:
    assert show(None, "text").kind == "null"
    assert show(b"plain", "text").text == "plain"
    pretty = show(b'{"a":1}', "json")
    assert (pretty.kind, pretty.text, pretty.note) == ("json", '{\n  "a": 1\n}', "")
    assert show(b"not json", "json").note == "not JSON: shown as text"
    assert show(b"not json", "json", strict_json=False).note == ""
    assert show(b"AB", "hex").text == "41 42"


def test_not_utf8_is_hex_and_long_values_are_cut() -> None:
    odd = show(b"\xff\x00", "json")
    assert (odd.kind, odd.text, odd.note) == ("hex", "ff 00", "not UTF-8: shown as hex")
    # A character cut by the limit is dropped, not taken for bad UTF-8.
    long = show(b"a" + "é".encode() * DISPLAY_LIMIT, "text")
    assert long.kind == "text"
    assert long.text == "a" + "é" * ((DISPLAY_LIMIT - 1) // 2)
    assert long.note == f"{1 + 2 * DISPLAY_LIMIT:,} bytes, the first {DISPLAY_LIMIT:,} shown"
    assert show(b"{}" * DISPLAY_LIMIT, "json").note.endswith("cut, so not parsed as JSON")
    assert len(show(b"\xff" * 50_000, "text").text.split()) == DISPLAY_LIMIT


def test_lag_history_and_chart() -> None:
    history = LagHistory(max_samples=3)
    assert 'data-samples="0"' in lag_chart(history.samples("g"))
    for at, total in ((0.0, 5), (0.5, 6), (2.0, 9), (4.0, 2), (6.0, 0)):
        history.add("g", total, now=at)
    # Samples closer than a second replace the previous one; the oldest fall off.
    assert history.samples("g") == [(2.0, 9), (4.0, 2), (6.0, 0)]
    chart = str(lag_chart(history.samples("g")))
    assert 'data-samples="3"' in chart and 'data-latest="0"' in chart
    assert chart.count("<polyline") == 1 and ">9</text>" in chart
