"""`logbus groups` arguments that need no broker: durations and usage errors."""

from __future__ import annotations

import argparse

import pytest

from logbus.cli.group_offsets import duration_ms as _duration_ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H30M", 5_400_000),
        ("P1DT2H", 93_600_000),
        ("P2D", 172_800_000),
        ("PT0.5S", 500),
        ("pt15m", 900_000),
        ("-PT5M", -300_000),
        ("PT-1H30M", -1_800_000),
        ("PT0S", 0),
    ],
)
def test_iso_8601_durations(text: str, ms: int) -> None:
    assert _duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1h", "P", "PT", "P1H", "PT1D", "", "P1DT"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="ISO-8601"):
        _duration_ms(text)
